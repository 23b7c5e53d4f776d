"""docker-compose.yml as data: services, the anchor-shared agent definition, environment,
healthchecks, dependencies, the single network, mounts and variable defaults."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = ROOT / "docker-compose.yml"
AGENTS = ["decomposer-1", "decomposer-2", "decomposer-3", "scorer", "executor", "observer"]
LLM_ROLES = ["decomposer-1", "decomposer-2", "decomposer-3", "scorer", "executor"]
_VAR = re.compile(r"\$\$|\$\{(\w+)(?:(:?[-?])([^}]*))?\}|\$(\w+)")


def interpolate(value, env: dict[str, str]):
    """Compose-style variable substitution: ${V}, ${V:-default}, ${V-default}, $$."""
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def sub(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1) or m.group(4)
        op, default = m.group(2), m.group(3) or ""
        if op == ":-":
            return env.get(name) or default
        if op == "-":
            return env.get(name, default)
        return env.get(name, "")

    return _VAR.sub(sub, value)


def load(env: dict[str, str] | None = None) -> dict:
    return interpolate(yaml.safe_load(COMPOSE.read_text()), env or {})


@pytest.fixture(scope="module")
def raw() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def test_services(raw):
    services = raw["services"]
    images = load()["services"]
    for name in AGENTS + ["ollama", "ollama-pull", "prometheus", "grafana"]:
        assert name in services, f"missing service {name}"
    assert "decomposer-2" in services  # literal name: `make chaos` kills it
    assert images["ollama"]["image"].startswith("ollama/ollama:")
    assert images["ollama-pull"]["image"] == images["ollama"]["image"]
    assert images["prometheus"]["image"].startswith("prom/prometheus:")
    assert images["grafana"]["image"].startswith("grafana/grafana:")


def test_agents_share_one_anchored_definition():
    """Every agent service merges (<<) the very node anchored as x-agent."""
    root = yaml.compose(COMPOSE.read_text())
    top = {k.value: v for k, v in root.value}
    anchored = top["x-agent"]
    services = {k.value: v for k, v in top["services"].value}
    for name in AGENTS:
        merges = [v for k, v in services[name].value if k.tag == "tag:yaml.org,2002:merge"]
        assert merges and merges[0] is anchored, f"{name} does not use <<: *agent"


def test_agent_definition(raw):
    services = raw["services"]
    images = {services[n]["image"] for n in AGENTS}
    assert len(images) == 1, "one image for every role"
    roles = {n: services[n]["command"] for n in AGENTS}
    for n in AGENTS:
        role = n.split("-")[0]
        assert roles[n] == ["run", "--role", role], (n, roles[n])
        assert services[n]["build"]["context"] == "."
        assert "container_name" not in services[n]
    strategies = [services[f"decomposer-{i}"]["environment"]["SWARM_STRATEGY"] for i in (1, 2, 3)]
    assert len(set(strategies)) == 3 and all(strategies), strategies


def test_agent_environment_defaults():
    services = load()["services"]
    for n in AGENTS:
        env = services[n]["environment"]
        assert env["SWARM_METRICS_PORT"] == "9100", n
        assert env["SWARM_LOG_FORMAT"] == "json", n
        assert env["SWARM_MDNS"] == "true", n
        assert env["SWARM_SCORERS"] == "3", n
        assert env["SWARM_OLLAMA_HOST"] == "http://ollama:11434", n
        assert env["SWARM_OLLAMA_MODEL"] == "llama3.2:1b", n
        assert env["SWARM_LLM"] == "ollama", n
        # passed through from the caller when set; never an empty string (invalid integer)
        assert "SWARM_QUORUM" in env and env["SWARM_QUORUM"] is None, n
        assert "SWARM_SCRIPTED_LATENCY" in env and env["SWARM_SCRIPTED_LATENCY"] is None, n  # make chaos' advice
        # the private-network key: passed through from the caller or .env, unset otherwise
        assert "SWARM_KEY" in env and env["SWARM_KEY"] is None, n
        assert env["SWARM_LLM_TIMEOUT"] == "600", n
    assert services["scorer"]["deploy"] == {"mode": "replicated", "replicas": "3"}
    assert services["executor"]["deploy"] == {"mode": "replicated", "replicas": "2"}
    assert services["ollama-pull"]["command"] == ["pull", "llama3.2:1b"]


def test_scorer_count_follows_scale():
    services = load({"SCALE_SCORERS": "5", "SCALE_EXECUTORS": "4", "OLLAMA_MODEL": "qwen2.5:0.5b"})["services"]
    assert services["scorer"]["deploy"]["replicas"] == "5"
    assert services["executor"]["deploy"]["replicas"] == "4"
    for n in AGENTS:
        assert services[n]["environment"]["SWARM_SCORERS"] == "5", n
        assert services[n]["environment"]["SWARM_OLLAMA_MODEL"] == "qwen2.5:0.5b", n
    assert services["ollama-pull"]["command"] == ["pull", "qwen2.5:0.5b"]


@pytest.mark.parametrize("scale,quorum_env,expected", [("3", None, 2), ("5", None, 3), ("5", "4", 4)])
def test_agent_settings_load_from_compose_env(monkeypatch, tmp_path, scale, quorum_env, expected):
    """The environment a container gets validates, and the quorum follows the scorer count."""
    from agent.settings import load_settings

    caller = {"SCALE_SCORERS": scale}
    env = load(caller)["services"]["scorer"]["environment"]
    for k in [k for k in os.environ if k.startswith("SWARM_")]:
        monkeypatch.delenv(k)
    for k, v in env.items():
        if v is None:  # Compose passes the caller's value through, or leaves it unset
            v = {"SWARM_QUORUM": quorum_env}.get(k)
        if v is not None:
            monkeypatch.setenv(k, v)
    # the volume's mount point, moved under tmp_path: /data/scorer-{slot} -> tmp/data/scorer-1
    monkeypatch.setenv("SWARM_DATA_DIR", str(tmp_path) + env["SWARM_DATA_DIR"])
    s = load_settings(_env_file=None)
    assert s.scorers == int(scale)
    assert s.quorum_for(int(scale)) == expected
    assert s.data_dir == tmp_path / "data" / "scorer-1"


def test_every_agent_keeps_its_identity_in_one_volume(raw):
    """One named volume at /data; a directory per agent that survives re-creation: the named
    services by a fixed hostname, the scaled replicas by a slot (their hostname is the container
    id, new on every re-creation, under Docker Compose and podman-compose alike)."""
    services = load()["services"]
    assert "agent-data" in raw["volumes"]
    templates = {}
    for n in AGENTS:
        s = services[n]
        # (and, read-only, its slots' credentials: test_credentials_are_mounted_read_only_...)
        assert [v for v in s["volumes"] if not v.endswith(":ro")] == ["agent-data:/data"], n
        data_dir = s["environment"]["SWARM_DATA_DIR"]
        assert data_dir.startswith("/data/"), n
        if "deploy" in s:  # scaled: replicas must never share a hostname-named directory
            assert "hostname" not in s, f"{n}: every replica would get the same hostname"
            assert data_dir == f"/data/{n}-{{slot}}", n
            templates[n] = data_dir
        else:
            assert s["hostname"] == n, n
            assert data_dir == "/data/{hostname}", n
            templates[n] = data_dir.replace("{hostname}", s["hostname"])
    assert len(set(templates.values())) == len(AGENTS), templates


def test_ollama_serves_every_agent_without_timeouts():
    """Parallel slots, a bounded queue far above what the agents can have in flight, the model
    kept loaded; agents' request timeout covers waiting in that queue."""
    services = load()["services"]
    env = services["ollama"]["environment"]
    assert env["OLLAMA_NUM_PARALLEL"] == "4"
    assert env["OLLAMA_KEEP_ALIVE"] == "-1"
    assert env["OLLAMA_MAX_LOADED_MODELS"] == "1"
    llm_agents = sum(int(services[n].get("deploy", {}).get("replicas", 1)) for n in LLM_ROLES)
    assert int(env["OLLAMA_MAX_QUEUE"]) >= 4 * llm_agents  # one request in flight per agent
    tuned = load({"OLLAMA_NUM_PARALLEL": "8", "OLLAMA_MAX_QUEUE": "512", "OLLAMA_KEEP_ALIVE": "24h",
                  "SWARM_LLM_TIMEOUT": "900"})["services"]
    assert tuned["ollama"]["environment"]["OLLAMA_NUM_PARALLEL"] == "8"
    assert tuned["ollama"]["environment"]["OLLAMA_MAX_QUEUE"] == "512"
    assert tuned["ollama"]["environment"]["OLLAMA_KEEP_ALIVE"] == "24h"
    assert tuned["scorer"]["environment"]["SWARM_LLM_TIMEOUT"] == "900"


