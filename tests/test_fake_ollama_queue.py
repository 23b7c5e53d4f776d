"""The fake Ollama's queue model (tests/support/fake_ollama.py: QueueModel), checked against
what it claims to model: P slots served in arrival order, a bounded queue answered with Ollama's
503, a per-token cost at full speed per slot or shared (a CPU), clients that give up leaving the
queue or freeing their slot, keep_alive and model loads, streamed first chunks after the queue.
The last tests show what the agents' Ollama backend does behind such a queue.

Timing tolerances are wide (2 shared cores); the exact properties (order, counts, outcomes) come
from the server's own records, and the tests wait on its state, never on fixed sleeps."""

from __future__ import annotations

import collections
import threading
import time

import httpx
import ollama
import pytest

from agent.llm.base import LLMUnavailable
from agent.llm.ollama_backend import OllamaLLM
from agent.llm.prompts import Frame, decompose_request
from support.fake_ollama import SERVER_BUSY, Call, FakeOllama, QueueModel, parse_keep_alive, percentile

MODEL = "llama3.2:1b"


def chat(url: str, *, timeout: float = 30.0, keep_alive=None, stream: bool = False) -> httpx.Response:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "x" * 40}], "stream": stream}
    if keep_alive is not None:
        body["keep_alive"] = keep_alive
    return httpx.post(f"{url}/api/chat", json=body, timeout=timeout)


class Clients:
    """Requests sent from threads, one at a time in a known order: each is sent only once the
    server has registered the previous one's arrival."""

    def __init__(self, fake: FakeOllama):
        self.fake = fake
        self.threads: list[threading.Thread] = []
        self.results: dict[int, object] = {}

    def send(self, i: int, **kw) -> None:
        arrived = self.fake.queue.snapshot()["arrived"]

        def go() -> None:
            try:
                self.results[i] = chat(self.fake.url, **kw)
            except httpx.HTTPError as exc:
                self.results[i] = exc

        t = threading.Thread(target=go, daemon=True)
        t.start()
        self.threads.append(t)
        self.fake.queue.wait_for(lambda s: s["arrived"] > arrived)

    def join(self, timeout: float = 60) -> None:
        for t in self.threads:
            t.join(timeout)
            assert not t.is_alive(), "a client never got an answer"


def served(fake: FakeOllama) -> list[Call]:
    return sorted(fake.queue.calls, key=lambda c: c.seq)


def most_at_once(calls: list[Call]) -> int:
    """The largest number of calls generating at the same instant (from the server's records)."""
    edges = sorted([(c.started, 1) for c in calls if c.started is not None]
                   + [(c.ended, -1) for c in calls if c.started is not None])
    now = best = 0
    for _, d in edges:  # at equal times -1 sorts first: an end frees its slot before a start
        now += d
        best = max(best, now)
    return best


def test_p_slots_serve_in_arrival_order():
    q = QueueModel(parallel=2, token_seconds=0.02, tokens=10)  # 0.2 s per answer
    with FakeOllama(models=[MODEL], queue=q) as fake:
        clients = Clients(fake)
        t0 = time.monotonic()
        for i in range(6):
            clients.send(i)
        clients.join()
        elapsed = time.monotonic() - t0
    assert all(r.status_code == 200 and r.json()["done"] for r in clients.results.values())
    calls = served(fake)
    assert [c.outcome for c in calls] == ["done"] * 6
    starts = [c.started for c in calls]
    assert starts == sorted(starts), "slots must be given in arrival order (FIFO)"
    assert most_at_once(calls) == 2 == q.max_active
    for c in calls:
        assert 0.18 <= c.ended - c.started <= 1.0, c  # 10 tokens x 0.02 s
    # a slot is handed over, never shared: call k (k >= P) starts only once k - P + 1 of the
    # calls before it have ended
    for k in range(2, 6):
        ends = sorted(c.ended for c in calls[:k])
        assert calls[k].started >= ends[k - 2], (k, calls[k], ends)
    assert elapsed >= 0.55  # 6 answers of 0.2 s through 2 slots: at least three rounds
    s = q.summary()
    assert (s["done"], s["rejected"], s["cancelled"], s["max_active"]) == (6, 0, 0, 2)
    assert s["p95_seconds"] >= s["p50_seconds"] >= 0.18
    last = clients.results[5].json()
    assert last["eval_count"] == 10  # the answer's durations: queued + answered, as recorded
    assert abs(last["total_duration"] - calls[5].total * 1e9) < 1e6 and calls[5].total >= 0.18


