"""Support for the chaos suite (tests/test_chaos*.py): faults injected into real agent
processes, and the checks every scenario ends with.

A scenario runs a LocalSwarm (tests/swarm_harness.py) with an in-process driver runtime that
posts the goal and watches the plan, injects one fault, waits for the plan to complete and for
every agent's stored log to hold the same events, stops everyone and checks:

- the plan completed (the driver's tree, and every agent's own stored log folds to a done root);
- every agent's stored log folds to the same digest, at one ``now``;
- no event is lost: the event-id sets of all stores are equal, and hold every event any agent
  logged as published;
- no agent process died: still running before the stop, exit code 0 after SIGTERM, and no
  traceback, "role failed" or library task failure in its log;
- no counted result changed after every agent had it: the driver watches each task's counted
  result over time, and each agent's stored log is replayed in order (see ``counted_history``).

Each scenario records its recovery time: from the end of the fault to the plan being done, and
to every stored log holding the same events (``Recovery``; printed, and appended as a JSON line
to ``$CHAOS_RESULTS`` when that is set).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import orjson
import trio

from agent.core.events import Event, Goal, decode_event
from agent.core.plan import Plan
from agent.core.reasons import Rejected
from agent.core.tree import derive

from .calls import TASK_KINDS, executions, in_flight  # noqa: F401  (the scenarios' counts of LLM calls)

# realistic-but-short: every LLM call of every agent takes this long (scripted answers)
LATENCY = 0.3

# log lines that mean an agent (or a part of it) crashed
CRASH_MARKERS = ("Traceback (most recent call last)", "role failed", "exited with error",
                 "InvalidTag", "NoiseInvalidMessage")


# ---------------------------------------------------------------------- stores
def complete_lines(data: bytes) -> list[bytes]:
    """The complete lines of a JSON-lines log read while it may be appended to (a last line
    without its newline is a write in progress, or a torn tail the store drops on open)."""
    lines = data.split(b"\n")
    return [ln for ln in lines[:-1] if ln.strip()]


def decode_all(lines: Iterable[bytes]) -> tuple[list[Event], list[str]]:
    events, bad = [], []
    for ln in lines:
        try:
            events.append(decode_event(ln))
        except Rejected as exc:
            bad.append(f"{exc.reason.value}: {exc.detail[:80]}")
    return events, bad


def fold(events: Iterable[Event]) -> Plan:
    plan = Plan()
    for e in events:
        plan.apply(e)
    return plan


def counted_now(plan: Plan) -> dict[str, str]:
    """Each claimed task's counted result (event id), as this plan holds it."""
    out = {}
    for node in sorted({c.body.node for c in plan.claims.values()}):
        r = plan.leases(node).counted
        if r is not None:
            out[node] = r.id
    return out


def counted_history(events: list[Event]) -> dict[str, list[str]]:
    """Replay a stored log in its order (the order the agent accepted the events): for each
    task, the sequence of results it counted."""
    plan = Plan()
    hist: dict[str, list[str]] = {}
    for e in events:
        plan.apply(e)
        if e.type not in ("claim", "renew", "release", "result"):
            continue
        node = e.body.node
        r = plan.leases(node).counted if node in plan.by_node else None
        if r is not None and (not hist.get(node) or hist[node][-1] != r.id):
            hist.setdefault(node, []).append(r.id)
    return hist


# ---------------------------------------------------------------------- logs
def log_records(text: str) -> list[dict]:
    out = []
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                out.append(orjson.loads(line))
            except orjson.JSONDecodeError:
                pass
    return out


def crash_lines(text: str) -> list[str]:
    return [ln[:400] for ln in text.splitlines() if any(m in ln for m in CRASH_MARKERS)]


def published_ids(records: list[dict]) -> set[str]:
    return {r["event_id"] for r in records if r.get("event") == "published" and r.get("event_id")}