def test_healthchecks(raw):
    services = raw["services"]
    for n in AGENTS + ["ollama", "prometheus", "grafana"]:
        hc = services[n].get("healthcheck")
        assert hc and isinstance(hc["test"], list) and hc["test"][0] in ("CMD", "CMD-SHELL"), n
        assert hc.get("interval") and hc.get("retries"), n
    agent_hc = " ".join(services["scorer"]["healthcheck"]["test"])
    assert "127.0.0.1:9100/metrics" in agent_hc


def test_depends_on(raw):
    services = raw["services"]
    for n in LLM_ROLES:
        dep = services[n]["depends_on"]
        assert dep["ollama-pull"]["condition"] == "service_completed_successfully", n
    assert services["ollama-pull"]["depends_on"]["ollama"]["condition"] == "service_healthy"
    assert "ollama-pull" not in (services["observer"].get("depends_on") or {})
    assert "prometheus" in services["grafana"]["depends_on"]
    for n, s in services.items():
        for dep in s.get("depends_on") or {}:
            assert dep in services, f"{n} depends on unknown {dep}"


def test_single_network(raw):
    nets = raw["networks"]
    assert list(nets) == ["swarm"] and nets["swarm"].get("driver", "bridge") == "bridge"
    for n, s in raw["services"].items():
        assert s.get("networks") == ["swarm"], n
        assert s.get("network_mode") is None, n


