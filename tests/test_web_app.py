"""The observer's web server in one process (the runtime over an in-memory bus, the real
Starlette app under Hypercorn's trio worker on 127.0.0.1, an HTTP client): the form refuses
bad input with a clear message and publishes nothing; a good goal is published with the page
in its electorate; the event stream sends a snapshot then only what changed; a person's
judgment is published as a score and, where the page is an elector, becomes its prevote; the
plan downloads; the Host check, the same-origin rule and the token."""

import time

import httpx
import orjson
import pytest
import trio

from agent.core.events import Proposal, Subgoal, sign_event
from agent.core.hlc import Timestamp
from agent.store import MemoryLog
from agent.drivers.real.runtime import Runtime, load_identity
from agent.settings import load_settings
from agent.web.server import FormError, is_loopback, page_token, parse_goal_form, serve_web
from agent.web.view import members_view
from builders import T0, hello, ident, precommit, prevote

SCORERS = [ident(f"s{i}") for i in range(3)]


class LoneNet:
    """A network whose only peers are the scorers (their hellos are fed in by hand): a
    submitter names only scorers it holds connections to (agent.goals.known_scorers)."""

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        await trio.sleep_forever()

    async def publish(self, raw: bytes) -> None:
        pass

    async def sync_all(self) -> int:
        return 0

    async def sync_from(self, peer: str) -> int:
        return 0

    @property
    def connected(self) -> list[str]:
        return [s.peer_id for s in SCORERS]


def make_observer(tmp_path, **kw) -> Runtime:
    # goals without a brief and without reviews: nobody here settles one (tests of the page's
    # brief are in test_web_brief.py)
    kw = {"brief": False, "max_attempts": 1, **kw}
    s = load_settings(data_dir=tmp_path, mdns=False, web_port=0, web_host="127.0.0.1", web_throttle=0.05,
                      startup_sync=0.1, proposal_window=0.1, vote_timeout=0.1, scorers=3, **kw)
    return Runtime(s, "observer", identity=load_identity(tmp_path), log=MemoryLog(), net=LoneNet())


async def start(nursery, rt: Runtime) -> str:
    await nursery.start(rt.run)
    for s in SCORERS:
        assert await rt.ingest(hello(s, "scorer").raw, "test")
    return await nursery.start(serve_web, rt.settings, rt)


def client(url: str, **kw) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=url, trust_env=False, timeout=20, **kw)


def propose(rt: Runtime, node: str, titles: list[str], who: str = "d1"):
    body = Proposal(node=node, strategy="by place", subgoals=tuple(Subgoal(title=t) for t in titles))
    # stamped after the goal it splits, even within the goal's own millisecond (a proposal
    # stamped the same ms as a goal the page had just published was refused as backdated)
    goal = rt.plan.events.get(node)
    wall = rt.now_ms() if goal is None else max(rt.now_ms(), goal.hlc.wall + 1)
    return sign_event(ident(who), Timestamp(wall, 0), body)


def test_form_fields_are_checked_with_clear_messages():
    s = load_settings(scorers=3)
    ok = parse_goal_form({"title": "  Plan a   wedding ", "depth": "1", "width": 3, "rounds": 2}, s)
    assert ok["title"] == "Plan a wedding" and (ok["depth"], ok["width"], ok["rounds"], ok["quorum"]) == (1, 3, 2, None)
    assert parse_goal_form({"title": "Plan"}, s)["depth"] == s.max_depth  # defaults from settings
    cases = {
        "the goal is empty": {"title": "   "},
        "the goal is empty: write": {"title": "\u200b\x1b[0m\u2060"},
        "has no word in it": {"title": "---"},
        "at most 200": {"title": "x" * 201},
        "description is": {"title": "Plan", "description": "y" * 2001},
        "depth must be between 0 and 6": {"title": "Plan", "depth": 7},
        "width (subgoals per split) must be between 2 and 12": {"title": "Plan", "width": 1},
        "rounds must be between 1 and 10": {"title": "Plan", "rounds": 0},
        "quorum must be between 1 and 101": {"title": "Plan", "quorum": 0},
        "must be a whole number": {"title": "Plan", "depth": "two"},
    }
    for message, data in cases.items():
        with pytest.raises(FormError) as got:
            parse_goal_form(data, s)
        assert message in got.value.message, (message, got.value.message)


