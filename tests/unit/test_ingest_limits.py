"""Records ingestion leaves out are named and counted; PubMed's other abstracts are kept."""

import io
import json

from infra.ingest.pipeline import Journal, ingest
from infra.ingest.sources import events
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
