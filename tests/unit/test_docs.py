"""What the README and docs/ say about the tree holds: every repository path they name exists,
every module the layout lists is a file, and the counts they give are the counts of the files."""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TOPS = ("graphs/", "nodes/", "infra/", "prompts/", "lab/", "tests/", "docs/", ".ci/")
MADE_BY_RUNS = (".ci/work/",)
"""Folders a run makes (`.ci/run` provisions Elasticsearch there): named, never committed."""
QUOTED = re.compile(r"`([^`\s]+)`")


def _named_paths(text: str) -> set[str]:
    """Return the repository paths a document quotes (`graphs/qa.py`), patterns left out."""
    found = set()
    for token in QUOTED.findall(text):
        token = token.rstrip(".,;:)").split("::")[0]
        if (
            token.startswith(TOPS)
            and not token.startswith(MADE_BY_RUNS)
            and not re.search(r"[<>*{}…]|\.\.\.", token)
        ):
            found.add(token)
    return found


def _exists(named: str) -> bool:
    """A path, a path with `:name` after it, or a module's `path/module.name`."""
    path = named.split(":")[0]
    return any((ROOT / p).exists() for p in (path, re.sub(r"\.\w+$", ".py", path)))


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_path_a_document_names_exists(doc):
    missing = sorted(p for p in _named_paths(doc.read_text("utf-8")) if not _exists(p))
    assert missing == []


def test_every_module_the_layout_lists_is_a_file():
    text = (ROOT / "docs/layout.md").read_text("utf-8")
    tree = text.split("```")[1]
    files = {
        p.name
        for top in ("graphs", "nodes", "infra", "prompts", "lab", "tests")
        for p in (ROOT / top).rglob("*.py")
    }
    listed = set(re.findall(r"\b(\w+\.py)\b", tree))
    assert sorted(listed - files) == []


def test_the_readme_counts_the_fixtures_there_are():
    readme = (ROOT / "README.md").read_text("utf-8")
    fixtures = ROOT / "tests/fixtures/bioasq_submissions"
    mistakes = json.loads((fixtures / "expected.json").read_text("utf-8"))
    (claimed,) = re.findall(r"(\d+) one-mistake fixtures", readme)
    assert int(claimed) == len(mistakes)
    excerpt = ROOT / "tests/fixtures/shared_excerpts/bioasq"
    questions = [
        q
        for path in excerpt.glob("11B1*.json")
        for q in json.loads(path.read_text("utf-8"))["questions"]
    ]
    (claimed,) = re.findall(r"(\d+) questions of BioASQ 11B1", readme)
    assert int(claimed) == len(questions)
