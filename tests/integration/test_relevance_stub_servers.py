"""Issue 55 as a user met it: stub servers of our own over a 12-abstract corpus of our own.

Each case is refused by the check that catches it, and its control — the same server, one
thing changed — is given, so a test that refused everything would fail too.
"""

import json
from pathlib import Path

import pytest

from infra.embeddings import HuggingFaceEmbedder
from infra.relevance import judge_relevance
from infra.settings import EmbeddingSettings
from tests.support.cli import quorum_env, run_quorum
from tests.support.stub_endpoint import serve_stub, spec

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "relevance" / "corpus.jsonl"
DOCS = {d["pmid"]: d for d in map(json.loads, CORPUS.read_text().splitlines())}
METFORMIN, WARFARIN, HFE, LUNG, BREAST, CFTR, MODIFIERS = (
    "90000001",
    "90000002",
    "90000003",
    "90000004",
    "90000005",
    "90000006",
    "90000007",
)
EVERY_DOCUMENT = (
    "metformin OR warfarin OR haemochromatosis OR lung OR breast OR cystic OR aspirin OR statin "
    "OR vitamin OR lactate OR epilepsy"
)


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    """A data directory whose index holds the 12 abstracts (no vectors: BM25 order)."""
    home = tmp_path_factory.mktemp("relevance-home")
    proc = run_quorum(quorum_env(home), "index", str(CORPUS), "--no-embeddings")
    assert proc.returncode == 0, proc.stderr
    return home


def first_sentence(pmid: str) -> str:
    return DOCS[pmid]["abstract"].split(". ")[0] + "."


def replies(exact, cited, ideal, quote, quoted_pmid=None):
    """Every role's reply from one server: the same answer, and the verifier's verdict."""
    answer = {
        "query": EVERY_DOCUMENT,
        "duplicates": [],
        "answer": exact if isinstance(exact, str) else exact[0],
        "pmids": [cited],
        "exact_answer": exact,
        "ideal_answer": ideal,
        "confidence": 0.95,
        "cited_pmids": [cited],
        "rationale": "",
    }
    verdicts = {"verdicts": [{"pmid": quoted_pmid or cited, "quote": quote, "verdict": "supports"}]}

    def respond(role, prompt):
        return verdicts if role == "verify" else answer

    return respond


def ask(home, respond, question, qtype):
    with serve_stub("stub", respond) as stub:
        env = quorum_env(home) | {
            "QUORUM_MODELS__QUERY": json.dumps(spec(stub)),
            "QUORUM_MODELS__ENSEMBLE": json.dumps([spec(stub)]),
            "QUORUM_FALLBACK__ENABLED": "false",
            "QUORUM_ORGANIZE__STRATEGY": "dedupe",
            "QUORUM_MODELS__CACHE": "off",
        }
        proc = run_quorum(env, "ask", question, "--type", qtype, "--json", timeout=600)
        assert max(stub.connections) > 1  # HTTP/1.1 keep-alive: a connection served many
    assert proc.returncode == 0, proc.stderr  # the model works; the evidence decides
    return json.loads(proc.stdout)


def test_an_answer_copied_from_an_off_topic_passage_is_never_given(home):
    # "Is metformin associated with lactic acidosis?" answered "yes" citing a warfarin-dosing
    # abstract whose first sentence (which says "Yes") the answer copied.
    question = "Is metformin associated with lactic acidosis?"
    copied = first_sentence(WARFARIN)
    result = ask(home, replies("yes", WARFARIN, copied, copied), question, "yesno")
    assert result["insufficient"] is True and result["exact_answer"] is None
    assert "no cited passage addresses the question" in result["insufficient_reason"]
    assert result["confidence"] == 0.0 and result["evidence"] == []
    # Control: the same server citing the metformin abstract, in its words, is given.
    said = first_sentence(METFORMIN)
    result = ask(home, replies("yes", METFORMIN, f"Yes. {said}", said), question, "yesno")
    assert result["insufficient"] is False and result["exact_answer"] == "yes"
    assert [e["pmid"] for e in result["evidence"]] == [METFORMIN]
    assert result["evidence"][0]["relevance"]["relevant"] is True
    assert result["support"]["verdict"] == "supported"
    assert result["confidence"] <= 0.5  # its only judge was the model that answered


def test_a_one_word_quote_verifies_nothing(home):
    # A verifier answering `supports` with the quote "the" verified a wrong gene. MBL2 stands
    # in a passage on cystic fibrosis, so only the verifier can refuse it.
    question = "Which gene is mutated in cystic fibrosis?"
    ideal = "MBL2 is mutated in cystic fibrosis."
    result = ask(home, replies(["MBL2"], MODIFIERS, ideal, "the"), question, "factoid")
    assert result["insufficient"] is True and result["exact_answer"] is None
    assert "not a whole sentence" in result["insufficient_reason"]
    # Control: the verifier quoting the whole sentence that names MBL2 lets it through — the
    # self-verifying liar, which only an independent judge or the confidence cap can answer.
    sentence = "Variants of MBL2 and TGFB1 were associated with more severe lung disease in cystic fibrosis."
    result = ask(home, replies(["MBL2"], MODIFIERS, ideal, sentence), question, "factoid")
    assert result["insufficient"] is False and result["exact_answer"] == [["MBL2"]]
    assert result["confidence"] <= 0.5


@pytest.mark.parametrize(
    ("question", "on", "off"),
    [
        ("Is metformin associated with lactic acidosis?", METFORMIN, WARFARIN),
        ("Which gene variants explain the variability of warfarin dose?", WARFARIN, HFE),
        ("Which genes are mutated in hereditary breast cancer?", BREAST, LUNG),
        ("Which gene is mutated in cystic fibrosis?", CFTR, HFE),
    ],
)
def test_the_issue_s_off_topic_abstracts_are_judged_off_the_question(question, on, off):
    # With the real embedder: the abstracts issue 55's answers were copied from.
    embedder = HuggingFaceEmbedder(EmbeddingSettings())
    judged = judge_relevance(question, [DOCS[on], DOCS[off]], embedder)
    assert judged[on].relevant, judged[on]
    assert not judged[off].relevant, judged[off]