# ---------------------------------------------------------------------- the driver's view
class Watch:
    """What the test's driver runtime saw over time: every task's counted result and each
    change of one, and when the goal's root was done. ``follow`` keeps it up to date (the
    driver may be restarted: it asks ``current()`` for the runtime each time)."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.counted: dict[str, str] = {}
        self.changes: list[dict] = []
        self.done_at: float | None = None
        self.goal_id: str | None = None

    def update(self, rt: Any) -> None:
        now = time.monotonic()
        for node, rid in counted_now(rt.plan).items():
            old = self.counted.get(node)
            if old is not None and old != rid:
                self.changes.append({"t": round(now - self.t0, 2), "node": node, "old": old, "new": rid})
            self.counted[node] = rid
        if self.goal_id and self.done_at is None and rt.tree().is_done(self.goal_id):
            self.done_at = now

    async def follow(self, current: Callable[[], Any]) -> None:
        while True:
            rt = current()
            if rt is None:
                await trio.sleep(0.1)
                continue
            self.update(rt)
            await rt.wait_change(0.25)

    def snapshot(self, rt: Any) -> dict[str, Any]:
        """What a watcher process reports (WatcherRun reads it back)."""
        tree = rt.tree()
        root = tree.node(self.goal_id) if self.goal_id else None
        return {"goal": self.goal_id, "done": self.done_at is not None, "events": len(rt.plan),
                "decided": [n.id for n in root.walk() if n.decided is not None] if root else [],
                "states": {k: v for k, v in tree.counts().items() if v},
                "counted": self.counted, "changes": self.changes, "peers": len(rt.net.connected)}


class DriverRun:
    """The test's own runtime (it posts the goal and watches), stoppable and restartable from
    its own store like any agent."""

    def __init__(self, sw: Any, data_dir: Path) -> None:
        self.sw = sw
        self.data_dir = data_dir
        self.rt: Any = None
        self._scope: trio.CancelScope | None = None
        self._stopped: trio.Event | None = None

    async def start(self, nursery: trio.Nursery) -> Any:
        rt = self.sw.driver(data_dir=self.data_dir)
        self._scope, self._stopped = trio.CancelScope(), trio.Event()
        await nursery.start(self._run, rt, self._scope, self._stopped)
        self.rt = rt
        return rt

    @staticmethod
    async def _run(rt: Any, scope: trio.CancelScope, stopped: trio.Event, *,
                   task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        try:
            with scope:
                await rt.run(task_status=task_status)
        finally:
            stopped.set()

    async def stop(self) -> None:
        rt, self.rt = self.rt, None
        assert self._scope is not None and self._stopped is not None
        self._scope.cancel()
        await self._stopped.wait()
        rt.store.close()

    async def follow(self, watch: Watch) -> None:
        await watch.follow(lambda: self.rt)

    async def until_ready(self, children: list[Any], timeout: float) -> None:
        from swarm_harness import wait_ready

        await wait_ready(self.rt, children, timeout)

    async def post_goal(self, title: str) -> str:
        from agent.goals import plan_params

        rt = self.rt
        electorate = [c.peer_id for c in self.sw.children if c.role == "scorer"]
        goal = await rt.publish(Goal(title=title, params=plan_params(rt.settings, electorate)))
        return goal.id


# ---------------------------------------------------------------------- recovery
@dataclass
class Recovery:
    scenario: str
    fault_end: float | None = None  # monotonic
    done: float | None = None
    converged: float | None = None
    notes: dict[str, Any] = field(default_factory=dict)

    def seconds(self, at: float | None) -> float | None:
        if at is None or self.fault_end is None:
            return None
        return round(max(0.0, at - self.fault_end), 2)

    def report(self, **checks: Any) -> dict[str, Any]:
        row = {"scenario": self.scenario, "to_done_s": self.seconds(self.done),
               "to_converged_s": self.seconds(self.converged), **self.notes, **checks,
               "at": time.strftime("%Y-%m-%dT%H:%M:%S")}
        print(f"\n[chaos] {self.scenario}: plan done {row['to_done_s']} s and every log equal "
              f"{row['to_converged_s']} s after the fault ended; {json.dumps(row, default=str)}")
        path = os.environ.get("CHAOS_RESULTS")
        if path:
            with open(path, "a") as fh:
                fh.write(json.dumps(row, default=str) + "\n")
        return row


def summarize(rows: list[dict]) -> str:
    """The lead's table from $CHAOS_RESULTS lines (python -m ... or a test helper)."""
    by: dict[str, list[dict]] = {}
    for r in rows:
        by.setdefault(r["scenario"], []).append(r)
    out = ["| fault | runs | plan completed | digests equal | lost | processes died | "
           "recovery to done (median / max) | to equal logs (median / max) |", "|" + "---|" * 8]
    for name, rs in by.items():
        def mm(key: str) -> str:
            xs = [r[key] for r in rs if r.get(key) is not None]
            return f"{statistics.median(xs):.1f} / {max(xs):.1f} s" if xs else "-"
        out.append(f"| {name} | {len(rs)} | {sum(bool(r.get('completed')) for r in rs)} | "
                   f"{sum(bool(r.get('digests_equal')) for r in rs)} | "
                   f"{sum(r.get('lost', 0) for r in rs)} | {sum(r.get('died', 0) for r in rs)} | "
                   f"{mm('to_done_s')} | {mm('to_converged_s')} |")
    return "\n".join(out)