def test_a_full_queue_answers_ollamas_503_at_once():
    q = QueueModel(parallel=1, max_queue=2, token_seconds=0.01, tokens=100)  # 1 s per answer
    with FakeOllama(models=[MODEL], queue=q) as fake:
        clients = Clients(fake)
        for i in range(3):  # one generating, two waiting: the queue is full
            clients.send(i)
        state = q.wait_for(lambda s: s["active"] == 1 and s["waiting"] == 2)
        assert state["done"] == 0, "the first answer must still be running"
        t = time.monotonic()
        busy = chat(fake.url)
        assert time.monotonic() - t < 1.0, "a rejection must not wait"
        clients.join()
    assert busy.status_code == 503 and busy.json() == {"error": SERVER_BUSY}
    assert [c.outcome for c in served(fake)] == ["done", "done", "done", "rejected"]
    with pytest.raises(ollama.ResponseError) as info:  # what the official client makes of it
        with FakeOllama(models=[MODEL], queue=QueueModel(max_queue=0, token_seconds=0.5, tokens=4)) as f2:
            c2 = Clients(f2)
            c2.send(0)
            f2.queue.wait_for(lambda s: s["active"] == 1)
            ollama.Client(host=f2.url).chat(model=MODEL, messages=[{"role": "user", "content": "hi"}])
    assert info.value.status_code == 503 and "server busy" in info.value.error


def test_shared_compute_divides_the_speed_among_active_slots():
    def two_at_once(shared: bool) -> tuple[list[float], float]:
        q = QueueModel(parallel=2, token_seconds=0.02, tokens=15, shared_compute=shared)  # 0.3 s alone
        with FakeOllama(models=[MODEL], queue=q) as fake:
            clients = Clients(fake)
            clients.send(0)
            clients.send(1)  # arrives a little later: the first ran alone meanwhile
            clients.join()
        calls = served(fake)
        return [c.ended - c.started for c in calls], max(c.ended for c in calls) - calls[0].started

    gpu, _ = two_at_once(False)
    assert all(0.28 <= d <= 0.5 for d in gpu), gpu  # each slot at full speed
    cpu, makespan = two_at_once(True)
    assert all(d >= 0.33 for d in cpu), cpu  # slower than alone while both run
    assert makespan >= 0.57, makespan  # one compute: 2 x 0.3 s of work take 0.6 s, however started


def test_a_client_that_gives_up_leaves_the_queue_and_frees_its_slot():
    q = QueueModel(parallel=1, token_seconds=0.01, tokens=100)  # 1 s per answer
    with FakeOllama(models=[MODEL], queue=q) as fake:
        clients = Clients(fake)
        clients.send("a", timeout=0.4)  # gives up while generating
        clients.send("b", timeout=0.2)  # gives up while queued
        clients.send("c")
        clients.join()
    a, b, c = served(fake)
    assert isinstance(clients.results["a"], httpx.TimeoutException)
    assert isinstance(clients.results["b"], httpx.TimeoutException)
    assert clients.results["c"].status_code == 200
    assert a.outcome == "cancelled" and a.started is not None
    assert b.outcome == "cancelled" and b.started is None, "b never got a slot"
    assert c.outcome == "done"
    # the abandoned answer stopped early: c did not wait for a's full second
    assert c.started - a.started < 0.85, (a, c)
    assert q.summary()["cancelled_while_running"] == 1


def test_keep_alive_and_model_loads():
    q = QueueModel(parallel=1, load_seconds=0.3, keep_alive="5m", tokens=1)
    with FakeOllama(models=[MODEL], queue=q) as fake:
        first = chat(fake.url)
        second = chat(fake.url, keep_alive=0)  # unload as soon as it is answered
        third = chat(fake.url, keep_alive=-1)  # loads again, then stays
        fourth = chat(fake.url)
    assert [c.paid_load for c in served(fake)] == [True, False, True, False]
    assert first.json()["load_duration"] == 300_000_000 and second.json()["load_duration"] == 0
    assert third.json()["total_duration"] >= 0.3e9 > fourth.json()["total_duration"]
    assert q.summary()["loads"] == 2


