"""How a server backend retries one call (Ollama's API and any OpenAI-compatible one): a server
that is away or an answer that breaks the schema is asked again, with exponential backoff and
jitter (``stamina``), each attempt with its own seed, so a bad sample is not drawn twice; the
last failure says how many attempts it took."""

from __future__ import annotations

from typing import Awaitable, Callable

import stamina

from agent.llm.base import Answer, LLMBadOutput, LLMRequest, LLMUnavailable

# one attempt: (request, its seed, attempt number, attempts in all, tokens spent so far)
Once = Callable[[LLMRequest, "int | None", int, int, list[int]], Awaitable[Answer]]


def attempt_seed(seed: int | None, n: int) -> int | None:
    return None if seed is None else (seed + (n - 1) * 7919) % (2**31)


async def complete_retrying(once: Once, req: LLMRequest, *, retries: int, backoff_initial: float,
                            backoff_max: float) -> Answer:
    attempts = retries + 1
    n = 0
    spent = [0, 0]  # per call, summed over its attempts (they were all paid for); calls may run at once
    try:
        async for attempt in stamina.retry_context(
            on=(LLMUnavailable, LLMBadOutput),
            attempts=attempts,
            timeout=None,
            wait_initial=backoff_initial,
            wait_max=backoff_max,
            wait_jitter=backoff_initial,
        ):
            with attempt:
                n += 1
                return await once(req, attempt_seed(req.seed, n), n, attempts, spent)
    except (LLMUnavailable, LLMBadOutput) as exc:
        if n <= 1:
            raise
        raise type(exc)(f"{exc} (after {n} attempts)") from exc
    raise AssertionError("unreachable")  # pragma: no cover
