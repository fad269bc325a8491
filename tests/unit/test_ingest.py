"""Ingestion: sources, the journal, resume after an interruption, deletions in order."""

import gzip
import json

import pytest

from infra.ingest.pipeline import Journal, ingest
from infra.ingest.sources import SourceError, check, events, normalize
from infra.search.embedded import EmbeddedIndex
from infra.search.embedded_store import EmbeddedWriter

UPDATE_XML = """<?xml version="1.0"?>
<PubmedArticleSet>
 <PubmedArticle><MedlineCitation><PMID>11</PMID><Article><Journal><JournalIssue><PubDate><Year>2001</Year></PubDate></JournalIssue><Title>J</Title></Journal>
  <ArticleTitle>Aspirin <i>trial</i></ArticleTitle><Abstract><AbstractText Label="RESULTS">Aspirin helped.</AbstractText></Abstract></Article></MedlineCitation></PubmedArticle>
 <PubmedArticle><MedlineCitation><PMID>12</PMID><Article><ArticleTitle>Statins</ArticleTitle></Article></MedlineCitation></PubmedArticle>
 <DeleteCitation><PMID>1</PMID></DeleteCitation>
</PubmedArticleSet>"""


def write_jsonl(path, docs, gz=False):
    text = "".join(json.dumps(d) + "\n" for d in docs)
    if gz:
        with gzip.open(path, "wt") as fh:
            fh.write(text)
    else:
        path.write_text(text)
    return path


DOCS = [
    {"pmid": str(i), "title": f"Title {i}", "abstract": f"aspirin study number {i}"}
    for i in range(1, 11)
]


def test_jsonl_and_gzip_give_the_same_events(tmp_path):
    plain = list(events(write_jsonl(tmp_path / "a.jsonl", DOCS)))
    zipped = list(events(write_jsonl(tmp_path / "a.jsonl.gz", DOCS, gz=True)))
    assert plain == zipped and len(plain) == 10 and plain[0][0] == "upsert"


def test_pubmed_xml_yields_articles_then_the_deletion(tmp_path):
    path = tmp_path / "update.xml"
    path.write_text(UPDATE_XML)
    got = list(events(path))
    assert [e for e, _ in got] == ["upsert", "upsert", "delete"]
    assert (
        got[0][1]["abstract"] == "RESULTS: Aspirin helped."
        and got[0][1]["title"] == "Aspirin trial"
    )
    assert got[2] == ("delete", "1")


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("docs.csv", b"x", "unsupported file type"),
        ("fake.jsonl.gz", b"not gzip", "not a gzip file"),
        ("missing.jsonl", None, "no such file"),
    ],
)
def test_check_names_the_problem(tmp_path, name, content, message):
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(SourceError, match=message):
        check(path)


def test_a_broken_record_names_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"pmid": "1", "title": "a"}\n{"pmid": \n')
    with pytest.raises(SourceError, match=r"bad\.jsonl:2: not JSON"):
        list(events(path))


def test_broken_xml_is_a_source_error(tmp_path):
    path = tmp_path / "bad.xml"
    path.write_text("<PubmedArticleSet><PubmedArticle><MedlineCitation><PMID>1</PMID></Medline")
    with pytest.raises(SourceError, match=r"bad\.xml"):
        list(events(path))


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"pmid": "abc"}, "is not a number"),
        ({"pmid": "1", "year": "soon"}, "year"),
        ({"pmid": "1", "mesh": "x"}, "mesh"),
    ],
)
def test_normalize_rejects_wrong_types(doc, message):
    with pytest.raises(ValueError, match=message):
        normalize(doc)


class Interrupt(Exception):
    pass


class FailingWriter:
    """Delegates to a real writer but raises after `fail_after` upserted documents."""

    def __init__(self, inner, fail_after):
        self.inner, self.left = inner, fail_after

    def upsert(self, docs, vectors):
        if self.left <= 0:
            raise Interrupt
        self.left -= len(docs)
        return self.inner.upsert(docs, vectors)

    def delete(self, pmids):
        return self.inner.delete(pmids)

    def commit(self):
        self.inner.commit()

    def close(self):
        self.inner.close()


def test_an_interrupted_run_resumes_without_duplicates(tmp_path):
    source = write_jsonl(tmp_path / "c.jsonl", DOCS)
    journal = Journal(tmp_path / "journal.json")
    writer = FailingWriter(EmbeddedWriter(tmp_path / "idx"), fail_after=6)
    with pytest.raises(Interrupt):
        ingest([source], writer, None, journal, batch_size=2, commit_every=4)
    writer.inner.close()
    assert Journal(tmp_path / "journal.json").done == {Journal.key(source): 4}
    report = ingest(
        [source],
        EmbeddedWriter(tmp_path / "idx"),
        None,
        Journal(tmp_path / "journal.json"),
        batch_size=2,
    )
    assert report.skipped == 4 and report.upserted == 6
    idx = EmbeddedIndex(tmp_path / "idx")
    assert idx.count() == 10
    assert idx.search("aspirin", 100).total == 10


def test_rerunning_a_finished_source_writes_nothing_and_a_changed_one_starts_over(tmp_path):
    source = write_jsonl(tmp_path / "c.jsonl", DOCS)
    w = EmbeddedWriter(tmp_path / "idx")
    ingest([source], w, None, Journal(tmp_path / "j.json"))
    w.close()
    w = EmbeddedWriter(tmp_path / "idx")
    again = ingest([source], w, None, Journal(tmp_path / "j.json"))
    assert again.upserted == 0 and again.skipped == 10
    write_jsonl(source, [*DOCS, {"pmid": "99", "title": "new", "abstract": "aspirin"}])
    changed = ingest([source], w, None, Journal(tmp_path / "j.json"))
    w.close()
    assert changed.upserted == 11
    assert EmbeddedIndex(tmp_path / "idx").count() == 11


def test_deletions_apply_after_the_upserts_before_them(tmp_path):
    first = write_jsonl(tmp_path / "base.jsonl", [{"pmid": "1", "title": "old", "abstract": "x"}])
    update = tmp_path / "update.xml"
    update.write_text(UPDATE_XML)
    w = EmbeddedWriter(tmp_path / "idx")
    report = ingest([first, update], w, None, Journal(tmp_path / "j.json"))
    w.close()
    idx = EmbeddedIndex(tmp_path / "idx")
    assert report.deleted == 1 and not idx.has("1") and idx.has("11") and idx.has("12")


def test_embeddings_are_computed_in_batches(tmp_path, embedder):
    source = write_jsonl(tmp_path / "c.jsonl", DOCS)
    calls = []

    class Counting(type(embedder)):
        def embed_documents(self, texts):
            calls.append(len(texts))
            return super().embed_documents(texts)

    counting = Counting()
    w = EmbeddedWriter(tmp_path / "idx", dims=counting.dim, embedding_model=counting.name)
    ingest([source], w, counting, Journal(tmp_path / "j.json"), batch_size=4)
    w.close()
    assert calls == [4, 4, 2]
    idx = EmbeddedIndex(tmp_path / "idx")
    q = counting.embed_query("Title 3. aspirin study number 3")
    assert idx.similarities(["3"], q)[0] > 0.99
