"""A bad data directory is one line naming the path, what is wrong and the fix (issue 48)."""

from pathlib import Path

import pytest

from infra.errors import UnusableHome
from infra.files import usable_home


def test_a_home_that_is_a_file_is_named_with_the_fix(tmp_path):
    home = tmp_path / "home"
    home.write_text("not a directory")
    with pytest.raises(UnusableHome, match=r"is a file, not a directory; set QUORUM_HOME to a"):
        usable_home(home)
    assert home.read_text() == "not a directory"  # nothing written over it


def test_a_home_that_cannot_be_written_is_named_with_the_fix():
    # sysfs refuses a new directory even to root (a read-only or unwritable directory is
    # what a user meets; root passes permission bits, so the test takes a place none may write).
    home = Path("/sys/quorum-home-check")
    with pytest.raises(UnusableHome, match=r"/sys/quorum-home-check cannot be written \("):
        usable_home(home)


def test_a_usable_home_is_made_and_left_clean(tmp_path):
    home = tmp_path / "a" / "b"
    assert usable_home(home) == home and home.is_dir() and list(home.iterdir()) == []