def test_the_page_needs_a_token_when_exposed():
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.0.2.7")
    assert page_token(load_settings(web_host="127.0.0.1")) == (None, False)
    token, generated = page_token(load_settings(web_host="0.0.0.0"))
    assert generated and len(token) >= 24
    assert page_token(load_settings(web_host="0.0.0.0", web_token="s" * 20)) == ("s" * 20, False)


async def read_events(resp: httpx.Response, out: list, stop: trio.Event) -> None:
    kind = None
    async for line in resp.aiter_lines():
        if line.startswith("event:"):
            kind = line[6:].strip()
        elif line.startswith("data:"):
            out.append((kind, orjson.loads(line[5:].strip()), time.time()))
        if stop.is_set():
            return


async def wait_for(pred, timeout=15.0):
    with trio.fail_after(timeout):
        while not pred():
            await trio.sleep(0.05)


async def test_submit_stream_judge_and_download(tmp_path):
    rt = make_observer(tmp_path)
    async with trio.open_nursery() as nursery:
        url = await start(nursery, rt)
        async with client(url) as c:
            r = await c.get("/")
            assert r.status_code == 200 and "/static/app.js" in r.text
            assert "default-src 'none'" in r.headers["content-security-policy"]
            assert "connect-src 'self'" in r.headers["content-security-policy"]
            for path in ("/static/app.js", "/static/style.css", "/healthz"):
                assert (await c.get(path)).status_code == 200, path

            # ---- bad input: a clear message, nothing published
            before = len(rt.store)
            bad = {
                "the goal is empty": {"title": ""},
                "1,000,": {"title": "x" * 1_000_000},
                "depth must be between": {"title": "Plan a trip", "depth": 99},
                "quorum 1 does not fit the electorate of 4": {"title": "Plan a trip", "quorum": 1, "include_me": True},
                "quorum 5 does not fit the electorate of 3": {"title": "Plan a trip", "quorum": 5},
            }
            for message, data in bad.items():
                r = await c.post("/api/goals", json=data)
                assert r.status_code in (400, 413), (message, r.status_code, r.text)
                assert message in r.json()["error"], (message, r.json())
            r = await c.post("/api/goals", content=b"title=x", headers={"content-type": "application/x-www-form-urlencoded"})
            assert r.status_code == 415
            r = await c.post("/api/goals", json={"title": "Plan"}, headers={"origin": "http://evil.example"})
            assert r.status_code == 403
            r = await c.get("/", headers={"host": "evil.example"})  # DNS rebinding
            assert r.status_code == 421
            assert len(rt.store) == before and not rt.plan.goals

            # ---- the stream: a snapshot, then only what changed
            got: list = []
            stop = trio.Event()
            async with c.stream("GET", "/events") as resp:
                async with trio.open_nursery() as reader:
                    assert resp.headers["content-type"].startswith("text/event-stream")
                    reader.start_soon(read_events, resp, got, stop)
                    await wait_for(lambda: got)
                    assert got[0][0] == "snapshot" and got[0][1]["nodes"] == {}

                    r = await c.post("/api/goals", json={"title": "Plan a two-week trip to Japan", "depth": 1,
                                                         "width": 3, "rounds": 2, "include_me": True})
                    assert r.status_code == 200, r.text
                    mine = r.json()
                    assert mine["ok"] and mine["counted"] and rt.me in mine["electorate"] and mine["quorum"] == 3
                    gid = mine["goal"]
                    assert gid in rt.plan.goals and len(rt.store) == before + 1
                    await wait_for(lambda: any(k == "patch" and gid in m["nodes"] for k, m, _ in got))

                    t0 = time.time()
                    p1 = propose(rt, gid, ["Tokyo and Kanto", "Kyoto and Kansai"])
                    assert await rt.ingest(p1.raw, "test")
                    await wait_for(lambda: any(k == "patch" and gid in m["nodes"] and m["nodes"][gid]["proposals"]
                                               for k, m, _ in got))
                    patch = next(m for k, m, _ in got if k == "patch" and gid in m["nodes"] and m["nodes"][gid]["proposals"])
                    assert list(patch["nodes"]) == [gid]  # only the node that changed
                    arrived = next(t for k, m, t in got if m is patch)
                    print(f"event -> stream: {1000 * (arrived - t0):.1f} ms (throttle {rt.settings.web_throttle * 1000:.0f} ms)")

                    # ---- a person's judgment: counted where the page is an elector
                    r = await c.post("/api/judge", json={"node": gid, "proposal": p1.id, "approve": False, "feedback": ""})
                    assert r.status_code == 400 and "Say why" in r.json()["error"]
                    r = await c.post("/api/judge", json={"node": gid, "proposal": "ab" * 32, "approve": True})
                    assert r.status_code == 404
                    r = await c.post("/api/judge", json={"node": gid, "proposal": p1.id, "approve": True,
                                                         "feedback": "clear and by region"})
                    assert r.status_code == 200, r.text
                    assert r.json()["counted"] and r.json()["message"].startswith("Counted")
                    node = rt.tree().node(gid)
                    assert [(s.author, s.acceptable, s.feedback) for s in node.proposal(p1.id).scores] == [
                        (rt.me, True, "clear and by region")]
                    await wait_for(lambda: rt.me in rt.tree().node(gid).tally.round(1).prevotes.get(p1.id, ()))
                    r = await c.post("/api/judge", json={"node": gid, "proposal": p1.id, "approve": False, "feedback": "no"})
                    assert r.status_code == 409

                    # ---- where the page is not an elector: a score, shown and fed back, not a vote
                    r = await c.post("/api/goals", json={"title": "Plan a wedding", "depth": 1})
                    g2 = r.json()["goal"]
                    assert not r.json()["counted"] and rt.me not in r.json()["electorate"]
                    p2 = propose(rt, g2, ["Venue and date", "Guests and invitations"], who="d2")
                    assert await rt.ingest(p2.raw, "test")
                    r = await c.post("/api/judge", json={"node": g2, "proposal": p2.id, "approve": False,
                                                         "feedback": "add the budget"})
                    assert r.status_code == 200 and not r.json()["counted"]
                    assert "Not counted" in r.json()["message"]
                    n2 = rt.tree().node(g2)
                    assert [s.feedback for s in n2.proposal(p2.id).scores] == ["add the budget"]
                    assert not n2.tally.rounds  # no vote from the page
                    reader.cancel_scope.cancel()

            # ---- downloads
            r = await c.get(f"/plan/{gid}.md")
            assert r.status_code == 200 and r.text.startswith("# Plan a two-week trip to Japan")
            assert "attachment" in r.headers["content-disposition"] and ".md" in r.headers["content-disposition"]
            doc = (await c.get(f"/plan/{gid}.json")).json()
            assert doc["goals"][0]["id"] == gid and len(doc["digest"]) == 64 and doc["done"] is False
            assert (await c.get(f"/plan/{'cd' * 32}.md")).status_code == 404
            tree = (await c.get("/api/tree.json")).json()
            assert tree["digest"] == rt.tree().digest
        nursery.cancel_scope.cancel()


