"""The gate's pieces that need no model: a stream put back together into one chat completion,
llama.cpp's errors inside a stream, the request rewrite (a stream always, the schema as a
compact grammar, the model named), and its counters. The gate in front of the real server:
tests/test_llm_server.py."""

from __future__ import annotations

import orjson
import pytest

from agent.llm.gate import Assembler, Gate, StreamError

CHUNK = {"created": 1, "id": "chatcmpl-x", "model": "m", "system_fingerprint": "b0",
         "object": "chat.completion.chunk"}


def line(**kw) -> str:
    return "data: " + orjson.dumps({**CHUNK, **kw}).decode()


def test_a_stream_becomes_the_one_answer_a_plain_request_gets():
    asm = Assembler()
    for ln in [
        line(choices=[{"index": 0, "finish_reason": None, "delta": {"role": "assistant", "content": None}}]),
        "",
        line(choices=[{"index": 0, "finish_reason": None, "delta": {"content": '{"result":'}}]),
        ": a comment line",
        line(choices=[{"index": 0, "finish_reason": None, "delta": {"reasoning_content": "hm"}}]),
        line(choices=[{"index": 0, "finish_reason": None, "delta": {"content": ' "ok"}'}}]),
        line(choices=[{"index": 0, "finish_reason": "stop", "delta": {}}], timings={"cache_n": 5}),
        line(choices=[], usage={"prompt_tokens": 9, "completion_tokens": 4},
             timings={"cache_n": 5, "predicted_per_second": 20.0}),
        "data: [DONE]",
    ]:
        asm.feed(ln)
    assert asm.done
    out = asm.result()
    assert out["object"] == "chat.completion" and out["id"] == "chatcmpl-x" and out["model"] == "m"
    (choice,) = out["choices"]
    assert choice["finish_reason"] == "stop"
    assert choice["message"] == {"role": "assistant", "content": '{"result": "ok"}', "reasoning_content": "hm"}
    assert out["usage"] == {"prompt_tokens": 9, "completion_tokens": 4}
    assert out["timings"]["predicted_per_second"] == 20.0


def test_an_error_inside_the_stream_is_the_answer():
    asm = Assembler()
    asm.feed(line(choices=[{"index": 0, "delta": {"content": "x"}}]))
    with pytest.raises(StreamError) as info:
        asm.feed('data: {"error": {"code": 500, "message": "decode failed", "type": "server_error"}}')
    assert info.value.status == 500 and b"decode failed" in info.value.body
    with pytest.raises(StreamError) as info:
        Assembler().feed("data: {not json")
    assert info.value.status == 502


def gate(**kw) -> Gate:
    kw.setdefault("max_active", 2)
    return Gate("http://127.0.0.1:1", "up-key", "key", **kw)


def test_every_chat_request_is_streamed_upstream_with_its_usage():
    g = gate()
    body, assemble, model = g._rewrite(orjson.dumps({"model": "m", "messages": []}))
    data = orjson.loads(body)
    assert assemble and data["stream"] is True and data["stream_options"] == {"include_usage": True}
    assert model == "m"
    body, assemble, _ = g._rewrite(orjson.dumps({"messages": [], "stream": True}))
    assert not assemble and "stream_options" not in orjson.loads(body)  # the client's own stream
    assert g._rewrite(b"not json") == (b"not json", False, None)


def test_a_json_schema_becomes_a_compact_grammar_once():
    calls = []

    def to_grammar(schema):
        calls.append(schema)
        return "%llguidance {}\nstart: %json " + orjson.dumps(schema).decode()

    g = gate(to_grammar=to_grammar)
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    req = {"messages": [], "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}}
    for _ in range(3):
        data = orjson.loads(g._rewrite(orjson.dumps(req))[0])
        assert "response_format" not in data and data["grammar"].startswith("%llguidance")
    assert calls == [schema]  # converted once, then cached
    # json_object, or a conversion that fails, go on as they are (llama.cpp handles them)
    obj = {"messages": [], "response_format": {"type": "json_object"}}
    assert orjson.loads(g._rewrite(orjson.dumps(obj))[0])["response_format"] == {"type": "json_object"}
    broken = gate(to_grammar=lambda s: (_ for _ in ()).throw(RuntimeError("no")))
    assert "response_format" in orjson.loads(broken._rewrite(orjson.dumps(req))[0])


def test_counters_render_as_prometheus_text():
    g = gate()
    g.stats.busy, g.stats.forwarded = 3, 7
    text = g.stats.prometheus()
    assert "swarm_llm_gate_busy_total 3" in text and "swarm_llm_gate_forwarded_total 7" in text
    assert "# TYPE swarm_llm_gate_active gauge" in text
