"""The `quorum` command line: one module per command group, assembled here."""

from __future__ import annotations

import errno
import os

import typer
from typer.core import TyperOption
from typer.exceptions import TyperException

import graphs.cli.eval_methods  # noqa: F401  (registers eval methods and eval likelihoods)
from graphs.cli.ask import ask
from graphs.cli.bench import bench_app
from graphs.cli.bioasq import bioasq_app
from graphs.cli.chat import chat
from graphs.cli.common import CliError, exit_now, fail
from graphs.cli.embed import embed
from graphs.cli.eval import eval_app
from graphs.cli.index import index
from graphs.cli.serve import serve
from graphs.cli.trace import trace_app
from graphs.cli.train import train_app

# NOTE: typer 0.29's help prints a type beside every option, flags too ("--json <bool>"); a
# flag takes no value, so it gets none.
_display_type = TyperOption.display_type_rich
TyperOption.display_type_rich = lambda self, ctx: (  # type: ignore[method-assign]
    None if self.is_flag else _display_type(self, ctx)
)

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Answer biomedical questions from PubMed, BioASQ-style, with every step traceable.",
)
for command in (ask, index, embed, chat, serve):
    app.command()(command)


def _version(shown: bool) -> None:
    if shown:
        from importlib.metadata import version

        typer.echo(f"quorum {version('quorum')}")
        raise typer.Exit(0)


@app.callback()
def _options(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Answer biomedical questions from PubMed, BioASQ-style, with every step traceable."""


app.add_typer(trace_app, name="trace")
app.add_typer(eval_app, name="eval")
app.add_typer(bench_app, name="bench")
app.add_typer(bioasq_app, name="bioasq")
app.add_typer(train_app, name="train")


_WRITE_NEXT = {
    errno.EROFS: "set QUORUM_HOME to a writable directory",
    errno.EACCES: "set QUORUM_HOME to a directory you may write, or fix its permissions",
    errno.EPERM: "set QUORUM_HOME to a directory you may write, or fix its permissions",
    errno.ENOSPC: "free some space there, or set QUORUM_HOME to a disk with room",
}
"""The next step after a write the file system refused, by errno."""


def main() -> None:
    """Run the CLI: user errors are one line, exit 2; tracebacks only with QUORUM_DEBUG set."""
    from infra.errors import Unavailable, UserError

    try:
        # Without standalone mode click returns a typer.Exit's code instead of raising it.
        code = app(standalone_mode=False)
        exit_now(code if isinstance(code, int) else 0)
    except typer.Exit as exc:
        exit_now(exc.exit_code)
    except typer.Abort:
        fail("aborted", 130)
    except TyperException as exc:  # usage errors from typer's bundled click
        if type(exc).__name__ == "NoArgsIsHelpError":
            exc.show()
            exit_now(2)
        fail(exc.format_message(), getattr(exc, "exit_code", 2))
    except (CliError, UserError) as exc:
        fail(str(exc), 2)
    except Unavailable as exc:  # a server that is down: its name and how to start it
        fail(str(exc), 1)
    except KeyboardInterrupt:
        fail("interrupted", 130)
    except OSError as exc:
        if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC) and exc.filename:
            fail(f"cannot write {exc.filename}: {exc.strerror}; {_WRITE_NEXT[exc.errno]}", 1)
        fail(f"{type(exc).__name__}: {exc} (set QUORUM_DEBUG=1 for details)", 1)
    except Exception as exc:
        if os.environ.get("QUORUM_DEBUG"):
            raise
        fail(
            f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''} "
            "(set QUORUM_DEBUG=1 for details)",
            1,
        )


if __name__ == "__main__":
    main()