async def test_token_is_required_when_set(tmp_path):
    rt = make_observer(tmp_path, web_token="correct-horse-battery-staple")
    async with trio.open_nursery() as nursery:
        url = await start(nursery, rt)
        async with client(url) as c:
            r = await c.get("/")
            assert r.status_code == 401 and "needs its token" in r.text
            assert (await c.get("/static/style.css")).status_code == 200  # the token page's own style
            r = await c.get("/api/tree.json")
            assert r.status_code == 401 and "token" in r.json()["error"]
            assert (await c.get("/events")).status_code == 401
            assert (await c.post("/api/goals", json={"title": "Plan"})).status_code == 401
            assert (await c.get("/?token=wrong")).status_code == 401
            r = await c.get("/?token=correct-horse-battery-staple")
            assert r.status_code == 303 and "httponly" in r.headers["set-cookie"].lower()
            assert (await c.get("/")).status_code == 200  # the cookie now
            assert (await c.get("/api/tree.json")).status_code == 200
        async with client(url, headers={"authorization": "Bearer correct-horse-battery-staple"}) as c:
            assert (await c.get("/api/tree.json")).status_code == 200
        nursery.cancel_scope.cancel()


async def test_a_page_that_falls_behind_gets_a_snapshot_instead():
    from agent.web.hub import QUEUE_LIMIT, Subscriber

    sub = Subscriber()
    for seq in range(1, 4):
        sub.push((seq, b"p"))
    sub.skip_to(2)  # a snapshot at seq 2 contains patches 1 and 2
    assert await sub.next() == (3, b"p")
    for seq in range(4, 5 + QUEUE_LIMIT):
        sub.push((seq, b"p"))
    assert await sub.next() is None  # too far behind: a snapshot is due, the backlog is dropped
    sub.push((99, b"q"))
    assert await sub.next() == (99, b"q")
    sub.close()
    with pytest.raises(trio.EndOfChannel):
        await sub.next()


