"""PubMed XML parsing and the E-utilities client's own rules (its HTTP: tests/integration)."""

from __future__ import annotations

import gzip
import io
import xml.etree.ElementTree as ET
from pathlib import Path

import httpx
import pytest

from infra.pubmed import (
    PubMedClient,
    iter_pubmed_articles,
    parse_pubmed_article,
)
from tests.support.data import EFETCH_XML, ESEARCH_JSON

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "pubmed"
SECRET = "sk-test-SECRET-123456"
FAST = 1000.0  # requests_per_second that keeps the limiter out of the way


# --- XML parsing ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def docs() -> dict[str, dict]:
    root = ET.fromstring(EFETCH_XML)
    parsed = [parse_pubmed_article(elem) for elem in root.findall("PubmedArticle")]
    return {doc["pmid"]: doc for doc in parsed if doc is not None}


def test_parse_returns_every_article_with_plain_fields(docs):
    assert list(docs) == ["90000001", "90000002", "90000003"]
    for doc in docs.values():
        assert set(doc) == {"pmid", "title", "abstract", "year", "mesh", "journal"}


def test_parse_structured_abstract_keeps_labels_and_inline_markup(docs):
    assert docs["90000001"]["abstract"] == (
        "BACKGROUND: Carriers of pathogenic BRCA1 variants respond to PARP inhibitors. "
        "METHODS: We enrolled 120 patients with Ca2+ levels above 2.6 mmol/L. "
        "RESULTS: Progression-free survival improved (HR 0.42; 95% CI 0.30-0.58). "
        "CONCLUSIONS: PARP inhibition benefits BRCA1 carriers."
    )


def test_parse_title_keeps_inline_markup_and_normalises_whitespace(docs):
    assert docs["90000001"]["title"] == (
        "Germline BRCA1 variants and PARP inhibitor response in ovarian cancer."
    )
    assert docs["90000003"]["title"] == "Hepatic glycogen turnover during prolonged fasting."


def test_parse_unlabelled_abstract(docs):
    assert docs["90000003"]["abstract"] == (
        "Hepatic glycogen was measured by 13C NMR spectroscopy in eight healthy volunteers. "
        "Net glycogenolysis accounted for 45% of glucose production."
    )


def test_parse_article_without_abstract(docs):
    assert docs["90000002"]["abstract"] == ""
    assert docs["90000002"]["title"] == "Reply to: On vitamin D and respiratory infections."


def test_parse_year_from_year_or_medline_date(docs):
    assert docs["90000001"]["year"] == 2019
    assert docs["90000002"]["year"] == 2021
    assert docs["90000003"]["year"] == 1998  # MedlineDate "1998 Dec-1999 Jan"


def test_parse_mesh_descriptors_only(docs):
    assert docs["90000001"]["mesh"] == [
        "Ovarian Neoplasms",
        "Genes, BRCA1",
        "Poly(ADP-ribose) Polymerase Inhibitors",
    ]
    assert docs["90000002"]["mesh"] == []
    assert docs["90000003"]["mesh"] == ["Fasting", "Glycogen", "Humans"]


def test_parse_journal_and_own_pmid(docs):
    assert docs["90000001"]["journal"] == "Journal of Synthetic Oncology"
    assert docs["90000003"]["journal"] == "Archives of Synthetic Physiology"
    # The PMID nested in CommentsCorrections belongs to another article.
    assert "90000999" not in docs


def test_parse_without_pmid_or_date():
    no_pmid = ET.fromstring("<PubmedArticle><MedlineCitation/></PubmedArticle>")
    assert parse_pubmed_article(no_pmid) is None
    undated = ET.fromstring(
        "<PubmedArticle><MedlineCitation><PMID>1</PMID><Article><Journal><JournalIssue>"
        "<PubDate><Season>Spring</Season></PubDate></JournalIssue></Journal>"
        "<ArticleTitle>T</ArticleTitle></Article></MedlineCitation></PubmedArticle>"
    )
    doc = parse_pubmed_article(undated)
    assert doc == {
        "pmid": "1",
        "title": "T",
        "abstract": "",
        "year": None,
        "mesh": [],
        "journal": "",
    }


# --- streaming ---------------------------------------------------------------------------------


def test_iter_yields_articles_then_deletions():
    events = list(iter_pubmed_articles(FIXTURES / "update_sample.xml"))
    assert [kind for kind, _ in events] == ["article", "article", "delete", "delete"]
    assert [doc["pmid"] for kind, doc in events if kind == "article"] == ["90000011", "90000012"]
    assert [pmid for kind, pmid in events if kind == "delete"] == ["90000021", "90000022"]
    assert events[0][1]["abstract"] == "First revised abstract."


def test_iter_accepts_file_objects_and_gzip_paths(tmp_path):
    from_stream = list(iter_pubmed_articles(io.BytesIO(EFETCH_XML)))
    gz = tmp_path / "pubmed25n0001.xml.gz"
    gz.write_bytes(gzip.compress(EFETCH_XML))
    assert list(iter_pubmed_articles(str(gz))) == from_stream
    assert [doc["pmid"] for _, doc in from_stream] == ["90000001", "90000002", "90000003"]


def test_iter_clears_finished_records():
    gen = iter_pubmed_articles(io.BytesIO(EFETCH_XML))
    next(gen)
    root = gen.gi_frame.f_locals["root"]  # the generator's partially built tree
    assert root.tag == "PubmedArticleSet"
    for _ in gen:
        # Earlier records are gone: at most the record being parsed is still attached.
        assert len(root) <= 1
    assert len(root) == 0


def test_iter_malformed_xml_raises_value_error_with_line():
    with pytest.raises(ValueError, match=r"malformed PubMed XML .*mismatched tag.*line 7"):
        list(iter_pubmed_articles(FIXTURES / "broken.xml"))


def test_iter_truncated_gzip_raises_value_error(tmp_path):
    gz = tmp_path / "truncated.xml.gz"
    gz.write_bytes(gzip.compress(EFETCH_XML)[:200])
    with pytest.raises(ValueError, match=r"truncated\.xml\.gz"):
        list(iter_pubmed_articles(gz))


# --- client settings ---------------------------------------------------------------------------


def test_default_rates_follow_ncbi_limits():
    assert PubMedClient().requests_per_second == 3.0
    assert PubMedClient(api_key=SECRET).requests_per_second == 10.0
    assert PubMedClient(api_key=SECRET, requests_per_second=1.5).requests_per_second == 1.5


def test_repr_hides_key():
    text = repr(PubMedClient(api_key=SECRET, email="dev@example.org"))
    assert SECRET not in text
    assert "api_key=***" in text


async def test_custom_transport_honours_retry_after_on_429():
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        if len(calls) == 1:
            return httpx.Response(429, headers={"Retry-After": "0"}, json={"error": "rate"})
        return httpx.Response(200, content=ESEARCH_JSON)

    client = PubMedClient(transport=httpx.MockTransport(handler), requests_per_second=FAST)
    assert await client.esearch("brca1") == ["90000003", "90000001", "90000002"]
    assert calls == ["/entrez/eutils/esearch.fcgi"] * 2
