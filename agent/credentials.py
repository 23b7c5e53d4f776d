"""Membership files: the authority key, agents' keys and credentials on disk (the I/O around
``agent.core.membership``, which judges them).

- The **authority key** (``authority.key``: a 32-byte ed25519 seed, mode 600) is kept by whoever
  runs the swarm, never in an image or an agent's volume. Its public id (``authority_id``, in
  peer-id form) is every agent's ``SWARM_AUTHORITY``.
- A **credential** (``credential.json``) is the authority's signed statement for one peer id:
  roles, swarm, validity. An agent reads it from ``SWARM_CREDENTIAL_FILE``, or from
  ``<credentials dir>/<name>/credential.json`` with ``SWARM_CREDENTIALS_DIR`` (Compose: one
  directory per service slot, written by ``make up``, mounted read-only), or from
  ``<data dir>/credential.json``. With a credentials directory the slot's key comes from there
  too (``key.ed25519``): the credential names that key's peer id. (The directory is used only
  with an authority: without one the key stays in the data directory.)
- ``issue_slots`` makes what ``make up`` writes: a key and a credential per slot, kept when
  still valid for long enough, renewed otherwise.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import orjson
from pydantic import ValidationError

from agent.core.events import Credential
from agent.core.identity import Identity
from agent.core.membership import Membership, credential_problem, issue_credential

__all__ = ["CredentialError", "MemberFiles", "authority_id", "issue_slots", "load_credential",
           "load_seed", "member_files", "membership_of", "write_new"]

KEY_NAME = "key.ed25519"
CREDENTIAL_NAME = "credential.json"
DAY_MS = 86_400_000


class CredentialError(RuntimeError):
    """A key or credential file is missing or unusable; the message says which and why."""


def write_new(path: Path, data: bytes, *, overwrite: bool = False) -> None:
    """Write ``data`` to ``path`` (mode 600) atomically; refuse to replace a file unless told."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() and not overwrite:
        raise CredentialError(f"{path} exists; not overwriting it")
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def load_seed(path: Path) -> Identity:
    try:
        seed = path.read_bytes()
    except OSError as exc:
        raise CredentialError(f"cannot read key {path}: {exc.strerror or exc}") from None
    if len(seed) != 32:
        raise CredentialError(f"{path} is not a 32-byte ed25519 seed")
    return Identity(seed)


def authority_id(path: Path) -> str:
    """The public id (SWARM_AUTHORITY) of the authority key in ``path``."""
    return load_seed(path).peer_id


def load_credential(path: Path) -> Credential:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CredentialError(f"cannot read credential {path}: {exc.strerror or exc}") from None
    try:
        return Credential.model_validate_json(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise CredentialError(f"{path} is not a credential: {'.'.join(map(str, first['loc']))}: "
                              f"{first['msg']}") from None


def membership_of(settings) -> Membership | None:
    """The swarm's authority and name, or None for a swarm without one (duck-typed settings)."""
    return Membership(settings.authority, settings.swarm) if settings.authority else None


@dataclass(frozen=True)
class MemberFiles:
    key: Path | None  # None: the data directory's own key
    credential: Path | None  # None: no credential configured or found


def member_files(settings, data_dir: Path) -> MemberFiles:
    """Where this agent's key and credential are (see the module doc)."""
    if settings.credentials_dir is not None and settings.authority:
        slot = settings.credentials_dir / Path(settings.data_dir).name
        return MemberFiles(slot / KEY_NAME, slot / CREDENTIAL_NAME)
    key = settings.identity_file
    if settings.credential_file is not None:
        return MemberFiles(key, settings.credential_file)
    default = data_dir / CREDENTIAL_NAME
    return MemberFiles(key, default if default.exists() else None)


def check_own(cred: Credential, identity: Identity, membership: Membership, now_ms: int) -> str | None:
    """Why ``cred`` cannot be this agent's credential now (None if it can)."""
    why = credential_problem(cred, membership)
    if why is not None:
        return why
    if cred.peer != identity.peer_id:
        return f"it is for peer {cred.peer}, this agent is {identity.peer_id}"
    if now_ms >= cred.expires:
        return f"it expired {(now_ms - cred.expires) // 60_000} min ago"
    return None


def issue_slots(authority: Identity, root: Path, slots: Iterable[tuple[str, str, list[str]]],
                swarm: str, days: float, *, now_ms: int | None = None,
                renew_within_days: float = 7.0) -> list[str]:
    """For each (group, slot, roles): ``root/group/slot/{key.ed25519, credential.json}``. A
    slot's key is made once and kept (its peer id is the agent's); its credential is issued
    again when missing, for other roles, swarm or authority, or expiring within
    ``renew_within_days``. Returns one line per slot saying what was done."""
    now = now_ms if now_ms is not None else time.time_ns() // 1_000_000
    cfg = Membership(authority.peer_id, swarm)
    lines = []
    for group, slot, roles in slots:
        d = root / group / slot
        key_path, cred_path = d / KEY_NAME, d / CREDENTIAL_NAME
        made = not key_path.exists()
        if made:
            write_new(key_path, os.urandom(32))
        ident = load_seed(key_path)
        keep = False
        if cred_path.exists():
            try:
                old = load_credential(cred_path)
                keep = (check_own(old, ident, cfg, now) is None and sorted(roles) == list(old.roles)
                        and old.expires - now > renew_within_days * DAY_MS)
            except CredentialError:
                keep = False
        if not keep:
            cred = issue_credential(authority, ident.peer_id, roles, swarm, now - 60_000,
                                    now + int(days * DAY_MS))
            write_new(cred_path, orjson.dumps(cred.model_dump(mode="json"), option=orjson.OPT_INDENT_2),
                      overwrite=True)
            for p in (key_path, cred_path, d):
                os.chmod(p, 0o755 if p.is_dir() else 0o644)  # read by the agent's non-root user
        what = "new key and credential" if made else ("kept" if keep else "credential renewed")
        lines.append(f"{group}/{slot}: {','.join(sorted(roles))} {ident.peer_id} ({what})")
    return lines