def test_streamed_answers_start_after_the_queue():
    q = QueueModel(parallel=1, token_seconds=0.05, tokens=8)  # 0.4 s per answer
    with FakeOllama(models=[MODEL], queue=q, replies=collections.deque([{"a": "b"}, "0123456789abcdef"])) as fake:
        clients = Clients(fake)
        clients.send(0)
        q.wait_for(lambda s: s["active"] == 1)
        client = ollama.Client(host=fake.url)
        t = time.monotonic()
        parts = client.chat(model=MODEL, messages=[{"role": "user", "content": "hi"}], stream=True)
        first = next(parts)
        waited = time.monotonic() - t
        rest = list(parts)
        clients.join()
    assert waited >= 0.25, "the first chunk came before the answer ahead of it was done"
    assert first.message.content and not first.done
    assert rest[-1].done and rest[-1].eval_count == 8
    assert first.message.content + "".join(p.message.content for p in rest) == "0123456789abcdef"
    second = served(fake)[1]
    assert second.first_token - second.started < 0.2  # the first token follows the slot at once


def test_keep_alive_and_percentile_parsing():
    assert parse_keep_alive("5m") == 300 and parse_keep_alive("1h30m") == 5400
    assert parse_keep_alive(-1) == parse_keep_alive("-1m") == float("inf")
    assert parse_keep_alive("250ms") == 0.25 and parse_keep_alive(0) == 0
    for bad in ("5 minutes", "m", True):
        with pytest.raises(ValueError):
            parse_keep_alive(bad)
    assert percentile([], 95) is None
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([float(i) for i in range(1, 101)], 95) == 95.0
    assert percentile([float(i) for i in range(1, 21)], 95) == 19.0


# ---------------------------------------------------------------- the agents' backend behind it
def decompose():
    return decompose_request(Frame("Plan a trip"), path=["Plan a trip"], title="Plan a trip",
                             description="", strategy="by place", max_children=4, seed=1)


async def test_the_backend_times_out_behind_a_queue_and_its_retry_queues_again():
    """Today's OllamaLLM: one timeout covers queueing and answering, and a timed-out request is
    retried at the back of the queue. Behind 2 answers of 1 s, a 0.5 s timeout fails although
    the server would have answered within 3 s, and its two attempts both cost queue places."""
    q = QueueModel(parallel=1, token_seconds=0.02, tokens=50)  # 1 s per answer
    with FakeOllama(models=[MODEL], queue=q) as fake:
        clients = Clients(fake)
        clients.send(0)
        clients.send(1)
        llm = OllamaLLM(fake.url, MODEL, timeout=0.5, retries=1, backoff_initial=0.01,
                        backoff_max=0.02)
        with pytest.raises(LLMUnavailable) as info:
            await llm.generate(decompose())
        await llm.aclose()
        clients.join()
    assert "did not answer" in str(info.value) and "after 2 attempts" in str(info.value)
    mine = served(fake)[2:]
    assert [c.outcome for c in mine] == ["cancelled", "cancelled"], mine
    assert all(c.started is None for c in mine), "both attempts were still queued when dropped"


async def test_the_backend_succeeds_when_its_timeout_covers_the_queue():
    q = QueueModel(parallel=1, token_seconds=0.02, tokens=30)
    with FakeOllama(models=[MODEL], queue=q) as fake:
        clients = Clients(fake)
        clients.send(0)
        clients.send(1)
        llm = OllamaLLM(fake.url, MODEL, timeout=10, retries=0)
        answer = await llm.generate(decompose())
        await llm.aclose()
        clients.join()
    assert answer and served(fake)[2].queued >= 0.6
    assert llm.last_timings["completion_tokens"] == 30


def test_the_load_tool_counts_latency_and_wasted_calls():
    """tests/support/ollama_load.py, the lead's measuring tool: 4 agents on one slot (a CPU),
    answers of 10 s. A 25 s timeout is shorter than the queue (4 x 10 s): answers are abandoned
    mid-generation and retried; a 60 s one covers it: no waste, p95 about 4 answers."""
    from support.ollama_load import closed_loop

    kw = dict(parallel=1, cpu=True, calls=2, retries=1, tokens=100, token_seconds=0.1,
              prompt_token_seconds=0.0, scale=40.0)
    short = closed_loop(4, timeout=25, **kw)
    enough = closed_loop(4, timeout=60, **kw)
    assert short.wasted > 0 and short.attempts > short.ok, short
    assert enough.wasted == enough.abandoned == enough.failed == 0, enough
    assert enough.ok == enough.attempts == 8
    assert 35 <= enough.p95 <= 55, enough  # behind the 3 others: 4 x 10 s
