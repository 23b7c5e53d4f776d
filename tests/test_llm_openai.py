"""The OpenAI-compatible backend's error paths, against a fake server (tests/support/fake_openai.py):
what a real server cannot be made to do on demand (refuse response_format, 429/500/503, a
missing model, slowness). The backend against a real llama.cpp server: tests/test_llm_server.py.
"""

from __future__ import annotations

import os
import socket
import time

import pytest
from structlog.testing import capture_logs

from agent.llm import make_llm
from agent.llm.base import LLMBadOutput, LLMError, LLMUnavailable, ModelMissing
from agent.llm.openai_backend import LLMAuthError, OpenAILLM, extract_json
from agent.llm.prompts import Frame, decompose_request, outline_request, parse_decomposition, parse_outline
from agent.settings import Settings
from support.fake_openai import FakeOpenAI, Reply

MODEL = "fake-model"
GOAL = "Plan a two-week trip to Japan"
GOOD_SPLIT = {"steps": [
    {"title": "Tokyo", "description": "Three days", "after": []},
    {"title": "Kyoto", "description": "Temples", "after": [1]},
    {"title": "Osaka", "description": "Food", "after": [2]},
]}


@pytest.fixture
def fake():
    with FakeOpenAI(models=[MODEL, "other"], key="sekrit") as server:
        yield server


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make(url: str, model: str | None = MODEL, **kw) -> OpenAILLM:
    kw.setdefault("api_key", "sekrit")
    kw.setdefault("timeout", 5.0)
    kw.setdefault("retries", 2)
    kw.setdefault("backoff_initial", 0.01)
    kw.setdefault("backoff_max", 0.02)
    return OpenAILLM(url, model, **kw)


def decompose(seed=None):
    return decompose_request(Frame(goal=GOAL), path=[], title=GOAL, description="",
                             strategy="by place", max_children=4, seed=seed)


async def test_a_call_sends_the_schema_as_response_format_and_counts_tokens(fake):
    llm = make(fake.url)
    fake.replies.append(GOOD_SPLIT)
    req = decompose(seed=5)
    answer = await llm.complete(req)
    assert parse_decomposition(answer.value, max_children=4)[0]["title"] == "Tokyo"
    assert (answer.prompt_tokens, answer.completion_tokens) == (11, 7)
    (body,) = fake.chats()
    assert body["model"] == MODEL and body["seed"] == 5 and body["max_tokens"] == req.max_tokens
    assert body["messages"] == [{"role": "system", "content": req.system},
                                {"role": "user", "content": req.prompt}]
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["schema"] == req.schema
    t = llm.last_timings
    assert t["cached_tokens"] == 3 and t["outcome"] == "ok" and t["mode"] == "json_schema"
    assert t["seconds"] > 0 and t["tokens_per_second"] > 0
    assert len(llm.calls) == 1
    await llm.aclose()


async def test_a_free_text_request_goes_without_a_schema_and_comes_back_as_text(fake):
    llm = make(fake.url)
    plan = "1. Flights and money\n- Book a flight to Tokyo\n2. Tokyo\n- Stay in Shinjuku\n3. Kyoto\n- See Kinkaku-ji"
    fake.replies.extend(["   ", plan])  # an empty answer is a bad output: asked again
    req = outline_request(Frame(goal=GOAL), path=[], title=GOAL, description="", max_children=4, seed=1)
    answer = await llm.complete(req)
    assert answer.value == {"text": plan}
    assert [s["title"] for s in parse_outline(answer.value["text"], max_children=4)][0] == "Flights and money"
    bodies = fake.chats()
    assert len(bodies) == 2 and all("response_format" not in b for b in bodies)
    assert "JSON" not in bodies[-1]["messages"][1]["content"]
    await llm.aclose()


