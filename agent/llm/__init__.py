"""The LLM layer: one interface (``LLM.complete`` -> ``Answer`` with token counts;
``LLM.generate`` -> the answer alone), three backends, and the prompts.

- ``ollama``: the real path (official client, JSON-schema structured output).
- ``openai``: any OpenAI-compatible server, above all the one shared llama.cpp server per host
  of ``python -m agent serve-llm`` (``agent.llm.server``); vLLM, LM Studio, a hosted API.
- ``llamacpp``: embedded llama.cpp (xllamacpp) with an embedded GGUF (``agent.llm.models``:
  SmolLM2 shipped in a wheel, Qwen2.5 assembled from pinned wheels); the fallback when no
  Ollama server has the model.
- ``scripted``: a deterministic test double for protocol tests, simulations and benchmarks.
"""

from __future__ import annotations

from typing import Any

import structlog

from agent.llm.base import (
    LLM,
    Answer,
    LLMBadOutput,
    LLMError,
    LLMRequest,
    LLMUnavailable,
    ModelMissing,
    generate_parsed,
)
from agent.llm.scripted import ScriptedLLM, scripted_answer

__all__ = [
    "LLM",
    "Answer",
    "LLMBadOutput",
    "LLMError",
    "LLMRequest",
    "LLMUnavailable",
    "ModelMissing",
    "ScriptedLLM",
    "generate_parsed",
    "make_llm",
    "scripted_answer",
]

PROBE_TIMEOUT = 2.0


async def make_llm(settings: Any) -> LLM:
    """The backend ``settings.llm`` asks for. "auto": the OpenAI-compatible server when
    SWARM_OPENAI_BASE_URL is set and it answers with the model, else Ollama if it has the model,
    else the embedded model."""
    log = structlog.get_logger()
    choice = settings.llm
    if choice == "scripted":
        log.warning("llm.selected", backend="scripted", latency=settings.scripted_latency,
                    reason="SWARM_LLM=scripted: a test double, not a real model")
        return ScriptedLLM(latency=settings.scripted_latency)
    if choice == "ollama":
        from agent.llm.ollama_backend import OllamaLLM

        llm: LLM = OllamaLLM.from_settings(settings)
        log.info("llm.selected", backend="ollama", model=llm.model, host=settings.ollama_host,
                 reason="SWARM_LLM=ollama")
        return llm
    if choice == "openai":
        from agent.llm.openai_backend import OpenAILLM

        llm = OpenAILLM.from_settings(settings)
        log.info("llm.selected", backend="openai", model=llm.model or "(the server's)",
                 url=llm.base_url, reason="SWARM_LLM=openai")
        return llm
    if choice == "llamacpp":
        from agent.llm.llamacpp_backend import LlamaCppLLM

        llm = LlamaCppLLM.from_settings(settings)
        log.info("llm.selected", backend="llamacpp", model=llm.model, reason="SWARM_LLM=llamacpp")
        return llm
    if choice != "auto":
        raise ValueError(f"unknown LLM backend {choice!r}")

    from agent.llm.llamacpp_backend import LlamaCppLLM
    from agent.llm.ollama_backend import OllamaLLM

    reasons = []
    if getattr(settings, "openai_base_url", None):
        from agent.llm.openai_backend import OpenAILLM

        openai_llm = OpenAILLM.from_settings(settings)
        usable, why = await openai_llm.probe(timeout=min(PROBE_TIMEOUT, settings.llm_timeout))
        if usable:
            log.info("llm.selected", backend="openai", model=openai_llm.model or "(the server's)",
                     url=openai_llm.base_url, reason=why)
            return openai_llm
        await openai_llm.aclose()
        reasons.append(why)
    ollama_llm = OllamaLLM.from_settings(settings)
    usable, why = await ollama_llm.probe(timeout=min(PROBE_TIMEOUT, settings.llm_timeout))
    why = "; ".join(reasons + [why])
    if usable:
        log.info("llm.selected", backend="ollama", model=ollama_llm.model,
                 host=settings.ollama_host, reason=why)
        return ollama_llm
    await ollama_llm.aclose()
    try:
        llm = LlamaCppLLM.from_settings(settings)
    except ModelMissing as exc:
        raise ModelMissing(
            f"no usable LLM: {why}; and the embedded model is missing: {exc}"
        ) from exc
    log.info("llm.selected", backend="llamacpp", model=llm.model,
             reason=f"{why}; falling back to the embedded llama.cpp model")
    return llm
