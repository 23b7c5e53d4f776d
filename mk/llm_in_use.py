#!/usr/bin/env python3
"""`make up` ends with this: which LLM the agents really run, read from an agent's own log line
(`llm.selected`, logged as the agent picks its backend), not from what the Makefile was told.
Standard library only (runs on the host).

  python3 mk/llm_in_use.py --compose "docker compose -f docker-compose.yml" [--service decomposer-1]
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time


def describe(rec: dict) -> str:
    backend = rec.get("backend", "?")
    if backend == "scripted":
        return (f"llm: scripted (a test double with canned answers, {rec.get('latency', 0)} s each; "
                "no real model: this host has no Ollama image)")
    model = rec.get("model") or "?"
    host = f" at {rec['host']}" if rec.get("host") else ""
    return f"llm: {backend} model={model}{host}"


def find(log: str) -> dict | None:
    for line in log.splitlines():
        line = line.strip()
        if '"llm.selected"' not in line or "{" not in line:
            continue
        try:
            return json.loads(line[line.index("{"):])
        except ValueError:
            continue
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compose", required=True)
    ap.add_argument("--service", default="decomposer-1")
    ap.add_argument("--wait", type=float, default=60, help="seconds to wait for the log line")
    a = ap.parse_args()
    deadline = time.monotonic() + a.wait
    while True:
        r = subprocess.run(shlex.split(a.compose) + ["logs", a.service], capture_output=True, text=True)
        rec = find(r.stdout + "\n" + r.stderr)
        if rec is not None:
            print(describe(rec))
            return 0
        if time.monotonic() > deadline:
            print(f"llm: {a.service} has not picked its LLM yet (make logs SERVICE={a.service})")
            return 0
        time.sleep(2)


if __name__ == "__main__":
    sys.exit(main())
