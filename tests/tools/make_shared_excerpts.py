"""Rebuild tests/fixtures/shared_excerpts from ../shared/data (for maintainers; deterministic).

The tests read these excerpts, never ../shared, so that `uv run pytest` passes on a clone with
nothing beside it. Run `uv run python tests/tools/make_shared_excerpts.py [--shared DIR]` after
../shared changes; the same input always gives the same bytes (gzip without a timestamp), and
`tests/tools/check_shared.py` says whether the excerpts in the tree are still what this writes.
Only the data files are written: the README and licence files beside them are kept by hand.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "data"
OUT = ROOT / "tests" / "fixtures" / "shared_excerpts"

PER_TYPE = 7  # of 11B1, in file order: keeps its first 20 questions, every type, big and small
SLIPS = ("8B5", "7B2", "9B2")  # the golden files whose one format slip the validator names
CORPUS_HEAD = 500  # the index tests take up to this many documents from the top
NQ_LINES = 100  # more than the tests take, so distractors come from beyond their questions
CONFLICTQA_LINES = 30


def golden_excerpt(golden: dict) -> dict:
    """Return the first PER_TYPE questions of each type, in the file's order."""
    seen: dict[str, int] = {}
    kept = []
    for question in golden["questions"]:
        seen[question["type"]] = seen.get(question["type"], 0) + 1
        if seen[question["type"]] <= PER_TYPE:
            kept.append(question)
    return {"questions": kept}


def slip_excerpt(golden: dict) -> dict:
    """Return the question with a format slip and the first question citing over 10 documents."""
    from infra.bioasq.validate import validate_submission

    slipped = {
        p.where.split("(id ")[1].rstrip(")")
        for p in validate_submission(golden, phase="B")
        if "are allowed" not in p.message
    }
    big = next(q["id"] for q in golden["questions"] if len(q["documents"]) > 10)
    return {"questions": [q for q in golden["questions"] if q["id"] in slipped | {big}]}


def pmids(golden: dict) -> set[str]:
    """Return the PMIDs a golden file's questions list as documents."""
    from infra.bioasq.formats import pmid_of

    return {pmid_of(url) for q in golden["questions"] for url in q["documents"]}


def golden_bytes(data: dict) -> bytes:
    """Serialise a golden excerpt with one question a line (small, and diffs read well)."""
    lines = [json.dumps(q, ensure_ascii=False) for q in data["questions"]]
    return ('{"questions": [\n' + ",\n".join(lines) + "\n]}\n").encode()


def gzipped(text: str) -> bytes:
    """Gzip text at level 9 with no name and no timestamp, so the bytes are reproducible."""
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, compresslevel=9, mtime=0) as fh:
        fh.write(text.encode())
    return buffer.getvalue()


def excerpts(shared: Path) -> dict[str, bytes]:
    """Return every excerpt file's path (relative to OUT) and bytes, built from `shared`."""
    bioasq = shared / "bioasq"
    golden = json.loads((bioasq / "11B1_golden.json").read_text(encoding="utf-8"))
    excerpt = golden_excerpt(golden)
    files = {"bioasq/11B1_excerpt.json": golden_bytes(excerpt)}
    for name in SLIPS:
        data = json.loads((bioasq / f"{name}_golden.json").read_text(encoding="utf-8"))
        files[f"bioasq/{name}_slip.json"] = golden_bytes(slip_excerpt(data))
    wanted = pmids(excerpt)
    with gzip.open(shared / "corpus" / "pubmed_docs.jsonl.gz", "rt", encoding="utf-8") as fh:
        corpus = [
            line
            for number, line in enumerate(fh)
            if number < CORPUS_HEAD or json.loads(line)["pmid"] in wanted
        ]
    files["corpus/pubmed_docs.jsonl.gz"] = gzipped("".join(corpus))
    general = shared / "general"
    with gzip.open(general / "nq_open_oracle.jsonl.gz", "rt", encoding="utf-8") as fh:
        nq = [line for _, line in zip(range(NQ_LINES), fh, strict=False)]
    files["general/nq_open_oracle.jsonl.gz"] = gzipped("".join(nq))
    with open(general / "conflictqa_strategyqa_gpt4.jsonl", encoding="utf-8") as fh:
        conflict = [line for _, line in zip(range(CONFLICTQA_LINES), fh, strict=False)]
    files["general/conflictqa_strategyqa_gpt4.jsonl"] = "".join(conflict).encode()
    return files


def main() -> None:
    """Write the excerpts under tests/fixtures/shared_excerpts."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=SHARED, help="the shared data folder")
    shared = parser.parse_args().shared
    if not (shared / "bioasq" / "11B1_golden.json").is_file():
        sys.exit(f"make_shared_excerpts: no BioASQ golden files under {shared}; pass --shared DIR")
    for name, data in excerpts(shared).items():
        path = OUT / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        print(f"{path.relative_to(ROOT)}  {len(data):,} bytes")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
