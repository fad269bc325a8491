"""Async NCBI E-utilities client (esearch + efetch) behind the graph's fallback search."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import httpx
from langchain_core.rate_limiters import InMemoryRateLimiter
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

from infra.pubmed.xml import iter_pubmed_articles
from infra.records import Document
from infra.settings import FallbackSettings
from infra.text import clip

logger = logging.getLogger(__name__)

FALLBACK = FallbackSettings()
"""The fallback group's defaults (URL, timeout, articles per search): a client made without
settings gets them, stated there."""
_EFETCH_BATCH = 200  # NCBI asks for POST above ~200 ids; batching keeps plain GETs.
_MAX_RETRY_AFTER_S = 30.0
_REDACTED = "***"
_RETRYABLE_ERRORS = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)


class FallbackUnavailable(Exception):
    """NCBI could not be reached: network errors, timeouts or 429/5xx after retries."""


class _TransientStatus(Exception):
    """HTTP 429 or 5xx, worth retrying."""

    def __init__(self, status: int, retry_after: float | None) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self.retry_after = retry_after


class _RedactSecrets(logging.Filter):
    """Blank API keys out of log records (httpx logs full request URLs at INFO)."""

    def __init__(self) -> None:
        super().__init__()
        self.secrets: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if any(secret in message for secret in self.secrets):
            for secret in self.secrets:
                message = message.replace(secret, _REDACTED)
            record.msg, record.args = message, ()
        return True


_LOG_REDACTOR = _RedactSecrets()
logging.getLogger("httpx").addFilter(_LOG_REDACTOR)


def _worth_retrying(error: BaseException) -> bool:
    """Retry transient failures, but not a failed DNS lookup: offline, it never recovers in time."""
    if (
        isinstance(error, httpx.ConnectError)
        and "name" in str(error).lower()
        and ("resolution" in str(error).lower() or "not known" in str(error).lower())
    ):
        return False
    return isinstance(error, (*_RETRYABLE_ERRORS, _TransientStatus))


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After")
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = (parsedate_to_datetime(value) - datetime.now(UTC)).total_seconds()
        except (TypeError, ValueError):
            return None
    return min(max(seconds, 0.0), _MAX_RETRY_AFTER_S)


class PubMedClient:
    """Search PubMed and fetch abstracts through NCBI E-utilities, politely and with retries.

    Use it directly (each call opens its own connection pool, so it is safe across event
    loops) or as ``async with PubMedClient(...) as client:`` to share one pool.
    """

    def __init__(
        self,
        *,
        base_url: str = FALLBACK.base_url,
        api_key: str | None = None,
        email: str | None = None,
        tool: str = "quorum",
        timeout_s: float = FALLBACK.timeout_s,
        max_retries: int = 2,
        requests_per_second: float | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key or None
        self.email = email
        self.tool = tool
        self.timeout_s = timeout_s
        self.max_retries = max(0, max_retries)
        # NCBI's published limits: 3 requests/s without an API key, 10 with one.
        self.requests_per_second = requests_per_second or (10.0 if self._api_key else 3.0)
        self._limiter = InMemoryRateLimiter(
            requests_per_second=self.requests_per_second,
            check_every_n_seconds=min(0.1, 0.5 / self.requests_per_second),
            max_bucket_size=1,
        )
        self._backoff = wait_exponential_jitter(multiplier=0.5, max=8.0, jitter=0.5)
        self._transport = transport
        self._host = httpx.URL(self.base_url).host or self.base_url
        self._client: httpx.AsyncClient | None = None
        if self._api_key:
            _LOG_REDACTOR.secrets.add(self._api_key)

    def __repr__(self) -> str:
        key = _REDACTED if self._api_key else None
        return (
            f"PubMedClient(base_url={self.base_url!r}, api_key={key}, email={self.email!r}, "
            f"tool={self.tool!r}, requests_per_second={self.requests_per_second})"
        )

    async def __aenter__(self) -> PubMedClient:
        self._client = self._new_http_client()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def esearch(self, term: str, retmax: int = FALLBACK.retmax) -> list[str]:
        """Return the PMIDs best matching ``term``, most relevant first."""
        async with self._http() as http:
            return await self._esearch(http, term, retmax)

    async def efetch(self, pmids: list[str]) -> list[Document]:
        """Fetch and parse ``pmids`` in the given order, skipping any PubMed did not return."""
        async with self._http() as http:
            return await self._efetch(http, pmids)

    async def search(self, term: str, retmax: int = FALLBACK.retmax) -> list[Document]:
        """Search PubMed for ``term`` and return the parsed articles, most relevant first."""
        async with self._http() as http:
            pmids = await self._esearch(http, term, retmax)
            return await self._efetch(http, pmids) if pmids else []

    def _new_http_client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.base_url + "/",
            timeout=self.timeout_s,
            transport=self._transport,
            headers={"User-Agent": f"{self.tool} (PubMed fallback search)"},
        )

    @asynccontextmanager
    async def _http(self) -> AsyncIterator[httpx.AsyncClient]:
        if self._client is not None:
            yield self._client
        else:
            async with self._new_http_client() as client:
                yield client

    async def _esearch(self, http: httpx.AsyncClient, term: str, retmax: int) -> list[str]:
        params = {"db": "pubmed", "term": term, "retmax": str(retmax)}
        params |= {"retmode": "json", "sort": "relevance"}
        response = await self._get(http, "esearch.fcgi", params)
        try:
            payload = json.loads(response.content)
        except ValueError as err:
            raise ValueError(f"PubMed esearch returned malformed JSON ({err})") from None
        result = payload.get("esearchresult") if isinstance(payload, dict) else None
        if not isinstance(result, dict):
            raise ValueError(f"PubMed esearch returned no result: {self._snippet(response.text)}")
        if result.get("ERROR"):
            raise ValueError(f"PubMed esearch failed: {self._snippet(str(result['ERROR']))}")
        return [str(pmid) for pmid in result.get("idlist", [])]

    async def _efetch(self, http: httpx.AsyncClient, pmids: list[str]) -> list[Document]:
        wanted = list(dict.fromkeys(str(pmid) for pmid in pmids))
        found: dict[str, Document] = {}
        for start in range(0, len(wanted), _EFETCH_BATCH):
            batch = wanted[start : start + _EFETCH_BATCH]
            params = {"db": "pubmed", "id": ",".join(batch), "retmode": "xml"}
            response = await self._get(http, "efetch.fcgi", params | {"rettype": "abstract"})
            body = io.BytesIO(response.content)
            body.name = "efetch response"  # named in parse errors
            for kind, doc in iter_pubmed_articles(body):
                if kind == "article" and isinstance(doc, dict):
                    found[doc["pmid"]] = doc
            error = re.search(rb"<ERROR>(.*?)</ERROR>", response.content, re.DOTALL)
            if error and not found:
                message = error.group(1).decode("utf-8", "replace")
                raise ValueError(f"PubMed efetch failed: {self._snippet(message)}")
        return [found[pmid] for pmid in wanted if pmid in found]

    async def _get(
        self, http: httpx.AsyncClient, endpoint: str, params: dict[str, str]
    ) -> httpx.Response:
        params = params | {"tool": self.tool}
        if self.email:
            params["email"] = self.email
        if self._api_key:
            params["api_key"] = self._api_key
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.max_retries + 1),
            wait=self._wait,
            retry=retry_if_exception(_worth_retrying),
            before_sleep=lambda state: self._log_retry(endpoint, state),
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    # Every attempt, retries included, counts against NCBI's rate limit.
                    await self._limiter.aacquire()
                    response = await http.get(endpoint, params=params)
                    if response.status_code == 429 or response.status_code >= 500:
                        raise _TransientStatus(response.status_code, _retry_after(response))
        except _TransientStatus as err:
            raise FallbackUnavailable(
                f"PubMed {endpoint} on {self._host} answered HTTP {err.status} "
                f"after {self.max_retries + 1} attempt(s)"
            ) from None
        except httpx.TransportError as err:
            # from None: httpx errors carry the request URL, and with it the API key.
            raise FallbackUnavailable(
                f"cannot reach PubMed {endpoint} on {self._host}: {type(err).__name__}"
            ) from None
        if not response.is_success:
            raise ValueError(
                f"PubMed {endpoint} rejected the request with HTTP {response.status_code}: "
                f"{self._snippet(response.text)}"
            )
        return response

    def _wait(self, state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome else None
        if isinstance(error, _TransientStatus) and error.retry_after is not None:
            return error.retry_after
        return self._backoff(state)

    def _log_retry(self, endpoint: str, state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome else None
        wait = state.next_action.sleep if state.next_action else 0.0
        logger.info(
            "PubMed %s attempt %d failed (%s); retrying in %.1fs",
            endpoint,
            state.attempt_number,
            error if isinstance(error, _TransientStatus) else type(error).__name__,
            wait,
        )

    def _snippet(self, text: str, limit: int = 200) -> str:
        # NCBI echoes the API key in some error bodies ({"error": ..., "api-key": ...}).
        if self._api_key:
            text = text.replace(self._api_key, _REDACTED)
        return clip(" ".join(text.split()), limit)