def test_published_ports_are_loopback_only_and_not_on_scaled_services():
    services = load()["services"]
    for n, s in services.items():
        for p in s.get("ports", []):
            assert str(p).startswith("127.0.0.1:"), f"{n} publishes {p} on every interface"
        if "deploy" in s:
            assert not s.get("ports"), f"{n} is scaled: a fixed host port would clash"
    assert services["observer"]["ports"] == ["127.0.0.1:9101:9100", "127.0.0.1:8080:8080"]  # metrics, web page
    assert services["observer"]["environment"]["SWARM_WEB_HOST"] == "0.0.0.0"  # so it needs a token
    assert services["prometheus"]["ports"] == ["127.0.0.1:9090:9090"]


def test_prometheus_and_grafana_mounts(raw):
    prom = raw["services"]["prometheus"]
    assert "./config/prometheus.yml:/etc/prometheus/prometheus.yml:ro" in prom["volumes"]
    assert "--config.file=/etc/prometheus/prometheus.yml" in prom["command"]
    graf = raw["services"]["grafana"]
    assert "./grafana/provisioning:/etc/grafana/provisioning:ro" in graf["volumes"]
    assert any(v.startswith("./grafana/dashboards:") for v in graf["volumes"])
    for v in prom["volumes"] + graf["volumes"]:
        src = v.split(":")[0]
        if src.startswith("./"):
            assert (ROOT / src).exists(), f"mounted {src} does not exist"
        else:
            assert src in raw["volumes"], f"named volume {src} not declared"


