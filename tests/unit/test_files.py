"""Writes to user-named paths never replace what is not a regular file."""

import os
import stat
from pathlib import Path

import pytest

from infra.errors import UserError
from infra.files import UnsafeTarget, check_target, write_atomic, write_json_atomic


def test_a_fifo_is_refused_and_left_as_it_was(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(UnsafeTarget, match="is a FIFO, not a file"):
        write_atomic(fifo, "text")
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_a_directory_is_refused(tmp_path):
    with pytest.raises(UnsafeTarget, match="is a directory"):
        write_atomic(tmp_path, "text", what="--html")


def test_a_device_is_refused_without_touching_it():
    for device in (Path("/dev/null"), Path("/dev/full")):
        if device.exists():  # both exist on every Linux; the check needs only stat
            with pytest.raises(UnsafeTarget, match="is a character device"):
                check_target(device)
            assert stat.S_ISCHR(device.stat().st_mode)


def test_a_missing_directory_is_named(tmp_path):
    with pytest.raises(UnsafeTarget, match="no directory"):
        check_target(tmp_path / "nope" / "out.json")


def test_a_missing_directory_is_made_when_asked(tmp_path):
    check_target(tmp_path / "a" / "b" / "out.json", create_parent=True)
    assert (tmp_path / "a" / "b").is_dir()
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(UnsafeTarget, match="Not a directory"):
        check_target(blocker / "sub" / "out.json", create_parent=True)


def test_refusals_are_user_errors_so_the_cli_says_one_line():
    assert issubclass(UnsafeTarget, UserError)


def test_a_regular_file_is_replaced_whole_and_a_link_keeps_pointing_at_it(tmp_path):
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    write_json_atomic(link, {"questions": []})
    assert link.is_symlink() and real.read_text() == '{\n "questions": []\n}'
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
