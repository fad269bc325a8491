"""Model endpoints checked before the first question: down, silent, key refused, broken, fine."""

import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from infra.errors import Unavailable
from infra.preflight import check_endpoints
from infra.settings import load_settings


class _Server:
    """A real HTTP server answering GET /v1/models with a chosen status (or after a delay)."""

    def __init__(self, status=200, delay=0.0, body=b'{"object": "list", "data": []}', kind=None):
        seen = self.seen = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                seen.append((self.path, self.headers.get("Authorization")))
                time.sleep(delay)
                self.send_response(status)
                if kind is not None:
                    self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _settings(tmp_path, url, **extra):
    spec = {"provider": "openai", "model": "m-1", "base_url": url, **extra}
    return load_settings(home=tmp_path, models={"query": spec, "ensemble": [spec]})


@pytest.mark.parametrize("status", [200, 405])
def test_a_server_that_answers_passes_with_one_probe_per_endpoint(tmp_path, status, monkeypatch):
    server = _Server(status)
    monkeypatch.setenv("QUORUM_TEST_KEY", "sk-secret-1")
    try:
        check_endpoints(_settings(tmp_path, server.url, api_key_env="QUORUM_TEST_KEY"))
    finally:
        server.close()
    assert server.seen == [("/v1/models", "Bearer sk-secret-1")]  # query and ensemble share it


def test_nothing_listening_is_named_with_url_model_role_and_next_step(tmp_path):
    url = f"http://127.0.0.1:{_free_port()}/v1"
    started = time.perf_counter()
    with pytest.raises(Unavailable) as caught:
        check_endpoints(_settings(tmp_path, url))
    assert time.perf_counter() - started < 5
    message = str(caught.value)
    assert message.startswith(f"model endpoint {url} (model 'm-1', models.query): ")
    assert "nothing answers there; start the server" in message


@pytest.mark.parametrize(
    ("status", "said"),
    [
        (401, "refused the key (HTTP 401); check the key in"),
        (404, "no OpenAI-compatible API there (GET /models: HTTP 404); check base_url"),
        (503, "server failed (HTTP 503)"),
    ],
)
def test_a_refused_key_or_a_broken_server_is_named(tmp_path, status, said):
    server = _Server(status)
    try:
        with pytest.raises(Unavailable, match=said.replace("(", r"\(").replace(")", r"\)")):
            check_endpoints(_settings(tmp_path, server.url))
    finally:
        server.close()


@pytest.mark.parametrize("kind", ["text/html; charset=utf-8", None])
def test_a_web_page_where_the_models_belong_is_named_with_the_hint(tmp_path, kind):
    server = _Server(body=b"<!doctype html><html><body>It works!</body></html>", kind=kind)
    try:
        with pytest.raises(Unavailable) as caught:
            check_endpoints(_settings(tmp_path, server.url))
    finally:
        server.close()
    assert str(caught.value).endswith(
        "answered GET /models with a web page, not the OpenAI API; is base_url the API root, "
        "ending in /v1?"
    )


def test_a_silent_server_is_given_up_on_after_the_timeout(tmp_path):
    server = _Server(delay=3)
    try:
        started = time.perf_counter()
        with pytest.raises(Unavailable, match=r"no answer within 0\.5 s"):
            check_endpoints(_settings(tmp_path, server.url), timeout_s=0.5)
        assert time.perf_counter() - started < 2.5
    finally:
        server.close()


def test_credentials_in_the_url_never_reach_the_message(tmp_path):
    url = f"http://user:hunter2@127.0.0.1:{_free_port()}/v1"
    with pytest.raises(Unavailable) as caught:
        check_endpoints(_settings(tmp_path, url))
    assert "hunter2" not in str(caught.value) and "127.0.0.1" in str(caught.value)


def test_local_models_are_not_probed(tmp_path):
    check_endpoints(load_settings(home=tmp_path))  # the demo default: nothing to reach
