"""The `quorum` command line: one module per command group, assembled here."""

from __future__ import annotations

import errno
import importlib
import os
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup, TyperOption

from graphs.cli.common import LAB_PACKAGES, CliError, exit_now, fail, lab_missing

COMMANDS: dict[str, tuple[str, str, str]] = {
    "ask": ("graphs.cli.ask", "ask", "Answer a question from the configured corpus."),
    "index": (
        "graphs.cli.index",
        "index",
        "Index corpus files; re-indexing replaces by PMID, and an interrupted run resumes.",
    ),
    "embed": (
        "graphs.cli.embed",
        "embed",
        "Compute the configured model's vectors for every document that lacks them.",
    ),
    "chat": (
        "graphs.cli.chat",
        "chat",
        "Chat with the corpus: follow-ups, /open PMID, /trace, /new, /quit.",
    ),
    "serve": (
        "graphs.cli.serve",
        "serve",
        "Serve a local web page: chat with the corpus and step through each turn's nodes.",
    ),
    "trace": ("graphs.cli.trace", "trace_app", "Read runs back from their checkpoints."),
    "eval": ("graphs.cli.eval", "eval_app", "Measure quorum on golden data."),
    "bench": ("lab.cli.bench", "bench_app", "Speed and memory benchmarks."),
    "bioasq": ("graphs.cli.bioasq", "bioasq_app", "BioASQ Task B: run, validate, evaluate."),
    "pubmed": (
        "graphs.cli.pubmed",
        "pubmed_app",
        "PubMed itself: sync the baseline and daily updates into an index.",
    ),
    "train": (
        "graphs.cli.train",
        "train_app",
        "Fine-tune quorum's retriever or reranker on golden files.",
    ),
}
"""Every command: the module that holds it, its name there, and the line `quorum --help` shows.

A command's module is imported only when the command runs (or its own --help is asked): the
top-level help needs none of them, and one command never pays for another's libraries."""

JOINING: dict[str, tuple[str, ...]] = {
    "eval": ("lab.cli.eval_methods",),
    "bench": ("lab.cli.bench_search",),
}
"""The modules whose commands join a group, imported after the group's own when it loads.

The lab's commands are registered here by module name, never imported by the product: lab/cli
adds `eval organize`, `ensemble`, `methods` and `likelihoods` to the product's `eval`, and the
search engines' benches (`bench retrieval`, `scale`, `dense`) to its own `bench`."""


def _untyped(params: list[Any]) -> list[Any]:
    """Show no type beside a flag in the help: it takes no value ("--json", not "--json <bool>").

    Typer's help prints a type beside every option, flags too; an empty metavar is click's own
    say in how an option's value is shown.
    """
    for param in params:
        if isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
            param.metavar = ""
    return params


def _untyped_flags(command: TyperCommand | TyperGroup, ctx: typer.Context) -> None:
    """Show no type beside the flags of a loaded command and of its subcommands."""
    _untyped(command.get_params(ctx))
    if isinstance(command, TyperGroup):
        for sub in command.commands.values():
            _untyped_flags(sub, ctx)  # type: ignore[arg-type]  # typer builds only its own


class _LazyCommands(TyperGroup):
    """The top-level group: commands listed from COMMANDS, loaded when one is resolved."""

    _resolving = False

    def list_commands(self, ctx: typer.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: typer.Context, cmd_name: str) -> TyperCommand | TyperGroup | None:
        if cmd_name not in COMMANDS:
            return None
        if not self._resolving:  # the help's list of commands: their lines, nothing imported
            return TyperCommand(cmd_name, help=COMMANDS[cmd_name][2])
        return load_command(cmd_name)

    def get_params(self, ctx: typer.Context) -> list[Any]:
        return _untyped(super().get_params(ctx))

    def resolve_command(self, ctx: typer.Context, args: list[str]) -> Any:
        self._resolving = True
        name, command, rest = super().resolve_command(ctx, args)
        if command is not None:
            _untyped_flags(command, ctx)
        return name, command, rest


def load_command(name: str) -> TyperCommand | TyperGroup:
    """Import the command's module and return the command (a group for trace, eval, …)."""
    module, attribute, _ = COMMANDS[name]
    found = getattr(importlib.import_module(module), attribute)
    for joining in JOINING.get(name, ()):
        importlib.import_module(joining)  # its commands register on `found` as they are defined
    if not isinstance(found, typer.Typer):
        single = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
        single.command(name=name)(found)
        found = single
    command = typer.main.get_command(found)
    command.name = name
    return command  # type: ignore[return-value]  # a TyperGroup, or one command's TyperCommand


app = typer.Typer(
    cls=_LazyCommands,
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Answer biomedical questions from PubMed, BioASQ-style, with every step traceable.",
)


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
    except typer.TyperException as exc:  # usage errors from typer's bundled click
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
    except ModuleNotFoundError as exc:  # a lab command without the `lab` extra
        package = (exc.name or "").partition(".")[0]
        if package in LAB_PACKAGES:
            fail(str(lab_missing(package)), 2)
        _unexpected(exc)
    except Exception as exc:
        _unexpected(exc)


def _unexpected(exc: Exception) -> None:
    """Report a bug or an outage in one line; its traceback only with QUORUM_DEBUG set."""
    if os.environ.get("QUORUM_DEBUG"):
        raise exc
    fail(
        f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''} "
        "(set QUORUM_DEBUG=1 for details)",
        1,
    )


if __name__ == "__main__":
    main()