# ---------------------------------------------------------------------- waiting
async def until(pred: Callable[[], Any], timeout: float, what: str,
                diagnose: Callable[[], str] | None = None, poll: float = 0.1) -> Any:
    """Poll ``pred`` until it returns something truthy (returned); fail with ``what`` (and
    ``diagnose()``, e.g. log tails) after ``timeout`` seconds."""
    with trio.move_on_after(timeout):
        while True:
            got = pred()
            if got:
                return got
            await trio.sleep(poll)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}"
                         + (f"\n{diagnose()}" if diagnose else ""))


# ---------------------------------------------------------------------- one scenario
class LogTail:
    """An agent's log file, parsed incrementally (JSON records; other lines kept as text)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.records: list[dict] = []
        self._partial = b""

    def read(self) -> list[dict]:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                chunk = fh.read()
        except FileNotFoundError:
            return self.records
        self.offset += len(chunk)
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()
        for ln in lines:
            if ln.startswith(b"{"):
                try:
                    self.records.append(orjson.loads(ln))
                except orjson.JSONDecodeError:
                    pass
        return self.records


class ChaosRun:
    """One scenario on a running LocalSwarm: the driver, the watch, fault helpers, and
    ``finish()`` with every check. Use inside a nursery::

        with LocalSwarm(...) as sw:
            async with trio.open_nursery() as nursery:
                run = ChaosRun(sw, nursery, "kill executor")
                await run.start("Plan a two-week trip to Japan")
                ... inject the fault, set run.rec.fault_end ...
                await run.finish()
    """

    def __init__(self, sw: Any, nursery: trio.Nursery, scenario: str, driver: Any = None) -> None:
        self.sw = sw
        self.nursery = nursery
        self.driver = driver or DriverRun(sw, sw.root / "driver")
        self.watch = Watch()
        self.rec = Recovery(scenario)
        self.goal_id = ""
        # how to read an agent's store (a SmallDisk agent's is inside its mount namespace)
        self.readers: dict[str, Callable[[], bytes]] = {}
        self.tails = {c.name: LogTail(sw.root / "logs" / f"{c.name}.log") for c in sw.children}
        self.published: dict[str, set[str]] = {}  # agent -> ids it logged as published

    # -------------------------------------------------------------- set-up
    async def start(self, title: str, ready: list[str] | None = None, ready_timeout: float = 120) -> str:
        """Start the driver, wait until the agents (or those named in ``ready``) announced
        themselves, post the goal."""
        await self.driver.start(self.nursery)
        self.nursery.start_soon(self.driver.follow, self.watch)
        await self.driver.until_ready([c for c in self.sw.children if ready is None or c.name in ready],
                                      ready_timeout)
        self.goal_id = self.watch.goal_id = await self.driver.post_goal(title)
        return self.goal_id

    # -------------------------------------------------------------- views
    @property
    def rt(self) -> Any:
        return self.driver.rt

    def tree(self) -> Any:
        return self.driver.rt.tree()

    @property
    def snapshot(self) -> dict[str, Any]:
        """The watcher process's latest report (a WatcherRun driver)."""
        return self.driver.latest

    def records(self, name: str) -> list[dict]:
        return self.tails[name].read()

    def peer(self, name: str) -> str:
        return self.sw.child(name).peer_id

    def node_depth(self, node_id: str | None) -> int | None:
        n = self.tree().node(node_id) if node_id and self.driver.rt is not None else None
        return None if n is None else n.depth

    def read_store(self, name: str) -> bytes:
        if name in self.readers:
            return self.readers[name]()
        path = (self.driver.data_dir if name == "driver" else self.sw.child(name).data_dir) / "events.jsonl"
        try:
            return path.read_bytes()
        except FileNotFoundError:
            return b""

    def names(self) -> list[str]:
        return [c.name for c in self.sw.children] + ["driver"]

    def diagnose(self, n: int = 6) -> str:
        out = []
        for c in self.sw.children:
            rc = c.proc.poll() if c.proc else None
            tail = self.sw.log_text(c.name).splitlines()[-n:]
            out.append(f"--- {c.name} (exit {rc}):\n" + "\n".join(ln[:300] for ln in tail))
        if self.driver.rt is not None and self.goal_id:
            root = self.tree().node(self.goal_id)
            if root is not None:
                out.append("--- tree: " + ", ".join(f"{n.id[:8]}:{n.state.value}" for n in root.walk()))
        return "\n".join(out)

    # -------------------------------------------------------------- faults
    def kill(self, name: str) -> None:
        """SIGKILL, after noting what the agent logged as published (all of it must be in its
        store: an agent stores before it publishes)."""
        self.sw.kill(name)
        self._check_published_stored(name)

    def _check_published_stored(self, name: str) -> None:
        ids = published_ids(self.records(name))
        events, _ = decode_all(complete_lines(self.read_store(name)))
        missing = ids - {e.id for e in events}
        assert not missing, f"{name} published {len(missing)} events its store does not hold"

    async def until(self, pred: Callable[[], Any], timeout: float, what: str) -> Any:
        return await until(pred, timeout, what, self.diagnose)

    async def until_log(self, name: str, pred: Callable[[list[dict]], Any], timeout: float,
                        what: str) -> Any:
        return await until(lambda: pred(self.records(name)), timeout, f"{name}: {what}", self.diagnose)

    # -------------------------------------------------------------- waiting for recovery
    async def until_done(self, timeout: float = 240) -> float:
        await until(lambda: self.watch.done_at is not None, timeout, "the plan to complete",
                    self.diagnose, poll=0.2)
        assert self.watch.done_at is not None
        self.rec.done = self.watch.done_at
        return self.watch.done_at

    def counted_changes(self) -> dict[str, dict[str, list[str]]]:
        """Per agent (the driver too), the tasks whose counted result changed while it ran: its
        stored log replayed in the order it accepted the events (``counted_history``). Where no
        fault can excuse it (a clock off is none, README), any change is a result that counted
        on that agent and was then replaced: work that was done twice, or counted too early."""
        out = {}
        for n in self.names():
            events, _ = decode_all(complete_lines(self.read_store(n)))
            changed = {node: h for node, h in counted_history(events).items() if len(h) > 1}
            if changed:
                out[n] = changed
        return out

    def store_sets(self) -> dict[str, frozenset[bytes]]:
        return {n: frozenset(complete_lines(self.read_store(n))) for n in self.names()}

    async def until_converged(self, timeout: float = 120, quiet: float = 2.0) -> float:
        """Until every store (the driver's too) holds the same events, unchanged for ``quiet``
        seconds, and holds every event an agent logged as published; returns (and records) when
        they first became equal. (Equal stores are not enough: an event stamped ahead of every
        clock is held by every peer, stored by none, and filed everywhere once due. Seen once:
        a +30 s executor's early event filed 3 s after the stores had been equal for 2 s, when
        the driver had already stopped.)"""
        since: float | None = None
        last: frozenset[bytes] | None = None
        line_ids: dict[bytes, str] = {}

        def unstored(stored: frozenset[bytes]) -> set[str]:
            for ln in stored - line_ids.keys():
                try:
                    line_ids[ln] = decode_event(ln).id
                except Rejected:
                    line_ids[ln] = ""
            published = set().union(*(published_ids(self.records(c.name)) for c in self.sw.children))
            return published - {line_ids[ln] for ln in stored}

        def check() -> bool:
            nonlocal since, last
            sets = self.store_sets()
            first = next(iter(sets.values()))
            if any(s != first for s in sets.values()) or unstored(first):
                since = last = None
                return False
            if first != last:
                since, last = time.monotonic(), first
            return time.monotonic() - since >= quiet

        def differences() -> str:
            sets = self.store_sets()
            union = frozenset().union(*sets.values())
            lines = []
            for n, s in sets.items():
                miss = [decode_event(x) for x in union - s]
                lines.append(f"{n}: {len(s)} events, missing {len(miss)} "
                             + ", ".join(f"{e.type}/{e.author[-6:]}/{e.id[:8]}" for e in miss[:8]))
            nowhere = unstored(union)
            if nowhere:
                lines.append(f"published, stored nowhere: {len(nowhere)} " + ", ".join(i[:8] for i in sorted(nowhere)[:8]))
            return "\n".join(lines) + "\n" + self.diagnose()

        await until(check, timeout, "every stored log to hold the same events", differences, poll=0.3)
        assert since is not None
        self.rec.converged = since
        return since

    # -------------------------------------------------------------- the checks
    async def finish(self, *, done_timeout: float = 240, converge_timeout: float = 120,
                     counted_may_change: bool = False) -> dict[str, Any]:
        sw = self.sw
        died = {c.name: c.proc.poll() for c in sw.children if c.proc is None or c.proc.poll() is not None}
        assert not died, f"agents died: {died}\n{self.diagnose()}"
        await self.until_done(done_timeout)
        await self.until_converged(converge_timeout)
        watch_changes = list(self.watch.changes)
        driver_counted = dict(self.watch.counted)
        await self.driver.stop()
        # stop every agent (SIGTERM), then read what each one stored
        from agent.demo import stop

        stop(sw.children, grace=15)
        codes = {c.name: c.proc.returncode for c in sw.children}
        for c in sw.children:
            self.published[c.name] = published_ids(self.records(c.name))
        now = int(time.time() * 1000)
        digests, ids, done, finals, histories, bad = {}, {}, {}, {}, {}, {}
        for n in self.names():
            events, bad[n] = decode_all(complete_lines(self.read_store(n)))
            plan = fold(events)
            tree = derive(plan, now)
            digests[n] = tree.digest
            ids[n] = {e.id for e in events}
            done[n] = tree.is_done(self.goal_id)
            finals[n] = counted_now(plan)
            histories[n] = counted_history(events)
        union = set().union(*ids.values())
        lost = {n: len(union - s) for n, s in ids.items() if union - s}
        unstored = {n: len(p - ids[n]) for n, p in self.published.items() if p - ids[n]}
        unheard = {n: len(p - union) for n, p in self.published.items() if p - union}
        crashes = {c.name: crash_lines(sw.log_text(c.name)) for c in sw.children}
        crashes = {n: v for n, v in crashes.items() if v}
        bad_exit = {n: rc for n, rc in codes.items() if rc != 0}
        # a counted result that every agent counted at some point but that is not the final one
        # (necessary for "changed after every agent had it"; see counted_history)
        flipped = {}
        final = finals["driver"]
        for node, rid in final.items():
            everyone = set.intersection(*(set(h.get(node, ())) for h in histories.values()))
            if everyone - {rid}:
                flipped[node] = sorted(everyone - {rid})
        row = self.rec.report(
            completed=all(done.values()), digests_equal=len(set(digests.values())) == 1,
            lost=sum(lost.values()) + sum(unheard.values()), died=len(bad_exit) + len(crashes),
            counted_changed=len(flipped) + (0 if counted_may_change else len(watch_changes)),
            events=len(union), tasks=len(final))
        assert all(done.values()), f"the plan is not done in every store: {done}"
        assert not any(bad.values()), f"unreadable stored events: {bad}"
        assert len(set(digests.values())) == 1, f"stored logs fold to different digests: {digests}"
        assert not lost, f"events missing from some stores (of {len(union)}): {lost}"
        assert not unstored and not unheard, f"published but not stored: {unstored} {unheard}"
        assert not bad_exit, f"exit codes after SIGTERM: {bad_exit}\n{self.diagnose(20)}"
        assert not crashes, f"crashes in the logs: {crashes}"
        assert all(f == final for f in finals.values()), "agents count different results"
        assert driver_counted.items() <= final.items() or counted_may_change, \
            "the driver counted results the stores do not"
        assert not flipped, f"a counted result every agent had was replaced: {flipped}"
        if not counted_may_change:
            assert not watch_changes, f"the driver saw counted results change: {watch_changes}"
        return row


