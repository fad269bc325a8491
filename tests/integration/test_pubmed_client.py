"""The E-utilities client against a real local HTTP server: identity, retries, errors, secrets."""

from __future__ import annotations

import json
import logging
import socket
import time

import pytest

from infra.pubmed import FallbackUnavailable, PubMedClient
from tests.support.servers import FakeEutils

SECRET = "sk-test-SECRET-123456"
FAST = 1000.0  # requests_per_second that keeps the limiter out of the way


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
