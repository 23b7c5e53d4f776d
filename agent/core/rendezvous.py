"""Rendezvous (highest-random-weight) hashing: which peers a key belongs to, computed the same
by every peer from the key and the candidates alone (no coordination, no randomness). The one
owner of the rule: a task's home executor, a result's rapporteur, a node's home decomposers
and a goal's electoral committee all rank peers here."""

from __future__ import annotations

import hashlib
from typing import Iterable


def weight(key: str, peer: str) -> bytes:
    """``peer``'s weight for ``key``: compared as bytes (big-endian), higher first."""
    return hashlib.blake2b(f"{key}|{peer}".encode(), digest_size=8).digest()


def first(key: str, peers: Iterable[str]) -> str:
    """The peer ``key`` belongs to first (ValueError on no peer)."""
    return max(peers, key=lambda p: weight(key, p))


def top(key: str, peers: Iterable[str], k: int) -> tuple[str, ...]:
    """The ``k`` peers ``key`` belongs to, heaviest first (all of them if there are fewer);
    repeats count once. Removing a peer outside the answer never changes it, and removing one
    inside moves in only the next heaviest: a dead peer disturbs one place."""
    ranked = sorted(set(peers), key=lambda p: weight(key, p), reverse=True)
    return tuple(ranked[:max(0, k)])
