"""The simulated LLM: how long each kind of request takes (log-uniform in the config's range),
and what comes back: the scripted answer, or, while faults are on, an unreachable server or
garbage. It draws from the simulation's one seeded generator."""

from __future__ import annotations

import math
from typing import Any, Callable

from agent.behaviour.effects import LLMReply
from agent.llm.base import LLMRequest, LLMUnavailable
from agent.llm.scripted import scripted_answer

from .config import START_MS, SimConfig


class SimLLM:
    def __init__(self, cfg: SimConfig, rng: Any, now: Callable[[], int]) -> None:
        self.cfg = cfg
        self.rng = rng
        self._now = now

    def latency_ms(self, kind: str) -> int:
        lo, hi = self.cfg.llm_ms.get(kind, (1_000, 10_000))
        return int(math.exp(self.rng.uniform(math.log(lo), math.log(hi))))

    def answer(self, req: LLMRequest) -> Any:
        f = self.cfg.faults
        in_faults = self._now() < START_MS + self.cfg.fault_phase_ms
        r = self.rng.random()
        if in_faults and r < f.llm_errors:
            return LLMUnavailable("simulated: the LLM server did not answer")
        if in_faults and r < f.llm_errors + f.llm_garbage:
            return LLMReply({"garbage": "%%%"}, 10, 3)
        value = scripted_answer(req)
        return LLMReply(value, len(req.prompt) // 4, 50)
