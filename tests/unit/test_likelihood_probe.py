"""MoI's likelihoods come only from endpoints whose echoed log-probabilities a probe confirmed.

llama-cpp-python's server (0.3.x) echoes each prompt token with the next token's figure; the
simulator reproduces that bug (`shift_echo`) so the refusal is tested over real HTTP.
"""

from __future__ import annotations

import asyncio

import pytest

from infra.likelihood import EchoedLikelihood, LikelihoodUnavailable, probe_echo
from infra.settings import ModelSpec
from lab.simulate.server import SimulatedEndpoint


def spec(endpoint: SimulatedEndpoint, name: str = "reader") -> ModelSpec:
    return ModelSpec(
        provider="openai", model=name, base_url=endpoint.base_url, prompt_logprobs=True
    )


async def test_a_right_server_is_probed_once_then_scored():
    with SimulatedEndpoint(0.0) as endpoint:
        scorer = EchoedLikelihood(spec(endpoint))
        scores = await asyncio.gather(*(scorer.score("a b c", " d e") for _ in range(6)))
        assert endpoint.stats.completions == 2 + 6  # one probe (generate, echo), six scores
    assert scorer.check is not None and scorer.check.agrees
    assert scorer.check.generated.strip() and scorer.check.tokens >= 1
    assert len({s for s, _ in scores}) == 1 and scores[0][0] < 0


async def test_a_server_echoing_one_token_off_is_refused_before_any_score():
    with SimulatedEndpoint(0.0, shift_echo=True) as endpoint:
        check = await probe_echo(spec(endpoint))
        assert not check.agrees  # the probe itself sees the disagreement
        scorer = EchoedLikelihood(spec(endpoint))
        with pytest.raises(LikelihoodUnavailable, match="shifts them by one token"):
            await scorer.score("a b c", " d e")
        probed = endpoint.stats.completions
        with pytest.raises(LikelihoodUnavailable, match="echoed prompt log-probabilities"):
            await scorer.score("a b c", " d e")  # refused from memory: nothing sent
        assert endpoint.stats.completions == probed
