"""quorum train: golden files to rows with BM25 negatives, and tiny models trained for a few steps."""

import json
from pathlib import Path

import pytest

from infra.bioasq.formats import load_questions
from infra.training.data import TrainingInputError, load_training, rerank_rows, retrieval_rows
from infra.training.sentences import labelled_sentences, sentence_rows
from infra.training.trainers import TrainOptions, train_reranker, train_retriever
from tests.support.data import CORPUS, GOLDEN
from tests.support.tiny_models import write_tiny_bert


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Train tiny models on one thread: two threads' barriers cost 10x on a busy CPU."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def golden(tmp_path_factory) -> Path:
    """Eight questions of the 11B1 excerpt (every one's gold documents are in CORPUS)."""
    data = json.loads(GOLDEN.read_text())
    path = tmp_path_factory.mktemp("golden") / "train_golden.json"
    path.write_text(json.dumps({"questions": data["questions"][:8]}))
    return path


@pytest.fixture(scope="module")
def data(golden):
    return load_training([golden], [CORPUS], seed=3, dev_fraction=0.25, dev_max=2)


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory) -> Path:
    return write_tiny_bert(tmp_path_factory.mktemp("tiny") / "bert")


def tiny_options(base: Path, **extra) -> TrainOptions:
    return TrainOptions(
        device="cpu",
        batch_size=4,
        max_length=32,
        dev_fraction=0.25,
        dev_depth=10,
        dev_max=2,
        base_model=base,
        **extra,
    )


def test_dev_split_is_carved_from_the_training_files_and_fixed_by_the_seed(golden, data):
    assert len(data.dev) == 2 and len(data.train) == 6
    ids = {e.question.id for e in data.train} | {e.question.id for e in data.dev}
    assert ids == {q.id for q in load_questions(golden)}
    again = load_training([golden], [CORPUS], seed=3, dev_fraction=0.25, dev_max=2)
    assert [e.question.id for e in again.dev] == [e.question.id for e in data.dev]
    other = load_training([golden], [CORPUS], seed=4, dev_fraction=0.25, dev_max=2)
    assert [e.question.id for e in other.dev] != [e.question.id for e in data.dev]


def test_hard_negatives_are_bm25_hits_outside_the_gold(data):
    for example in data.train + data.dev:
        assert example.hits, example.question.body
        assert not set(example.negatives) & set(example.question.documents)
        assert set(example.negatives) <= {p for p, _ in example.hits}
    rows = retrieval_rows(data, data.train, max_positives=2, seed=0)
    assert len(rows["anchor"]) == sum(min(2, len(e.gold)) for e in data.train)
    gold_of = {e.question.body: {data.text(p) for p in e.question.documents} for e in data.train}
    assert all(p in gold_of[a] for a, p in zip(rows["anchor"], rows["positive"], strict=True))
    assert not any(n in gold_of[a] for a, n in zip(rows["anchor"], rows["negative"], strict=True))
    ranked = rerank_rows(data, data.train, negatives=7, seed=0)
    assert len(ranked) == 9 and len(ranked["anchor"]) == len(data.train)
    for i, example in enumerate(data.train):
        negatives = {ranked[f"negative_{k}"][i] for k in range(1, 8)}
        assert not negatives & {data.text(p) for p in example.question.documents}
    wider = rerank_rows(data, data.train, negatives=7, seed=0, max_positives=3)
    assert len(wider["anchor"]) == sum(min(3, len(e.gold)) for e in data.train)
    positives = {(a, p) for a, p in zip(wider["anchor"], wider["positive"], strict=True)}
    assert len(positives) == len(wider["anchor"])  # distinct gold documents of each question
    assert all(p in gold_of[a] for a, p in positives)


def test_sentence_positives_overlap_gold_snippets(data):
    example = next(e for e in data.train if e.question.snippets)
    positives, negatives = labelled_sentences(data, example)
    snippets = " ".join(" ".join(s["text"].split()) for s in example.question.snippets)
    assert positives and all(p in snippets or p[:40] in snippets for p in positives[:3])
    assert negatives and not set(positives) & set(negatives)
    rows = sentence_rows(data, data.train, negatives=3, seed=0)
    assert rows["anchor"] and len(rows) == 5
    capped = {
        n: len(sentence_rows(data, data.train, negatives=3, seed=0, max_positives=n)["anchor"])
        for n in (1, 4, 100)
    }
    counts = [len(labelled_sentences(data, e)[0]) for e in data.train]
    assert capped == {n: sum(min(n, c) for c in counts if c) for n in (1, 4, 100)}
    assert capped[1] < capped[100]  # the fixture has questions with several gold sentences


def test_a_golden_file_without_documents_is_refused(tmp_path, golden):
    bare = tmp_path / "phase_b.json"
    data = json.loads(golden.read_text())
    bare.write_text(json.dumps({"questions": [{**q, "documents": []} for q in data["questions"]]}))
    with pytest.raises(TrainingInputError, match="no question lists gold 'documents'"):
        load_training([bare], [CORPUS], seed=0, dev_fraction=0.1, dev_max=5)


