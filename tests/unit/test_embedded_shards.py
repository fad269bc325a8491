"""An embedded index in several tantivy shards: the same answers as one, and a commit that
survives a crash between the shards' commits (`infra/search/embedded_shards.py`)."""

import json

import numpy as np
import pytest

import infra.search.embedded_store as store
from infra.search.embedded import EmbeddedIndex
from infra.search.embedded_shards import PENDING_DELETES, _hits, _merge
from infra.search.embedded_shards import apply_deletes as apply
from infra.search.embedded_store import META, EmbeddedWriter

WORDS = [
    "aspirin",
    "statin",
    "insulin",
    "heparin",
    "warfarin",
    "metformin",
    "cancer",
    "trial",
    "cohort",
    "dose",
]


def doc(pmid, text):
    return {"pmid": str(pmid), "title": f"title {pmid}", "abstract": text, "year": 2020}


def corpus(n=60, seed=0):
    rng = np.random.default_rng(seed)
    return [doc(i, " ".join(rng.choice(WORDS, size=8))) for i in range(1, n + 1)]


def unit(n, dims=4, seed=0):
    vecs = np.random.default_rng(seed).normal(size=(n, dims)).astype(np.float32)
    return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)


def build(path, docs, shards, vectors=None):
    w = EmbeddedWriter(path, dims=4 if vectors is not None else None, shards=shards)
    w.upsert(docs, vectors)
    w.close()
    return EmbeddedIndex(path)


def test_shards_hold_the_documents_by_row_and_answer_as_one_index(tmp_path):
    docs = corpus()
    one = build(tmp_path / "one", docs, 1)
    three = build(tmp_path / "three", docs, 3)
    meta = json.loads((tmp_path / "three" / META).read_text())
    assert meta["shards"] == 3 and (tmp_path / "three" / "tantivy-2").is_dir()
    assert "shards" not in json.loads((tmp_path / "one" / META).read_text())
    assert [s.num_docs for s in three._searchers] == [20, 20, 20]
    assert (three.shards, one.shards) == (3, 1)
    assert three.count() == one.count() == 60
    for query in ("aspirin", "statin AND cohort", "heparin OR dose", "insu*", "metformn~1"):
        a, b = one.search(query, 1000), three.search(query, 1000)
        assert a.total == b.total and set(a.pmids) == set(b.pmids), query
        assert list(b.scores) == sorted(b.scores, reverse=True)
    head = three.search("aspirin OR cancer", 5)
    assert len(head.pmids) == 5 and head.total > 5
    assert three.fetch(["7", "8", "9", "404"]) == one.fetch(["7", "8", "9", "404"])
    assert three.has("59") and not three.has("404")


def test_a_shard_holding_more_than_its_share_of_the_top_is_asked_again(tmp_path):
    # Even rows (shard 0) mention aspirin three times, odd rows (shard 1) once: the top 200
    # are all in shard 0, which is first asked for its share (141) of them.
    docs = [doc(i, "aspirin " * (3 if i % 2 == 0 else 1) + "trial") for i in range(400)]
    one, two = build(tmp_path / "one", docs, 1), build(tmp_path / "two", docs, 2)
    a, b = one.search("aspirin", 200), two.search("aspirin", 200)
    assert a.total == b.total == 400
    assert set(b.pmids) == set(a.pmids) == {str(i) for i in range(0, 400, 2)}
    assert two.search("aspirin", 0).pmids == [] and two.search("aspirin", 0).total == 400
    # The control: the first round alone (each shard's share) lets shard 1's weaker hits in.
    query = two.compile("aspirin")
    _, rows = _merge([_hits(s, query, 141) for s in two._searchers], 200)
    assert (rows % 2 == 1).sum() == 59


