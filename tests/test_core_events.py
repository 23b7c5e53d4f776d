import base64
import hashlib

import orjson
import pytest
from hypothesis import given, settings, strategies as st

from agent.core.events import MAX_EVENT_BYTES, Goal, PlanParams, canonical, decode_event, sign_event
from agent.core.hlc import Timestamp
from agent.core.identity import Identity, peer_id_from_public, verify
from agent.core.reasons import Reason, Rejected
from builders import goal, ident, params, proposal, vote


def test_peer_id_is_libp2p_peer_id_of_same_key():
    from libp2p.crypto.ed25519 import create_new_key_pair
    from libp2p.peer.id import ID

    seed = bytes(range(32))
    kp = create_new_key_pair(seed)
    assert Identity(seed).peer_id == ID.from_pubkey(kp.public_key).to_base58()
    assert Identity(seed).public_bytes == kp.public_key.to_bytes()


def test_canonical_bytes_and_id():
    a = ident("alice")
    e = goal(a)
    obj = orjson.loads(e.raw)
    assert e.raw == orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)
    assert b" " not in e.raw.replace(b"Plan a two-week trip to Japan", b"")
    unsigned = {k: v for k, v in obj.items() if k != "sig"}
    assert e.id == hashlib.sha256(canonical(unsigned)).hexdigest()
    assert verify(a.peer_id, canonical(unsigned), base64.b64decode(obj["sig"]))


def test_roundtrip_and_recanonicalises_whitespace():
    e = goal(ident("alice"))
    spaced = orjson.dumps(orjson.loads(e.raw), option=orjson.OPT_INDENT_2)
    d = decode_event(spaced)
    assert d.id == e.id and d.raw == e.raw


def _tamper(raw: bytes, path: tuple, value) -> bytes:
    obj = orjson.loads(raw)
    cur = obj
    for p in path[:-1]:
        cur = cur[p]
    cur[path[-1]] = value
    return orjson.dumps(obj)


FIELDS = [
    (("hlc", 0), 5), (("hlc", 1), 9), (("body", "title"), "Plan a trip to Peru"),
    (("body", "description"), "x"), (("body", "params", "quorum"), 3),
    (("body", "params", "max_depth"), 3), (("body", "params", "max_lease_ms"), 4000),
]


@pytest.mark.parametrize("path,value", FIELDS)
def test_any_changed_field_fails_verification(path, value):
    e = goal(ident("alice"))
    with pytest.raises(Rejected) as ei:
        decode_event(_tamper(e.raw, path, value))
    assert ei.value.reason is Reason.BAD_SIGNATURE


@settings(max_examples=60, deadline=None)
@given(st.text(min_size=1, max_size=120), st.text(max_size=200), st.integers(0, 2**40))
def test_tampered_text_or_wrong_key_fails(title, desc, wall):
    a, b = ident("a"), ident("b")
    e = sign_event(a, Timestamp(wall, 0), Goal(title=title, description=desc, params=params()))
    assert decode_event(e.raw).id == e.id
    obj = orjson.loads(e.raw)
    obj["body"]["title"] = title + "!"
    with pytest.raises(Rejected):
        decode_event(orjson.dumps(obj))
    forged = orjson.loads(e.raw)
    forged["author"] = b.peer_id  # a signature made by a, claimed by b
    with pytest.raises(Rejected) as ei:
        decode_event(orjson.dumps(forged))
    assert ei.value.reason is Reason.BAD_SIGNATURE


@pytest.mark.parametrize("raw,reason", [
    (b"not json", Reason.MALFORMED),
    (b"{}", Reason.MALFORMED),
    (b'{"v":2}', Reason.MALFORMED),
    (b'{"v":1}', Reason.MALFORMED),
    (b"x" * (MAX_EVENT_BYTES + 1), Reason.OVERSIZE),
])
def test_malformed_and_oversize(raw, reason):
    with pytest.raises(Rejected) as ei:
        decode_event(raw)
    assert ei.value.reason is reason


