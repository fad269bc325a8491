"""What the README and docs/ say about the tree and the output holds: every repository path they
name exists, every file and folder the layout lists is where it says, the counts they give are
the counts of the files, and the README names exactly the keys `ask --json` prints."""

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


PACKAGES = ("graphs", "nodes", "infra", "prompts", "lab")
"""The top-level folders of code: the layout's tree has a block for each."""


def _layout_blocks() -> dict[str, str]:
    """Return the layout's tree by top folder: each block's lines, from `graphs/` to `tests/`."""
    tree = (ROOT / "docs/layout.md").read_text("utf-8").split("```")[1]
    blocks: dict[str, str] = {}
    top = None
    for line in tree.splitlines():
        if found := re.match(r"(\w+)/\s", line):
            top = found.group(1)
        if top is not None:
            blocks[top] = blocks.get(top, "") + line + "\n"
    return blocks


def test_the_layout_has_a_block_for_every_top_folder_of_code():
    blocks = _layout_blocks()
    assert set(PACKAGES) <= set(blocks)
    assert all((ROOT / top).is_dir() for top in blocks)


@pytest.mark.parametrize("top", [*PACKAGES, "tests"])
def test_every_file_and_folder_the_layout_lists_is_under_its_top_folder(top):
    block = _layout_blocks()[top]
    files = {p.name for p in (ROOT / top).rglob("*.py")}
    folders = {p.name for p in (ROOT / top).rglob("*") if p.is_dir()}
    listed_files = set(re.findall(r"(?<![\w/.])(\w+\.py)\b", block))
    listed_folders = set(re.findall(r"(?<![\w/.])(\w+)/(?=[\s):])", block)) - {top}
    paths = set(re.findall(r"(?<![\w/.])(\w+(?:/\w+)+\.py)\b", block))  # from the root
    assert sorted(listed_files - files) == []
    assert sorted(listed_folders - folders) == []
    assert sorted(p for p in paths if not (ROOT / p).is_file()) == []


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


def _json_sentence_keys(readme: str) -> tuple[set[str], set[str]]:
    """Return the keys README's `--json` sentence lists, and every name it quotes in it.

    A listed key is quoted outside parentheses; the parentheses say what it holds.
    """
    start = readme.index("`--json` prints exactly one object:")
    end = readme.index("`thread_id`.", start) + len("`thread_id`")
    sentence = readme[start + len("`--json` prints exactly one object:") : end]
    listed, quoted, depth = set(), set(), 0
    for part in re.split(r"(`[^`]+`|[()])", sentence):
        if part == "(":
            depth += 1
        elif part == ")":
            depth -= 1
        elif part.startswith("`"):
            quoted.add(part.strip("`"))
            if depth == 0:
                listed.add(part.strip("`"))
    return listed, quoted


def test_the_readme_names_exactly_the_keys_ask_json_prints():
    from graphs.cli.ask import ANSWER_KEYS
    from nodes.records import Result

    # `failed` is never a key: a model failure is `ask`'s exit status 1, with no JSON printed.
    keys = (Result.__required_keys__ | Result.__optional_keys__) - {"failed"} | {"thread_id"}
    assert set(ANSWER_KEYS) == keys
    listed, quoted = _json_sentence_keys((ROOT / "README.md").read_text("utf-8"))
    assert sorted(listed - keys) == []  # no key the output lacks
    assert sorted(keys - quoted) == []  # every key the output has