def test_example_env_lists_every_setting():
    from agent.settings import Settings

    text = (ROOT / "config" / "example.env").read_text()
    listed = set(re.findall(r"^#?\s*(SWARM_[A-Z0-9_]+)=", text, re.M))
    fields = {f"SWARM_{name.upper()}" for name in Settings.model_fields}
    assert fields <= listed, f"config/example.env lacks {sorted(fields - listed)}"
    # SWARM_KEY: passed by Compose to every agent; read by agents with private-network support
    assert listed <= fields | {"SWARM_IMAGE", "SWARM_KEY"}, f"unknown settings {sorted(listed - fields)}"


def _tool_config(cmd: list[str], env: dict[str, str]) -> dict:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("SCALE_", "SWARM_", "OLLAMA_"))}
    full.update(env)
    r = subprocess.run(cmd, cwd=ROOT, env=full, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout
    return json.loads(out) if out.lstrip().startswith("{") else yaml.safe_load(out)


def _compose_cli() -> list[str] | None:
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"],
                                                 capture_output=True).returncode == 0:
        return ["docker", "compose", "-f", str(COMPOSE), "config"]
    venv_pc = ROOT / ".venv" / "bin" / "podman-compose"
    pc = shutil.which("podman-compose") or (str(venv_pc) if venv_pc.exists() else None)
    if pc and shutil.which("podman"):
        return [pc, "-f", str(COMPOSE), "config"]
    return None


@pytest.mark.skipif(_compose_cli() is None, reason="neither `docker compose` nor podman-compose installed")
def test_real_compose_tool_resolves_the_file():
    cfg = _tool_config(_compose_cli(), {"SCALE_SCORERS": "5"})
    services = cfg["services"]
    assert set(AGENTS) <= set(services)
    assert str(services["scorer"]["deploy"]["replicas"]) == "5"
    assert str(services["decomposer-2"]["environment"]["SWARM_SCORERS"]) == "5"
    assert services["decomposer-2"]["environment"]["SWARM_STRATEGY"]


# ---------------------------------------------------------------- the swarm key of `make up`
HEX64 = re.compile(r"^SWARM_KEY=([0-9a-f]{64})$", re.M)


def _swarm_key(env_file: Path, **env: str) -> subprocess.CompletedProcess:
    """`make swarm-key` (a prerequisite of `make up`) against env_file."""
    full = {k: v for k, v in os.environ.items() if k != "SWARM_KEY"}
    full.update(env)
    return subprocess.run(["make", "-s", "--no-print-directory", "swarm-key", f"ENV_FILE={env_file}"],
                          cwd=ROOT, env=full, capture_output=True, text=True, timeout=60)


def test_make_up_writes_a_swarm_key_into_env_once(tmp_path):
    up = re.search(r"^up:(.*)$", (ROOT / "mk" / "cluster.mk").read_text(), re.M)
    assert up and "swarm-key" in up.group(1).split(), "make up must create the key first"
    env_file = tmp_path / ".env"
    r = _swarm_key(env_file)
    assert r.returncode == 0, r.stderr
    keys = HEX64.findall(env_file.read_text())
    assert len(keys) == 1, env_file.read_text()
    assert env_file.stat().st_mode & 0o777 == 0o600, "the key is a secret: .env is 0600"
    # the swarm.key form other libp2p implementations read, from the stored hex
    swarm_key = f"/key/swarm/psk/1.0.0/\n/base16/\n{keys[0]}\n"
    assert len(bytes.fromhex(swarm_key.splitlines()[2])) == 32
    # a second `make up` keeps it
    r = _swarm_key(env_file)
    assert r.returncode == 0 and "using the SWARM_KEY" in r.stdout
    assert HEX64.findall(env_file.read_text()) == keys


