"""`quorum chat`: a conversation with the corpus in the terminal."""

from __future__ import annotations

from graphs.cli.common import (
    ApiKeyEnvOption,
    BackendOption,
    IndexOption,
    ModelOption,
    PresetOption,
    TypeOption,
    answering_settings,
    checked_type,
    demo_notice,
    err,
    fail,
    role_notice,
)
from graphs.live import LiveStatus


def chat(
    index_name: IndexOption = None,
    backend: BackendOption = None,
    qtype: TypeOption = None,
    model: ModelOption = None,
    api_key_env: ApiKeyEnvOption = None,
    preset: PresetOption = None,
) -> None:
    """Chat with the corpus: follow-ups, /open PMID, /trace, /new, /quit."""
    from graphs.consoles import SafeConsole

    qtype = checked_type(qtype)
    settings = answering_settings(index_name, backend, model, api_key_env, preset)
    demo_notice(settings)
    role_notice(settings)
    from graphs.chat.terminal import run_chat
    from graphs.runtime import build_context

    with LiveStatus(err, "loading models and index…"):
        try:
            context = build_context(settings)
        except KeyboardInterrupt:  # before any question: nothing to finish, nothing written
            fail("interrupted while loading models and index; nothing was asked", 130)
    console = SafeConsole()
    run_chat(settings, context, console, lambda: console.input("[bold]you>[/bold] "), qtype)