def test_retriever_trains_and_leaves_a_loadable_model_with_its_card(tmp_path, golden, tiny_bert):
    from sentence_transformers import SentenceTransformer

    out = tmp_path / "retriever"
    record = train_retriever([golden], [CORPUS], out, tiny_options(tiny_bert))
    model = SentenceTransformer(str(out), device="cpu")
    assert model.encode(["protein of the cell"]).shape == (1, 32)
    card = (out / "README.md").read_text()
    for part in ("## Data", "## Settings", "## Dev figures", "train_golden.json", "map@10"):
        assert part in card
    saved = json.loads((out / "quorum-training.json").read_text())
    assert saved["data"]["dev_questions"] == 2 and saved["settings"]["seed"] == 13
    assert [r["model"] for r in saved["dev"]] == ["BM25", "bert (untrained)", "trained"]
    alpha = record["chosen"]["alpha"]
    assert 0.0 <= alpha <= 1.0
    assert f"QUORUM_EMBEDDINGS__PATH={out.resolve()}" in record["settings_lines"]
    assert f"QUORUM_RERANK__ALPHA={alpha}" in card
    assert not list(tmp_path.glob(".retriever.*"))  # the scratch directory is gone


@pytest.mark.parametrize("level", ["document", "sentence"])
def test_reranker_trains_at_both_levels(tmp_path, golden, tiny_bert, level):
    from sentence_transformers.cross_encoder import CrossEncoder

    out = tmp_path / f"reranker-{level}"
    record = train_reranker([golden], [CORPUS], out, tiny_options(tiny_bert, level=level))
    scores = CrossEncoder(str(out), device="cpu").predict([("cell", "a protein"), ("a", "b")])
    assert len(scores) == 2
    assert record["dev"][-1]["model"] == "trained" and "map@10" in record["dev"][-1]
    key = "SNIPPETS__SCORER_PATH" if level == "sentence" else "RERANK__CROSS_ENCODER__PATH"
    card = (out / "README.md").read_text()
    assert f"QUORUM_{key}={out.resolve()}" in card
    if level == "document":  # the blend weight is chosen on dev and printed to use
        weight = record["chosen"]["weight"]
        assert 0.0 <= weight <= 1.0 and record["dev"][-1]["weight"] == weight
        assert f"QUORUM_RERANK__CROSS_ENCODER__WEIGHT={weight}" in card
    else:  # the snippets' floor and documents are chosen on dev with the saved model
        chosen = record["chosen"]
        assert "weight" not in chosen and chosen["snippets_documents"] in (5, 10)
        assert chosen["dev_snippets_f1"] == record["snippet_selection"][0]["snippets_f1"]
        assert f"QUORUM_SNIPPETS__DOCUMENTS={chosen['snippets_documents']}" in card
        assert "QUORUM_SNIPPETS__MAX_LENGTH=32" in card and "| documents | min score |" in card


def test_dev_groups_blend_the_first_stage_as_rerank_does():
    import numpy as np

    from infra.training.dev import group_figures

    # BM25 puts the gold (g) last of three; the cross-encoder puts it first.
    group = ("q", ["a", "b", "g"], ["ta", "tb", "tg"], ["g"], [], [3.0, 2.0, 1.0])
    ce = [np.array([0.0, 0.1, 5.0], dtype=np.float32)]
    assert group_figures([group], ce, 0.0)["map@10"] == round(1 / 3, 4)
    assert group_figures([group], ce, 1.0)["map@10"] == 1.0
    # half and half: g = 0.5, a = 0.5 (ties keep BM25's order), b = 0.25 + 0.01
    assert group_figures([group], ce, 0.5)["map@10"] == pytest.approx(1 / 2)
    no_first = (*group[:5], [])
    assert group_figures([no_first], ce, 0.0)["map@10"] == 1.0  # sentences: the scores alone


def test_a_non_empty_output_is_never_overwritten(tmp_path, golden, tiny_bert):
    out = tmp_path / "taken"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(TrainingInputError, match="exists and is not empty"):
        train_retriever([golden], [CORPUS], out, tiny_options(tiny_bert))
    assert [p.name for p in out.iterdir()] == ["keep.txt"]


def test_one_question_trains_without_a_dev_split(tmp_path, golden, tiny_bert):
    single = tmp_path / "one_golden.json"
    single.write_text(json.dumps({"questions": json.loads(golden.read_text())["questions"][1:2]}))
    record = train_retriever([single], [CORPUS], tmp_path / "one", tiny_options(tiny_bert))
    assert record["data"]["dev_questions"] == 0 and record["dev"] == []
    assert record["chosen"] == {"epoch": 1, "alpha": 0.6}  # no dev: the settings' default weight


