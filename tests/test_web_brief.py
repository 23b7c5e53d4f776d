"""The page shows a goal's working assumptions first, and the person who submitted the goal
amends them there: the amendment (a brief of the goal's own author) takes over what the
electors decided, and every prompt made from then on carries it."""

from __future__ import annotations

import httpx
import trio

from agent.behaviour import work
from agent.core.events import Brief, Goal, sign_event
from agent.core.hlc import Timestamp
from agent.goals import plan_params
from agent.web.view import nodes_view
from builders import ident
from test_web_app import make_observer, start


async def wait_for(cond, timeout=20.0):
    with trio.fail_after(timeout):
        while not cond():
            await trio.sleep(0.05)


def client(url):
    return httpx.AsyncClient(base_url=url, trust_env=False, timeout=20)


async def test_the_submitter_amends_the_brief_and_nobody_else_can(tmp_path):
    rt = make_observer(tmp_path, brief=True)
    async with trio.open_nursery() as nursery:
        url = await start(nursery, rt)
        async with client(url) as c:
            r = await c.post("/api/goals", json={"title": "Plan a two-week trip to Japan", "depth": 1})
            assert r.status_code == 200, r.text
            gid = r.json()["goal"]
            view = nodes_view(rt.tree(), rt.plan)[gid]
            assert view["brief_wanted"] and not view["brief_settled"] and view["brief"] is None

            # a decomposer proposes a brief: shown, not yet settled (nobody voted)
            proposed = sign_event(ident("d1"), Timestamp(rt.now_ms(), 0),
                                  Brief(node=gid, duration="14 weeks", currency="JPY", budget="5000 JPY"))
            assert await rt.ingest(proposed.raw, "test")
            view = nodes_view(rt.tree(), rt.plan)[gid]
            assert [b["facts"]["duration"] for b in view["briefs"]] == ["14 weeks"] and not view["brief_settled"]

            # bad input: a clear message, nothing published
            before = len(rt.store)
            for data, status, text in [
                ({"goal": "ab" * 32, "duration": "x"}, 404, "no such goal"),
                ({"goal": gid, "currency": "euros"}, 400, "currency"),
                ({"goal": gid, "duration": 3}, 400, "must be text"),
                ({"goal": gid}, 400, "at least one assumption"),
            ]:
                r = await c.post("/api/brief", json=data)
                assert r.status_code == status and text in r.json()["error"], (data, r.text)
            assert len(rt.store) == before

            # the submitter's amendment settles it at once and takes over
            r = await c.post("/api/brief", json={"goal": gid, "duration": "14 days", "dates": "2-15 April 2027",
                                                 "budget": "5,000 EUR for two", "currency": "eur",
                                                 "place": "Tokyo, Kyoto, Osaka", "people": "2 adults"})
            assert r.status_code == 200 and r.json()["ok"], r.text
            await wait_for(lambda: rt.tree().node(gid).brief_settled)
            root = rt.tree().node(gid)
            assert root.brief["currency"] == "EUR" and root.brief["duration"] == "14 days"
            req = work.decompose_req(rt.tree(), root, "outline", 1)
            assert "Brief (every step keeps to it): duration: 14 days; dates: 2-15 April 2027" in req.prompt

            # a goal somebody else submitted: this page may not amend it
            foreign = sign_event(ident("someone"), Timestamp(rt.now_ms(), 0),
                                 Goal(title="Plan a bakery", params=plan_params(rt.settings, [rt.me])))
            assert await rt.ingest(foreign.raw, "test")
            r = await c.post("/api/brief", json={"goal": foreign.id, "duration": "1 month"})
            assert r.status_code == 403 and "Only the person who submitted" in r.json()["error"]
        nursery.cancel_scope.cancel()
