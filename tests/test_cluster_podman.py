"""The Compose cluster for real, under podman, on a host without Docker or a registry.

Builds the project's image from the unchanged Dockerfile (on the local Debian base that
scripts/containers/base-image.sh tags as python:3.11-slim), brings docker-compose.yml up with
podman-compose plus a small override written here (scripted LLM; ollama and grafana left out,
their images cannot be had; Debian's Prometheus; an `internal: true` network so nothing leaves
the machine), then:

  1. Prometheus's DNS service discovery lists one target per agent container (every replica);
  2. every agent answers its healthcheck (polled: healthchecks don't run under podman-compose);
  3. Prometheus scrapes every agent (`up == 1`), queried on a port published on 127.0.0.1;
  4. a goal is submitted; once the plan is in progress decomposer-2 is killed;
  5. `observe --once --json` is polled until the goal's root is done;
  6. every surviving agent reports the same digest and the same number of stored events.

Bounded (about 14 min, pytest-timeout 900 s) and always torn down (`down -v`, the test's own
image tag and network). Needs root, podman and podman-compose: scripts/containers/setup.sh.
Run: .venv/bin/python -m pytest -m containers tests/test_cluster_podman.py -s
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CTR = ROOT / "scripts" / "containers"
VENV_PC = ROOT / ".venv" / "bin" / "podman-compose"
PODMAN_COMPOSE = shutil.which("podman-compose") or (str(VENV_PC) if VENV_PC.exists() else None)
IMAGE = "localhost/swarm-planner:cluster-test"
PROM_IMAGE = "localhost/swarm-prometheus:latest"
PROJECT = f"swarmtest{os.getpid()}"
AGENT_SERVICES = ["decomposer-1", "decomposer-2", "decomposer-3", "scorer", "executor", "observer"]
SCORERS, EXECUTORS = 3, 2
GOAL = "Plan a two-week trip to Japan"
BUDGET = 14 * 60  # seconds for the whole scenario; teardown comes on top
HOST_CA = "/etc/ssl/certs/ca-certificates.crt"

_why_skip = None
if os.geteuid() != 0:
    _why_skip = "needs root: rootful podman with CNI networking (scripts/containers/setup.sh)"
elif shutil.which("podman") is None:
    _why_skip = "podman not installed (run scripts/containers/setup.sh)"
elif PODMAN_COMPOSE is None:
    _why_skip = "podman-compose not installed (run scripts/containers/setup.sh)"

pytestmark = [
    pytest.mark.containers,
    pytest.mark.slow,
    pytest.mark.skipif(_why_skip is not None, reason=_why_skip or ""),
    pytest.mark.timeout(900),
]

_spec = importlib.util.spec_from_file_location("swarm_chaos", ROOT / "mk" / "chaos.py")
chaos = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(chaos)  # type: ignore[union-attr]


def _set_env(mp: pytest.MonkeyPatch, tmp: Path) -> None:
    """Engine settings of scripts/containers, but with the netavark network backend: podman 4.3's
    CNI dnsname plugin refuses internal networks ("dnsname and internal networks are
    incompatible"), so on an `internal: true` network service names (Prometheus's DNS-SD) would
    not resolve. aardvark-dns does serve internal networks (it may stall for a while after a
    container stops, which only delays Prometheus's view of the killed decomposer)."""
    conf = (CTR / "containers.conf").read_text()
    conf = conf.replace('network_backend = "cni"', 'network_backend = "netavark"')
    assert 'network_backend = "netavark"' in conf
    (tmp / "containers.conf").write_text(conf)
    mp.setenv("CONTAINERS_CONF", str(tmp / "containers.conf"))
    mp.setenv("CONTAINERS_REGISTRIES_CONF", str(CTR / "registries.conf"))
    mp.setenv("SCALE_SCORERS", str(SCORERS))
    mp.setenv("SCALE_EXECUTORS", str(EXECUTORS))
    mp.setenv("SWARM_IMAGE", IMAGE)
    for k in ("SWARM_QUORUM", "SWARM_PEERS", "SWARM_LLM", "COMPOSE_PROJECT_NAME"):
        mp.delenv(k, raising=False)


def run(cmd: list[str], timeout: float = 120, check: bool = True,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                       env=None if env is None else {**os.environ, **env})
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} -> {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


OVERRIDE = """\
# written by tests/test_cluster_podman.py
services:
  ollama: !reset
  ollama-pull: !reset
  grafana: !reset
  prometheus:
    image: {prom_image}
    # a port cannot be published from an internal network: Prometheus alone also joins a
    # test-only bridge that carries its published port (127.0.0.1 only)
    networks: !override [swarm, hostport]
    ports: !override ["127.0.0.1:{prom_port}:9090"]
{agents}
networks:
  swarm:
    internal: true
  hostport:
    driver: bridge
"""
AGENT_OVERRIDE = """\
  {name}:
    image: {image}
    depends_on: !reset {{}}
    environment:
      SWARM_LLM: scripted
      SWARM_SWARM: {project}
"""


class Cluster:
    def __init__(self, tmp: Path):
        self.prom_port = free_port()
        agents = "".join(AGENT_OVERRIDE.format(name=n, image=IMAGE, project=PROJECT)
                         for n in AGENT_SERVICES)
        # no host port for the observer (a user's cluster may hold 9101)
        agents += "    ports: !reset []\n"  # appended to the last block: observer
        assert AGENT_SERVICES[-1] == "observer"
        self.override = tmp / "compose.test.yml"
        self.override.write_text(OVERRIDE.format(prom_image=PROM_IMAGE, prom_port=self.prom_port,
                                                 agents=agents))
        self.compose = [PODMAN_COMPOSE, "-p", PROJECT, "-f", str(ROOT / "docker-compose.yml"),
                        "-f", str(self.override)]
        self.log: list[str] = []
        self.t0 = time.monotonic()

    def step(self, msg: str) -> None:
        line = f"[{time.monotonic() - self.t0:6.1f}s] {msg}"
        self.log.append(line)
        print(line, flush=True)

    def left(self) -> float:
        return BUDGET - (time.monotonic() - self.t0)

    def containers(self) -> list[dict]:
        r = run(["podman", "ps", "-a", "--format", "json",
                 "--filter", f"label=io.podman.compose.project={PROJECT}"])
        return json.loads(r.stdout or "[]")

    def agent_containers(self, running_only: bool = True) -> dict[str, str]:
        """container name -> service, for agent services."""
        out = {}
        for c in self.containers():
            svc = c.get("Labels", {}).get("com.docker.compose.service")
            if svc in AGENT_SERVICES and (not running_only or c.get("State") == "running"):
                out[c["Names"][0]] = svc
        return out

    def logs(self, tail: int = 15) -> str:
        parts = []
        for c in self.containers():
            name = c["Names"][0]
            r = run(["podman", "logs", "--tail", str(tail), name], check=False)
            parts.append(f"--- {name} ({c.get('State')}, exit {c.get('ExitCode')})\n"
                         + (r.stdout + r.stderr)[-1500:])
        return "\n".join(parts)

    def fail(self, what: str) -> None:
        pytest.fail(f"{what}\nprogress:\n" + "\n".join(self.log) + "\n" + self.logs(), pytrace=False)

    def prom(self, path: str, **params) -> dict:
        url = f"http://127.0.0.1:{self.prom_port}{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                return json.loads(r.read())
        except OSError:
            # fallback: ask from inside the Prometheus container (its image has python3)
            code = f"import urllib.request,sys; sys.stdout.write(urllib.request.urlopen({url.replace(str(self.prom_port), '9090')!r}, timeout=5).read().decode())"
            name = next(c["Names"][0] for c in self.containers()
                        if c["Labels"].get("com.docker.compose.service") == "prometheus")
            r = run(["podman", "exec", name, "python3", "-c", code], check=False, timeout=30)
            if r.returncode != 0:
                raise OSError(f"Prometheus API unreachable: {r.stderr[-300:]}")
            self.prom_via_exec = True
            return json.loads(r.stdout)

    def poll(self, what: str, fn, timeout: float, interval: float = 3.0):
        """Call fn until it returns a truthy value; fail with the last result after timeout."""
        deadline = time.monotonic() + min(timeout, max(self.left(), 1))
        last = None
        while time.monotonic() < deadline:
            try:
                last = fn()
                if last and not isinstance(last, str):
                    return last
            except (OSError, ValueError, KeyError, RuntimeError, StopIteration,
                    subprocess.TimeoutExpired) as exc:
                last = f"{type(exc).__name__}: {exc}"
            time.sleep(interval)
        self.fail(f"{what}: not reached in {timeout:.0f}s; last: {str(last)[-1500:]}")

    def teardown(self) -> None:
        run(self.compose + ["down", "-v", "-t", "5"], check=False, timeout=300)
        for net in ("swarm", "hostport"):
            run(["podman", "network", "rm", "-f", f"{PROJECT}_{net}"], check=False)
        run(["podman", "rmi", "-f", IMAGE], check=False)


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    _set_env(monkeypatch, tmp_path)
    c = Cluster(tmp_path)
    try:
        yield c
    finally:
        t = time.monotonic()
        c.teardown()
        print(f"teardown {time.monotonic() - t:.1f}s; steps:\n" + "\n".join(c.log), flush=True)


def test_cluster_survives_losing_a_decomposer(cluster: Cluster):
    c = cluster
    # --- images: the local base (cached), Debian's Prometheus, the project's image -------------
    # Builds use the CNI settings of scripts/containers (pip reaches PyPI from the build
    # container there; with netavark it did not); images are shared by both backends.
    cni = {"CONTAINERS_CONF": str(CTR / "containers.conf")}
    for script in ("base-image.sh", "prometheus-image.sh"):
        run(["bash", str(CTR / script)], timeout=600, env=cni)
    c.step("base and Prometheus images ready")
    run(["podman", "build", "--format", "docker", "-v", f"{HOST_CA}:/etc/ssl/host-ca.crt:ro",
         "--build-arg", "PIP_CERT=/etc/ssl/host-ca.crt", "-t", IMAGE, str(ROOT)], timeout=600,
        env=cni)
    c.step(f"built {IMAGE} from the unchanged Dockerfile")

    # --- up ----------------------------------------------------------------------------------
    run(c.compose + ["up", "-d"], timeout=300)
    expected = 3 + SCORERS + EXECUTORS + 1
    agents = c.agent_containers(running_only=False)
    assert len(agents) == expected, f"{len(agents)} agent containers, want {expected}: {agents}"
    c.step(f"up: {expected} agent containers + prometheus on an internal network")

    # --- 1. DNS-SD finds every replica -----------------------------------------------------------
    ips = {}
    for name in agents:
        r = run(["podman", "inspect", name, "--format",
                 "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}"])
        ips[name] = r.stdout.strip()

    def discovered():
        ts = c.prom("/api/v1/targets")["data"]["activeTargets"]
        got = {t["labels"]["instance"] for t in ts if t["labels"].get("job") == "swarm-agents"}
        want = {f"{ip}:9100" for ip in ips.values()}
        return got == want or f"targets {sorted(got)} != containers {sorted(want)}"

    c.poll("Prometheus DNS-SD lists every agent replica", discovered, 60)
    c.step(f"Prometheus discovered all {expected} agent targets by DNS-SD"
           + (" (API via podman exec: published port unreachable)" if getattr(c, "prom_via_exec", False) else ""))

    # --- 2. agents up (healthcheck run by hand) -----------------------------------------------
    def healthy():
        bad = []
        for name in c.agent_containers(running_only=False):
            r = run(["podman", "healthcheck", "run", name], check=False, timeout=30)
            if r.returncode != 0:
                bad.append(f"{name}: {(r.stdout + r.stderr).strip()[-100:]}")
        return not bad or "unhealthy: " + "; ".join(bad)

    c.poll("every agent answers its healthcheck (/metrics on 9100)", healthy, 180, interval=5)
    c.step("all agents healthy")

    # --- 3. Prometheus scrapes every agent --------------------------------------------------------
    def all_up():
        res = c.prom("/api/v1/query", query='up{job="swarm-agents"}')["data"]["result"]
        up = {r["metric"]["instance"]: r["value"][1] for r in res}
        return (len(up) == expected and set(up.values()) == {"1"}) or f"up={up}"

    c.poll("Prometheus scrapes every agent (up == 1)", all_up, 60)
    c.step("Prometheus: up == 1 for every agent replica")

    # --- 4. submit, kill decomposer-2 mid-plan ------------------------------------------------
    chaos.submit(c.compose, GOAL)
    c.step("goal submitted")

    def in_progress():
        node = chaos.find_goal(chaos.observe(c.compose), GOAL)
        return chaos.in_progress(node) or f"not in progress: {node and chaos.summary(node)}"

    c.poll("plan in progress", in_progress, 180)
    run(c.compose + ["kill", "decomposer-2"])
    killed = [n for n, s in c.agent_containers(running_only=False).items() if s == "decomposer-2"]
    assert killed and all(n not in c.agent_containers() for n in killed)
    c.step("plan in progress: killed decomposer-2")

    # --- 5. the root gets done without it ---------------------------------------------------
    seen = {}

    def root_done():
        tree = chaos.observe(c.compose)
        node = chaos.find_goal(tree, GOAL)
        line = chaos.summary(node) if node else "goal not seen"
        if seen.get("line") != line:
            c.step(line)
            seen["line"] = line
        return (node is not None and node.get("state") == "done") or line

    c.poll("root done", root_done, max(c.left() - 120, 60), interval=5)
    c.step("root done")

    # --- 6. every surviving agent agrees ----------------------------------------------------------
    def digests():
        # each agent's own view: fold the event log in its data dir (read-only, while it runs)
        out = {}
        for name in c.agent_containers():
            r = run(["podman", "exec", name, "sh", "-c",
                     'python -m agent replay "$SWARM_DATA_DIR/events.jsonl" --json'], timeout=120)
            out[name] = json.loads(r.stdout[r.stdout.index("{"):])["digest"]
        stored = c.prom("/api/v1/query", query='swarm_events_stored')["data"]["result"]
        sizes = {r["metric"]["instance"]: r["value"][1] for r in stored}
        ok = len(set(out.values())) == 1 and len(set(sizes.values())) == 1 \
            and len(sizes) == len(out)
        return ok or f"digests {out}; events stored {sizes}"

    c.poll("every agent has the same digest and event count", digests, 120, interval=5)
    c.step("all agents report one digest")
