"""Private test networks made of Linux network namespaces (root only).

Nothing here touches the machine's own interfaces: every link lives in namespaces this
module creates, named ``swnet-<pid>-<random>-<role>``, and removes again (by those names)
when the context manager exits, also on failure. Processes started through the helpers are
killed before their namespace goes. Namespaces left behind by a crashed run (their pid is
dead) are swept on the next use.

- ``loopback_ns()``: one namespace with only ``lo`` (up, multicast on, 224.0.0.0/4 routed to
  lo): mDNS "on loopback" for processes that share it.
- ``bridge_hosts(n)``: a namespace holding bridge ``br0`` (multicast snooping off) and ``n``
  host namespaces, each with ``eth0`` = 10.77.<x>.<i>/24 on a veth to the bridge,
  multicast on, 224.0.0.0/4 routed to eth0.
- ``netns_unavailable()``: None if namespaces work here, else the reason to skip.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator, Sequence

PREFIX = "swnet"
_NAME_RE = re.compile(rf"^{PREFIX}-(\d+)-[0-9a-f]{{6}}-")
_cached_reason: list[str | None] = []


class NetnsError(RuntimeError):
    pass


def _ip(*args: str, check: bool = True, timeout: float = 10) -> subprocess.CompletedProcess:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise NetnsError(f"ip {' '.join(args)} failed ({proc.returncode}): "
                         f"{proc.stderr.strip() or proc.stdout.strip()}")
    return proc


def _ns(ns: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return _ip("netns", "exec", ns, *args, check=check)


def _unique(role: str) -> str:
    return f"{PREFIX}-{os.getpid()}-{secrets.token_hex(3)}-{role}"


def list_namespaces() -> list[str]:
    proc = _ip("netns", "list", check=False)
    return [line.split()[0] for line in proc.stdout.splitlines() if line.strip()]


def _delete(ns: str) -> None:
    _ip("netns", "del", ns, check=False)


def sweep_stale() -> list[str]:
    """Delete namespaces of ours whose creating process is gone (a crashed earlier run)."""
    removed = []
    for ns in list_namespaces():
        m = _NAME_RE.match(ns)
        if not m:
            continue
        pid = int(m.group(1))
        if pid == os.getpid():
            continue
        try:
            os.kill(pid, 0)
            continue  # still alive: not ours to remove
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        _delete(ns)
        removed.append(ns)
    return removed


def netns_unavailable() -> str | None:
    """None if network namespaces can be used here; otherwise why not (for pytest.skip)."""
    if _cached_reason:
        return _cached_reason[0]
    reason: str | None = None
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        reason = "needs root to create network namespaces (ip netns)"
    elif shutil.which("ip") is None:
        reason = "iproute2 `ip` command not found"
    else:
        probe = _unique("probe")
        try:
            _ip("netns", "add", probe)
            _ns(probe, "ip", "link", "set", "lo", "up")
        except (NetnsError, OSError, subprocess.TimeoutExpired) as exc:
            reason = f"`ip netns` does not work here: {exc}"
        finally:
            _delete(probe)
        if reason is None:
            sweep_stale()
    _cached_reason.append(reason)
    return reason


@dataclass
class Host:
    ns: str
    ip: str


@dataclass
class TestNet:
    """Namespaces made for one test; ``popen`` starts a process inside one of them."""

    namespaces: list[str] = field(default_factory=list)
    hosts: list[Host] = field(default_factory=list)
    procs: list[subprocess.Popen] = field(default_factory=list)

    def argv(self, ns: str, argv: Sequence[str]) -> list[str]:
        return ["ip", "netns", "exec", ns, *argv]

    def popen(self, ns: str, argv: Sequence[str], **kw) -> subprocess.Popen:
        proc = subprocess.Popen(self.argv(ns, argv), start_new_session=True, **kw)
        self.procs.append(proc)
        return proc

    def pids_in(self, ns: str) -> list[int]:
        proc = _ip("netns", "pids", ns, check=False)
        return [int(p) for p in proc.stdout.split() if p.isdigit()]

    def cleanup(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 5
        for proc in self.procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait(timeout=5)
        # anything else still running inside our namespaces (started by other means)
        for ns in self.namespaces:
            for pid in self.pids_in(ns):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for ns in reversed(self.namespaces):
            _delete(ns)
        left = set(self.namespaces) & set(list_namespaces())
        self.namespaces.clear()
        if left:
            raise NetnsError(f"could not delete namespaces {sorted(left)}")


def _multicast_on(ns: str, dev: str) -> None:
    _ns(ns, "ip", "link", "set", dev, "multicast", "on")
    _ns(ns, "ip", "route", "add", "224.0.0.0/4", "dev", dev)


@contextmanager
def loopback_ns() -> Iterator[TestNet]:
    """One namespace with only lo, multicast routed to lo. ``net.hosts[0].ns`` is its name."""
    net = TestNet()
    try:
        ns = _unique("lo")
        _ip("netns", "add", ns)
        net.namespaces.append(ns)
        _ns(ns, "ip", "link", "set", "lo", "up")
        _multicast_on(ns, "lo")
        net.hosts.append(Host(ns, "127.0.0.1"))
        yield net
    finally:
        net.cleanup()


@contextmanager
def bridge_hosts(n: int, subnet: int | None = None) -> Iterator[TestNet]:
    """``n`` host namespaces on one bridge, 10.77.<subnet>.<1..n>/24."""
    if not 1 <= n <= 200:
        raise ValueError("1 <= n <= 200")
    x = secrets.randbelow(256) if subnet is None else subnet
    net = TestNet()
    try:
        br = _unique("br")
        _ip("netns", "add", br)
        net.namespaces.append(br)
        _ns(br, "ip", "link", "set", "lo", "up")
        _ns(br, "ip", "link", "add", "br0", "type", "bridge", "mcast_snooping", "0")
        _ns(br, "ip", "link", "set", "br0", "up")
        for i in range(1, n + 1):
            host = _unique(f"h{i}")
            _ip("netns", "add", host)
            net.namespaces.append(host)
            _ip("link", "add", f"vh{i}", "netns", br, "type", "veth",
                "peer", "name", "eth0", "netns", host)
            _ns(br, "ip", "link", "set", f"vh{i}", "master", "br0")
            _ns(br, "ip", "link", "set", f"vh{i}", "up")
            ip = f"10.77.{x}.{i}"
            _ns(host, "ip", "link", "set", "lo", "up")
            _ns(host, "ip", "addr", "add", f"{ip}/24", "dev", "eth0")
            _ns(host, "ip", "link", "set", "eth0", "up")
            _multicast_on(host, "eth0")
            net.hosts.append(Host(host, ip))
        yield net
    finally:
        net.cleanup()


def set_link(net: TestNet, host_index: int, up: bool) -> None:
    """Cut (or restore) one host's cable: its veth end in the bridge namespace."""
    br = net.namespaces[0]
    _ns(br, "ip", "link", "set", f"vh{host_index + 1}", "up" if up else "down")