def test_the_demo_gives_its_observer_a_web_port(tmp_path):
    from agent.demo import DemoConfig, child_env, plan_children

    cfg = DemoConfig(decomposers=1, scorers=1, executors=1, observers=1)
    children = plan_children(cfg, tmp_path)
    obs = next(c for c in children if c.role == "observer")
    assert obs.web_port and all(c.web_port == 0 for c in children if c is not obs)
    env = child_env(cfg, obs, children, 0)
    assert env["SWARM_WEB_PORT"] == str(obs.web_port) and env["SWARM_WEB_HOST"] == "127.0.0.1"
    assert not any(c.web_port for c in plan_children(DemoConfig(web=False), tmp_path / "off"))


async def test_the_page_submits_only_if_its_agent_may_submit(tmp_path):
    """In a swarm with an authority the page's goals are its agent's: an observer whose
    credential does not grant submitter gets a clear refusal, and nothing is published."""
    import time as _time

    from agent.core.membership import Membership, issue_credential
    from builders import AUTHORITY, SWARM, member_hello

    s = load_settings(data_dir=tmp_path, mdns=False, web_port=0, web_host="127.0.0.1", web_throttle=0.05,
                      startup_sync=0.1, scorers=3, swarm=SWARM, authority=AUTHORITY.peer_id)
    me = load_identity(tmp_path)
    now = _time.time_ns() // 1_000_000
    cred = issue_credential(AUTHORITY, me.peer_id, ["observer"], SWARM, now - 60_000, now + 3_600_000)
    rt = Runtime(s, "observer", identity=me, log=MemoryLog(), net=LoneNet(),
                 membership=Membership(AUTHORITY.peer_id, SWARM), credential=cred)
    async with trio.open_nursery() as nursery:
        await nursery.start(rt.run)
        for sc in SCORERS:
            rel = now - 1767225600000  # builders' stamps count from 2026-01-01
            assert await rt.ingest(member_hello(sc, "scorer", wall=rel - 1000, issued=rel - 60_000,
                                                expires=rel + 3_600_000).raw, "test")
        url = await nursery.start(serve_web, rt.settings, rt)
        async with client(url) as c:
            r = await c.post("/api/goals", json={"title": "Plan a trip"})
        nursery.cancel_scope.cancel()
    assert r.status_code == 403 and "may not submit" in r.json()["error"], r.text
    assert not rt.plan.goals


async def test_include_me_needs_the_scorer_role_where_there_is_an_authority(tmp_path):
    """A page that may submit but not score asks to be an elector: a one-line refusal naming
    what its credential grants, nothing published; the same goal without it goes out."""
    import time as _time

    from agent.core.membership import Membership, issue_credential
    from builders import AUTHORITY, SWARM, member_hello

    s = load_settings(data_dir=tmp_path, mdns=False, web_port=0, web_host="127.0.0.1", web_throttle=0.05,
                      startup_sync=0.1, scorers=3, swarm=SWARM, authority=AUTHORITY.peer_id)
    me = load_identity(tmp_path)
    now = _time.time_ns() // 1_000_000
    cred = issue_credential(AUTHORITY, me.peer_id, ["observer", "submitter"], SWARM, now - 60_000, now + 3_600_000)
    rt = Runtime(s, "observer", identity=me, log=MemoryLog(), net=LoneNet(),
                 membership=Membership(AUTHORITY.peer_id, SWARM), credential=cred)
    async with trio.open_nursery() as nursery:
        await nursery.start(rt.run)
        for sc in SCORERS:
            rel = now - 1767225600000  # builders' stamps count from 2026-01-01
            assert await rt.ingest(member_hello(sc, "scorer", wall=rel - 1000, issued=rel - 60_000,
                                                expires=rel + 3_600_000).raw, "test")
        url = await nursery.start(serve_web, rt.settings, rt)
        async with client(url) as c:
            refused = await c.post("/api/goals", json={"title": "Plan a trip", "include_me": True})
            assert not rt.plan.goals
            ok = await c.post("/api/goals", json={"title": "Plan a trip"})
        nursery.cancel_scope.cancel()
    assert refused.status_code == 403, refused.text
    err = refused.json()
    assert err["field"] == "include_me" and "not scorer" in err["error"] and "\n" not in err["error"]
    assert ok.status_code == 200 and not ok.json()["counted"], ok.text
    assert len(rt.plan.goals) == 1