def test_a_reindexed_pmid_moves_shard_and_leaves_no_old_copy(tmp_path):
    w = EmbeddedWriter(tmp_path / "i", dims=4, shards=2)
    w.upsert([doc(1, "aspirin trial"), doc(2, "statin trial")], unit(2))
    w.commit()
    w.upsert([doc(1, "ibuprofen trial")], unit(1, seed=1))  # row 2: shard 0 (was row 0)
    w.upsert([doc(2, "heparin trial")], unit(1, seed=2))  # row 3: shard 1
    w.upsert([doc(2, "warfarin trial")], unit(1, seed=3))  # row 4: supersedes row 3 at once
    w.commit()
    assert w.delete(["1", "404"]) == 1
    w.close()
    idx = EmbeddedIndex(tmp_path / "i")
    assert idx.count() == 1 and not idx.has("1")
    assert idx.search("aspirin OR ibuprofen OR statin OR heparin", 10).total == 0
    assert [p for p, _ in idx.search("warfarin", 10).hits] == ["2"]
    assert idx.fetch(["2"])[0]["abstract"] == "warfarin trial"
    assert [p for p, _ in idx.nearest(unit(1, seed=3)[0], 5)] == ["2"]
    assert not (tmp_path / "i" / PENDING_DELETES).exists()


@pytest.mark.parametrize(
    ("second", "phase_two"),
    [
        ([[doc(3, "insulin"), doc(4, "heparin")]], False),  # new PMIDs: nothing older to delete
        ([[doc(3, "insulin"), doc(1, "ibuprofen")]], True),  # the control: PMID 1 is re-indexed
        ([[doc(3, "insulin")], [doc(3, "heparin")]], True),  # superseded within the batch
    ],
)
def test_only_a_batch_that_replaces_a_pmid_commits_a_second_time(
    tmp_path, monkeypatch, second, phase_two
):
    """Phase 2 (its record, its delete query, a second commit in every shard) is skipped when
    no PMID of the batch has a document already."""
    w = EmbeddedWriter(tmp_path / "i", shards=2)
    w.upsert([doc(1, "aspirin"), doc(2, "statin")], None)
    w.commit()
    calls = []
    monkeypatch.setattr(store, "apply_deletes", lambda *a: calls.append(a) or apply(*a))
    for batch in second:
        w.upsert(batch, None)
    w.commit()
    w.close()
    assert bool(calls) == phase_two
    idx = EmbeddedIndex(tmp_path / "i")
    written = [doc(1, "aspirin"), doc(2, "statin"), *(d for batch in second for d in batch)]
    latest = {d["pmid"]: d["abstract"] for d in written}
    assert idx.count() == len(latest)
    assert {d["pmid"]: d["abstract"] for d in idx.fetch(sorted(latest))} == latest
    assert not (tmp_path / "i" / PENDING_DELETES).exists()


class Crashing:
    """A shard's tantivy writer whose commit never happens (the process died first)."""

    def __init__(self, writer):
        self._writer = writer

    def __getattr__(self, name):
        return getattr(self._writer, name)

    def commit(self):
        raise SystemExit("killed")


def test_a_batch_one_shard_missed_is_taken_back_from_the_others(tmp_path):
    w = EmbeddedWriter(tmp_path / "i", shards=2)
    w.upsert([doc(1, "aspirin"), doc(2, "statin")], None)
    w.commit()
    w.upsert([doc(1, "ibuprofen"), doc(3, "heparin")], None)  # rows 2 (shard 0), 3 (shard 1)
    w._writers[1] = Crashing(w._writers[1])
    with pytest.raises(SystemExit):
        w.commit()  # shard 0 committed its half of the batch, shard 1 did not
    del w
    reader = EmbeddedIndex(tmp_path / "i")  # before any writer repairs: the old state
    assert reader.search("ibuprofen", 10).total <= 1  # shard 0 holds it ...
    assert reader.search("ibuprofen", 10).pmids == []  # ... but its row is not committed
    assert reader.fetch(["1"])[0]["abstract"] == "aspirin"
    again = EmbeddedWriter(tmp_path / "i")
    assert again.rows == 2
    again.close()
    idx = EmbeddedIndex(tmp_path / "i")
    assert idx.count() == 2 and idx.search("ibuprofen OR heparin", 10).total == 0
    assert idx.fetch(["1"])[0]["abstract"] == "aspirin"  # the old version was never touched
    assert not (tmp_path / "i" / PENDING_DELETES).exists()