@contextmanager
def two_networks(n1: int, n2: int) -> Iterator[TestNet]:
    """Two LANs joined by a router, no multicast between them: ``n1`` hosts on
    10.77.<x>.0/24 (bridge br0) and ``n2`` on 10.78.<x>.0/24 (br1); the router namespace
    (``net.namespaces[0]``) holds both bridges, is .254 on each and forwards unicast only.
    ``net.hosts`` lists the first network's hosts, then the second's."""
    if not (1 <= n1 <= 100 and 1 <= n2 <= 100):
        raise ValueError("1..100 hosts per network")
    x = secrets.randbelow(256)
    net = TestNet()
    try:
        router = _unique("rt")
        _ip("netns", "add", router)
        net.namespaces.append(router)
        _ns(router, "ip", "link", "set", "lo", "up")
        _ns(router, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
        index = 0
        for b, (count, prefix) in enumerate(((n1, f"10.77.{x}"), (n2, f"10.78.{x}"))):
            _ns(router, "ip", "link", "add", f"br{b}", "type", "bridge", "mcast_snooping", "0")
            _ns(router, "ip", "addr", "add", f"{prefix}.254/24", "dev", f"br{b}")
            _ns(router, "ip", "link", "set", f"br{b}", "up")
            for i in range(1, count + 1):
                index += 1
                host = _unique(f"n{b}h{i}")
                _ip("netns", "add", host)
                net.namespaces.append(host)
                _ip("link", "add", f"vh{index}", "netns", router, "type", "veth",
                    "peer", "name", "eth0", "netns", host)
                _ns(router, "ip", "link", "set", f"vh{index}", "master", f"br{b}")
                _ns(router, "ip", "link", "set", f"vh{index}", "up")
                ip = f"{prefix}.{i}"
                _ns(host, "ip", "link", "set", "lo", "up")
                _ns(host, "ip", "addr", "add", f"{ip}/24", "dev", "eth0")
                _ns(host, "ip", "link", "set", "eth0", "up")
                _ns(host, "ip", "route", "add", "default", "via", f"{prefix}.254")
                _multicast_on(host, "eth0")
                net.hosts.append(Host(host, ip))
        yield net
    finally:
        net.cleanup()


def add_bridge(net: TestNet, name: str) -> None:
    """Another bridge (up, multicast snooping off) in ``bridge_hosts``' bridge namespace: moving
    host ports onto it (``move_port``) cuts them off from the hosts left on br0."""
    br = net.namespaces[0]
    _ns(br, "ip", "link", "add", name, "type", "bridge", "mcast_snooping", "0")
    _ns(br, "ip", "link", "set", name, "up")


def move_port(net: TestNet, host_index: int, bridge: str) -> None:
    """Plug one host's cable (its veth end in the bridge namespace) into another bridge: a
    partition without nft or iptables. The link stays up; frames just go elsewhere."""
    br = net.namespaces[0]
    _ns(br, "ip", "link", "set", f"vh{host_index + 1}", "master", bridge)