def test_swarm_key_keeps_other_lines_and_refuses_a_bad_key(tmp_path):
    env_file = tmp_path / ".env"
    env_file.write_text("SCALE_SCORERS=5")  # no final newline
    assert _swarm_key(env_file).returncode == 0
    text = env_file.read_text()
    assert text.startswith("SCALE_SCORERS=5\n") and len(HEX64.findall(text)) == 1
    bad = tmp_path / "bad.env"
    bad.write_text("SWARM_KEY=not-a-key\n")
    r = _swarm_key(bad)
    assert r.returncode != 0 and "not 64 hex characters" in r.stderr
    assert bad.read_text() == "SWARM_KEY=not-a-key\n"
    # an empty value is an explicit open swarm: said plainly, nothing written
    open_env = tmp_path / "open.env"
    open_env.write_text("SWARM_KEY=\n")
    r = _swarm_key(open_env)
    assert r.returncode == 0 and "OPEN swarm" in r.stdout and open_env.read_text() == "SWARM_KEY=\n"


def test_an_exported_swarm_key_is_used_and_not_written(tmp_path):
    env_file = tmp_path / ".env"
    r = _swarm_key(env_file, SWARM_KEY="ab" * 32)
    assert r.returncode == 0 and "from the environment" in r.stdout
    assert not env_file.exists()
    r = _swarm_key(env_file, SWARM_KEY="xyz")
    assert r.returncode != 0 and not env_file.exists()


def test_env_is_never_committed_nor_sent_to_an_image_build():
    if shutil.which("git") and (ROOT / ".git").exists():
        r = subprocess.run(["git", "check-ignore", "-q", ".env"], cwd=ROOT)
        assert r.returncode == 0, ".env must be in .gitignore"
    patterns = [ln.strip() for ln in (ROOT / ".dockerignore").read_text().splitlines()
                if ln.strip() and not ln.startswith("#")]
    assert patterns[0] == "*", "the build context must start from nothing"
    assert not any(p.startswith("!") and ".env" in p for p in patterns)


def test_make_down_removes_every_replica():
    """podman-compose's `down` removes only the replicas the current SCALE_* names: after
    `make up SCALE_SCORERS=5`, `make down` must still remove scorer 4 and 5 (by project label)."""
    mk = (ROOT / "mk" / "cluster.mk").read_text()
    recipe = re.search(r"^down:.*\n\t(.*)$", mk, re.M)
    assert recipe and " down --remove-orphans" in recipe.group(1), recipe and recipe.group(1)


# ---------------------------------------------------------------- compose.llm.yml: the embedded model
LLM_OVERRIDE = ROOT / "compose.llm.yml"


class _Tagged(yaml.SafeLoader):
    """Reads Compose's !reset / !override tags as plain values marked by their tag."""


_Tagged.add_constructor("!reset", lambda loader, node: "!reset")
_Tagged.add_constructor("!override", lambda loader, node: ("!override", loader.construct_sequence(node)
                                                           if isinstance(node, yaml.SequenceNode)
                                                           else loader.construct_mapping(node)))


def test_the_llm_override_serves_every_llm_agent_from_the_project_image():
    cfg = interpolate(yaml.load(LLM_OVERRIDE.read_text(), Loader=_Tagged), {})
    services = cfg["services"]
    assert services["ollama"] == "!reset" and services["ollama-pull"] == "!reset"
    llm = services["llm"]
    assert llm["image"] == "swarm-planner:latest"  # the agents' image: one build, the model inside
    assert llm["build"]["args"]["LLM_MODELS"] == "qwen2.5-1.5b"
    cmd = llm["command"]
    assert cmd[0] == "serve-llm" and cmd[cmd.index("--model") + 1] == "qwen2.5-1.5b"
    assert cmd[cmd.index("--key-file") + 1] == "/llm/key" and cmd[cmd.index("--port") + 1] == "8088"
    assert "ports" not in llm, "the model server is never published on the host"
    assert "llm-key:/llm" in llm["volumes"] and "/health" in " ".join(llm["healthcheck"]["test"])
    for name in LLM_ROLES:
        svc = services[name]
        env = svc["environment"]
        assert env["SWARM_LLM"] == "openai" and env["SWARM_OPENAI_BASE_URL"] == "http://llm:8088/v1"
        assert env["SWARM_OPENAI_API_KEY_FILE"] == "/llm/key" and env["SWARM_OPENAI_MODEL"] == "qwen2.5-1.5b"
        assert "llm-key:/llm:ro" in svc["volumes"]
        assert svc["depends_on"] == ("!override", ["llm"])
        assert svc["build"]["args"]["LLM_MODELS"] == "qwen2.5-1.5b"
    small = interpolate(yaml.load(LLM_OVERRIDE.read_text(), Loader=_Tagged), {"LLM_MODEL": "smollm2-135m"})
    assert "smollm2-135m" in small["services"]["llm"]["command"]
    assert small["services"]["scorer"]["environment"]["SWARM_OPENAI_MODEL"] == "smollm2-135m"
    assert "llm-key" in cfg["volumes"]


