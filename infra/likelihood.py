"""Log-likelihoods from an OpenAI-compatible endpoint's echoed prompt log-probabilities.

MoI scores orderings by log P(text | passages). An endpoint gives that through `/completions`
with `echo` and `logprobs` (vLLM's prompt log-probabilities). Some servers echo them wrong:
llama-cpp-python's server (0.3.x) gives each prompt token the log-probability of the token
after it, so a score reads -14.49 where the model's own logits give -10.64, and nothing in the
reply says so. So before an endpoint's first score, a probe asks it to continue a short text
greedily with log-probabilities, then echoes that very text back and compares: a server whose
echoed figures disagree with its own completion's is refused, never used.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from infra.local_weights import ModelError
from infra.settings import ModelSpec, secret_from_env

PROBE_PROMPT = "Question: What organ pumps blood through the human body?\nAnswer: The"
"""A text any model continues with a few ordinary tokens."""
PROBE_TOKENS = 4
"""Tokens generated for the probe."""
TOLERANCE = 0.25
"""Mean disagreement per generated token (nats) the probe accepts; a shift by one token is
off by several nats (3.85 on one token in the case above), float noise by thousandths."""


WRONG_ECHO = (
    "its echoed prompt log-probabilities are wrong (llama-cpp-python's server shifts them by one "
    "token), so MoI cannot use them: serve the model with vLLM, or choose another "
    "ensemble.strategy"
)


class LikelihoodUnavailable(ModelError):
    """The model cannot score text, only generate it (or scores it wrongly)."""


@dataclass(frozen=True)
class EchoCheck:
    """What the probe found: the two sums over the same generated text, and the verdict."""

    generated: str
    completion_logprob: float
    """Sum of the server's log-probabilities for the tokens it generated."""
    echoed_logprob: float
    """Sum of the log-probabilities it echoes for the same text as part of a prompt."""
    tokens: int

    @property
    def agrees(self) -> bool:
        """Tell whether the echoed figures match the completion's within TOLERANCE per token."""
        gap = abs(self.completion_logprob - self.echoed_logprob)
        return gap <= TOLERANCE * max(1, self.tokens)

    def describe(self) -> str:
        """Return one line naming both figures."""
        return (
            f"echoed prompt log-probabilities {self.echoed_logprob:.2f} vs its own completion's "
            f"{self.completion_logprob:.2f} for {self.generated!r} ({self.tokens} token(s))"
        )


def _client(spec: ModelSpec):
    from openai import AsyncOpenAI

    key = secret_from_env(spec.api_key_env)
    return AsyncOpenAI(
        base_url=spec.base_url,
        api_key=key.get_secret_value() if key is not None else "not-needed",
        timeout=spec.timeout_s,
        max_retries=spec.max_retries,
    )


async def _echoed(spec: ModelSpec, context: str, continuation: str) -> tuple[float, int]:
    """Return the summed echoed log-probabilities of `continuation` after `context`."""
    async with _client(spec) as client:
        response = await client.completions.create(
            model=spec.model, prompt=context + continuation, echo=True, logprobs=1, max_tokens=1
        )
    logprobs = response.choices[0].logprobs
    if logprobs is None or not logprobs.token_logprobs:
        raise LikelihoodUnavailable(f"model {spec.model!r}: the endpoint returned no logprobs")
    offsets = logprobs.text_offset or _offsets(logprobs.tokens or [])
    end = len(context) + len(continuation)
    value = sum(
        lp
        for lp, start in zip(logprobs.token_logprobs, offsets, strict=False)
        if lp is not None and len(context) <= start < end
    )
    tokens = response.usage.prompt_tokens if response.usage else len(logprobs.token_logprobs)
    return float(value), int(tokens)


async def probe_echo(spec: ModelSpec) -> EchoCheck:
    """Compare an endpoint's echoed log-probabilities with its own completion's.

    Raises:
        LikelihoodUnavailable: The endpoint generates nothing or gives no log-probabilities.
    """
    async with _client(spec) as client:
        response = await client.completions.create(
            model=spec.model,
            prompt=PROBE_PROMPT,
            max_tokens=PROBE_TOKENS,
            temperature=0.0,
            logprobs=1,
        )
    choice = response.choices[0]
    logprobs = choice.logprobs
    text = choice.text or ""
    if text.startswith(PROBE_PROMPT):  # a server that echoes without being asked
        text = text[len(PROBE_PROMPT) :]
    if not text or logprobs is None or not logprobs.token_logprobs:
        raise LikelihoodUnavailable(
            f"model {spec.model!r}: the endpoint's completions carry no log-probabilities to "
            "check its echoed ones against"
        )
    own = [lp for lp in logprobs.token_logprobs if lp is not None][-PROBE_TOKENS:]
    echoed, _ = await _echoed(spec, PROBE_PROMPT, text)
    return EchoCheck(text, float(sum(own)), echoed, len(own))


def refusal(spec: ModelSpec) -> str | None:
    """Probe an endpoint before any work; return why MoI cannot use it, or None.

    Only a verdict is returned: an endpoint that cannot be reached at all is left to the run,
    which meets the same error on its first call and reports it there.
    """
    try:
        check = asyncio.run(probe_echo(spec))
    except LikelihoodUnavailable as exc:
        return str(exc)
    except Exception:  # unreachable or refusing: the run's own calls report it
        return None
    if check.agrees:
        return None
    return f"model {spec.model!r}: {check.describe()}; {WRONG_ECHO}"


class EchoedLikelihood:
    """Scores through one endpoint's echoed prompt log-probabilities, checked once by a probe."""

    def __init__(self, spec: ModelSpec):
        """Score with the endpoint `spec` names; nothing is sent until the first score."""
        self.spec = spec
        self.check: EchoCheck | None = None
        self._refused: str | None = None
        self._lock: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None

    async def score(self, context: str, continuation: str) -> tuple[float, int]:
        """Return log P(continuation | context) and the tokens read.

        Raises:
            LikelihoodUnavailable: The endpoint gives no log-probabilities, or the probe found
                its echoed ones disagreeing with its own completion's.
        """
        await self.verify()
        return await _echoed(self.spec, context, continuation)

    async def verify(self) -> EchoCheck:
        """Probe the endpoint once (concurrent callers wait for the one probe)."""
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock[0] is not loop:
            self._lock = (loop, asyncio.Lock())
        async with self._lock[1]:
            if self._refused is not None:
                raise LikelihoodUnavailable(self._refused)
            if self.check is None:
                check = await probe_echo(self.spec)
                if not check.agrees:
                    self._refused = f"model {self.spec.model!r}: {check.describe()}; {WRONG_ECHO}"
                    raise LikelihoodUnavailable(self._refused)
                self.check = check
            return self.check


def _offsets(tokens: list[str]) -> list[int]:
    out, at = [], 0
    for token in tokens:
        out.append(at)
        at += len(token)
    return out
