"""The papers' defaults: docs/methods.md's table held against `Settings()`.

The table ("The papers' defaults") is the one place a paper's default is written: each row
names a setting, its value, the paper and the section that fix it. A value changed in
infra/settings/ without the table, a row that deviates from its paper without the reason
beside the setting, and a method setting in neither of the section's tables all fail here.
"""

from __future__ import annotations

import ast
import inspect
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from infra.settings import Settings
from nodes.ensemble.strategies import STRATEGIES as ENSEMBLE_STRATEGIES
from nodes.organize.strategies import STRATEGIES as ORGANIZE_STRATEGIES

METHODS_DOC = Path(__file__).resolve().parents[2] / "docs" / "methods.md"
HEADING = "## The papers' defaults"
PAPERS = {
    "context-bagging.txt",
    "citation-consistent-voting.txt",
    "mixture-of-intervention.txt",
    "corg.txt",
    "bioasq-llm-ensemble.txt",
}
METHOD_GROUPS = ("ensemble", "organize", "synthesis")
"""The settings groups of the answering methods: each of their settings is classified."""


def tables() -> list[list[dict[str, str]]]:
    """Return the section's markdown tables, each row a dict by header (backticks removed)."""
    text = METHODS_DOC.read_text(encoding="utf-8")
    assert HEADING in text, f"docs/methods.md has no section {HEADING!r}"
    section = text.split(HEADING, 1)[1].split("\n## ", 1)[0]
    found: list[list[dict[str, str]]] = []
    header: list[str] | None = None
    for line in section.splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
            found.append([])
        elif not set("".join(cells)) <= set("-: "):
            found[-1].append(dict(zip(header, cells, strict=True)))
    return found


DEFAULTS, UNFIXED = tables()


def leaves(group: BaseModel, prefix: str) -> list[str]:
    """Return the dotted path of every setting under a group, nested groups walked."""
    paths = []
    for name in type(group).model_fields:
        value = getattr(group, name)
        path = f"{prefix}.{name}"
        paths += leaves(value, path) if isinstance(value, BaseModel) else [path]
    return paths


def resolve(settings: Settings, path: str) -> Any:
    value: Any = settings
    for part in path.split("."):
        assert isinstance(value, BaseModel) and part in type(value).model_fields, (
            f"{path} names no setting"
        )
        value = getattr(value, part)
    return value


def written_beside(settings: Settings, path: str) -> str:
    """Return the comments above a setting's definition and the definition itself."""
    parent, name = path.rsplit(".", 1)
    cls = type(resolve(settings, parent))
    source = inspect.getsource(inspect.getmodule(cls))
    lines = source.splitlines()
    (classdef,) = [
        n
        for n in ast.walk(ast.parse(source))
        if isinstance(n, ast.ClassDef) and n.name == cls.__name__
    ]
    (field,) = [
        n
        for n in classdef.body
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and n.target.id == name
    ]
    start = field.lineno - 1
    while start > 0 and lines[start - 1].strip().startswith("#"):
        start -= 1
    return "\n".join(lines[start : field.end_lineno])


@pytest.fixture
def defaults(monkeypatch) -> Settings:
    """Settings as shipped: no QUORUM_* variable, no settings file."""
    for name in list(os.environ):
        if name.startswith("QUORUM_"):
            monkeypatch.delenv(name)
    return Settings()


def test_the_table_names_a_paper_and_its_section_for_every_default():
    assert len(DEFAULTS) >= 25 and UNFIXED
    for row in DEFAULTS:
        assert row["paper"] in PAPERS, row
        assert row["section"].startswith(("§", "App.")), row
        assert row["what"], row
    pairs = [(row["setting"], row["paper"]) for row in DEFAULTS]
    assert len(pairs) == len(set(pairs)), "a setting is listed twice for one paper"


@pytest.mark.parametrize("row", DEFAULTS, ids=lambda r: f"{r['setting']}@{r['paper']}")
def test_the_code_holds_the_papers_default(defaults, row):
    value = json.loads(row["value"])
    actual = resolve(defaults, row["setting"])
    assert (actual, type(actual)) == (value, type(value)), (
        f"{row['setting']} is {actual!r} in infra/settings/ but {row['value']} in docs/methods.md "
        f"({row['paper']} {row['section']}): change both, or mark the row 'deviates: reason' "
        "and write the reason beside the setting"
    )


@pytest.mark.parametrize("row", DEFAULTS, ids=lambda r: f"{r['setting']}@{r['paper']}")
def test_a_deviation_is_marked_in_the_table_and_reasoned_beside_the_setting(defaults, row):
    marked = row["what"].startswith("deviates: ")
    beside = written_beside(defaults, row["setting"])
    # One sentence beside the setting names the paper it deviates from and goes on to say why.
    reasoned = re.search(rf"deviates from [^.;]*{re.escape(row['paper'])}", beside) is not None
    assert marked == reasoned, (
        f"{row['setting']}: the table says {'it deviates' if marked else 'it follows'} "
        f"{row['paper']}, the code beside it says {'it deviates' if reasoned else 'nothing of it'}:"
        f"\n{beside}"
    )


def test_every_setting_of_the_methods_is_in_one_of_the_tables(defaults):
    listed = {row["setting"] for row in DEFAULTS}
    unfixed = [row["setting"] for row in UNFIXED]
    assert len(unfixed) == len(set(unfixed)) and not listed & set(unfixed)
    every = {p for group in METHOD_GROUPS for p in leaves(getattr(defaults, group), group)}
    assert set(unfixed) <= every, "the second table names a setting of no method"
    missing = sorted(every - listed - set(unfixed))
    assert not missing, (
        f"{', '.join(missing)}: in neither table of docs/methods.md's {HEADING!r}; add it with "
        "its paper and section, or say why no paper fixes it"
    )


def read_by(kind: str, name: str, defaults: Settings) -> list[str]:
    """Return the settings a registered method reads: its own group, its kind's, synthesis'."""
    group = getattr(defaults, kind)
    own = getattr(group, name, None)
    paths = [
        f"{kind}.{n}"
        for n in type(group).model_fields
        if not isinstance(getattr(group, n), BaseModel)
    ]
    if isinstance(own, BaseModel):
        paths += leaves(own, f"{kind}.{name}")
    return paths + leaves(defaults.synthesis, "synthesis")


@pytest.mark.parametrize(
    ("kind", "name"),
    [("ensemble", n) for n in ENSEMBLE_STRATEGIES] + [("organize", n) for n in ORGANIZE_STRATEGIES],
)
def test_every_registered_method_has_each_of_its_settings_classified(defaults, kind, name):
    classified = {row["setting"] for row in DEFAULTS + UNFIXED}
    missing = [p for p in read_by(kind, name, defaults) if p not in classified]
    assert not missing, f"{kind} strategy {name!r} reads {missing}, in neither table"