def test_dev_questions_keep_deeper_bm25_hits_than_training_questions(golden, monkeypatch):
    import infra.training.data as training_data

    # Fusion weights are chosen on dev by fusing every candidate, as rerank does; training
    # only needs enough hits for its hard negatives.
    monkeypatch.setattr(training_data, "DEPTH", 3)
    monkeypatch.setattr(training_data, "DEV_DEPTH", 12)
    data = load_training([golden], [CORPUS], seed=3, dev_fraction=0.25, dev_max=2)
    assert max(len(e.hits) for e in data.train) == 3
    assert max(len(e.hits) for e in data.dev) > 3


def a_retriever(tmp_path, alpha: float) -> Path:
    """A tiny sentence-transformers model with the record `train retriever` leaves."""
    from tests.support.tiny_models import write_tiny_sentence_transformer

    path = write_tiny_sentence_transformer(tmp_path / f"retriever-{alpha}", seed=5)
    (path / "quorum-training.json").write_text(json.dumps({"chosen": {"alpha": alpha}}))
    return path


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_hits_follow_bm25_fused_with_the_retriever_as_rerank_fuses(tmp_path, golden, alpha):
    from sentence_transformers import SentenceTransformer

    from infra.training.first_stage import fuse_hits

    bm25 = load_training([golden], [CORPUS], seed=3, dev_fraction=0.25, dev_max=2)
    fused = load_training([golden], [CORPUS], seed=3, dev_fraction=0.25, dev_max=2)
    retriever = a_retriever(tmp_path, alpha)
    assert fuse_hits(fused, retriever, "cpu") == alpha
    model = SentenceTransformer(str(retriever), device="cpu")
    moved = 0
    for before, after in zip(bm25.train + bm25.dev, fused.train + fused.dev, strict=True):
        ids = [p for p, _ in before.hits]
        assert sorted(ids) == sorted(p for p, _ in after.hits)
        if alpha == 0.0:  # BM25's weight alone: its order (ties in its order)
            assert [p for p, _ in after.hits] == ids
            continue
        q = model.encode([before.question.body], normalize_embeddings=True)[0]
        docs = model.encode([fused.text(p) for p in ids], normalize_embeddings=True)
        cosine = dict(zip(ids, docs @ q, strict=True))
        low, high = min(cosine.values()), max(cosine.values())
        scores = [s for _, s in after.hits]
        assert scores == sorted(scores, reverse=True)
        for pmid, score in after.hits:  # the retriever's weight alone: min-max cosine
            assert score == pytest.approx((cosine[pmid] - low) / (high - low), abs=1e-3)
        moved += [p for p, _ in after.hits] != ids
        gold = set(before.question.documents)
        assert after.negatives == [p for p, _ in after.hits if p not in gold]
    assert alpha == 0.0 or moved  # the fused order is not BM25's


def test_a_reranker_behind_a_retriever_records_it_and_its_first_stage(tmp_path, golden, tiny_bert):
    retriever = a_retriever(tmp_path, 0.7)
    options = tiny_options(tiny_bert, retriever=retriever)
    record = train_reranker([golden], [CORPUS], tmp_path / "ce", options)
    assert record["dev"][0]["model"] == f"BM25 + {retriever.name} (α 0.7)"
    assert record["settings"]["retriever"] == str(retriever)
    assert "BM25 + " in record["loss"]
    card = (tmp_path / "ce" / "README.md").read_text()
    assert "chosen blending with BM25's head" not in card


def test_a_retriever_without_its_record_is_refused_in_one_line(tmp_path):
    from infra.errors import UserError
    from infra.training.first_stage import retriever_alpha

    with pytest.raises(UserError, match="not a retriever `quorum train retriever` made"):
        retriever_alpha(tmp_path)


class GoldScorer:
    """Scores a dev question's gold sentences 0.9 and every other sentence 0.15."""

    def __init__(self, gold: set[str]):
        self.gold = gold

    def score(self, query, passages):
        import numpy as np

        return np.array([0.9 if " ".join(p.split()) in self.gold else 0.15 for p in passages])


def test_snippet_selection_chooses_the_floor_that_keeps_the_gold_sentences(data):
    from infra.training.sentences import SELECTION_DOCUMENTS, snippet_selection

    dev = [e for e in data.dev if e.question.snippets]
    gold = {s for e in dev for s in labelled_sentences(data, e)[0]}
    rows = snippet_selection(data, dev, GoldScorer(gold))
    assert len(rows) == len(SELECTION_DOCUMENTS) * 10  # every documents × floor, scored
    best = rows[0]
    assert best["min_score"] == 0.2  # the lowest floor that drops the 0.15s (ties: grid order)
    unfloored = next(r for r in rows if r["min_score"] is None and r["documents"] == 10)
    assert best["snippets_precision"] > unfloored["snippets_precision"]
    assert best["snippets_f1"] > unfloored["snippets_f1"] > 0  # gold scored at its text
