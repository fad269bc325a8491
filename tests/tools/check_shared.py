"""Check quorum's readers and measures against the full data in ../shared (a command, not a test).

`uv run pytest` reads only the excerpts in tests/fixtures/shared_excerpts, so it passes on a
clone with nothing beside it. What needs the whole of ../shared/data is checked here instead:

    uv run python tests/tools/check_shared.py [--shared DIR]

One line per check (`ok` or `FAIL` and why); exit 0 when all pass, 1 when one fails, 2 when
there is no shared data. The last check says whether the excerpts in the tree are still what
tests/tools/make_shared_excerpts.py writes from this data.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(Path(__file__).resolve().parent)]

from make_shared_excerpts import OUT, SHARED, excerpts  # noqa: E402

from infra.bioasq.formats import load_questions, pmid_of  # noqa: E402
from infra.bioasq.urls import pubmed_url  # noqa: E402
from infra.bioasq.validate import validate_file, validate_submission  # noqa: E402

TYPES = {"yesno": 618, "factoid": 740, "list": 409, "summary": 543}
# The organisers' own slips: what the validator must name in the golden files, and nothing else.
KNOWN_SLIPS = {
    "7B2_golden.json": ["offsetInBeginSection must be non-negative, got -1"],
    "7B4_golden.json": ["offsetInBeginSection must be non-negative, got -1"],
    "8B5_golden.json": ["yesno exact_answer must be lower case 'yes', got 'Yes'"],
    "9B2_golden.json": ["empty string as a synonym"],
    "9B3_golden.json": ["empty string as a synonym"],
    "9B4_golden.json": ["empty string as a synonym"],
}


def golden_files(shared: Path) -> list[Path]:
    """Return the BioASQ golden files, by name."""
    return sorted((shared / "bioasq").glob("*_golden.json"))


def check_golden_files_load(shared: Path) -> str:
    """All 25 golden files load: 2,310 questions, as many of each type as README says."""
    files = golden_files(shared)
    assert len(files) == 25, f"{len(files)} golden files, not 25"
    types = Counter(q.type for path in files for q in load_questions(path))
    assert types == TYPES, f"types {dict(types)}"
    return f"{len(files)} files, {sum(types.values()):,} questions"


def check_golden_format(shared: Path) -> str:
    """Every golden file passes the format check (no phase)."""
    problems = {p.name: len(validate_file(p)) for p in golden_files(shared)}
    failed = {name: count for name, count in problems.items() if count}
    assert not failed, f"problems in {failed}"
    return "25 files"


def check_golden_slips(shared: Path) -> str:
    """As a phase B submission, a golden file has only its known slips (and too long lists)."""
    found = {}
    for path in golden_files(shared):
        problems = validate_file(path, phase="B")
        slips = [p.message for p in problems if "are allowed" not in p.message]
        if slips:
            found[path.name] = slips
    assert found == KNOWN_SLIPS, f"slips {found}"
    return f"{len(found)} files with a slip, all known"


def check_golden_submissions(shared: Path) -> str:
    """A submission built from each golden file (10 documents and snippets) passes A and B."""
    for path in golden_files(shared):
        questions = load_questions(path)
        testset = {"questions": [{"id": q.id, "body": q.body, "type": q.type} for q in questions]}
        submission = {
            "questions": [
                {
                    "id": q.id,
                    "documents": [pubmed_url(pmid) for pmid in q.documents[:10]],
                    "snippets": q.snippets[:10],
                    "exact_answer": q.exact_answer,
                    "ideal_answer": q.ideal_answer,
                }
                for q in questions
            ]
        }
        for phase in ("A", "B"):
            left = [
                p.message
                for p in validate_submission(submission, testset=testset, phase=phase)
                if not any(slip in p.message for slip in KNOWN_SLIPS.get(path.name, []))
            ]
            assert not left, f"{path.name} phase {phase}: {left[0]}"
    return "25 files, phases A and B"


def check_measures_on_11b1(shared: Path) -> str:
    """11B1 scored against itself: every measure 1, over 73 questions."""
    from infra.bioasq.measures import evaluate_phase_a, evaluate_phase_b

    golden = json.loads((shared / "bioasq" / "11B1_golden.json").read_text(encoding="utf-8"))
    a, b = evaluate_phase_a(golden, golden), evaluate_phase_b(golden, golden)
    assert a["questions"] == 73, a["questions"]
    for key in ("documents_recall", "snippets_recall", "documents_f1", "snippets_f1"):
        assert a[key] == 1, (key, a[key])
    assert (b["yesno_questions"], b["factoid_questions"], b["list_questions"]) == (24, 19, 11)
    for key in ("yesno_accuracy", "yesno_macro_f1", "factoid_strict_accuracy", "list_f1"):
        assert b[key] == 1, (key, b[key])
    return "phase A and B measures 1.0"


def check_ensemble_cases(shared: Path) -> str:
    """NQ-open: 9 BM25 distractors without the answer for 28+ of the first 30; 11B1 yes/no: 24."""
    from lab.trials.ensemble import load_cases

    cases = load_cases(shared / "general" / "nq_open_oracle.jsonl.gz", limit=30)
    full = sum(len(c.contexts) == 10 for c in cases)
    assert full >= 28, f"{full} of 30 questions have 10 contexts"
    for case in cases:
        ids = [c["pmid"] for c in case.contexts]
        assert ids.count(case.gold_pmid) == 1, case.question
    yesno = load_cases(shared / "bioasq" / "11B1_golden.json")
    assert len(yesno) == 24, f"{len(yesno)} yes/no cases"
    return f"NQ {full}/30 full lists, 24 yes/no cases"


def check_organize_cases(shared: Path) -> str:
    """ConflictQA: 1,356 cases, each memory with its evidence against the counter-memory with its."""
    from lab.trials.organize import load_cases

    cases = load_cases(shared / "general" / "conflictqa_strategyqa_gpt4.jsonl")
    assert len(cases) == 1356, f"{len(cases)} cases"
    for c in cases:
        sides = [set(pair) for pair in c.duplicates]
        assert len(c.contexts) == 4 and len(sides) == 2 and not sides[0] & sides[1], c.question
        assert {frozenset(p) for p in c.conflicts} == {
            frozenset((a, b)) for a in sides[0] for b in sides[1]
        }, c.question
    return "1,356 cases of 4 passages, 2 sides"


def check_corpus_covers_golden(shared: Path) -> str:
    """The corpus has 14,448 documents, among them every golden document with snippet text."""
    with gzip.open(shared / "corpus" / "pubmed_docs.jsonl.gz", "rt", encoding="utf-8") as fh:
        pmids = [json.loads(line)["pmid"] for line in fh]
    assert len(pmids) == len(set(pmids)) == 14448, f"{len(pmids)} documents"
    cited = {
        pmid_of(s["document"])
        for path in golden_files(shared)
        for q in load_questions(path)
        for s in q.snippets
        if s.get("text")
    }
    missing = cited - set(pmids)
    assert not missing, f"{len(missing)} cited documents missing, e.g. {sorted(missing)[:3]}"
    return f"{len(pmids):,} documents, {len(cited):,} cited"


def check_excerpts_current(shared: Path) -> str:
    """The excerpts in tests/fixtures/shared_excerpts are what make_shared_excerpts.py writes."""
    stale = [name for name, data in excerpts(shared).items() if _read(OUT / name) != data]
    assert not stale, f"stale {stale}; run tests/tools/make_shared_excerpts.py"
    return f"{len(excerpts(shared))} files"


def _read(path: Path) -> bytes | None:
    return path.read_bytes() if path.is_file() else None


CHECKS: list[Callable[[Path], str]] = [
    check_golden_files_load,
    check_golden_format,
    check_golden_slips,
    check_golden_submissions,
    check_measures_on_11b1,
    check_ensemble_cases,
    check_organize_cases,
    check_corpus_covers_golden,
    check_excerpts_current,
]


def main() -> int:
    """Run every check; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=SHARED, help="the shared data folder")
    shared = parser.parse_args().shared
    if not golden_files(shared):
        print(f"check_shared: no BioASQ golden files under {shared}; pass --shared DIR")
        return 2
    failed = 0
    for check in CHECKS:
        began = time.perf_counter()
        try:
            result = f"ok    {check.__name__}: {check(shared)}"
        except AssertionError as exc:
            failed += 1
            result = f"FAIL  {check.__name__}: {exc}"
        print(f"{result} ({time.perf_counter() - began:.1f} s)", flush=True)
    print(f"{len(CHECKS) - failed} of {len(CHECKS)} checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
