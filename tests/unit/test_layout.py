"""The layout holds: imports go down (lab → graphs → nodes → infra/prompts), no import circle
(typing imports included), the lab (`lab/`: benches, the methods' trials, the simulated reader,
Elasticsearch/JDK provisioning, their commands) is one folder that nothing outside it imports,
and the answering path never reaches the lab or training. Read from the source with `ast`,
imports inside functions too."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAYERS = {"lab": 3, "graphs": 2, "nodes": 1, "infra": 0, "prompts": 0}
HEAVY = ("lab", "infra.training")
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


def _within(name: str, *packages: str) -> bool:
    """Return whether module `name` is one of `packages` or inside one."""
    return any(name == p or name.startswith(f"{p}.") for p in packages)


def test_nothing_outside_the_lab_imports_it():
    """The product never enters the lab: graphs/cli registers the lab's commands by module name."""
    entering = [
        f"{name} imports {target}"
        for name in MODULES
        if not _within(name, "lab")
        for target in sorted(GRAPH[name])
        if _within(target, "lab")
    ]
    assert entering == []


def test_the_commands_registered_by_name_exist():
    """A module named in graphs/cli's COMMANDS or JOINING is a real module; the lab's are in lab.cli."""
    from graphs.cli import COMMANDS, JOINING

    named = {module for module, _, _ in COMMANDS.values()} | {
        module for modules in JOINING.values() for module in modules
    }
    assert sorted(named - MODULES.keys()) == []
    assert sorted(m for m in named if _within(m, "lab") and not _within(m, "lab.cli")) == []


HARNESS = ("lab.simulate", "lab.elasticsearch_server", "lab.elasticsearch_dist", "lab.java_runtime")
"""The lab's infrastructure: what tests and benches start (the simulated endpoint, an
Elasticsearch node and its JDK). It stands on infra alone, as a client would."""


def test_the_lab_s_infrastructure_stands_on_infra_alone():
    above = [
        f"{name} imports {target}"
        for name in MODULES
        if _within(name, *HARNESS)
        for target in sorted(GRAPH[name])
        if not _within(target, "infra", *HARNESS)
    ]
    assert above == []


def test_the_answering_path_never_enters_the_lab():
    reached, todo = set(), list(ANSWERING)
    while todo:
        name = todo.pop()
        if name not in reached:
            reached.add(name)
            todo.extend(GRAPH[name])
    assert sorted(m for m in reached if _within(m, *HEAVY)) == []


def test_the_lab_is_under_its_own_roof():
    """Everything that measures quorum sits in lab/, never beside the product."""
    words = ("bench", "simulate", "trials", "elasticsearch_server", "eval_methods")
    stray = [
        name
        for name in MODULES
        if not _within(name, "lab") and any(word in name.split(".") for word in words)
    ]
    assert stray == []


def _rooms(name: str, target: str) -> tuple[str, str] | None:
    """Return the two rooms an import between two infra or nodes modules crosses, or None.

    A room is a folder or a module inside the nearest folder both stand in: `infra.search` and
    `infra.ingest` for two modules of those folders, `nodes.ensemble.strategies` and
    `nodes.ensemble.decide` for a strategy importing its sibling, at every depth. None when
    they are not both under infra/ or both under nodes/, or one holds the other (a package's
    `__init__` and its own modules).
    """
    a, b = name.split("."), target.split(".")
    if a[0] != b[0] or a[0] not in ("infra", "nodes"):
        return None
    shared = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)
    if shared is None:
        return None
    return ".".join(a[: shared + 1]), ".".join(b[: shared + 1])


def two_way_ties(graph: dict[str, set[str]]) -> list[str]:
    """Return every pair of rooms under infra/ or nodes/ that import each other, with an import
    each way, at every depth of folders."""
    ties: dict[tuple[str, str], str] = {}
    for name, targets in graph.items():
        for target in sorted(targets):
            if rooms := _rooms(name, target):
                ties.setdefault(rooms, f"{name} imports {target}")
    return sorted(
        f"{a} ⇄ {b}: {ties[a, b]}; {ties[b, a]}" for a, b in ties if a < b and (b, a) in ties
    )


def test_no_two_rooms_of_infra_or_nodes_import_each_other():
    """A folder (or module) under infra/ or nodes/ is a room: imports between two go one way,
    so each can be read, tested and moved with what it stands on."""
    assert two_way_ties(GRAPH) == []


def test_a_two_way_tie_is_caught():
    """The negative control: ingest and pubmed importing each other, as they once did."""
    tied = {
        "infra.ingest.sources": {"infra.pubmed.xml"},
        "infra.pubmed.sync_job": {"infra.ingest.session"},
        "nodes.search": {"infra.text"},
    }
    assert two_way_ties(tied) == [
        "infra.ingest ⇄ infra.pubmed: infra.ingest.sources imports infra.pubmed.xml; "
        "infra.pubmed.sync_job imports infra.ingest.session"
    ]


def test_a_two_way_tie_inside_a_folder_is_caught():
    """The negative control one floor down: a folder inside nodes/ensemble and a module beside
    it, tied through two different modules of the folder (no import circle of modules)."""
    tied = {
        "nodes.ensemble.strategies.registry": {"nodes.ensemble.decide"},
        "nodes.ensemble.decide": {"nodes.ensemble.strategies.views"},
        "nodes.ensemble": {"nodes.ensemble.node"},  # a package's own module: no tie
        "nodes.ensemble.node": {"nodes.ensemble.strategies"},
    }
    assert two_way_ties(tied) == [
        "nodes.ensemble.decide ⇄ nodes.ensemble.strategies: nodes.ensemble.decide imports "
        "nodes.ensemble.strategies.views; nodes.ensemble.strategies.registry imports "
        "nodes.ensemble.decide"
    ]


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
    """`graphs/cli` and `lab/cli` parse, call a use case and print; the use cases live below."""

    def in_cli(name: str) -> bool:
        return _within(name, "graphs.cli", "lab.cli")

    upward = [
        f"{name} imports {target}"
        for name, targets in GRAPH.items()
        if not in_cli(name)
        for target in sorted(targets)
        if in_cli(target)
    ]
    assert upward == []
