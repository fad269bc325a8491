"""Model endpoints checked before the first question: one cheap request each, a short timeout.

An endpoint that is down used to be found 45 s into a run, after query writing, search and
rerank, and reported as the OpenAI client's "Connection error." with no URL or model (issue 28).
Here every distinct OpenAI-compatible endpoint the settings name gets `GET {base_url}/models`
(every OpenAI-compatible server answers it: OpenAI, vLLM, llama.cpp, Ollama, LM Studio), all at
once: a connection refused, a timeout, a refused key, no API at that path (404: the OpenAI API
lists models at /models, so every compatible server answers it) or a server error is named with
its URL and model and what to do next, and so is a web page where the list of models belongs (a
site's front page: base_url is not the API root). Any other answer means a server is there:
what it does with a chat request is the run's to find out (infra/models/failures.py names it).
Local models load lazily and are not probed.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from infra.errors import Unavailable
from infra.settings import ModelSpec, Settings, secret_from_env
from infra.text import shown_url

PROBE_TIMEOUT_S = 5.0
"""Seconds an endpoint has to answer the probe (connect and read)."""


def check_endpoints(settings: Settings, timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """Raise Unavailable, naming URL, model and next step, for the first endpoint that fails."""
    from infra.models.providers import provider_for

    targets: dict[tuple[str, str | None], tuple[str, ModelSpec]] = {}
    for role, spec in settings.models.by_role():
        if (url := provider_for(spec).endpoint(spec)) is not None:
            targets.setdefault((url, spec.api_key_env), (role, spec))
    if not targets:
        return
    with ThreadPoolExecutor(min(8, len(targets)), thread_name_prefix="preflight") as pool:
        found = list(
            pool.map(lambda key: _problem(key[0], targets[key][1], timeout_s), list(targets))
        )
    for key, problem in zip(targets, found, strict=True):
        if problem is not None:
            role, spec = targets[key]
            raise Unavailable(
                f"model endpoint {shown_url(key[0])} (model {spec.model!r}, models.{role}): "
                f"{problem}"
            )


def _problem(url: str, spec: ModelSpec, timeout_s: float) -> str | None:
    """Return what is wrong with the endpoint at `url`, or None when a server answered."""
    import httpx

    key = secret_from_env(spec.api_key_env)
    headers = {"Authorization": f"Bearer {key.get_secret_value()}"} if key else {}
    try:
        reply = httpx.get(f"{url}/models", headers=headers, timeout=timeout_s)
    except httpx.ConnectError:
        return "nothing answers there; start the server, or set base_url to one that runs"
    except httpx.TimeoutException:
        return (
            f"no answer within {timeout_s:g} s; check the server is up and reachable, or set "
            "base_url to one that runs"
        )
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}: {exc}; check base_url"
    if reply.status_code in (401, 403):
        env = spec.api_key_env or "api_key_env"
        return (
            f"the server refused the key (HTTP {reply.status_code}); check the key in "
            f"{env}, or whether this server wants one"
        )
    if reply.status_code == 404:
        return (
            "no OpenAI-compatible API there (GET /models: HTTP 404); check base_url, which "
            "usually ends in /v1"
        )
    if reply.status_code >= 500:
        return f"the server failed (HTTP {reply.status_code}); check its log, or try again"
    if reply.status_code == 200 and _is_web_page(reply):
        return (
            "answered GET /models with a web page, not the OpenAI API; is base_url the API "
            "root, ending in /v1?"
        )
    return None


def _is_web_page(reply: Any) -> bool:
    """Tell whether a reply is an HTML page (a site's front page where the API was expected)."""
    kind = reply.headers.get("content-type", "").lower()
    return "html" in kind or reply.text.lstrip()[:1] == "<"