# ---------------------------------------------------------------------- a disk that fills up
class SmallDisk:
    """A small tmpfs for one agent's data dir, mounted in a private mount namespace held by a
    ``sleep`` process (nothing is mounted in the machine's own namespace; the mount goes away
    with the holder). The agent runs under ``prefix`` (nsenter into that namespace). ``fill()``
    writes a file until the disk is full, ``free()`` removes it; ``read(name)`` reads a file of
    the data dir from inside the namespace."""

    def __init__(self, data_dir: Path, size: str = "4m") -> None:
        self.dir = data_dir
        self.size = size
        self.holder: subprocess.Popen | None = None

    def __enter__(self) -> "SmallDisk":
        key = (self.dir / "key.ed25519").read_bytes()  # made by plan_children: keep the peer id
        cred_path = self.dir / "credential.json"  # ... and the membership credential issued for it
        cred = cred_path.read_bytes() if cred_path.exists() else None
        self.holder = subprocess.Popen(["unshare", "--mount", "--propagation", "private",
                                        "sleep", "infinity"], start_new_session=True)
        try:
            self._until_unshared()
            self._in("mount", "-t", "tmpfs", "-o", f"size={self.size},mode=0700", "tmpfs", str(self.dir))
            self._in("sh", "-c", f"cat > '{self.dir}/key.ed25519'", input=key)
            if cred is not None:
                self._in("sh", "-c", f"cat > '{self.dir}/credential.json'", input=cred)
        except BaseException:
            self.__exit__()
            raise
        return self

    def _until_unshared(self) -> None:
        assert self.holder is not None
        mine = os.readlink("/proc/self/ns/mnt")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                if os.readlink(f"/proc/{self.holder.pid}/ns/mnt") != mine:
                    return
            except FileNotFoundError:
                pass
            time.sleep(0.02)
        raise RuntimeError("unshare --mount did not make a mount namespace")

    def __exit__(self, *exc: object) -> None:
        if self.holder is not None and self.holder.poll() is None:
            self.holder.kill()
            self.holder.wait()

    @property
    def prefix(self) -> list[str]:
        assert self.holder is not None
        return ["nsenter", "-t", str(self.holder.pid), "-m", "--"]

    def _in(self, *argv: str, input: bytes | None = None, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run([*self.prefix, *argv], input=input, capture_output=True, check=check,
                              timeout=30)

    def fill(self) -> None:
        self._in("dd", "if=/dev/zero", f"of={self.dir}/fill", "bs=64k", check=False)
        df = self._in("df", "-k", "--output=avail", str(self.dir)).stdout.split()
        assert df[-1] == b"0", f"the disk is not full: {df}"

    def free(self) -> None:
        self._in("rm", "-f", f"{self.dir}/fill")

    def read(self, name: str) -> bytes:
        return self._in("cat", f"{self.dir}/{name}").stdout


# ---------------------------------------------------------------------- swarms in namespaces
AGENT_PORT = 4001


class NetnsSwarm:
    """LocalSwarm's agents, each in its own network namespace on ``bridge_hosts`` (one more
    host runs the watcher): what a LocalSwarm offers ChaosRun (children, child, log_text,
    kill, restart, root), with static peers on 10.77.x.i:4001 and no mDNS."""

    def __init__(self, root: Path, net: Any, **kw: Any) -> None:
        from swarm_harness import LocalSwarm

        self.local = LocalSwarm(root, **kw)  # its config, children (names, keys, dirs), env
        self.root = root
        self.net = net
        self.children = self.local.children
        self.cfg = self.local.cfg
        self.hosts = {c.name: net.hosts[i] for i, c in enumerate(self.children)}
        assert len(net.hosts) > len(self.children), "one host for the watcher"
        self.watcher_host = net.hosts[len(self.children)]

    def addr(self, c: Any) -> str:
        return f"/ip4/{self.hosts[c.name].ip}/tcp/{AGENT_PORT}/p2p/{c.peer_id}"

    def __enter__(self) -> "NetnsSwarm":
        for c in self.children:
            self.start_child(c)
        return self

    def __exit__(self, *exc: object) -> None:
        from agent.demo import stop

        stop(self.children)

    def start_child(self, c: Any) -> None:
        from agent.demo import child_env

        idx = int(c.name.rsplit("-", 1)[1]) - 1
        env = {**child_env(self.cfg, c, self.children, idx),
               "SWARM_LISTEN_HOST": self.hosts[c.name].ip, "SWARM_LISTEN_PORT": str(AGENT_PORT),
               "SWARM_PEERS": ",".join(self.addr(o) for o in self.children if o is not c),
               "SWARM_WEB_PORT": "0", **self.local.agent_env.get(c.name, {})}
        with open(self.root / "logs" / f"{c.name}.log", "ab") as fh:
            c.proc = self.net.popen(self.hosts[c.name].ns, [sys.executable, "-m", "agent", "run"],
                                    env=env, stdout=fh, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL)

    def child(self, name: str) -> Any:
        return self.local.child(name)

    def log_text(self, name: str) -> str:
        return self.local.log_text(name)

    def kill(self, name: str) -> None:
        self.local.kill(name)

    def restart(self, name: str) -> None:
        self.start_child(self.child(name))

    def watcher(self) -> "WatcherRun":
        return WatcherRun(self, self.root / "driver")


class WatcherRun:
    """The driver as a process in the watcher's namespace (``python -m support.chaos
    watch``): it waits for the agents, posts the goal and reports Watch snapshots as JSON
    lines; ChaosRun uses it like a DriverRun (``rt`` is None: use ``ChaosRun.snapshot``)."""

    rt = None

    def __init__(self, sw: NetnsSwarm, data_dir: Path) -> None:
        self.sw = sw
        self.data_dir = data_dir
        self.out = sw.root / "watcher.jsonl"
        self.proc: subprocess.Popen | None = None
        self.latest: dict[str, Any] = {}
        self._tail = LogTail(self.out)
        self._ready: list[Any] = []
        self._title = ""

    async def start(self, nursery: trio.Nursery) -> None:
        pass  # started by post_goal, which knows the title and whom to wait for

    async def until_ready(self, children: list[Any], timeout: float) -> None:
        self._ready = [c for c in children if c.role != "observer"]  # observers never announce
        self._timeout = timeout

    async def post_goal(self, title: str) -> str:
        from agent.demo import issue_credential_file
        from swarm_harness import LocalSwarm

        sw = self.sw
        issue_credential_file(sw.cfg, self.data_dir, LocalSwarm.TEST_ROLES)  # the watcher is a member
        argv = [sys.executable, "-m", "support.chaos", "watch", "--data", str(self.data_dir),
                "--authority", sw.cfg.authority_id or "",
                "--out", str(self.out), "--title", title, "--key", sw.cfg.swarm_key,
                "--peers", ",".join(sw.addr(c) for c in sw.children),
                "--ready", ",".join(c.peer_id for c in self._ready),
                "--electorate", ",".join(c.peer_id for c in sw.children if c.role == "scorer"),
                "--ready-timeout", str(self._timeout),
                "--plan", json.dumps({"scorers": sw.cfg.scorers, "max_depth": sw.cfg.max_depth,
                                      "max_children": sw.cfg.max_children,
                                      "max_rounds": sw.cfg.max_rounds})]
        with open(sw.root / "logs" / "watcher.log", "ab") as fh:
            self.proc = sw.net.popen(sw.watcher_host.ns, argv, stdout=fh, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": os.pathsep.join(
                                         str(p) for p in Path(__file__).resolve().parents[1:3])})
        log = self.sw.root / "logs" / "watcher.log"
        got = await until(lambda: self._poll().get("goal") or (self.proc.poll() is not None and "exit"),
                          self._timeout + 30, "the watcher to post the goal",
                          lambda: log.read_text(errors="replace")[-3000:])
        assert got != "exit", log.read_text(errors="replace")[-3000:]
        return got

    def _poll(self) -> dict[str, Any]:
        recs = self._tail.read()
        if recs:
            self.latest = recs[-1]
        return self.latest

    async def follow(self, watch: Watch) -> None:
        while True:
            snap = self._poll()
            if snap:
                watch.counted = dict(snap.get("counted", {}))
                watch.changes = list(snap.get("changes", []))
                if snap.get("done") and watch.done_at is None:
                    watch.done_at = time.monotonic()
            await trio.sleep(0.2)

    async def stop(self) -> None:
        assert self.proc is not None
        self.proc.terminate()
        with trio.fail_after(20):
            while self.proc.poll() is None:
                await trio.sleep(0.1)
        assert self.proc.returncode == 0, f"the watcher exited with {self.proc.returncode}"


