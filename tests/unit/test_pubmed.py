"""PubMed XML parsing and the E-utilities client, the latter against a real local HTTP server."""

from __future__ import annotations

import gzip
import io
import json
import logging
import socket
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import httpx
import pytest
from conftest import EFETCH_XML, ESEARCH_JSON, FakeEutils

from infra.pubmed import (
    FallbackUnavailable,
    PubMedClient,
    iter_pubmed_articles,
    parse_pubmed_article,
)

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


def client_for(fake: FakeEutils, **kwargs) -> PubMedClient:
    options = {"base_url": fake.base_url, "requests_per_second": FAST} | kwargs
    return PubMedClient(**options)


async def test_search_returns_docs_in_relevance_order_and_sends_identity(eutils):
    client = client_for(eutils, api_key=SECRET, email="dev@example.org", tool="quorum-test")
    docs = await client.search("brca1 parp", retmax=5)

    assert [doc["pmid"] for doc in docs] == ["90000003", "90000001", "90000002"]
    assert eutils.paths() == ["/entrez/eutils/esearch.fcgi", "/entrez/eutils/efetch.fcgi"]
    (_, search_q, _), (_, fetch_q, _) = eutils.requests
    for query in (search_q, fetch_q):
        assert query["api_key"] == [SECRET]
        assert query["tool"] == ["quorum-test"]
        assert query["email"] == ["dev@example.org"]
        assert query["db"] == ["pubmed"]
    assert search_q["term"] == ["brca1 parp"]
    assert search_q["retmax"] == ["5"]
    assert search_q["retmode"] == ["json"]
    assert search_q["sort"] == ["relevance"]
    assert fetch_q["id"] == ["90000003,90000001,90000002"]
    assert fetch_q["retmode"] == ["xml"]
    assert fetch_q["rettype"] == ["abstract"]


async def test_no_identity_params_when_not_configured(eutils):
    await client_for(eutils).esearch("x")
    query = eutils.requests[0][1]
    assert "api_key" not in query and "email" not in query
    assert query["tool"] == ["quorum"]


async def test_efetch_keeps_requested_order_and_skips_missing(eutils):
    docs = await client_for(eutils).efetch(["90000002", "90000404", "90000001"])
    assert [doc["pmid"] for doc in docs] == ["90000002", "90000001"]
    assert await client_for(eutils).efetch([]) == []
    assert len(eutils.requests) == 1


async def test_search_without_hits_skips_efetch(eutils):
    eutils.esearch_body = json.dumps({"esearchresult": {"count": "0", "idlist": []}}).encode()
    async with client_for(eutils) as client:
        assert await client.search("no such thing") == []
    assert eutils.paths() == ["/entrez/eutils/esearch.fcgi"]


async def test_503_then_200_is_retried(eutils):
    eutils.script["/entrez/eutils/esearch.fcgi"] = [(503, {"Retry-After": "0"}, b"busy")]
    pmids = await client_for(eutils, max_retries=2).esearch("brca1")
    assert pmids == ["90000003", "90000001", "90000002"]
    assert eutils.paths() == ["/entrez/eutils/esearch.fcgi"] * 2


async def test_persistent_5xx_becomes_fallback_unavailable(eutils):
    eutils.script["/entrez/eutils/esearch.fcgi"] = [(502, {"Retry-After": "0"}, b"")] * 3
    client = client_for(eutils, api_key=SECRET, max_retries=2)
    with pytest.raises(FallbackUnavailable, match="HTTP 502 after 3 attempt") as info:
        await client.esearch("brca1")
    assert SECRET not in str(info.value)
    assert len(eutils.requests) == 3


async def test_timeout_becomes_fallback_unavailable(eutils):
    eutils.delay_s = 1.0
    client = client_for(eutils, api_key=SECRET, timeout_s=0.2, max_retries=0)
    with pytest.raises(FallbackUnavailable, match="ReadTimeout") as info:
        await client.esearch("brca1")
    assert SECRET not in str(info.value)


async def test_http_400_raises_value_error_without_key(eutils):
    # NCBI echoes the key back in this error body.
    body = json.dumps({"error": "API key invalid", "api-key": SECRET, "type": "invalid"})
    eutils.script["/entrez/eutils/esearch.fcgi"] = [(400, {}, body.encode())]
    with pytest.raises(ValueError, match=r"HTTP 400.*API key invalid") as info:
        await client_for(eutils, api_key=SECRET).esearch("brca1")
    assert SECRET not in str(info.value)
    assert not isinstance(info.value, FallbackUnavailable)


async def test_malformed_json_raises_value_error(eutils):
    eutils.esearch_body = b'{"esearchresult": {"idlist": ["1"'
    with pytest.raises(ValueError, match="esearch returned malformed JSON"):
        await client_for(eutils).esearch("brca1")


async def test_malformed_efetch_xml_raises_value_error(eutils):
    eutils.script["/entrez/eutils/efetch.fcgi"] = [(200, {}, b"<PubmedArticleSet><PubmedArticle>")]
    with pytest.raises(ValueError, match=r"malformed PubMed XML in efetch response: .*line 1"):
        await client_for(eutils).efetch(["90000001"])


async def test_esearch_error_payload_raises_value_error(eutils):
    eutils.esearch_body = json.dumps({"esearchresult": {"ERROR": "Invalid query"}}).encode()
    with pytest.raises(ValueError, match="esearch failed: Invalid query"):
        await client_for(eutils).esearch("((")


async def test_rate_limiter_spaces_requests(eutils):
    client = client_for(eutils, requests_per_second=4)  # one request per 0.25 s
    start = time.monotonic()
    await client.esearch("a")
    await client.esearch("b")
    await client.esearch("c")
    elapsed = time.monotonic() - start

    assert [query["term"] for _, query, _ in eutils.requests] == [["a"], ["b"], ["c"]]
    # Lower bounds only: the bucket starts empty, so three requests need >= 0.75 s.
    assert elapsed >= 0.7
    stamps = [stamp for _, _, stamp in eutils.requests]
    assert stamps[2] - stamps[0] >= 0.45


def test_default_rates_follow_ncbi_limits():
    assert PubMedClient().requests_per_second == 3.0
    assert PubMedClient(api_key=SECRET).requests_per_second == 10.0
    assert PubMedClient(api_key=SECRET, requests_per_second=1.5).requests_per_second == 1.5


# --- secrets and unreachable hosts ------------------------------------------------------------


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def test_unreachable_host_raises_fallback_unavailable_without_key(closed_port, caplog):
    client = PubMedClient(
        base_url=f"http://127.0.0.1:{closed_port}/entrez/eutils",
        api_key=SECRET,
        requests_per_second=FAST,
        max_retries=1,
    )
    with caplog.at_level(logging.DEBUG), pytest.raises(FallbackUnavailable) as info:
        await client.search("brca1")
    message = str(info.value)
    assert "127.0.0.1" in message and "ConnectError" in message
    assert SECRET not in message
    assert info.value.__cause__ is None and info.value.__suppress_context__
    assert "retrying" in caplog.text
    assert SECRET not in caplog.text


async def test_httpx_request_log_is_redacted(eutils, caplog):
    with caplog.at_level(logging.INFO, logger="httpx"):
        await client_for(eutils, api_key=SECRET).esearch("brca1")
    assert "HTTP Request: GET" in caplog.text
    assert SECRET not in caplog.text


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
