#!/usr/bin/env python3
"""`make up` ends with this: which LLM the agents really run, read from an agent's own log line
(`llm.selected`, logged as the agent picks its backend), not from what the Makefile was told.
Standard library only (runs on the host).

  python3 mk/llm_in_use.py --compose "docker compose -f docker-compose.yml" [--service decomposer-1]
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
import time


def describe(rec: dict) -> str:
    backend = rec.get("backend", "?")
    if backend == "scripted":
        return (f"llm: scripted (a test double: canned answers after {rec.get('latency', 0)} s each, "
                "no real model; SWARM_LLM=ollama needs the ollama service)")
    model = rec.get("model") or "?"
    host = f" at {rec['host']}" if rec.get("host") else ""
    return f"llm: {backend} model={model}{host}"


ANSI = re.compile(r"\x1b\[[0-9;]*m")


def find(log: str) -> dict | None:
    """The first llm.selected record; podman-compose prefixes lines with the service name and
    colours them, so the JSON is taken from the first { to the last }."""
    for line in ANSI.sub("", log).splitlines():
        if '"llm.selected"' not in line or "{" not in line:
            continue
        try:
            return json.loads(line[line.index("{"):line.rindex("}") + 1])
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