async def test_a_server_refusing_json_schema_gets_json_object_then_the_schema_in_the_prompt(fake):
    llm = make(fake.url)
    fake.replies.extend([
        Reply(400, {"error": {"message": "response_format type json_schema is not supported"}}),
        Reply(400, {"error": {"message": "'response_format' must be 'text'"}}),
        "Sure! Here it is:\n```json\n" + __import__("json").dumps(GOOD_SPLIT) + "\n```",
        GOOD_SPLIT,
    ])
    with capture_logs() as logs:
        assert await llm.generate(decompose()) == GOOD_SPLIT
    bodies = fake.chats()
    assert [b.get("response_format", {}).get("type") for b in bodies] == ["json_schema", "json_object", None]
    req = decompose()
    last = bodies[-1]["messages"]
    assert last[0]["content"] == req.system  # the shared prefix is untouched ...
    assert last[1]["content"].startswith(req.prompt) and '"steps"' in last[1]["content"]  # ... the schema comes last
    assert llm.mode == "prompt"
    refused = [e for e in logs if e["event"] == "llm.openai.response_format_refused"]
    assert [e["next_mode"] for e in refused] == ["json_object", "prompt"]
    # the mode that worked is kept: the next call goes straight to it
    assert await llm.generate(decompose()) == GOOD_SPLIT
    assert "response_format" not in fake.chats()[-1]
    await llm.aclose()


async def test_a_400_about_something_else_is_an_error_and_changes_no_mode(fake):
    llm = make(fake.url)
    fake.replies.append(Reply(400, {"error": {"message": "the request exceeds the available context size"}}))
    with pytest.raises(LLMError, match="exceeds the available context") as info:
        await llm.generate(decompose())
    assert type(info.value) is LLMError and llm.mode == "json_schema"
    assert len(fake.chats()) == 1  # not retried
    await llm.aclose()


async def test_a_fixed_mode_never_falls_back(fake):
    llm = make(fake.url, mode="json_schema")
    fake.replies.append(Reply(400, {"error": {"message": "response_format json_schema unsupported"}}))
    with pytest.raises(LLMError, match="unsupported"):
        await llm.generate(decompose())
    assert len(fake.chats()) == 1
    await llm.aclose()


async def test_overload_and_server_errors_are_retried_with_backoff(fake):
    llm = make(fake.url, retries=3)
    fake.replies.extend([Reply(503, {"error": {"message": "server busy"}}),
                         Reply(429, {"error": {"message": "slow down"}}),
                         Reply(500, {"error": {"message": "boom"}}), GOOD_SPLIT])
    assert await llm.generate(decompose()) == GOOD_SPLIT
    assert len(fake.chats()) == 4
    fake.replies.extend([Reply(503, {"error": {"message": "server busy"}})] * 3)
    llm.retries = 2
    with pytest.raises(LLMUnavailable, match=r"server busy.*after 3 attempts"):
        await llm.generate(decompose())
    await llm.aclose()


async def test_bad_answers_are_asked_again_with_another_seed(fake):
    llm = make(fake.url, retries=2)
    fake.replies.extend(['{"steps": [ {"title": "Tok', {"steps": "Tokyo"}, GOOD_SPLIT])
    assert await llm.generate(decompose(seed=7)) == GOOD_SPLIT
    seeds = [b["seed"] for b in fake.chats()]
    assert seeds[0] == 7 and len(set(seeds)) == 3
    assert [c.outcome for c in llm.calls] == ["bad_output", "bad_output", "ok"]
    fake.replies.extend(["no json here"] * 3)
    with pytest.raises(LLMBadOutput, match="after 3 attempts"):
        await llm.generate(decompose())
    await llm.aclose()


async def test_tokens_of_rejected_answers_are_counted_too(fake):
    llm = make(fake.url, retries=1)
    fake.replies.extend(["not json", GOOD_SPLIT])
    answer = await llm.complete(decompose())
    assert (answer.prompt_tokens, answer.completion_tokens) == (22, 14)
    await llm.aclose()


async def test_a_wrong_key_is_one_clear_error_not_retried(fake):
    llm = make(fake.url, api_key="nope")
    with pytest.raises(LLMAuthError, match=r"refused SWARM_OPENAI_API_KEY \(401\)"):
        await llm.generate(decompose())
    assert len(fake.chats()) == 1
    usable, why = await llm.probe()
    assert not usable and "refused" in why
    await llm.aclose()


async def test_the_key_file_is_read_again_when_it_changes(fake, tmp_path):
    key_file = tmp_path / "key"
    key_file.write_text("old-key\n")
    llm = make(fake.url, api_key=None, api_key_file=key_file)
    with pytest.raises(LLMAuthError, match=str(key_file)):
        await llm.generate(decompose())
    key_file.write_text("sekrit\n")
    os.utime(key_file, ns=(time.time_ns(), time.time_ns() + 10**9))  # a new mtime, surely
    assert await llm.generate(decompose()) is not None
    assert fake.requests[-1][2]["Authorization"] == "Bearer sekrit"
    key_file.unlink()
    with pytest.raises(LLMUnavailable, match="cannot read the API key file"):
        await llm.generate(decompose())
    await llm.aclose()


