"""The cluster's make targets as a user types them, read with `make -n` (nothing runs): the
scale given to `make up` is remembered in the env file and used again; `make observe` takes
none of the observer's ports and asks for readable logs; `make kill`, `make down DOWN_FLAGS=-v`;
and `make up` run for real against a fake podman-compose (its systemd lines hidden).
(tests/test_cluster_podman.py runs them for real on podman.)"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def dry(*args: str, env_file: Path) -> str:
    r = subprocess.run(["make", "--no-print-directory", "-n", "-C", str(ROOT), "-o", "image",
                        "COMPOSE=compose", "ENGINE=engine", "PODMAN_LOCAL=", f"ENV_FILE={env_file}", *args],
                       capture_output=True, text=True, timeout=60,
                       env={"PATH": "/usr/bin:/bin", "HOME": "/tmp"})
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_make_up_remembers_the_scale_for_later_compose_commands(tmp_path):
    env_file = tmp_path / "cluster.env"
    out = dry("up", "SCALE_SCORERS=5", env_file=env_file)
    assert f'env-set.sh "{env_file}" SCALE_SCORERS=5 SCALE_EXECUTORS=2' in out
    # what the script writes, a plain compose command reads; and the next `make up` too
    script = ROOT / "scripts" / "containers" / "env-set.sh"
    env_file.write_text("# mine\nSWARM_KEY=" + "a" * 64 + "\nSCALE_SCORERS=3\n")
    subprocess.run([str(script), str(env_file), "SCALE_SCORERS=5", "SCALE_EXECUTORS=2"], check=True)
    lines = env_file.read_text().splitlines()
    assert lines == ["# mine", "SWARM_KEY=" + "a" * 64, "SCALE_SCORERS=5", "SCALE_EXECUTORS=2"]
    assert oct(env_file.stat().st_mode & 0o777) == "0o600"
    assert 'SCALE_SCORERS=5 SCALE_EXECUTORS=2' in dry("up", env_file=env_file)
    assert 'SCALE_SCORERS=3 SCALE_EXECUTORS=2' in dry("up", "SCALE_SCORERS=3", env_file=env_file)


def test_make_up_remembers_the_embedded_model(tmp_path):
    """`make up LLM=embedded LLM_MODEL=smollm2-135m` writes the model into the env file, where a
    plain compose command reads it; a later `make up` (e.g. the README's `make up SWARM_LLM=scripted
    SWARM_SCRIPTED_LATENCY=10` for make chaos) builds and serves that model, not the default."""
    env_file = tmp_path / "cluster.env"
    out = dry("up", "LLM=embedded", "LLM_MODEL=smollm2-135m", env_file=env_file)
    assert f'env-set.sh "{env_file}" SCALE_SCORERS=3 SCALE_EXECUTORS=2 LLM_MODEL=smollm2-135m' in out, out
    env_file.write_text("SWARM_KEY=" + "a" * 64 + "\nLLM_MODEL=smollm2-135m\n")
    again = dry("up", "LLM=embedded", "SWARM_LLM=scripted", env_file=env_file)
    assert "LLM_MODEL=smollm2-135m" in again and "model=smollm2-135m" in again, again
    assert "qwen2.5-1.5b" not in again, again
    assert "model=qwen2.5-0.5b" in dry("up", "LLM=embedded", "LLM_MODEL=qwen2.5-0.5b", env_file=env_file)
    # the image is built with the same model (`make image`, which `make up` runs first)
    r = subprocess.run(["make", "--no-print-directory", "-n", "-C", str(ROOT), "COMPOSE=compose",
                        "ENGINE=engine", "PODMAN_LOCAL=", f"ENV_FILE={env_file}", "image", "LLM=embedded"],
                       capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin", "HOME": "/tmp"})
    assert "--build-arg LLM_MODELS=smollm2-135m" in r.stdout, r.stdout + r.stderr
    env_file.write_text("LLM_MODEL=$(rm -rf x)\n")  # not a model's name: the default
    assert "model=qwen2.5-1.5b" in dry("up", "LLM=embedded", env_file=env_file)


def test_make_observe_takes_no_port_of_the_observer_and_shows_readable_logs(tmp_path):
    out = dry("observe", env_file=tmp_path / "e")
    for flag in ("SWARM_LISTEN_PORT=0", "SWARM_METRICS_PORT=0", "SWARM_WEB_PORT=0",
                 "SWARM_LOG_FORMAT=console", "SWARM_LOG_LEVEL=warning"):
        assert f"-e {flag}" in out, out
    assert "exec -T" not in out  # a terminal in the container: the live tree
    sub = dry("submit", env_file=tmp_path / "e")
    for flag in ("SWARM_WEB_PORT=0", "SWARM_LOG_FORMAT=console", "SWARM_LOG_LEVEL=warning"):
        assert f"-e {flag}" in sub, sub  # the goal's id, not buried in JSON log lines


def test_make_kill_and_down_with_volumes(tmp_path):
    assert "compose -f" in (k := dry("kill", "SERVICE=decomposer-2", env_file=tmp_path / "e"))
    assert k.rstrip().endswith("kill decomposer-2"), k
    assert "down --remove-orphans -v" in dry("down", "DOWN_FLAGS=-v", env_file=tmp_path / "e")


def test_make_logs_and_ps_are_composes_own(tmp_path):
    # README: `make logs SERVICE=observer   # make ps`
    assert dry("logs", "SERVICE=observer", env_file=tmp_path / "e").rstrip().endswith("logs -f --tail=200 observer")
    assert dry("ps", env_file=tmp_path / "e").rstrip().endswith(" ps")


def test_the_readmes_podman_commands_are_the_ones_make_runs(tmp_path):
    """README, "Without Docker": `. scripts/containers/env.sh` and `$PC kill decomposer-2` by
    hand are what `make kill` runs on a podman host: the same compose files, in the same order,
    and the same engine settings."""
    import re
    import shlex

    readme = (ROOT / "README.md").read_text()
    pc = re.search(r'^PC="([^"]+)"$', readme, re.M)
    assert pc, "the README's PC= line"
    typed = shlex.split(pc.group(1))
    assert "$PC kill decomposer-2" in readme and "$PC down -v" in readme
    r = subprocess.run(["make", "--no-print-directory", "-n", "-C", str(ROOT), "-o", "image",
                        f"COMPOSE={ROOT}/.venv/bin/podman-compose", "ENGINE=podman", "PODMAN_LOCAL=1",
                        f"ENV_FILE={ROOT}/.env", "kill", "SERVICE=decomposer-2"],
                       capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin", "HOME": "/tmp"})
    assert r.returncode == 0, r.stderr
    ran = shlex.split(r.stdout.strip().splitlines()[-1])
    assert ran[-2:] == ["kill", "decomposer-2"], ran
    # make names the files by absolute path; the README's are relative to the checkout
    assert [str(Path(a).relative_to(ROOT)) if a.startswith(str(ROOT)) else a for a in ran[:-2]] == typed
    # the engine settings make exports, and what env.sh sets for a shell
    shell = subprocess.run(["bash", "-c", ". scripts/containers/env.sh && echo $CONTAINERS_CONF "
                            "$CONTAINERS_REGISTRIES_CONF"], cwd=ROOT, capture_output=True, text=True, timeout=30)
    conf, registries = shell.stdout.split()
    assert Path(conf) == ROOT / "scripts/containers/containers.conf" and Path(conf).is_file()
    assert Path(registries) == ROOT / "scripts/containers/registries.conf" and Path(registries).is_file()
    mk = (ROOT / "mk" / "cluster.mk").read_text()
    assert "export CONTAINERS_CONF := $(CTR_DIR)/containers.conf" in mk
    assert "export CONTAINERS_REGISTRIES_CONF := $(CTR_DIR)/registries.conf" in mk


def test_make_up_names_no_llm_but_the_one_the_agents_log(tmp_path):
    """Issue 20: `make up` printed `llm=ollama model=llama3.2:1b` while the agents ran the scripted
    LLM. Its summary line names only what it keeps in the env file (the scale, and the embedded
    model the `llm` service serves); which LLM the agents run is mk/llm_in_use.py's line, read
    from an agent's own log."""
    env_file = tmp_path / "e"
    for args in (["SWARM_LLM=scripted", "SWARM_SCRIPTED_LATENCY=10"], [], ["OLLAMA_MODEL=qwen2.5:1.5b"]):
        out = dry("up", *args, env_file=env_file)
        kept = next(ln for ln in out.splitlines() if "kept in" in ln)
        assert "scorers=3 executors=2" in kept, kept
        assert "llm=" not in kept and "model=" not in kept, kept  # the Ollama model is not kept anywhere
        assert "mk/llm_in_use.py --compose" in out, out
    kept = next(ln for ln in dry("up", "LLM=embedded", "LLM_MODEL=smollm2-135m", env_file=env_file).splitlines()
                if "kept in" in ln)
    assert "embedded model=smollm2-135m" in kept and "llm=" not in kept, kept


def test_make_up_hides_podmans_systemd_lines_says_so_once_and_keeps_failures(tmp_path):
    """README: podman without systemd prints two `level=error ... unable to get systemd
    connection` lines per container; `make up` hides them and says so once. `make up` runs here
    for real against a fake podman-compose (image, key and credentials steps skipped); what else
    compose says gets through, and a compose that fails fails `make up`."""
    import sys

    env_file = tmp_path / "cluster.env"
    fake = tmp_path / "podman-compose"
    noise = ('time="2026-12-01T10:00:00Z" level=error msg="unable to get systemd connection to add '
             'healthchecks: dial unix /run/systemd/private: connect: no such file or directory"\n'
             'time="2026-12-01T10:00:00Z" level=error msg="unable to get systemd connection to start '
             'healthchecks: dial unix /run/systemd/private: connect: no such file or directory"\n')
    selected = '{"event": "llm.selected", "backend": "scripted", "latency": 10}'
    fake.write_text(f"#!{sys.executable}\nimport os, sys\n"
                    "if 'logs' in sys.argv: print('[decomposer-1] | ' + " + repr(selected) + "); sys.exit(0)\n"
                    "for name in ('swarm_decomposer-1_1', 'swarm_scorer_1'):\n"
                    "    print(name)\n"
                    f"    sys.stderr.write({noise!r})\n"
                    "sys.exit(int(os.environ.get('FAKE_RC', '0')))\n")
    fake.chmod(0o755)

    def up(rc: int) -> subprocess.CompletedProcess:
        return subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), "-o", "image", "-o", "swarm-key",
                               "-o", "credentials", f"COMPOSE={fake}", "ENGINE=podman", "PODMAN_LOCAL=",
                               f"ENV_FILE={env_file}", "up"], capture_output=True, text=True, timeout=120,
                              env={"PATH": "/usr/bin:/bin", "HOME": "/tmp", "FAKE_RC": str(rc)})

    r = up(0)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout + r.stderr
    assert "systemd connection" not in out and "level=error" not in out, out
    assert "swarm_decomposer-1_1" in out and "swarm_scorer_1" in out, out  # compose's own words stay
    assert out.count("healthchecks are not scheduled") == 1, out
    assert "llm: scripted (a test double" in out, out
    r = up(1)
    assert r.returncode != 0 and "llm:" not in r.stdout, r.stdout + r.stderr
