"""`quorum eval support` measures the check that runs: judge_relevance, then judge_answer."""

import numpy as np

from graphs.eval.support import evaluate_support
from infra.bioasq.formats import Question


class Blind:
    """An embedder whose every cosine is 0: the key terms alone decide relevance."""

    dim = 2

    def embed_query(self, text):
        return np.array([1.0, 0.0], dtype=np.float32)

    def embed_documents(self, texts):
        return np.tile(np.array([0.0, 1.0], dtype=np.float32), (len(texts), 1))


def question(qid, body, qtype, snippets, exact, ideal):
    docs = [f"http://www.ncbi.nlm.nih.gov/pubmed/{pmid}" for pmid, _ in snippets]
    return Question(
        id=qid,
        body=body,
        type=qtype,
        documents=docs,
        snippets=[
            {"document": d, "text": t, "beginSection": "abstract", "offsetInBeginSection": 0}
            for d, (_, t) in zip(docs, snippets, strict=True)
        ],
        exact_answer=exact,
        ideal_answer=[ideal],
    )


METFORMIN = question(
    "m",
    "Is metformin associated with lactic acidosis?",
    "yesno",
    [("1", "Metformin therapy is associated with lactic acidosis in renal failure.")],
    "yes",
    "Yes, metformin is associated with lactic acidosis in patients with renal failure.",
)
WARFARIN = question(
    "w",
    "Does warfarin dosing depend on VKORC1 genotype?",
    "yesno",
    [("2", "Warfarin dose requirements depend on the VKORC1 genotype of each patient.")],
    "yes",
    "Yes, the warfarin dose depends on the VKORC1 genotype.",
)


async def test_each_gold_answer_is_given_and_each_swapped_one_refused():
    report = await evaluate_support([METFORMIN, WARFARIN], embedder=Blind())
    row = report["by_type"]["yesno"]
    assert row["n"] == 2 and row["false_refusal"] == 0.0 and row["swap_refusal"] == 1.0
    # Each question's own snippet addresses it; the other question's does not.
    assert row["relevance_kept"] == 1.0 and row["relevance_swap_refused"] == 1.0
    assert row["gold_contradictory"] == 0


async def test_a_gold_answer_that_contradicts_itself_is_counted_apart():
    says_no = question(
        "n",
        METFORMIN.body,
        "yesno",
        [("1", METFORMIN.snippets[0]["text"])],
        "yes",
        "No, metformin is not associated with lactic acidosis in these patients.",
    )
    report = await evaluate_support([says_no, WARFARIN], embedder=Blind())
    row = report["by_type"]["yesno"]
    assert row["gold_contradictory"] == 1 and row["false_refusal"] == 0.0
    # Control: a gold answer refused for another reason is a false refusal.
    off = question(
        "o",
        METFORMIN.body,
        "yesno",
        [("1", "Statins lower cholesterol in older adults.")],
        "yes",
        METFORMIN.ideal_answer[0],
    )
    report = await evaluate_support([off, WARFARIN], embedder=Blind())
    assert report["by_type"]["yesno"]["false_refusal"] == 0.5
    assert "no cited passage addresses" in report["false_refusal_examples"]["yesno"][0]["why"]