def test_deletes_a_crash_left_pending_are_finished_on_reopening(tmp_path, monkeypatch):
    w = EmbeddedWriter(tmp_path / "i", dims=4, shards=2)
    w.upsert([doc(1, "aspirin"), doc(2, "statin")], unit(2))
    w.commit()
    w.upsert([doc(2, "heparin")], unit(1, seed=5))  # row 2: shard 0; the old row 1 in shard 1
    assert w.delete(["1"]) == 1

    def crash(*_args):
        raise SystemExit("killed")

    monkeypatch.setattr(store, "apply_deletes", crash)
    with pytest.raises(SystemExit):
        w.commit()  # every shard has the new documents; the deletes never ran
    del w
    monkeypatch.undo()
    assert (tmp_path / "i" / PENDING_DELETES).exists()
    reader = EmbeddedIndex(tmp_path / "i")
    assert reader.count() == 3  # both copies of PMID 2, and PMID 1, still in tantivy
    assert reader.search("statin OR heparin", 10).pmids == ["2"]  # the superseded copy skipped
    assert reader.fetch(["2"])[0]["abstract"] == "heparin"
    assert [p for p, _ in reader.nearest(unit(2)[1], 5)].count("2") == 1  # both rows are near
    EmbeddedWriter(tmp_path / "i").close()
    idx = EmbeddedIndex(tmp_path / "i")
    assert idx.count() == 1 and not idx.has("1")
    assert idx.search("statin", 10).total == 0 and idx.search("heparin", 10).pmids == ["2"]
    assert not (tmp_path / "i" / PENDING_DELETES).exists()


def test_without_the_pending_file_a_crash_would_leave_the_old_copies(tmp_path, monkeypatch):
    """The control: the same crash with the deletes' record lost keeps both copies."""
    w = EmbeddedWriter(tmp_path / "i", shards=2)
    w.upsert([doc(1, "aspirin"), doc(2, "statin")], None)
    w.commit()
    w.upsert([doc(2, "heparin")], None)

    def crash(*_args):
        raise SystemExit("killed")

    monkeypatch.setattr(store, "apply_deletes", crash)
    with pytest.raises(SystemExit):
        w.commit()
    del w
    monkeypatch.undo()
    (tmp_path / "i" / PENDING_DELETES).unlink()
    EmbeddedWriter(tmp_path / "i").close()
    idx = EmbeddedIndex(tmp_path / "i")
    assert idx.count() == 3 and idx.search("statin", 10).total == 1


def test_the_setting_shards_a_new_index_and_an_existing_one_keeps_its_own(tmp_path):
    from infra.search.backends import open_writer
    from infra.settings import load_settings

    settings = load_settings(home=tmp_path, search={"index": "s", "embedded_shards": 2})
    writer = open_writer(settings, None)
    writer.upsert(corpus(10), None)
    writer.close()
    assert json.loads((settings.index_dir / META).read_text())["shards"] == 2
    later = load_settings(home=tmp_path, search={"index": "s", "embedded_shards": 4})
    writer = open_writer(later, None)
    assert writer.shards == 2
    writer.close()


def test_vectors_added_later_reach_documents_in_every_shard(tmp_path):
    w = EmbeddedWriter(tmp_path / "i", shards=2)
    w.upsert(corpus(6), None)
    w.commit()
    w.upsert([doc(3, "aspirin again")], None)  # row 6 supersedes row 2
    w.commit()
    w.start_vectors(4, "m")
    batches = list(w.unembedded(100))
    rows = [r for b in batches for r in b.keys]
    assert rows == [0, 1, 3, 4, 5, 6]  # row 2's document is gone: it needs no vector
    assert [d["pmid"] for b in batches for d in b.docs][-1] == "3"
    w.set_vectors(rows, unit(6), 7)
    w.commit_vectors()
    w.close()
    idx = EmbeddedIndex(tmp_path / "i")
    assert [p for p, _ in idx.nearest(unit(6)[5], 1)] == ["3"]


def test_hits_merge_best_first_and_equal_scores_by_row_as_lexsort_orders_them():
    from infra.search.embedded_shards import best_first

    rng = np.random.default_rng(3)
    scores = rng.choice(np.float32([-2.5, -0.0, 0.0, 0.5, 1.0, 7.25, 1e-30, -1e-30]), 4000)
    scores = np.concatenate([scores, rng.gamma(2, 3, 4000).astype(np.float32)])
    rows = rng.permutation(np.unique(rng.integers(0, 2**32, 9000)))[: len(scores)]  # distinct
    assert (best_first(scores, rows) == np.lexsort((rows, -scores))).all()
    # the control: scores alone, without the rows, would leave ties in another order
    assert not (np.argsort(-scores, kind="stable") == np.lexsort((rows, -scores))).all()