async def _watch_main(args: Any) -> None:
    """The watcher process: a runtime that waits for the agents, posts the goal, and writes a
    Watch snapshot line whenever its log grows; SIGTERM stops it."""
    import signal as _signal

    from agent.goals import plan_params
    from agent.logging import configure_logging
    from agent.drivers.real.runtime import open_runtime
    from agent.settings import load_settings

    configure_logging("json", "info")
    plan = json.loads(args.plan)
    settings = load_settings(swarm="demo", listen_host="0.0.0.0", listen_port=0, mdns=False,
                             peers=args.peers.split(","), sync_interval=2, reconnect_interval=1,
                             key=args.key, key_file=None, authority=args.authority or None,
                             credential_file=None, credentials_dir=None, identity_file=None, **plan)
    rt = open_runtime(settings, "submitter", data_dir=Path(args.data))
    watch = Watch()
    out = open(args.out, "ab")

    def emit(obj: dict[str, Any]) -> None:
        out.write(orjson.dumps({**obj, "t": time.time()}) + b"\n")
        out.flush()

    async with trio.open_nursery() as nursery:
        await nursery.start(rt.run)

        async def until_signal() -> None:
            with trio.open_signal_receiver(_signal.SIGTERM, _signal.SIGINT) as signals:
                async for _ in signals:
                    nursery.cancel_scope.cancel()
                    return

        nursery.start_soon(until_signal)
        want = [p for p in args.ready.split(",") if p]
        with trio.fail_after(float(args.ready_timeout)):
            while not all(rt.plan.roles.get(p) for p in want):
                await trio.sleep(0.2)
        goal = await rt.publish(Goal(title=args.title, params=plan_params(settings, args.electorate.split(","))))
        watch.goal_id = goal.id
        last = None
        while True:
            watch.update(rt)
            snap = watch.snapshot(rt)
            if snap != last:
                emit(snap)
                last = snap
            await rt.wait_change(0.5)


def main(argv: list[str] | None = None) -> None:
    import argparse

    ap = argparse.ArgumentParser(prog="chaos.py")
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("watch")
    for opt in ("--data", "--out", "--title", "--key", "--peers", "--ready", "--electorate",
                "--plan", "--ready-timeout"):
        w.add_argument(opt, required=True)
    w.add_argument("--authority", default="")
    args = ap.parse_args(argv)
    trio.run(_watch_main, args)


__all__ = [
    "AGENT_PORT", "CRASH_MARKERS", "ChaosRun", "DriverRun", "NetnsSwarm", "WatcherRun", "LATENCY", "Recovery", "SmallDisk", "Watch", "complete_lines",
    "counted_history", "counted_now", "crash_lines", "decode_all", "fold", "in_flight",
    "log_records", "published_ids", "summarize", "until",
]


if __name__ == "__main__":
    main()
