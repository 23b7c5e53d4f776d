"""The Ollama backend through the official client, against a fake Ollama HTTP server."""

from __future__ import annotations

import socket
import time

import httpx
import ollama
import pytest
from structlog.testing import capture_logs

from agent.llm.answers import answer_errors
from agent.llm import generate_parsed, make_llm
from agent.llm.base import LLMBadOutput, LLMError, LLMUnavailable, ModelMissing
from agent.llm.llamacpp_backend import LlamaCppLLM
from agent.llm.ollama_backend import OllamaLLM, model_matches
from agent.llm.prompts import (
    Frame,
    brief_request,
    decompose_request,
    execute_request,
    parse_decomposition,
    criteria_request,
    review_request,
    synthesis_request,
)
from agent.llm.scripted import ScriptedLLM
from agent.settings import Settings
from support.fake_ollama import FakeOllama, Reply, minimal_instance

MODEL = "llama3.2:1b"
GOAL = "Plan a two-week trip to Japan"


@pytest.fixture
def fake():
    server = FakeOllama(models=[MODEL, "qwen2.5:0.5b"])
    server.start()
    yield server
    server.stop()


@pytest.fixture
def closed_port() -> int:
    """A port on 127.0.0.1 where nothing listens (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make(url: str, model: str = MODEL, **kw) -> OllamaLLM:
    kw.setdefault("timeout", 5.0)
    kw.setdefault("retries", 2)
    kw.setdefault("backoff_initial", 0.01)
    kw.setdefault("backoff_max", 0.02)
    return OllamaLLM(url, model, **kw)


def settings(**kw) -> Settings:
    base = {"llm": "auto", "ollama_model": MODEL, "llm_timeout": 5.0, "llm_retries": 1}
    base.update(kw)
    return Settings(_env_file=None, **base)


def decompose(seed=None):
    return decompose_request(Frame(GOAL), path=[GOAL], title=GOAL, description="",
                             strategy="by place", max_children=4, seed=seed)


GOOD_SPLIT = {"steps": [
    {"title": "Tokyo", "description": "Three days", "after": []},
    {"title": "Kyoto", "description": "Temples", "after": [1]},
    {"title": "Osaka", "description": "Food", "after": []},
]}


async def test_each_kind_succeeds_with_the_schema_sent_as_format(fake):
    llm = make(fake.url)
    assert llm.backend == "ollama" and llm.model == MODEL
    fake.replies.append(GOOD_SPLIT)
    req = decompose(seed=42)
    answer = await llm.generate(req)
    assert parse_decomposition(answer, max_children=4)[1]["title"] == "Kyoto"
    sent = fake.chat_requests()[-1]
    assert sent["model"] == MODEL and sent["format"] == req.schema
    assert sent["stream"] is False
    assert sent["options"] == {"temperature": req.temperature, "num_predict": req.max_tokens,
                               "seed": 42}
    assert [m["role"] for m in sent["messages"]] == ["system", "user"]
    assert sent["messages"][1]["content"] == req.prompt

    # no canned reply: the fake answers with a minimal instance of the schema
    rreq = criteria_request(Frame(GOAL), path=[], title=GOAL, description="", scorer="me")
    assert answer_errors(await llm.generate(rreq), rreq.answer) == []
    ereq = execute_request(Frame(GOAL), path=[GOAL], title="Tokyo", description="")
    assert answer_errors(await llm.generate(ereq), ereq.answer) == []
    assert llm.last_timings["completion_tokens"] >= 1
    await llm.aclose()


async def test_an_unreachable_server_is_reported_quickly(closed_port):
    llm = make(f"http://127.0.0.1:{closed_port}", retries=2)
    start = time.monotonic()
    with pytest.raises(LLMUnavailable) as info:
        await llm.generate(decompose())
    assert time.monotonic() - start < 3
    message = str(info.value)
    assert f"Ollama at http://127.0.0.1:{closed_port} is unreachable" in message
    assert "after 3 attempts" in message


async def test_a_missing_model_says_how_to_fix_it_and_is_not_retried(fake):
    llm = make(fake.url, model="mistral:7b")
    with pytest.raises(ModelMissing, match=r"run `ollama pull mistral:7b`"):
        await llm.generate(decompose())
    assert len(fake.chat_requests()) == 1


async def test_invalid_json_then_a_valid_answer_is_retried_with_another_seed(fake):
    llm = make(fake.url)
    fake.replies.extend(['{"steps": [ {"title": "Tok', GOOD_SPLIT])
    answer = await llm.generate(decompose(seed=7))
    assert answer == GOOD_SPLIT
    seeds = [r["options"]["seed"] for r in fake.chat_requests()]
    assert len(seeds) == 2 and seeds[0] == 7 and seeds[1] != 7


async def test_json_that_breaks_the_schema_is_retried(fake):
    llm = make(fake.url)
    too_many = {"steps": GOOD_SPLIT["steps"] * 3}  # 6 > maxItems 4
    fake.replies.extend([too_many, {"steps": "Tokyo"}, GOOD_SPLIT])
    assert await llm.generate(decompose()) == GOOD_SPLIT
    assert len(fake.chat_requests()) == 3


async def test_always_invalid_gives_bad_output_after_all_attempts(fake):
    llm = make(fake.url, retries=2)
    fake.replies.extend(["not json at all"] * 5)
    with pytest.raises(LLMBadOutput, match="after 3 attempts"):
        await llm.generate(decompose())
    assert len(fake.chat_requests()) == 3


async def test_generate_parsed_asks_again_when_the_split_is_unusable(fake):
    llm = make(fake.url, retries=0)
    same = {"steps": [{"title": "Japan", "description": "", "after": []}] * 3}
    fake.replies.extend([same, GOOD_SPLIT])
    parse = lambda a: parse_decomposition(a, max_children=4)  # noqa: E731
    assert [s["title"] for s in await generate_parsed(llm, decompose(seed=3), parse)] == \
        ["Tokyo", "Kyoto", "Osaka"]
    assert [r["options"]["seed"] for r in fake.chat_requests()] == [3, 3 + 104_729]
    fake.replies.extend([same] * 3)
    with pytest.raises(LLMBadOutput, match="at least 2"):
        await generate_parsed(llm, decompose(), parse, attempts=3)
    assert len(fake.chat_requests()) == 5


async def test_server_errors_are_retried_and_client_errors_are_not(fake):
    llm = make(fake.url)
    fake.replies.extend([Reply(status=500, body={"error": "model runner crashed"}), GOOD_SPLIT])
    assert await llm.generate(decompose()) == GOOD_SPLIT
    fake.replies.append(Reply(status=400, body={"error": "invalid format"}))
    with pytest.raises(LLMError, match="invalid format") as info:
        await llm.generate(decompose())
    assert type(info.value) is LLMError
    assert len(fake.chat_requests()) == 3


async def test_a_slow_server_times_out(fake):
    llm = make(fake.url, timeout=0.3, retries=0)
    fake.replies.append(Reply(content=GOOD_SPLIT, delay=2.0))
    start = time.monotonic()
    with pytest.raises(LLMUnavailable, match="did not answer"):
        await llm.generate(decompose())
    assert time.monotonic() - start < 1.5


async def test_probe(fake, closed_port):
    assert (await make(fake.url).probe())[0] is True
    usable, why = await make(fake.url, model="phi3").probe()
    assert not usable and "ollama pull phi3" in why and MODEL in why
    usable, why = await make(f"http://127.0.0.1:{closed_port}").probe(timeout=1)
    assert not usable and "unreachable" in why


def test_model_names_match_with_and_without_tag():
    assert model_matches("llama3.2:latest", "llama3.2")
    assert model_matches("llama3.2:1b", "llama3.2:1b")
    assert not model_matches("llama3.2:1b", "llama3.2")
    assert not model_matches(None, "x")


async def test_make_llm_auto_picks_ollama_when_it_has_the_model(fake):
    with capture_logs() as logs:
        llm = await make_llm(settings(ollama_host=fake.url))
    assert isinstance(llm, OllamaLLM) and llm.model == MODEL
    chosen = [e for e in logs if e["event"] == "llm.selected"]
    assert chosen and chosen[0]["backend"] == "ollama"
    assert any(r[1] == "/api/tags" for r in fake.requests)
    await llm.aclose()


async def test_make_llm_auto_falls_back_to_llamacpp_when_unreachable(closed_port):
    start = time.monotonic()
    with capture_logs() as logs:
        llm = await make_llm(settings(ollama_host=f"http://127.0.0.1:{closed_port}"))
    assert time.monotonic() - start < 3
    assert isinstance(llm, LlamaCppLLM)
    chosen = [e for e in logs if e["event"] == "llm.selected"]
    assert chosen[0]["backend"] == "llamacpp" and "unreachable" in chosen[0]["reason"]
    await llm.aclose()


async def test_make_llm_auto_falls_back_when_the_model_is_missing(fake):
    with capture_logs() as logs:
        llm = await make_llm(settings(ollama_host=fake.url, ollama_model="gemma:2b"))
    assert isinstance(llm, LlamaCppLLM)
    reason = [e for e in logs if e["event"] == "llm.selected"][0]["reason"]
    assert "ollama pull gemma:2b" in reason
    await llm.aclose()


async def test_make_llm_auto_with_nothing_usable_explains_both(closed_port, tmp_path):
    with pytest.raises(ModelMissing) as info:
        await make_llm(settings(ollama_host=f"http://127.0.0.1:{closed_port}",
                                llamacpp_model=tmp_path / "none.gguf"))
    assert "unreachable" in str(info.value) and "none.gguf" in str(info.value)


async def test_make_llm_direct_choices(fake):
    scripted = await make_llm(settings(llm="scripted", scripted_latency=0.25))
    assert isinstance(scripted, ScriptedLLM) and scripted.latency == 0.25
    direct = await make_llm(settings(llm="ollama", ollama_host=fake.url))
    assert isinstance(direct, OllamaLLM)
    assert not fake.requests  # selecting directly does not probe
    await direct.aclose()
    embedded = await make_llm(settings(llm="llamacpp"))
    assert isinstance(embedded, LlamaCppLLM) and embedded.path.suffix == ".gguf"
    await embedded.aclose()


async def test_the_fake_speaks_the_official_client(fake):
    client = ollama.AsyncClient(host=fake.url)
    listing = await client.list()
    assert {m.model for m in listing.models} == {MODEL, "qwen2.5:0.5b"}
    shown = await client.show(MODEL)
    assert shown.details.family == "llama"
    with pytest.raises(ollama.ResponseError) as info:
        await client.show("nope")
    assert info.value.status_code == 404 and "not found" in info.value.error
    streamed = [part async for part in await client.chat(
        model=MODEL, messages=[{"role": "user", "content": "hi"}], stream=True)]
    assert streamed[-1].done
    await client.close()
    # the 0.6.3 client has no method for GET /api/version: check it over raw HTTP
    async with httpx.AsyncClient() as raw:
        assert (await raw.get(f"{fake.url}/api/version")).json()["version"] == fake.version


def test_minimal_instance_is_valid_for_every_schema():
    f = Frame(GOAL, "2027-01-01", {"currency": "EUR"})
    for req in (decompose(), execute_request(f, path=[], title="t", description=""),
                criteria_request(f, path=[], title=GOAL, description="", scorer="s"),
                brief_request(f), review_request(f, path=[], title="t", description="", result="r"),
                synthesis_request(f, path=[], title=GOAL, description="", children=[("a", "b"), ("c", "d")])):
        assert answer_errors(minimal_instance(req.schema), req.answer) == []
