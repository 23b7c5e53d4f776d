"""Signed, content-addressed events: the only thing agents exchange and store.

Wire form (canonical JSON: UTF-8, sorted keys, no insignificant whitespace):
    {"author": <peer id>, "body": {"type": ..., ...}, "hlc": [wall_ms, logical], "sig": <b64>, "v": 2}
The id is sha256 of the canonical bytes without "sig"; the signature covers those same bytes,
so an event relayed by sync, read from disk or replayed from a file verifies like one off gossip.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from collections.abc import Iterable
from typing import Annotated, Any, ClassVar, Literal, Union

import orjson
from pydantic import (
    BaseModel, ConfigDict, Field, SerializationInfo, SerializerFunctionWrapHandler, TypeAdapter,
    ValidationError, model_serializer, model_validator,
)

from .committee import MAX_POOL, draw, pool_of
from .hlc import Timestamp
from .identity import Identity, verify
from .reasons import Reason, Rejected

MAX_EVENT_BYTES = 64 * 1024
PROTOCOL_VERSION = 2
EVENT_ID = r"^[0-9a-f]{64}$"
# A node is a goal (its event id) or the i-th subgoal of a proposal: "<proposal id>/<i>".
NODE_ID = r"^[0-9a-f]{64}(/[0-9]{1,2})?$"
# What a vote decides (agent.core.slots): a node's split (the node id), a goal's brief
# ("<goal>#b") or the review of a task's k-th result ("<node>#v<k>").
SLOT_ID = r"^[0-9a-f]{64}(/[0-9]{1,2})?(#(b|v[1-9]))?$"
# What a claim holds: a task's first attempt (the node id), or its k-th after a rejected result
# ("<node>#<k>").
TASK_ID = r"^[0-9a-f]{64}(/[0-9]{1,2})?(#[2-9])?$"
PEER_ID = r"^[1-9A-HJ-NP-Za-km-z]{40,60}$"
# What a vote can be for: a proposal (split the node that way), LEAF (execute the node as it
# is) or NIL (nothing this round); on a brief slot a brief (LEAF: plan without one); on a review
# slot the result (accept it) or REJECT (send the task back).
LEAF, NIL, REJECT = "leaf", "nil", "reject"
VOTE_VALUE = r"^([0-9a-f]{64}|leaf|nil|reject)$"
# Rounds are unbounded in the protocol (liveness may need many under a long partition); this
# cap only bounds what a faulty member can make every agent store.
MAX_ROUND = 1000
MAX_ELECTORATE = 101

EventId = Annotated[str, Field(pattern=EVENT_ID)]
NodeId = Annotated[str, Field(pattern=NODE_ID)]
SlotId = Annotated[str, Field(pattern=SLOT_ID)]
TaskId = Annotated[str, Field(pattern=TASK_ID)]
PeerId = Annotated[str, Field(pattern=PEER_ID)]
Score01 = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]
RoleName = Literal["decomposer", "scorer", "executor", "observer", "submitter"]
Phase = Literal["prevote", "precommit"]


class _Model(BaseModel):
    """``_omit_empty``: fields added after protocol v2 shipped. They are left out of the
    canonical form while empty (None, False, 0, "", []), so every event written before they existed
    keeps its bytes, its id and its signature."""

    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=False)
    _omit_empty: ClassVar[frozenset[str]] = frozenset()

    @model_serializer(mode="wrap")
    def _canonical_fields(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> Any:
        out = handler(self)
        if self._omit_empty and isinstance(out, dict):
            for key in self._omit_empty:
                if key in out and out[key] in (None, False, 0, "", [], ()):
                    del out[key]
        return out


def majority(electors: int) -> int:
    """The smallest strict majority of ``electors``: two such quorums always share a voter, so
    two values can never both be decided. The one owner of the quorum rule."""
    return electors // 2 + 1


def is_majority(quorum: int, electors: int) -> bool:
    return majority(electors) <= quorum <= electors


def quorum_for(electors: int, wanted: int | None = None, liars: int = 0) -> int:
    """The quorum for ``electors``: ``wanted``, raised to a strict majority of the electorate
    plus the ``liars`` it must tolerate (q > (n + f) / 2: fewer than 2q - n liars can never
    decide two values, agent.core.consensus), and at most the whole electorate."""
    least = majority(electors + liars)
    return min(electors, max(wanted or least, least))


class PlanParams(_Model):
    """Carried by the goal, so every peer folds that goal's tree with the same rules.

    ``electorate`` is fixed for the goal's whole life: only these peers' votes count, so
    scaling scorers while a plan runs can never make two splits reach a quorum. ``quorum``
    must be a strict majority of it (two quorums always share a voter)."""

    electorate: tuple[PeerId, ...] = Field(min_length=1, max_length=MAX_ELECTORATE)
    quorum: int = Field(ge=1, le=MAX_ELECTORATE)
    max_depth: int = Field(ge=0, le=6)
    max_children: int = Field(ge=2, le=12)
    max_rounds: int = Field(ge=1, le=10)
    max_lease_ms: int = Field(default=300_000, ge=1000, le=3_600_000)
    # the goal's working assumptions are settled (a decided brief) before the tree grows
    brief: bool = False
    # attempts a task gets: results of attempts before the last are reviewed by the electorate
    # (accepted, or sent back with feedback); 0 or 1: no review (a result counts as it comes)
    max_attempts: int = Field(default=0, ge=0, le=9)
    # tokens (prompt + completion) the goal may spend in all, as its events report them; 0: no
    # limit (agent.core.budget says what happens as it runs out)
    token_budget: int = Field(default=0, ge=0, le=1_000_000_000)
    # a committee (agent.core.committee): the electorate is the ``committee`` scorers of
    # ``pool`` that the goal's seed draws; both empty when the electorate is the whole pool
    pool: tuple[PeerId, ...] = Field(default=(), max_length=MAX_POOL)
    committee: int = Field(default=0, ge=0, le=MAX_ELECTORATE)

    _omit_empty = frozenset({"brief", "max_attempts", "token_budget", "pool", "committee"})

    @classmethod
    def of(cls, electorate: Iterable[str], quorum: int | None = None, *, liars: int = 0,
           max_attempts: int = 0, committee: int = 0, seed: str | None = None,
           author: str | None = None, **fields: Any) -> "PlanParams":
        """A goal's parameters, however the electorate came (any order, repeats): the quorum
        by ``quorum_for``; ``max_attempts`` of 1 is one attempt without review, written 0.
        With ``committee`` k and a ``seed`` (agent.core.committee.seed), more than k scorers
        become the goal's pool and the k it draws its electorate; the goal's ``author``, if
        it names itself an elector (the page's person), sits on the committee as one more."""
        voters = tuple(sorted(set(electorate)))
        pool: tuple[str, ...] = ()
        scorers = tuple(v for v in voters if v != author)
        if committee and seed is not None and len(scorers) > committee:
            pool = pool_of(seed, scorers)
            drawn = draw(seed, pool, committee)
            voters = tuple(sorted(set(drawn) | ({author} if author in voters else set())))
        return cls(electorate=voters, quorum=quorum_for(len(voters), quorum, liars),
                   max_attempts=max_attempts if max_attempts > 1 else 0,
                   pool=pool, committee=committee if pool else 0, **fields)

    @property
    def attempts(self) -> int:
        return max(1, self.max_attempts)

    @model_validator(mode="after")
    def _check(self) -> "PlanParams":
        if list(self.electorate) != sorted(set(self.electorate)):
            raise ValueError("electorate must be sorted and without repeats")
        if self.quorum > len(self.electorate):
            raise ValueError(f"quorum {self.quorum} exceeds the electorate of {len(self.electorate)}")
        if not is_majority(self.quorum, len(self.electorate)):
            raise ValueError(f"quorum {self.quorum} is not a strict majority of {len(self.electorate)} electors")
        if bool(self.pool) != bool(self.committee):
            raise ValueError("a committee needs a pool, and a pool a committee size")
        if self.committee:
            if list(self.pool) != sorted(set(self.pool)):
                raise ValueError("pool must be sorted and without repeats")
            if len(self.pool) <= self.committee:
                raise ValueError(f"a pool of {len(self.pool)} for a committee of {self.committee}: "
                                 "name the pool as the electorate")
            outside = len(set(self.electorate) - set(self.pool))
            if len(self.electorate) - outside != self.committee or outside > 1:
                raise ValueError(f"the electorate must be {self.committee} scorers of the pool "
                                 "(and at most the goal's author besides)")
        return self

    @property
    def tolerated_liars(self) -> int:
        """Electors that may equivocate or lie while acceptance stays safe: fewer than 2q - n."""
        return max(0, 2 * self.quorum - len(self.electorate) - 1)


class Subgoal(_Model):
    title: str = Field(min_length=1, max_length=120)
    description: str = Field(default="", max_length=600)
    atomic: bool = False  # the proposer's hint only: whether a node is a leaf is voted on
    # the earlier subgoals (1-based positions in the split) whose results this one needs: its
    # task waits until they are done, and its executor sees their results
    after: tuple[Annotated[int, Field(ge=1, le=12)], ...] = Field(default=(), max_length=11)

    _omit_empty = frozenset({"after"})


class Credential(_Model):
    """A membership credential: the swarm's authority says that ``peer`` may act as ``roles``
    in ``swarm`` for events stamped from ``issued`` until ``expires`` (wall ms: judged against
    event stamps, never a clock). Carried in the member's hello; checked by
    ``agent.core.membership``, which also signs and verifies ``sig``."""

    peer: PeerId
    roles: tuple[RoleName, ...] = Field(min_length=1, max_length=5)
    swarm: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")
    issued: int = Field(ge=0, le=2**53)
    expires: int = Field(ge=0, le=2**53)
    authority: PeerId
    sig: str = Field(min_length=80, max_length=100)


class Hello(_Model):
    """An agent announces its role (how a submitter finds the scorers to name as electorate);
    in a swarm with an authority it carries the agent's membership credential."""

    type: Literal["hello"] = "hello"
    role: RoleName
    name: str = Field(default="", max_length=64)
    credential: Credential | None = None

    @model_serializer(mode="wrap")
    def _without_empty_credential(self, handler: Any) -> Any:
        # a hello without a credential keeps the exact bytes (and so the id and signature) it
        # had before credentials existed
        out = handler(self)
        if isinstance(out, dict) and out.get("credential") is None:
            out.pop("credential", None)
        return out


class Revoke(_Model):
    """The authority withdraws ``peer``'s membership: every event it stamped at or after this
    event's stamp is refused, by every peer, whatever order things arrive in."""

    type: Literal["revoke"] = "revoke"
    peer: PeerId
    reason: str = Field(default="", max_length=200)


class Goal(_Model):
    type: Literal["goal"] = "goal"
    title: str = Field(min_length=1, max_length=200)
    description: str = Field(default="", max_length=2000)
    params: PlanParams


class Proposal(_Model):
    type: Literal["proposal"] = "proposal"
    node: NodeId
    strategy: str = Field(min_length=1, max_length=40)
    subgoals: tuple[Subgoal, ...] = Field(min_length=2, max_length=12)
    refines: EventId | None = None
    prompt_tokens: int = Field(default=0, ge=0, le=10_000_000)  # what the LLM call cost
    completion_tokens: int = Field(default=0, ge=0, le=10_000_000)

    @model_validator(mode="after")
    def _order(self) -> "Proposal":
        for i, s in enumerate(self.subgoals, 1):
            if any(a >= i for a in s.after):
                raise ValueError(f"subgoal {i} may only follow earlier subgoals, not {list(s.after)}")
        return self


BRIEF_FIELDS = ("duration", "dates", "budget", "currency", "place", "people", "constraints", "done")


class Brief(_Model):
    """A goal's working assumptions, settled before its tree grows and carried by every prompt
    below it. Decomposers propose briefs and the electorate decides one like a split; a brief
    from the goal's own author (the person who submitted it, amending on the page) takes
    precedence over any decision."""

    type: Literal["brief"] = "brief"
    node: EventId  # the goal
    duration: str = Field(default="", max_length=120)
    dates: str = Field(default="", max_length=120)
    budget: str = Field(default="", max_length=120)
    currency: str = Field(default="", pattern=r"^([A-Z]{3})?$")  # ISO 4217 code of the budget
    place: str = Field(default="", max_length=160)
    people: str = Field(default="", max_length=120)
    constraints: str = Field(default="", max_length=300)
    done: str = Field(default="", max_length=300)
    prompt_tokens: int = Field(default=0, ge=0, le=10_000_000)
    completion_tokens: int = Field(default=0, ge=0, le=10_000_000)

    def facts(self) -> dict[str, str]:
        return {k: getattr(self, k) for k in BRIEF_FIELDS if getattr(self, k)}


class Score(_Model):
    """A judgment of one proposal: shown, and fed back to the decomposers for refinement.
    It is not a vote: anyone in the swarm may score (a person on the web page, too)."""

    type: Literal["score"] = "score"
    node: NodeId
    proposal: EventId
    specificity: Score01
    non_overlap: Score01
    coverage: Score01
    acceptable: bool
    feedback: str = Field(default="", max_length=400)
    prompt_tokens: int = Field(default=0, ge=0, le=10_000_000)
    completion_tokens: int = Field(default=0, ge=0, le=10_000_000)
    # the scorer's place for this split among the node's splits it judged side by side (1 is
    # its best), and the essential work it found missing
    rank: int | None = Field(default=None, ge=1, le=50)
    missing: str = Field(default="", max_length=300)

    _omit_empty = frozenset({"rank", "missing"})


class Review(_Model):
    """An elector's reading of a task's result: feedback for a new attempt, and what it votes
    on the result's review slot. Like a score it is not a vote."""

    type: Literal["review"] = "review"
    node: NodeId
    result: EventId
    accept: bool
    problems: tuple[Annotated[str, Field(max_length=200)], ...] = Field(default=(), max_length=5)
    feedback: str = Field(default="", max_length=400)
    prompt_tokens: int = Field(default=0, ge=0, le=10_000_000)
    completion_tokens: int = Field(default=0, ge=0, le=10_000_000)


class Vote(_Model):
    """One elector's vote in one round and phase (two phases per round, as in Tendermint):
    a prevote for a value, then a precommit for a value that got a quorum of prevotes. A split
    (or LEAF) is decided by a quorum of precommits for it in one round."""

    type: Literal["vote"] = "vote"
    node: SlotId
    round: int = Field(ge=1, le=MAX_ROUND)
    phase: Phase
    value: str = Field(pattern=VOTE_VALUE)
    # what the elector's own judgment behind this vote cost (the judgment whether a node is one
    # step publishes no event of its own)
    prompt_tokens: int = Field(default=0, ge=0, le=10_000_000)
    completion_tokens: int = Field(default=0, ge=0, le=10_000_000)

    _omit_empty = frozenset({"prompt_tokens", "completion_tokens"})


class Claim(_Model):
    type: Literal["claim"] = "claim"
    node: TaskId
    lease_ms: int = Field(ge=100, le=3_600_000)


class Renew(_Model):
    type: Literal["renew"] = "renew"
    node: TaskId
    claim: EventId
    lease_ms: int = Field(ge=100, le=3_600_000)


class Release(_Model):
    """The holder gives a task back early (its LLM keeps failing, or it lost the lease)."""

    type: Literal["release"] = "release"
    node: TaskId
    claim: EventId
    reason: str = Field(default="", max_length=200)
    prompt_tokens: int = Field(default=0, ge=0, le=10_000_000)  # the attempts given up on
    completion_tokens: int = Field(default=0, ge=0, le=10_000_000)

    _omit_empty = frozenset({"prompt_tokens", "completion_tokens"})


class Result(_Model):
    """A leaf's output, or a split node's synthesis of its children's results."""

    type: Literal["result"] = "result"
    node: TaskId
    claim: EventId
    output: str = Field(min_length=1, max_length=8000)
    prompt_tokens: int = Field(default=0, ge=0, le=10_000_000)
    completion_tokens: int = Field(default=0, ge=0, le=10_000_000)


Body = Annotated[
    Union[Hello, Goal, Brief, Proposal, Score, Review, Vote, Claim, Renew, Release, Result, Revoke],
    Field(discriminator="type"),
]
EVENT_TYPES = ("hello", "goal", "brief", "proposal", "score", "review", "vote", "claim", "renew",
               "release", "result", "revoke")


class _Wire(_Model):
    v: Literal[2]
    author: str = Field(pattern=PEER_ID)
    hlc: tuple[Annotated[int, Field(ge=0, le=2**53)], Annotated[int, Field(ge=0, le=2**31)]]
    body: Body
    sig: str = Field(min_length=80, max_length=100)


_WIRE = TypeAdapter(_Wire)


def canonical(obj: Any) -> bytes:
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)


