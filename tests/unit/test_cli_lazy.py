"""Commands load when they run: `quorum --help` imports none of them, one command not the rest."""

import subprocess
import sys

from graphs.cli import COMMANDS, load_command
from lab.bench.help import help_lines

PROBE = """
import sys
from typer.testing import CliRunner
from graphs.cli import app
result = CliRunner().invoke(app, sys.argv[1:])
assert result.exit_code == 0, result.output
loaded = sorted(m for m in sys.modules if m.startswith(("graphs.cli.", "lab", "nodes", "langgraph",
    "torch", "sentence_transformers", "langchain", "scipy", "tantivy")))
print(" ".join(loaded))
"""


def _loaded(*args):
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return set(done.stdout.split())


def test_the_top_level_help_lists_every_command_and_imports_none():
    loaded = _loaded("--help")
    assert loaded <= {"graphs.cli.common"}, loaded


def test_a_command_s_help_imports_its_module_and_no_engine_or_model_library():
    loaded = _loaded("ask", "--help")
    assert "graphs.cli.ask" in loaded
    assert not {m for m in loaded if m == "lab" or m.startswith(("lab.", "graphs.cli.eval"))}
    heavy = ("torch", "sentence_transformers", "langgraph", "langchain", "scipy", "tantivy")
    assert not {m for m in loaded if m.startswith(heavy)}, loaded


def test_every_command_loads_under_its_name_and_the_benchmark_times_them_all():
    commands = {name: load_command(name) for name in COMMANDS}
    assert all(command.name == name for name, command in commands.items())
    lines = help_lines(commands)
    assert lines[0] == ["--help"] and ["bioasq", "run", "--help"] in lines
    assert {line[0] for line in lines[1:]} == set(COMMANDS)


def test_the_lab_s_commands_join_their_groups_under_the_names_users_call():
    """graphs/cli registers them by module name (JOINING): eval's are the product's and the lab's."""
    evals = load_command("eval").commands
    assert set(evals) == {
        *("retrieval", "snippets", "support"),  # the product's: graphs/cli/eval.py
        *("organize", "ensemble", "methods", "likelihoods"),  # the lab's: lab/cli/eval_methods.py
    }
    assert evals["methods"].callback.__module__ == "lab.cli.eval_methods"
    assert evals["support"].callback.__module__ == "graphs.cli.eval"
    assert {"retrieval", "scale", "dense", "pipeline", "help"} <= set(
        load_command("bench").commands
    )


def test_help_shows_a_type_beside_an_option_that_takes_a_value_and_none_beside_a_flag():
    from typer.testing import CliRunner

    from graphs.cli import app

    for args, flag, valued in (([], "--version", None), (["ask"], "--json", "--index")):
        shown = CliRunner().invoke(app, [*args, "--help"], terminal_width=100).output
        lines = {line.split()[1]: line for line in shown.splitlines() if line.startswith("│ --")}
        assert "<" not in lines[flag] and "<" not in lines["--help"], shown
        assert valued is None or "<str>" in lines[valued], shown


def test_a_bracketed_table_name_in_help_is_shown_not_read_as_markup():
    from typer.testing import CliRunner

    from graphs.cli import app

    shown = CliRunner().invoke(app, ["ask", "--help"]).output
    words = " ".join(shown.replace("│", " ").split())  # the help box wraps lines
    assert "a table of the config file's [presets]" in words, shown
