"""Records ingestion leaves out are named and counted; PubMed's other abstracts are kept."""

import io
import json
import re

import pytest

from infra.ingest.pipeline import Journal, ingest
from infra.ingest.sources import HEAD_LINES, SourceError, check, events
from infra.pubmed import iter_pubmed_articles
from infra.search.embedded import EmbeddedIndex
from infra.search.embedded_store import EmbeddedWriter


def _doc(pmid: str, abstract: str = "aspirin and colorectal cancer") -> str:
    return json.dumps({"pmid": pmid, "title": f"title {pmid}", "abstract": abstract}) + "\n"


def test_a_record_over_the_limit_is_skipped_with_its_line_and_size(tmp_path):
    source = tmp_path / "corpus.jsonl"
    source.write_text(_doc("1") + _doc("2", "x" * 5_000) + _doc("3"))
    got = list(events(source, max_record_chars=1_000))
    assert [kind for kind, _ in got] == ["upsert", "skip", "upsert"]
    assert got[1][1].startswith(f"{source}:2: ") and "over the limit of 1,000" in got[1][1]
    assert [value["pmid"] for kind, value in got if kind == "upsert"] == ["1", "3"]


def test_a_pubmed_article_over_the_limit_is_skipped_by_pmid(tmp_path):
    source = tmp_path / "articles.xml"
    long = "w " * 600
    source.write_text(
        "<PubmedArticleSet><PubmedArticle><MedlineCitation><PMID>42</PMID><Article>"
        f"<ArticleTitle>t</ArticleTitle><Abstract><AbstractText>{long}</AbstractText></Abstract>"
        "</Article></MedlineCitation></PubmedArticle></PubmedArticleSet>"
    )
    [(kind, why)] = list(events(source, max_record_chars=800))
    assert kind == "skip" and why == f"{source}: PMID 42: 1,200 characters, over the limit of 800"


def test_ingest_reports_what_it_left_out_and_indexes_the_rest(tmp_path):
    source = tmp_path / "corpus.jsonl"
    source.write_text(_doc("1") + _doc("2", "z" * 3_000) + _doc("3"))
    said: list[str] = []
    report = ingest(
        [source],
        EmbeddedWriter(tmp_path / "idx"),
        None,
        Journal(tmp_path / "journal.json"),
        on_reject=said.append,
        max_record_chars=2_000,
    )
    assert report.upserted == 2 and report.rejected == said and len(said) == 1
    assert {d["pmid"] for d in EmbeddedIndex(tmp_path / "idx").fetch(["1", "2", "3"])} == {"1", "3"}


ARTICLES = b"""<?xml version="1.0"?>
<PubmedArticleSet>
  <PubmedArticle><MedlineCitation>
    <Article><ArticleTitle>No identifier here</ArticleTitle></Article>
  </MedlineCitation></PubmedArticle>
  <PubmedArticle><MedlineCitation>
    <PMID Version="1">777</PMID>
    <Article><ArticleTitle>Aspirin</ArticleTitle>
      <Abstract><AbstractText Label="BACKGROUND">Main text.</AbstractText></Abstract>
    </Article>
    <OtherAbstract Type="Publisher" Language="eng"><AbstractText>Plain words.</AbstractText></OtherAbstract>
    <OtherAbstract Type="Publisher" Language="ger"><AbstractText>Deutsche Worte.</AbstractText></OtherAbstract>
  </MedlineCitation></PubmedArticle>
</PubmedArticleSet>
"""


def test_an_article_without_pmid_is_named_and_other_english_abstracts_are_kept():
    source = io.BytesIO(ARTICLES)
    source.name = "sample.xml"
    got = list(iter_pubmed_articles(source))
    assert got[0] == ("skip", "sample.xml: PubmedArticle #1 has no PMID")
    kind, doc = got[1]
    assert kind == "article" and doc["pmid"] == "777"
    assert doc["abstract"] == "BACKGROUND: Main text. Plain words."


def test_a_byte_that_is_not_utf8_is_named_with_file_and_line(tmp_path):
    source = tmp_path / "latin1.jsonl"
    good = json.dumps({"pmid": "1", "title": "t", "abstract": "a"}).encode()
    bad = json.dumps({"pmid": "2", "title": "t", "abstract": "x"}).encode().replace(b"x", b"\x84")
    source.write_bytes(good + b"\n" + bad + b"\n")
    with pytest.raises(SourceError) as caught:
        list(events(source))
    column = bad.index(b"\x84") + 1
    assert str(caught.value) == (
        f"{source}:2: not UTF-8 (byte 0x84 at column {column}); save the file as UTF-8"
    )


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b"pmid,title\n1,x\n", ":1: not JSON"),
        (b'[{"pmid": "1"}]\n', ":1: a document needs a 'pmid'"),
        (b'{"pmid": "1"}\n\xff\n', ":2: not UTF-8 (byte 0xff"),
    ],
)
def test_a_file_of_the_wrong_kind_is_refused_by_the_check_before_any_model_loads(
    tmp_path, content, said
):
    source = tmp_path / "corpus.jsonl"
    source.write_bytes(content)
    with pytest.raises(SourceError, match=re.escape(f"{source}{said}")):
        check(source)


def test_the_check_reads_only_the_head_of_a_file(tmp_path):
    source = tmp_path / "corpus.jsonl"
    line = json.dumps({"pmid": "1", "title": "t", "abstract": "a"})
    source.write_text("\n".join([line] * HEAD_LINES + ["not json"]) + "\n")
    check(source)  # the bad line past the head is named when indexing reaches it
    with pytest.raises(SourceError, match=f":{HEAD_LINES + 1}: not JSON"):
        list(events(source))
