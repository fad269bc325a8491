"""The simulated verifier judges from the same facts as the simulated members (issue 57, item 8).

Through quorum's own verify call (`verify_answer`) over real HTTP: without plants the simulator
verifies the answer its own synthesis gives in its placeholder words, and judges any other
answer by the words of the passage; with plants each passage's planted answer decides, quoted
as members quote, misquoted at the reader's calibrated rate.
"""

from __future__ import annotations

import pytest

from infra.models import ModelPool
from infra.settings import ModelSpec, load_settings
from lab.simulate.reader import ReaderSettings
from lab.simulate.schema_instance import PROSE
from lab.simulate.server import SimulatedEndpoint
from nodes.synthesize.verify import verify_answer
from tests.support.reader import EXACT_READER

QUESTION = "Do mitochondria play a role in remodelling lace plant leaves during cell death?"
# What the bench question's first synthesis cited on the demo index: nothing of mitochondria.
STORAGE = {
    "pmid": "22519710",
    "title": "Will clinical studies elucidate the connection between the length of storage of "
    "transfused red blood cells and clinical outcomes?",
    "abstract": "BACKGROUND: The temporal pattern of the biologic mechanism linking red blood "
    "cell (RBC) storage duration with clinical outcomes is yet unknown. This study investigates "
    "how such a temporal pattern can affect the power of randomized controlled trials.",
    "score": 0.9,
}


def verifier(settings, url: str):
    spec = ModelSpec(provider="openai", model="sim", base_url=url, max_retries=0)
    chosen = load_settings(home=settings.home, models={"ensemble": [spec], "cache": "off"})
    return ModelPool(chosen).first("verify")


LACE = {
    "pmid": "21645374",
    "title": "Do mitochondria play a role in remodelling lace plant leaves during programmed "
    "cell death?",
    "abstract": "BACKGROUND: Programmed cell death (PCD) is the regulated death of cells within "
    "an organism. The role of mitochondria during PCD has been recognized in animals; however, "
    "it has been less studied during PCD in plants.",
    "score": 1.0,
}


async def test_the_simulator_verifies_its_own_answer_and_not_another(settings):
    with SimulatedEndpoint(0.0) as endpoint:
        model = verifier(settings, endpoint.base_url)
        own, _ = await verify_answer(model, QUESTION, "yesno", ["yes"], PROSE, [LACE], authors=())
        # What the bench question's first synthesis cited: the simulator supports its own
        # answer there too, but its quote holds none of the question's key terms, and quorum
        # counts it as nothing (issue 55).
        stored, _ = await verify_answer(
            model, QUESTION, "yesno", ["yes"], PROSE, [STORAGE], authors=()
        )
        # Negative control: the same passage, an answer the simulator never gave it.
        other, _ = await verify_answer(
            model,
            QUESTION,
            "yesno",
            ["yes"],
            "Mitochondria remodel lace plant leaves.",
            [STORAGE],
            authors=(),
        )
    assert own["status"] == "supported", own["why"]
    (passage,) = own["passages"]
    assert passage["verdict"] == "supports" and passage["quoted"]  # verbatim, as members cite
    assert passage["quote"].startswith("Do mitochondria play a role")  # most about the question
    assert stored["status"] == "refused" and stored["passages"][0]["verdict"] == "supports"
    assert "key terms" in stored["passages"][0]["why_not"]
    assert other["status"] == "refused" and other["passages"][0]["verdict"] == "unrelated"


GOLD, WRONG = "ENaC", "CFTR"
PLANTS = [
    {
        "id": "cf",
        "question": "Which channel dehydrates the airway surface in cystic fibrosis?",
        "answer": GOLD,
        "passages": [
            {
                "pmid": "g1",
                "role": "gold",
                "title": "Sodium channels",
                "text": f"Airway surface liquid is lost. {GOLD} hyperactivity dehydrates the "
                "airway surface in cystic fibrosis, as the patch clamp studies report.",
            },
            {
                "pmid": "c1",
                "role": "counterfactual",
                "answer": WRONG,
                "title": "Chloride channels",
                "text": f"Airway surface liquid is lost. {WRONG} loss dehydrates the airway "
                "surface in cystic fibrosis, as the patch clamp studies report.",
            },
            {
                "pmid": "i1",
                "role": "irrelevant",
                "title": "Lung growth",
                "text": "Lungs grow until early adulthood in most mammals studied so far.",
            },
        ],
    }
]
PASSAGES = [
    {"pmid": p["pmid"], "title": p["title"], "abstract": p["text"], "score": 1.0}
    for p in PLANTS[0]["passages"]
]


async def planted_verdicts(settings, answer: str, **reader) -> dict[str, dict]:
    question = PLANTS[0]["question"]
    settings_ = ReaderSettings(**(EXACT_READER | reader))
    with SimulatedEndpoint(0.0, planted=PLANTS, reader=settings_) as endpoint:
        model = verifier(settings, endpoint.base_url)
        found, _ = await verify_answer(
            model, question, "factoid", [answer], f"{answer}.", PASSAGES, authors=()
        )
    return {p["pmid"]: p for p in found["passages"]} | {"status": found["status"]}


async def test_a_planted_passage_judges_by_its_planted_answer(settings):
    gold = await planted_verdicts(settings, GOLD)
    assert gold["status"] == "supported"
    assert gold["g1"]["verdict"] == "supports" and gold["g1"]["quoted"]
    assert gold["g1"]["quote"].startswith(f"{GOLD} hyperactivity")  # the sentence naming it
    assert gold["c1"]["verdict"] == "contradicts" and gold["c1"]["quote"].startswith(WRONG)
    assert gold["i1"]["verdict"] == "unrelated" and gold["i1"]["quote"] == ""
    # Negative control: the counterfactual's answer is supported by its own passage alone,
    # though its words ("dehydrates the airway surface") stand in the gold passage as well.
    wrong = await planted_verdicts(settings, WRONG)
    assert wrong["c1"]["verdict"] == "supports" and wrong["g1"]["verdict"] == "contradicts"


@pytest.mark.parametrize(("misquote", "verbatim"), [(0.0, True), (1.0, False)])
async def test_the_planted_verifier_misquotes_at_the_members_rate(settings, misquote, verbatim):
    found = await planted_verdicts(settings, GOLD, misquote=misquote)
    assert found["g1"]["verdict"] == "supports" and found["g1"]["quoted"] is verbatim
    # A misquoted verdict counts as unrelated: the answer is then refused, as quorum refuses a
    # verifier whose quote is not in its passage.
    assert found["status"] == ("supported" if verbatim else "refused")
