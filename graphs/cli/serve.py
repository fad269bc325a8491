"""`quorum serve`: the local web page (chat, and each turn's trace)."""

from __future__ import annotations

from typing import Annotated

import typer

from graphs.cli.common import (
    ApiKeyEnvOption,
    BackendOption,
    CliError,
    IndexOption,
    ModelOption,
    PresetOption,
    TypeOption,
    answering_settings,
    checked_type,
    demo_notice,
    err,
    role_notice,
)
from graphs.live import LiveStatus


def serve(
    host: Annotated[
        str, typer.Option(help="Address to listen on (loopback unless --allow-remote).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port to listen on.")] = 8765,
    allow_remote: Annotated[
        bool,
        typer.Option(
            "--allow-remote",
            help="Allow a non-loopback --host: whoever reaches it can ask and read every trace.",
        ),
    ] = False,
    index_name: IndexOption = None,
    backend: BackendOption = None,
    qtype: TypeOption = None,
    model: ModelOption = None,
    api_key_env: ApiKeyEnvOption = None,
    preset: PresetOption = None,
) -> None:
    """Serve a local web page: chat with the corpus and step through each turn's nodes."""
    import socket

    import uvicorn

    from graphs.runtime import build_context
    from graphs.web.server import LOOPBACK_NAMES, create_app, is_loopback

    remote = not is_loopback(host)
    if remote and not allow_remote:
        raise CliError(
            f"--host {host} is reachable from other machines and the page has no login; "
            "add --allow-remote to serve it anyway"
        )
    qtype = checked_type(qtype)
    settings = answering_settings(index_name, backend, model, api_key_env, preset)
    demo_notice(settings)
    role_notice(settings)
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        listener = socket.create_server((host.strip("[]"), port), family=family)
    except OSError as exc:
        raise CliError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    with LiveStatus(err, "loading models and index…"):
        context = build_context(settings)
    if remote:
        err.print(
            f"[yellow]warning: serving on {host}, not loopback: anyone who can reach this port "
            "can ask questions and read every trace; there is no login.[/yellow]"
        )
    shown = f"[{host}]" if ":" in host else host
    err.print(f"quorum: serving on http://{shown}:{port}/ (Ctrl+C to stop)")
    hosts = ["*"] if remote else [host, *LOOPBACK_NAMES]
    config = uvicorn.Config(
        create_app(settings, context, allowed_hosts=hosts, qtype=qtype),
        log_level="warning",
        timeout_graceful_shutdown=3,
    )
    uvicorn.Server(config).run(sockets=[listener])