@dataclass(frozen=True, slots=True)
class Event:
    id: str
    author: str
    hlc: Timestamp
    body: Any  # one of the Body models
    sig: bytes
    raw: bytes  # canonical signed bytes: what is stored and sent

    @property
    def type(self) -> str:
        return self.body.type

    @property
    def order(self) -> tuple[int, int, str]:
        return (self.hlc.wall, self.hlc.logical, self.author)

    def __repr__(self) -> str:
        return f"Event({self.type} {self.id[:10]} by {self.author[-6:]} @{self.hlc})"


def _unsigned(author: str, hlc: Timestamp, body: Any) -> dict[str, Any]:
    return {"v": PROTOCOL_VERSION, "author": author, "hlc": [hlc.wall, hlc.logical],
            "body": body.model_dump(mode="json")}


def sign_event(identity: Identity, hlc: Timestamp, body: Any) -> Event:
    unsigned = _unsigned(identity.peer_id, hlc, body)
    payload = canonical(unsigned)
    sig = identity.sign(payload)
    raw = canonical({**unsigned, "sig": base64.b64encode(sig).decode()})
    if len(raw) > MAX_EVENT_BYTES:
        raise Rejected(Reason.OVERSIZE, f"{len(raw)} bytes > {MAX_EVENT_BYTES}")
    return Event(hashlib.sha256(payload).hexdigest(), identity.peer_id, hlc, body, sig, raw)


def decode_event(raw: bytes | str) -> Event:
    """Parse and verify one event; raises Rejected with a named reason."""
    if isinstance(raw, str):
        raw = raw.encode()
    if len(raw) > MAX_EVENT_BYTES:
        raise Rejected(Reason.OVERSIZE, f"{len(raw)} bytes > {MAX_EVENT_BYTES}")
    try:
        wire = _WIRE.validate_json(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise Rejected(Reason.MALFORMED, f"{where}: {first['msg']}") from None
    hlc = Timestamp(*wire.hlc)
    unsigned = _unsigned(wire.author, hlc, wire.body)
    payload = canonical(unsigned)
    try:
        sig = base64.b64decode(wire.sig, validate=True)
    except ValueError:
        raise Rejected(Reason.BAD_SIGNATURE, "signature is not base64") from None
    if not verify(wire.author, payload, sig):
        raise Rejected(Reason.BAD_SIGNATURE, "signature does not match author and content")
    canon = canonical({**unsigned, "sig": wire.sig})
    return Event(hashlib.sha256(payload).hexdigest(), wire.author, hlc, wire.body, sig, canon)
