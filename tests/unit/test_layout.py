"""The layout holds: imports go down (graphs → nodes → infra/prompts), no import circle (typing
imports included), the lab (`graphs/lab`: benches and method evaluations; `infra/lab`: the
simulated reader, Elasticsearch/JDK provisioning) is a room of its own that only the commands
running it enter, and the answering path never reaches the lab or training. Read from the source
with `ast`, imports inside functions too."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAYERS = {"graphs": 2, "nodes": 1, "infra": 0, "prompts": 0}
LAB = ("graphs.lab", "infra.lab")
HEAVY = (*LAB, "infra.training")
"""What the answering path never reaches: the lab, and training (a user's `quorum train`)."""
ANSWERING = (
    "graphs.runtime",
    "graphs.qa",
    "graphs.chat",
    "graphs.web",
    "graphs.bioasq.run",
    "graphs.cli.ask",
    "graphs.cli.chat",
    "graphs.cli.serve",
)


def _modules() -> dict[str, Path]:
    found = {}
    for top in LAYERS:
        for path in (ROOT / top).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = _modules()


def _imports(name: str) -> set[str]:
    """Return the project modules `name` imports anywhere in its source."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            targets = [base, *(f"{base}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            continue
        found |= {t for t in targets if t in MODULES and t != name}
    return found


GRAPH = {name: _imports(name) for name in MODULES}


def test_imports_only_go_down():
    upward = [
        f"{name} imports {target}"
        for name, targets in GRAPH.items()
        for target in targets
        if LAYERS[target.split(".")[0]] > LAYERS[name.split(".")[0]]
    ]
    assert upward == []


def test_no_import_circle():
    circles, done, path = [], set(), []

    def visit(name: str) -> None:
        if name in path:
            circles.append([*path[path.index(name) :], name])
            return
        if name in done:
            return
        path.append(name)
        for target in sorted(GRAPH[name]):
            visit(target)
        path.pop()
        done.add(name)

    for name in sorted(GRAPH):
        visit(name)
    assert circles == []


LAB_COMMANDS = (
    "graphs.cli.eval",
    "graphs.cli.eval_methods",
    "graphs.cli.bench",
    "graphs.cli.bench_search",
)
"""The commands that run the lab: the only modules outside it that may import it."""


def test_nothing_in_the_product_imports_the_lab():
    product = [m for m in MODULES if not m.startswith(LAB) and m not in LAB_COMMANDS]
    entering = [
        f"{name} imports {target}"
        for name in product
        for target in sorted(GRAPH[name])
        if target.startswith(LAB)
    ]
    assert entering == []


def test_the_answering_path_never_enters_the_lab():
    reached, todo = set(), list(ANSWERING)
    while todo:
        name = todo.pop()
        if name not in reached:
            reached.add(name)
            todo.extend(GRAPH[name])
    assert sorted(m for m in reached if m.startswith(HEAVY)) == []


def test_the_lab_is_under_its_own_roof():
    """Everything that measures quorum sits in graphs/lab or infra/lab, never beside the product."""
    stray = [
        name
        for name in MODULES
        if not name.startswith(LAB)
        and name not in LAB_COMMANDS
        and any(word in name.split(".") for word in ("bench", "simulate", "elasticsearch_server"))
    ]
    assert stray == []


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _private_crossings(name: str) -> list[str]:
    """Return where `name` reaches a private name (`_x`) of another project module, or imports
    from a dependency's private module (its internals may change in any release)."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bound: dict[str, str] = {}  # local name → the project module it stands for
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            for alias in node.names:
                target = f"{base}.{alias.name}"
                if target in MODULES:
                    bound[alias.asname or alias.name] = target
                if any(map(_private, base.split("."))) or (_private(alias.name) and base != name):
                    found.append(f"{name}:{node.lineno} imports {target}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if any(map(_private, alias.name.split("."))):
                    found.append(f"{name}:{node.lineno} imports {alias.name}")
                if alias.asname and alias.name in MODULES:
                    bound[alias.asname] = alias.name
                elif alias.name.split(".")[0] in MODULES:
                    bound[alias.name.split(".")[0]] = alias.name.split(".")[0]
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and _private(node.attr)):
            continue
        chain, value = [], node.value
        while isinstance(value, ast.Attribute):
            chain.append(value.attr)
            value = value.value
        if isinstance(value, ast.Name) and value.id in bound:
            module = ".".join([bound[value.id], *reversed(chain)])
            if module in MODULES and module != name:
                found.append(f"{name}:{node.lineno} reads {module}.{node.attr}")
    return found


def test_no_private_name_crosses_a_module():
    """A name with a leading underscore is its module's own: another module that needs it gets
    it public (or the use moves into the owner); a dependency is used by its public API only."""
    assert [line for name in sorted(MODULES) for line in _private_crossings(name)] == []


def test_nothing_below_the_cli_imports_it():
    """`graphs/cli` parses, calls a use case and prints; the use cases live below it, never in it."""

    def in_cli(name: str) -> bool:
        return name == "graphs.cli" or name.startswith("graphs.cli.")

    upward = [
        f"{name} imports {target}"
        for name, targets in GRAPH.items()
        if not in_cli(name)
        for target in sorted(targets)
        if in_cli(target)
    ]
    assert upward == []