def test_schema_bounds_and_unknown_fields():
    a = ident("a")
    g = goal(a)
    for path, value in [(("body", "extra"), 1), (("body", "title"), "x" * 201), (("body", "title"), ""),
                        (("body", "type"), "nonsense"), (("extra",), 1), (("author",), "not-a-peer")]:
        with pytest.raises(Rejected) as ei:
            decode_event(_tamper(g.raw, path, value))
        assert ei.value.reason is Reason.MALFORMED, path
    p = proposal(a, g.id, ["Tokyo", "Kyoto"])
    obj = orjson.loads(p.raw)
    obj["body"]["subgoals"] = obj["body"]["subgoals"][:1]  # fewer than 2 subgoals
    with pytest.raises(Rejected) as ei:
        decode_event(orjson.dumps(obj))
    assert ei.value.reason is Reason.MALFORMED
    for key, bad in (("round", 0), ("round", 1001), ("phase", "commit"), ("value", "maybe")):
        v = orjson.loads(vote(a, g.id, p.id).raw)
        v["body"][key] = bad
        with pytest.raises(Rejected) as ei:
            decode_event(orjson.dumps(v))
        assert ei.value.reason is Reason.MALFORMED, key


def test_goal_params_need_a_sorted_electorate_and_a_majority_quorum():
    import pydantic

    s = sorted(ident(n).peer_id for n in ("x", "y", "z", "w"))
    for electorate, quorum in ((s[:3], 1), (s[:4], 2), (s[:3], 4), (list(reversed(s[:3])), 2),
                               (s[:2] + s[:1], 2), ([], 1)):
        with pytest.raises(pydantic.ValidationError):
            PlanParams(electorate=tuple(electorate), quorum=quorum, max_depth=2, max_children=3, max_rounds=2)
    p = PlanParams(electorate=tuple(s[:4]), quorum=3, max_depth=2, max_children=3, max_rounds=2)
    assert p.tolerated_liars == 1  # fewer than 2q - n = 2 liars keep a decision safe
    assert PlanParams(electorate=tuple(s[:3]), quorum=2, max_depth=2, max_children=3,
                      max_rounds=2).tolerated_liars == 0


def test_bad_base64_signature():
    g = orjson.loads(goal(ident("a")).raw)
    g["sig"] = "!" * 88
    with pytest.raises(Rejected) as ei:
        decode_event(orjson.dumps(g))
    assert ei.value.reason is Reason.BAD_SIGNATURE


def test_peer_id_from_public_rejects_wrong_length():
    with pytest.raises(ValueError):
        peer_id_from_public(b"123")


@settings(max_examples=200, deadline=None)
@given(seed=st.binary(min_size=32, max_size=32), message=st.binary(max_size=600),
       flip=st.integers(min_value=-1, max_value=64 * 8 - 1), other=st.binary(min_size=32, max_size=32))
def test_libsodium_checks_agree_with_openssl(seed, message, flip, other):
    """Events are checked with libsodium (faster); an honest signature, a flipped bit and the
    wrong key give the answer OpenSSL gives (what earlier versions used)."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    me, stranger = Identity(seed), Identity(other)
    sig = bytearray(me.sign(message))
    if flip >= 0:
        sig[flip // 8] ^= 1 << (flip % 8)
    for who in (me, stranger):
        try:
            Ed25519PublicKey.from_public_bytes(who.public_bytes).verify(bytes(sig), message)
            openssl = True
        except InvalidSignature:
            openssl = False
        assert verify(who.peer_id, message, bytes(sig)) is openssl
    assert verify(me.peer_id, message, bytes(sig)) is (flip < 0)
    assert not verify(me.peer_id, message, bytes(sig[:63]))  # truncated


def test_the_quorum_rule_has_one_owner():
    from agent.core.events import is_majority, majority

    assert [majority(n) for n in (1, 2, 3, 4, 5, 101)] == [1, 2, 2, 3, 3, 51]
    assert is_majority(3, 5) and not is_majority(2, 4) and not is_majority(6, 5)
