"""Make each hand-made break of the support check issue 55 listed, and show a test catches it.

Each break edits one file, runs the support tests, and restores the file: a break the tests let
through prints MISSED. `uv run python tests/tools/support_breaks.py [NAME ...]` (a few minutes;
names filter by substring). Run it from a clean tree: it rewrites files in place while it runs.
"""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = [
    "tests/unit/test_support_rules.py",
    "tests/unit/test_support.py",
    "tests/unit/test_verify.py",
    "tests/unit/test_earned_confidence.py",
    "tests/unit/test_relevance.py",
]
BREAKS = [
    (
        "plurals not stemmed",
        "infra/terms.py",
        "    if len(word) <= 3 or not word.isalpha():\n        return word",
        "    if True:\n        return word",
    ),
    (
        "abbreviation expansion unused",
        "infra/support.py",
        "        if any(form == long_form for form in forms):\n            extra.append(short_form)\n",
        "",
    ),
    (
        "short form not mapped to long",
        "infra/support.py",
        "        if any(form == short_form for form in forms):\n            extra.append(long_form)\n",
        "",
    ),
    (
        "first-letter rule dropped",
        "infra/terms.py",
        "    if joined[:1] != letters[0]:\n        return False\n",
        "",
    ),
    ("one-word entity by stem", "infra/support.py", "if len(r) >= 2]", "if len(r) >= 1]"),
    (
        "debris list items kept",
        "infra/support.py",
        "            if problem := degenerate_item(item):",
        "            if False and (problem := degenerate_item(item)):",
    ),
    (
        "degenerate_prose not in check_support",
        "infra/support.py",
        "    if ideal and (problem := degenerate_prose(ideal)):",
        "    if False and (problem := degenerate_prose(ideal)):",
    ),
    ("code fence not debris", "infra/bioasq/contract.py", 'r"[{}]|```|', 'r"[{}]|'),
    ("JSON key not debris", "infra/bioasq/contract.py", '|\\"[A-Za-z_]+\\"\\s*:', ""),
    ("brace not debris", "infra/bioasq/contract.py", 'r"[{}]|```|', 'r"```|'),
    (
        "answer-is not debris",
        "infra/bioasq/contract.py",
        '\n    r"|\\b(?:the\\s+)?(?:final\\s+)?answer\\s+is\\s*:"',
        "",
    ),
    (
        "one debris refuses whole",
        "infra/bioasq/contract.py",
        "    if all(problems):",
        "    if any(problems):",
    ),
    (
        "repeat share 0.45",
        "infra/bioasq/contract.py",
        "MAX_REPEATED_SHARE = 0.6",
        "MAX_REPEATED_SHARE = 0.45",
    ),
    ("number item 60", "infra/bioasq/contract.py", "MAX_NUMBER_ITEM = 24", "MAX_NUMBER_ITEM = 60"),
    ("grounding 0.5", "infra/support.py", "GROUNDING = 0.2", "GROUNDING = 0.5"),
    (
        "yes/numbers counted",
        "infra/support.py",
        'if not w.isdigit() and w not in ("yes", "no")]',
        "]",
    ),
    (
        "quote from another passage",
        "nodes/synthesize/verify.py",
        '    if not verbatim(quote, passage):\n        return "the quote is not in this passage"\n    found = whole_sentences(quote, passage)',
        "    found = next((f for p in [passage] + list(OTHERS) if (f := whole_sentences(quote, p))), None)",
    ),
    (
        "case-insensitive quotes",
        "nodes/synthesize/verify.py",
        "    return wanted in _squashed(f\"{passage.get('title') or ''}\\n{passage.get('abstract') or ''}\")",
        "    return wanted.lower() in _squashed(f\"{passage.get('title') or ''}\\n{passage.get('abstract') or ''}\").lower()",
    ),
    (
        "not verified refuses",
        "nodes/synthesize/support.py",
        '    if verification["status"] == "refused":\n        checked["support"]["verdict"]',
        '    if verification["status"] != "supported":\n        checked["support"]["verdict"]',
    ),
    (
        "list confidence not scaled",
        "nodes/synthesize/support.py",
        "    return kept / (kept + dropped)",
        "    return 1.0",
    ),
    (
        "list confidence not scaled (earned)",
        "nodes/synthesize/confidence.py",
        "    evidence *= supported\n",
        "",
    ),
    (
        "off-question passage is evidence",
        "infra/support.py",
        '    on = [p for p in cited if (relevance.get(p["pmid"]) or {}).get("relevant")]',
        "    on = list(cited)",
    ),
    (
        "no cap",
        "nodes/synthesize/confidence.py",
        "    capped = not judged_independently(support) and value > UNJUDGED_CAP",
        "    capped = False",
    ),
    (
        "no subject rule",
        "infra/relevance.py",
        "    return (subject or close) and share",
        "    return share",
    ),
    (
        "stand-in quotes off-question passages",
        "nodes/synthesize/node.py",
        "        stating=on_question,\n",
        "",
    ),
    (
        "members off the question give confidence",
        "nodes/synthesize/confidence.py",
        "    aligned = on_question(qtype, given, members, relevant)",
        "    aligned = 1.0",
    ),
    (
        "quote need not hold the answer",
        "nodes/synthesize/verify.py",
        '            return "the quoted sentence does not hold the answer"',
        "            return None",
    ),
]


def main(only: list[str]) -> None:
    """Make each break named (all when none), run the tests, and restore the file."""
    for name, path, old, new in BREAKS:
        if only and not any(o in name for o in only):
            continue
        full = ROOT / path
        src = full.read_text()
        if old not in src:
            print(f"!! {name}: pattern not found")
            continue
        broken = src.replace(old, new)
        if name == "quote from another passage":
            # The break: a quote counts when it is a whole sentence of any passage shown.
            broken = broken.replace("def quote_problem(", "OTHERS = []\n\n\ndef quote_problem(")
            broken = broken.replace(
                '    for passage in passages:\n        check = said.get(passage["pmid"])',
                "    OTHERS[:] = passages\n    for passage in passages:\n"
                '        check = said.get(passage["pmid"])',
            )
        full.write_text(broken)
        try:
            run = subprocess.run(
                ["uv", "run", "pytest", "-n", "0", "-q", "-x", "-p", "no:cacheprovider", *TESTS],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=600,
            )
            said = [
                line
                for line in run.stdout.splitlines()
                if line.startswith(("FAILED", "ERROR")) or " passed" in line or " failed" in line
            ]
            print(f"{'CAUGHT' if run.returncode else 'MISSED'} {name}: {said[:2]}", flush=True)
        finally:
            full.write_text(src)


if __name__ == "__main__":
    main(sys.argv[1:])
