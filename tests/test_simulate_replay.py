"""simulate -> replay round trips, and the protocol features the simulator must exercise."""

import random
import subprocess
import sys

import orjson

from agent.core.plan import fold
from agent.logfile import read_log, write_log
from agent.sim import SimConfig, simulate


def run_cli(*args, check=True):
    p = subprocess.run([sys.executable, "-m", "agent", *args], capture_output=True, text=True, timeout=300)
    if check and p.returncode != 0:
        raise AssertionError(f"exit {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


def test_simulate_then_replay_same_digest_also_shuffled(tmp_path):
    log = tmp_path / "sim.jsonl"
    p = run_cli("simulate", "--seed", "3", "--out", str(log))
    assert "done:" in p.stderr
    sim_digest = p.stderr.strip().split("digest ")[-1]
    out = orjson.loads(run_cli("replay", str(log), "--json").stdout)
    assert out["digest"] == sim_digest
    assert out["goals"][0]["state"] == "done"
    lines = log.read_bytes().splitlines()
    random.Random(1).shuffle(lines)
    shuffled = tmp_path / "shuffled.jsonl"
    shuffled.write_bytes(b"\n".join(lines + lines[:10]) + b"\n")  # shuffled, with duplicates
    assert orjson.loads(run_cli("replay", str(shuffled), "--json").stdout)["digest"] == sim_digest


def test_simulation_is_deterministic():
    a, sa, pa = simulate(SimConfig(seed=11))
    b, sb, pb = simulate(SimConfig(seed=11))
    assert [e.raw for e in a] == [e.raw for e in b]
    assert pa.tree().digest == pb.tree().digest


def test_features_across_seeds():
    """Competing splits, a refinement, a second round, collisions and a lease takeover."""
    seen = dict(competing=0, refinement=0, second_round=0, collisions=0, takeover=0, done=0)
    for seed in range(12):
        log, stats, plan = simulate(SimConfig(seed=seed))
        tree = plan.tree()
        seen["done"] += stats.done
        seen["competing"] += any(len(n.proposals) > 1 for n in tree.walk())
        seen["refinement"] += any(p.refines for n in tree.walk() for p in n.proposals)
        seen["second_round"] += any(n.accepted_round and n.accepted_round >= 2 for n in tree.walk())
        seen["collisions"] += stats.collisions > 0
        seen["takeover"] += stats.takeovers > 0
        # the log alone reproduces the observer's view
        assert fold(log).tree(plan.latest_wall()).digest == plan.tree(plan.latest_wall()).digest
    assert seen["done"] == 12, seen
    for k, v in seen.items():
        assert v > 0, f"no seed produced {k}: {seen}"


def test_replay_reports_bad_lines_and_skips_them(tmp_path):
    log, _, plan = simulate(SimConfig(seed=2, max_depth=1))
    path = tmp_path / "log.jsonl"
    write_log(path, log)
    lines = path.read_bytes().splitlines()
    tampered = orjson.loads(lines[5])
    tampered["hlc"][0] += 1
    lines[5] = orjson.dumps(tampered)
    lines.insert(2, b"{not json")
    path.write_bytes(b"\n".join(lines) + b"\n")
    p = run_cli("replay", str(path), "--json")
    assert ":3: skipped: malformed" in p.stderr
    assert ":7: skipped: bad_signature" in p.stderr
    events, bad = read_log(path)
    assert [b.line for b in bad] == [3, 7]


def test_replay_unreadable_file_is_a_clear_error(tmp_path):
    p = run_cli("replay", str(tmp_path / "missing.jsonl"), check=False)
    assert p.returncode == 2 and "cannot read" in p.stderr


def test_demo_fails_with_a_clear_reason_when_no_llm_is_reachable(tmp_path):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**__import__("os").environ, "SWARM_OLLAMA_HOST": f"http://127.0.0.1:{port}"}
    p = subprocess.run([sys.executable, "-m", "agent", "demo", "--llm", "ollama", "--timeout", "12",
                        "--decomposers", "1", "--scorers", "1", "--executors", "1", "--observers", "0",
                        "--out-dir", str(tmp_path)], capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 3, p.stdout[-2000:]
    assert "never became ready" in p.stdout and "unreachable" in p.stdout
