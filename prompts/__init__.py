"""Prompt templates, one file per node; rendering fails loudly on a missing or unknown variable."""

from __future__ import annotations

import string
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

HERE = Path(__file__).parent
SPLIT = "\n---\n"
# NOTE: rendered messages carry their template's name in `response_metadata`, which chat clients
# do not send (langchain_openai sends a prompt message's role, content and name) nor the reply
# cache hashes: whoever receives the messages (the tests' scripted model) can tell which prompt
# a call used without matching its wording, and the request stays byte for byte the same.
TEMPLATE_KEY = "prompt_template"


class PromptError(KeyError):
    """A template was rendered with the wrong variables."""


@cache
def template(name: str) -> tuple[str, str]:
    """Return a template's (system, user) parts; files hold them split by a '---' line."""
    text = (HERE / f"{name}.md").read_text(encoding="utf-8")
    system, _, user = text.partition(SPLIT)
    return system.strip(), user.strip()


def variables(name: str) -> set[str]:
    """Return the variables a template uses."""
    found = set()
    for part in template(name):
        found |= {field for _, field, _, _ in string.Formatter().parse(part) if field}
    return found


def render(name: str, **values: object) -> list[BaseMessage]:
    """Render a template into chat messages."""
    expected = variables(name)
    if missing := expected - values.keys():
        raise PromptError(f"prompt {name!r} needs {sorted(missing)}")
    if extra := values.keys() - expected:
        raise PromptError(f"prompt {name!r} does not use {sorted(extra)}")
    system, user = template(name)
    tag = {TEMPLATE_KEY: name}
    return [
        SystemMessage(content=system.format(**values), response_metadata=dict(tag)),
        HumanMessage(content=user.format(**values), response_metadata=dict(tag)),
    ]


def template_of(messages: Sequence[BaseMessage]) -> str | None:
    """Return the name of the template the messages were rendered from, if any."""
    for message in messages:
        if name := message.response_metadata.get(TEMPLATE_KEY):
            return name
    return None
