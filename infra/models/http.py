"""HTTP to OpenAI-compatible endpoints: one client per event loop, every reply checked.

A connection pool belongs to the event loop that opened its connections. langchain-openai keeps
one client per base URL for the whole process, so `chat`, which ran each turn in its own
`asyncio.run`, sent its second turn over sockets of a closed loop against any server that keeps
connections alive ("RuntimeError: Event loop is closed"; issue 56). Here each running loop gets
its own client, made on its first call and closed as the loop shuts down; nothing crosses loops.

The client also reads each chat completion before the OpenAI library does, so that what the
server really sent is named: a web page, text that is not JSON, JSON that is not a chat
completion, an empty body. The library would return a web page as a string and fail further on
("'str' object has no attribute 'choices'").
"""

from __future__ import annotations

import asyncio
import json
import weakref
from collections.abc import AsyncIterator
from typing import Any

from infra.text import clip

_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[Any, AsyncIterator[None]]]
_clients = weakref.WeakKeyDictionary()
_whole_replies: set[str] = set()
"""Endpoints (base URLs) that answered a streamed request with one whole reply."""

WEB_PAGE_HINT = "is base_url the API root, ending in /v1?"
"""What a web page, or no chat completions at the URL, most often means."""
SHOWN_BODY = 120
"""Characters of a body that is not a chat completion shown in its error."""


class BadReply(Exception):
    """An endpoint answered HTTP 200 with something other than a chat completion."""


class NotStreamed(BadReply):
    """A streamed call came back as one whole chat completion: the server ignores `stream`."""


def streams(url: str) -> bool:
    """Tell whether the endpoint at `url` may be asked to stream (none has shown otherwise)."""
    return url not in _whole_replies


def remember_whole_replies(url: str) -> None:
    """Ask the endpoint at `url` for whole replies from now on: it ignores `stream`."""
    _whole_replies.add(url)


async def loop_client() -> Any:
    """Return the running event loop's HTTP client for endpoints, made on first use."""
    loop = asyncio.get_running_loop()
    found = _clients.get(loop)
    if found is None:
        import openai

        client = openai.DefaultAsyncHttpxClient(event_hooks={"response": [_check_reply]})
        closer = _closed_with_loop(client)
        # NOTE: started on this loop, the generator is one the loop finalizes as it shuts down
        # (asyncio.run and asyncio.Runner call loop.shutdown_asyncgens), which closes the
        # client while its loop still runs. The loop holds it weakly, so it is kept here.
        await anext(closer)
        found = _clients[loop] = (client, closer)
    return found[0]


async def _closed_with_loop(client: Any) -> AsyncIterator[None]:
    try:
        yield
    finally:
        await client.aclose()


async def _check_reply(response: Any) -> None:
    """Raise BadReply when a chat completion request was answered with anything else."""
    request = response.request
    if request.method != "POST" or not request.url.path.endswith("/chat/completions"):
        return
    if response.status_code != 200:
        return  # the OpenAI library names HTTP errors; infra/models/failures.py words them
    streamed = _asked_to_stream(request.content)
    kind = response.headers.get("content-type", "")
    if streamed and "text/event-stream" in kind:
        return
    await response.aread()
    problem = reply_problem(response.content, kind, streamed=streamed)
    if problem is not None:
        raise problem


def _asked_to_stream(body: bytes) -> bool:
    try:
        request = json.loads(body or b"{}")
    except ValueError:
        return False
    return isinstance(request, dict) and bool(request.get("stream"))


def reply_problem(body: bytes, content_type: str, *, streamed: bool = False) -> BadReply | None:
    """Return what is wrong with a 200 reply to a chat completion request, or None."""
    text = body.decode("utf-8", "replace").strip()
    if not text:
        return BadReply("answered HTTP 200 with an empty body, not a chat completion")
    if "html" in content_type.lower() or text.startswith("<"):
        return BadReply(f"answered with a web page, not a chat completion; {WEB_PAGE_HINT}")
    if streamed and text.startswith("data:"):
        return None  # server-sent events under another content type: the library reads them
    try:
        data = json.loads(text)
    except ValueError:
        if text.startswith(("{", "[")):
            return BadReply(
                f"answered with JSON that breaks off or is malformed ({len(body):,} bytes: "
                f"{clip(text, SHOWN_BODY)!r}), not a chat completion"
            )
        return BadReply(
            f"answered with text that is not JSON ({clip(text, SHOWN_BODY)!r}), not a chat "
            "completion"
        )
    problem = _shape_problem(data)
    if problem is not None:
        return BadReply(f"answered with JSON that is not a chat completion: {problem}")
    if streamed:
        return NotStreamed("answered a streamed request with one whole reply")
    return None


def _shape_problem(data: Any) -> str | None:
    """Return how `data` falls short of a chat completion, or None."""
    if not isinstance(data, dict):
        return f"a JSON {type(data).__name__} where an object belongs"
    if "choices" not in data:
        error = data.get("error")
        if error is not None:
            said = error.get("message") if isinstance(error, dict) else error
            return f"an error under HTTP 200 ({clip(str(said), SHOWN_BODY)!r})"
        keys = ", ".join(sorted(map(str, data))[:6]) or "none"
        return f"no `choices` (its keys: {keys})"
    choices = data["choices"]
    if not isinstance(choices, list):
        return f"`choices` is a {type(choices).__name__}, not a list"
    if not choices:
        return "`choices` is empty: the server returned no answer"
    first = choices[0]
    if not isinstance(first, dict) or not isinstance(first.get("message"), dict):
        return "its first choice has no `message`"
    return None
