"""Sample data and paths the tests share: a small corpus, router limits, the answering path.

The public data sets come as excerpts inside the repository (tests/fixtures/shared_excerpts, made
by tests/tools/make_shared_excerpts.py), so no test needs ../shared beside the checkout.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXCERPTS = ROOT / "tests" / "fixtures" / "shared_excerpts"
# 28 questions of 11B1_golden.json: its first 7 of each type (also its first 20 questions).
GOLDEN = EXCERPTS / "bioasq" / "11B1_excerpt.json"
# Per golden file, the question with the format slip the validator names (and a big question).
GOLDEN_SLIPS = {name: EXCERPTS / "bioasq" / f"{name}_slip.json" for name in ("8B5", "7B2", "9B2")}
CORPUS = EXCERPTS / "corpus" / "pubmed_docs.jsonl.gz"  # 707 documents
NQ = EXCERPTS / "general" / "nq_open_oracle.jsonl.gz"  # 100 questions
CONFLICTQA = EXCERPTS / "general" / "conflictqa_strategyqa_gpt4.jsonl"  # 30 records
INJECTED = ROOT / "tests" / "fixtures" / "injected" / "corpus.jsonl"  # the hostile corpus
PUBMED_FIXTURES = ROOT / "tests" / "fixtures" / "pubmed"
EFETCH_XML = (PUBMED_FIXTURES / "efetch_sample.xml").read_bytes()
ESEARCH_JSON = (PUBMED_FIXTURES / "esearch_sample.json").read_bytes()

# The nodes a confident answer passes through, in order (no refinement, no fallback).
ANSWERING_NODES = [
    "generate_query",
    "search",
    "rerank",
    "organize",
    "ensemble",
    "synthesize",
    "finalize",
]

# Router bounds as generate_query copies them from default settings.
LIMITS = {
    "min_hits": 5,
    "max_refinements": 2,
    "min_confidence": 0.5,
    "max_attempts": 2,
    "max_fallbacks": 1,
    "min_contexts": 1,
}


DOCS = [
    {
        "pmid": "101",
        "title": "Mitochondria drive programmed cell death in lace plant leaves",
        "abstract": "Mitochondrial dynamics change early during programmed cell death in the lace plant. "
        "Cyclosporin A reduced perforation formation.",
        "year": 2011,
        "mesh": ["Mitochondria"],
    },
    {
        "pmid": "102",
        "title": "Mitochondrial permeability in plant cell death",
        "abstract": "Mitochondria release cytochrome c during plant programmed cell death.",
        "year": 2009,
    },
    {
        "pmid": "103",
        "title": "Lace plant leaf perforation",
        "abstract": "Perforations in lace plant leaves form by programmed cell death of areole cells.",
        "year": 2008,
    },
    {
        "pmid": "104",
        "title": "Chloroplasts in leaf senescence",
        "abstract": "Chloroplast degradation accompanies leaf senescence in many plants.",
        "year": 2010,
    },
    {
        "pmid": "105",
        "title": "Caspase-like proteases in plants",
        "abstract": "Plant cell death involves caspase-like activities and mitochondria.",
        "year": 2012,
    },
    {
        "pmid": "106",
        "title": "Aspirin and colorectal cancer",
        "abstract": "Aspirin use lowers colorectal cancer incidence in randomized trials.",
        "year": 2015,
    },
    {
        "pmid": "107",
        "title": "Statins after myocardial infarction",
        "abstract": "Statins reduce mortality after myocardial infarction.",
        "year": 2014,
    },
    {
        "pmid": "108",
        "title": "Cell death in leaves of the lace plant: a duplicate report",
        "abstract": "Mitochondrial dynamics change early during programmed cell death in the lace plant. "
        "Cyclosporin A reduced perforation formation.",
        "year": 2012,
    },
]