def test_the_image_builds_the_pinned_models_before_the_code():
    text = (ROOT / "Dockerfile").read_text()
    models_stage = text[text.index("AS models"):text.index("AS build")]
    assert "ARG LLM_MODELS=" in models_stage and "python3 -m agent.llm.models install" in models_stage
    assert "COPY agent/llm/errors.py agent/llm/models.py" in models_stage  # not the whole code
    assert "COPY --from=models /opt/models /opt/models" in text and "SWARM_MODEL_DIR=/opt/models" in text
    assert "libgomp1" in text and '["optional-dependencies"]["local-llm"]' in text


@pytest.mark.skipif(_compose_cli() is None, reason="neither `docker compose` nor podman-compose installed")
def test_real_compose_tool_resolves_the_embedded_model_cluster():
    cmd = _compose_cli()
    files = ["-f", str(COMPOSE), "-f", str(LLM_OVERRIDE)]
    if "podman-compose" in cmd[0]:
        files += ["-f", str(ROOT / "scripts" / "containers" / "compose.podman.yml")]
    cmd = [cmd[0], *files, "config"] if "podman-compose" in cmd[0] else [*cmd[:2], *files, "config"]
    cfg = _tool_config(cmd, {"LLM_MODEL": "smollm2-135m"})
    services = cfg["services"]
    assert "ollama" not in services and "ollama-pull" not in services and "llm" in services
    for name in LLM_ROLES:
        env = services[name]["environment"]
        assert env["SWARM_LLM"] == "openai" and env["SWARM_OPENAI_MODEL"] == "smollm2-135m"
        assert "llm" in services[name]["depends_on"]
        assert any(str(v).startswith("llm-key:/llm") or (isinstance(v, dict) and v.get("target") == "/llm")
                   for v in services[name]["volumes"])


def test_credentials_are_mounted_read_only_per_service_and_the_authority_key_nowhere():
    """make up issues a key and a credential per service slot into .swarm/credentials/<service>/;
    each agent service mounts only its own directory, read-only; the authority key
    (.swarm/authority.key) is mounted into no service and never reaches the build context."""
    services = load()["services"]
    for n in AGENTS:
        env = services[n]["environment"]
        assert env["SWARM_CREDENTIALS_DIR"] == "/credentials", n
        assert env["SWARM_AUTHORITY"] == "", n  # from .env (make up writes it); empty: no authority
        mounts = services[n]["volumes"]
        assert "agent-data:/data" in mounts, n
        creds = [m for m in mounts if m.endswith(":/credentials:ro")]
        assert creds == [f"./.swarm/credentials/{n}:/credentials:ro"], (n, mounts)
    for name, svc in services.items():
        for m in svc.get("volumes", []):
            assert "authority" not in m and not m.startswith("./.swarm:"), (name, m)
    assert load({"SWARM_AUTHORITY": "12D3KooWabc"})["services"]["scorer"]["environment"]["SWARM_AUTHORITY"] == "12D3KooWabc"
    ignore = (ROOT / ".dockerignore").read_text().splitlines()
    assert ignore[0] == "*" or "*" in ignore  # only pyproject.toml and agent/ reach the image
    assert ".swarm/" in (ROOT / ".gitignore").read_text().splitlines()


