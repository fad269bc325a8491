"""`quorum --version` prints the installed version and exits 0, before any command runs."""

from importlib.metadata import version

from typer.testing import CliRunner

from graphs.cli import app


def test_version_prints_the_installed_version():
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output == f"quorum {version('quorum')}\n"