async def test_a_missing_model_says_how_to_fix_it(fake):
    llm = make(fake.url, model="gpt-9")
    with pytest.raises(ModelMissing, match="SWARM_OPENAI_MODEL"):
        await llm.generate(decompose())
    usable, why = await llm.probe()
    assert not usable and "gpt-9" in why and MODEL in why
    await llm.aclose()


async def test_without_a_model_the_server_s_first_one_is_used(fake):
    llm = make(fake.url, model=None)
    usable, why = await llm.probe()
    assert usable and llm.model == MODEL
    await llm.generate(decompose())
    assert fake.chats()[-1]["model"] == MODEL
    await llm.aclose()


async def test_a_wrong_base_url_says_it_usually_ends_in_v1(fake):
    llm = make(fake.url[: -len("/v1")])
    with pytest.raises(LLMError, match="usually ends in /v1"):
        await llm.generate(decompose())
    await llm.aclose()
    with pytest.raises(LLMError, match="must start with http"):
        OpenAILLM("127.0.0.1:8088/v1")


async def test_an_unreachable_server_is_reported_quickly(closed_port):
    llm = make(f"http://127.0.0.1:{closed_port}/v1", retries=2)
    start = time.monotonic()
    with pytest.raises(LLMUnavailable) as info:
        await llm.generate(decompose())
    assert time.monotonic() - start < 3
    msg = str(info.value)
    assert f"http://127.0.0.1:{closed_port}/v1 is unreachable" in msg and "after 3 attempts" in msg
    assert "\n" not in msg
    usable, why = await llm.probe(timeout=1)
    assert not usable and "unreachable" in why
    await llm.aclose()


async def test_a_slow_server_times_out(fake):
    llm = make(fake.url, timeout=0.3, retries=0)
    fake.replies.append(Reply(body=GOOD_SPLIT, delay=2.0))
    start = time.monotonic()
    with pytest.raises(LLMUnavailable, match="did not answer"):
        await llm.generate(decompose())
    assert time.monotonic() - start < 1.5
    await llm.aclose()


def test_json_is_found_inside_chatter():
    assert extract_json('Here: ```json\n{"a": 1}\n``` done') == '{"a": 1}'
    assert extract_json('ok {"a": {"b": 2}} bye') == '{"a": {"b": 2}}'
    assert extract_json("nothing") == "nothing"


def settings(**kw) -> Settings:
    base = {"llm": "auto", "llm_timeout": 5.0, "llm_retries": 1}
    base.update(kw)
    return Settings(_env_file=None, **base)


async def test_make_llm_openai_and_auto(fake, closed_port, tmp_path):
    key_file = tmp_path / "key"
    key_file.write_text("sekrit")
    direct = await make_llm(settings(llm="openai", openai_base_url=fake.url, openai_api_key_file=key_file))
    assert isinstance(direct, OpenAILLM) and not fake.requests  # no probe when chosen directly
    await direct.aclose()
    with capture_logs() as logs:
        auto = await make_llm(settings(openai_base_url=fake.url, openai_api_key="sekrit"))
    assert isinstance(auto, OpenAILLM) and auto.model == MODEL
    assert [e["backend"] for e in logs if e["event"] == "llm.selected"] == ["openai"]
    await auto.aclose()
    # configured but unreachable: auto goes on to Ollama, then the embedded model, and says why
    with capture_logs() as logs:
        fallback = await make_llm(settings(openai_base_url=f"http://127.0.0.1:{closed_port}/v1",
                                           ollama_host=f"http://127.0.0.1:{closed_port}"))
    chosen = [e for e in logs if e["event"] == "llm.selected"][0]
    assert chosen["backend"] == "llamacpp" and "OpenAI-compatible server" in chosen["reason"]
    await fallback.aclose()
    with pytest.raises(LLMError, match="SWARM_OPENAI_BASE_URL"):
        await make_llm(settings(llm="openai"))