def test_credentials_script_issues_every_slot_of_the_scale(tmp_path):
    """scripts/containers/credentials.sh with a stand-in for the container engine (it runs
    `python -m agent` here instead of in the image): an authority key made once, its id in the
    env file, a key and credential per slot of the scale, each verifiable; a second run keeps
    the keys, a larger scale adds slots."""
    import stat
    import sys

    engine = tmp_path / "engine"
    engine.write_text(f"""#!/usr/bin/env bash
# engine run --rm --network none --user 0 -v SRC:/swarm --entrypoint python IMAGE -m agent ARGS
while [ "$1" != "-v" ]; do shift; done; src=${{2%%:/swarm}}; shift 2
shift 3  # --entrypoint python IMAGE
args=("$@"); args=("${{args[@]//\\/swarm/$src}}")
exec {sys.executable} "${{args[@]}}"
""")
    engine.chmod(engine.stat().st_mode | stat.S_IEXEC)
    env_file, sdir = tmp_path / ".env", tmp_path / "swarm"
    script = ROOT / "scripts" / "containers" / "credentials.sh"
    env = {k: v for k, v in os.environ.items() if k != "SWARM_AUTHORITY"}
    env["PYTHONPATH"] = str(ROOT)

    def run(scorers: int) -> str:
        r = subprocess.run([str(script), str(env_file), str(sdir), str(engine), "img", str(scorers), "2",
                            "compose", "30"], capture_output=True, text=True, env=env, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        return r.stdout

    out = run(3)
    authority = next(ln.split("=", 1)[1] for ln in env_file.read_text().splitlines() if ln.startswith("SWARM_AUTHORITY="))
    assert oct((sdir / "authority.key").stat().st_mode & 0o777) == "0o600"
    from agent.core.membership import Membership, credential_problem
    from agent.credentials import load_credential, load_seed

    slots = sorted(p.parent.relative_to(sdir / "credentials").as_posix() for p in sdir.glob("credentials/*/*/credential.json"))
    assert slots == ["decomposer-1/decomposer-1", "decomposer-2/decomposer-2", "decomposer-3/decomposer-3",
                     "executor/executor-1", "executor/executor-2", "observer/observe", "observer/observer", "observer/submit",
                     "scorer/scorer-1", "scorer/scorer-2", "scorer/scorer-3"], out
    m = Membership(authority, "compose")
    for slot in slots:
        cred = load_credential(sdir / "credentials" / slot / "credential.json")
        assert credential_problem(cred, m) is None and cred.peer == load_seed(sdir / "credentials" / slot / "key.ed25519").peer_id
    assert load_credential(sdir / "credentials/observer/observer/credential.json").roles == ("observer", "submitter")
    assert load_credential(sdir / "credentials/observer/observe/credential.json").roles == ("observer",)
    # the one-shot tools' data dirs name their slots (agent.credentials.member_files)
    mk = (ROOT / "mk" / "cluster.mk").read_text()
    assert "SWARM_DATA_DIR=/tmp/submit observer" in mk and "SWARM_DATA_DIR=/tmp/observe " in mk
    key1 = (sdir / "credentials/scorer/scorer-1/key.ed25519").read_bytes()
    out = run(5)
    assert (sdir / "credentials/scorer/scorer-5/credential.json").exists() and "scorer/scorer-1:" in out and "(kept)" in out
    assert (sdir / "credentials/scorer/scorer-1/key.ed25519").read_bytes() == key1
    assert env_file.read_text().count("SWARM_AUTHORITY=") == 1
    # SWARM_AUTHORITY= (empty) in the env file: the swarm key alone, nothing issued
    other = tmp_path / "other.env"
    other.write_text("SWARM_AUTHORITY=\n")
    r = subprocess.run([str(script), str(other), str(tmp_path / "none"), str(engine), "img", "3", "2", "compose", "30"],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0 and "no authority" in r.stdout and not (tmp_path / "none" / "authority.key").exists()
