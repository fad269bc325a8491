"""An embedder that counts what it embeds and can crash on cue: for `quorum embed`'s tests."""

from __future__ import annotations

from collections import Counter

from tests.support.fakes import HashEmbedder


class Planted(Exception):
    """The crash a test plants."""


class CountingEmbedder(HashEmbedder):
    """A hash embedder that counts every text it embeds and fails on its n-th call if told."""

    def __init__(self, fail_on_call: int | None = None):
        self.seen: Counter[str] = Counter()
        self.calls = 0
        self.fail_on_call = fail_on_call

    def embed_documents(self, texts):
        self.calls += 1
        if self.calls == self.fail_on_call:
            raise Planted(f"planted crash on call {self.calls}")
        self.seen.update(texts)
        return super().embed_documents(texts)