def test_the_peer_list_shows_each_clock_against_the_swarms(tmp_path):
    """Lags are our clock minus a peer's stamps (delay included): a peer whose events arrive
    30 s 'before' they were stamped is 30 s ahead; the list carries it, and our own offset."""
    from agent.web.hub import Hub
    from agent.web.view import clock_offsets

    assert clock_offsets({"a": -30_000, "b": 40, "c": 60}, 0) == {"a": 30_000, "b": -40, "c": -60}
    assert clock_offsets({"a": 5_000}, 5_000) == {"a": 0}  # we are the one 5 s ahead, not a

    rt = make_observer(tmp_path)
    fast, slow = SCORERS[0].peer_id, SCORERS[1].peer_id
    local = rt.local_ms()
    for i in range(3):  # three peers on time, one 30 s ahead
        rt.skew.sample(fast, local + 30_000 + i, local + i)
        for sc in SCORERS[1:]:
            rt.skew.sample(sc.peer_id, local - 50, local)
    clocks = Hub(rt, connected=lambda: [fast, slow])._clocks()
    assert abs(clocks[fast] - 30_000) <= 500 and abs(clocks[slow]) <= 500 and clocks[rt.me] == 0
    tree = rt.tree()
    view = members_view(tree, {}, [fast, slow], rt.me, clocks)
    got = {m["peer"]: m["clock_ms"] for m in view}
    assert got[fast] == clocks[fast] and got[slow] == clocks[slow]


async def test_the_plan_download_keeps_markup_in_titles_as_text(tmp_path):
    """The page's Markdown download, not only the renderer: a goal and a split titled with
    markup come back as text a CommonMark renderer shows, with no tag, link or heading of theirs,
    and a file name without them."""
    from markdown_it import MarkdownIt

    rt = make_observer(tmp_path)
    evil = 'Plan a trip <img src=x onerror=alert(1)> [go](javascript:alert(1)) "q"'
    async with trio.open_nursery() as nursery:
        url = await start(nursery, rt)
        async with client(url) as c:
            r = await c.post("/api/goals", json={"title": evil, "depth": 1})
            assert r.status_code == 200, r.text
            gid = r.json()["goal"]
            p = propose(rt, gid, ["<script>alert(2)</script> Day 1", "# Day 2 *bold*"])
            assert await rt.ingest(p.raw, "test")
            after = p.hlc.wall - T0  # a vote is stamped after the proposal it is for
            for s in SCORERS[:2]:  # the split decided: its subgoals are the plan's sections
                assert await rt.ingest(prevote(s, gid, p.id, wall=after + 1).raw, "test")
                assert await rt.ingest(precommit(s, gid, p.id, wall=after + 2).raw, "test")
            await wait_for(lambda: rt.tree().node(gid).decided == p.id)
            r = await c.get(f"/plan/{gid}.md")
            assert r.status_code == 200
            assert "Day 1" in r.text and "Day 2" in r.text
            html = MarkdownIt("commonmark").render(r.text)
            for tag in ("<img", "<script", "<a ", "<strong>", "<em>bold"):
                assert tag not in html, (tag, html)
            assert "&lt;img src=x onerror=alert(1)&gt;" in html
            disposition = r.headers["content-disposition"]
            assert disposition.startswith('attachment; filename="') and disposition.count('"') == 2
            assert not any(ch in disposition for ch in "<>[]()")
        nursery.cancel_scope.cancel()
