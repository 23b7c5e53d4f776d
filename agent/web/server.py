"""The observer's web page: a Starlette app served by Hypercorn's trio worker, in the observer's
own trio loop, next to its runtime.

Routes
    GET  /                     the page (static HTML/JS/CSS from agent/web/static: nothing external)
    GET  /events               server-sent events: a snapshot, then patches as the log grows
    GET  /api/tree.json        the whole tree with its digest (as `observe --once --json`)
    GET  /plan/<goal>.md|.json the plan of one goal, as a download
    POST /api/goals            submit a goal (the same validated path as `python -m agent submit`)
    POST /api/judge            a person approves or rejects a split, with feedback
    POST /api/brief            the person who submitted a goal amends its working assumptions
    GET  /healthz

Security: bound to loopback by default, where it checks the Host header (no DNS rebinding).
Bound anywhere else it requires a token (SWARM_WEB_TOKEN, or one generated and logged at
start): ``/?token=...`` once sets a cookie; API clients may send ``Authorization: Bearer``.
Requests that publish must be JSON from the page's own origin. A Content-Security-Policy of
'self' keeps the page from loading or sending anything elsewhere.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import re
import secrets
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson
import trio
from pydantic import ValidationError
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from agent.goals import (
    DESCRIPTION_MAX, TITLE_MAX, GoalTextError, SubmitError, check_goal_text, choose_electorate, electorate_size,
    make_goal,
)
from agent.supervise import supervise
from agent.core.events import BRIEF_FIELDS, Brief, PlanParams, canonical, is_majority, majority
from agent.core.reasons import Rejected
from agent.drivers.real.driver import Driver
from agent.render import markdown_plan
from agent.drivers.real.runtime import NotMember, Runtime
from agent.settings import Settings

from .hub import Hub
from .person import MAX_FEEDBACK, Judgment, PersonScorer

STATIC = Path(__file__).parent / "static"
MAX_BODY = 64 * 1024  # a goal is at most 200 + 2000 characters: anything this big is refused
DRAIN_MAX = 16 * 2**20  # an oversize body is read (and dropped) up to this, then the connection closes
COOKIE = "swarm_web_token"
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1", "[::1]"}


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _bounds(field: str) -> tuple[int, int]:
    lo = hi = None
    for m in PlanParams.model_fields[field].metadata:
        lo = getattr(m, "ge", lo)
        hi = getattr(m, "le", hi)
    assert lo is not None and hi is not None
    return lo, hi


FORM = {  # form field -> (PlanParams field, label)
    "depth": ("max_depth", "depth"),
    "width": ("max_children", "width (subgoals per split)"),
    "rounds": ("max_rounds", "rounds"),
}


class FormError(ValueError):
    def __init__(self, field: str | None, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.field = field
        self.message = message
        self.status = status


def _int(data: dict[str, Any], name: str, label: str, lo: int, hi: int, default: int | None) -> int | None:
    v = data.get(name)
    if v is None or (isinstance(v, str) and not v.strip()):
        return default
    if isinstance(v, bool):
        raise FormError(name, f"{label} must be a whole number")
    try:
        n = int(v) if not isinstance(v, float) or v.is_integer() else None
    except (TypeError, ValueError):
        n = None
    if n is None:
        raise FormError(name, f"{label} must be a whole number, not {str(v)[:20]!r}")
    if not lo <= n <= hi:
        raise FormError(name, f"{label} must be between {lo} and {hi} (got {n})")
    return n


def parse_goal_form(data: Any, settings: Settings) -> dict[str, Any]:
    """Check the submit form's fields; raises FormError with a message for the person."""
    if not isinstance(data, dict):
        raise FormError(None, "expected a JSON object")
    try:
        title, description = check_goal_text(data.get("title"), data.get("description") or "")
    except GoalTextError as exc:
        raise FormError(exc.field, str(exc)) from None
    defaults = {"depth": settings.max_depth, "width": settings.max_children, "rounds": settings.max_rounds}
    out: dict[str, Any] = {"title": title, "description": description}
    for name, (field, label) in FORM.items():
        lo, hi = _bounds(field)
        out[name] = _int(data, name, label, lo, hi, defaults[name])
    lo, hi = _bounds("quorum")
    out["quorum"] = _int(data, "quorum", "quorum", lo, hi, None)
    out["include_me"] = bool(data.get("include_me"))
    return out


def form_limits(settings: Settings) -> dict[str, Any]:
    out: dict[str, Any] = {"title_max": TITLE_MAX, "description_max": DESCRIPTION_MAX,
                           "feedback_max": MAX_FEEDBACK, "scorers": settings.scorers}
    defaults = {"depth": settings.max_depth, "width": settings.max_children, "rounds": settings.max_rounds}
    for name, (field, _label) in FORM.items():
        lo, hi = _bounds(field)
        out[name] = {"min": lo, "max": hi, "default": defaults[name]}
    lo, hi = _bounds("quorum")
    out["quorum"] = {"min": lo, "max": hi, "default": settings.quorum}
    return out


def slug(text: str) -> str:
    s = re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()
    return s[:60] or "plan"


class Guard:
    """ASGI middleware: token (when required), Host check (on loopback), same-origin JSON for
    anything that publishes, and security headers on every response."""

    def __init__(self, app: ASGIApp, *, token: str | None, host: str) -> None:
        self.app = app
        self.token = token
        self.hosts = set(LOOPBACK_NAMES) | ({host} if host not in ("0.0.0.0", "::") else set())

    def _authorized(self, scope: Scope, headers: dict[bytes, bytes]) -> bool:
        if self.token is None:
            return True
        want = self.token.encode()
        auth = headers.get(b"authorization", b"")
        if auth.startswith(b"Bearer ") and hmac.compare_digest(auth[7:].strip(), want):
            return True
        for part in headers.get(b"cookie", b"").split(b";"):
            k, _, v = part.strip().partition(b"=")
            if k == COOKIE.encode() and hmac.compare_digest(v, want):
                return True
        return False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        host = headers.get(b"host", b"").decode("latin-1")
        hostname = urlsplit("//" + host).hostname or ""
        if self.token is None and hostname not in self.hosts and f"[{hostname}]" not in self.hosts:
            await PlainTextResponse(f"unknown host {host!r}", 421)(scope, receive, send)
            return

        async def send_secure(message: dict) -> None:
            if message["type"] == "http.response.start":
                extra = [(b"content-security-policy", CSP.encode()), (b"x-content-type-options", b"nosniff"),
                         (b"referrer-policy", b"no-referrer"), (b"x-frame-options", b"DENY")]
                message = {**message, "headers": list(message.get("headers", [])) + extra}
            await send(message)

        path = scope["path"]
        if not self._authorized(scope, headers):
            given = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token", [""])[0]
            if path == "/" and given and hmac.compare_digest(given.encode(), (self.token or "").encode()):
                resp: Response = RedirectResponse("/", 303)
                resp.set_cookie(COOKIE, given, httponly=True, samesite="strict", max_age=30 * 86400)
                await resp(scope, receive, send_secure)
                return
            if path.startswith("/static/") or path == "/healthz":
                await self.app(scope, receive, send_secure)  # the page's own code and style are public
                return
            msg = ("This swarm page is exposed beyond this machine, so it needs its token: open the URL "
                   "the observer logged at start (…/?token=…), or send 'Authorization: Bearer <token>'.")
            if path == "/":
                await FileResponse(STATIC / "token.html", 401)(scope, receive, send_secure)
            else:
                await JSONResponse({"error": msg}, 401)(scope, receive, send_secure)
            return
        if scope["method"] not in ("GET", "HEAD"):
            ctype = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
            origin = headers.get(b"origin")
            if ctype != b"application/json":
                await JSONResponse({"error": "send JSON (Content-Type: application/json)"}, 415)(
                    scope, receive, send_secure)
                return
            if origin is not None and urlsplit(origin.decode("latin-1")).netloc != host:
                await JSONResponse({"error": "cross-origin request refused"}, 403)(scope, receive, send_secure)
                return
        await self.app(scope, receive, send_secure)


async def read_json(request: Request) -> Any:
    """The request's JSON body; anything over MAX_BODY is refused with a message. An oversize body
    is read and thrown away (up to DRAIN_MAX) so that the client, still uploading, gets the
    message rather than a reset connection."""
    body = bytearray()
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size <= MAX_BODY:
            body += chunk
        elif size > DRAIN_MAX:
            break
    if size > MAX_BODY:
        shown = f"{size:,} bytes" if size <= DRAIN_MAX else f"over {DRAIN_MAX // 2**20} MiB"
        raise FormError(None, f"The request is {shown}: far more than any goal ({TITLE_MAX} characters, "
                              f"and {DESCRIPTION_MAX:,} of description). Nothing was published.", 413)
    try:
        return orjson.loads(bytes(body))
    except orjson.JSONDecodeError:
        raise FormError(None, "the request is not valid JSON") from None


class Web:
    """The page's server side, bound to one observer runtime."""

    def __init__(self, settings: Settings, rt: Runtime, *, token: str | None,
                 electorate_timeout: float = 15.0) -> None:
        self.settings = settings
        self.rt = rt
        self.token = token
        self.electorate_timeout = electorate_timeout
        seed = int.from_bytes(hashlib.sha256(rt.me.encode()).digest()[:4], "big")
        self.person = PersonScorer(rt.me, settings.timing(), seed)
        self.driver = Driver(self.person, rt, None)
        self.hub = Hub(rt, throttle=settings.web_throttle, static_meta={
            "swarm": settings.swarm, "grafana": settings.grafana_url, "token_required": token is not None,
            "form": form_limits(settings),
        })
        self.submitted = 0
        self.app = Guard(self._starlette(), token=token, host=settings.web_host)

    def _starlette(self) -> Starlette:
        return Starlette(routes=[
            Route("/", self.index),
            Route("/healthz", self.healthz),
            Route("/events", self.events),
            Route("/api/tree.json", self.tree_json),
            Route("/api/goals", self.submit, methods=["POST"]),
            Route("/api/judge", self.judge, methods=["POST"]),
            Route("/api/brief", self.amend_brief, methods=["POST"]),
            Route("/plan/{goal:str}.md", self.plan_md),
            Route("/plan/{goal:str}.json", self.plan_json),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ])

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(self.hub.run)
            nursery.start_soon(supervise, self.driver.run, self.rt)
            task_status.started()

    # ------------------------------------------------------------------ pages
    async def index(self, request: Request) -> Response:
        return FileResponse(STATIC / "index.html", headers={"cache-control": "no-cache"})

    async def healthz(self, request: Request) -> Response:
        return JSONResponse({"ok": True, "events": len(self.rt.plan), "subscribers": len(self.hub.subscribers)})

    async def events(self, request: Request) -> Response:
        hub = self.hub
        sub = hub.subscribe()

        def snapshot(retry: int | None = None) -> ServerSentEvent:
            seq = hub.seq
            sub.skip_to(seq)  # patches queued meanwhile are in the snapshot already
            return ServerSentEvent(data=hub.snapshot().decode(), event="snapshot", id=str(seq), retry=retry)

        async def stream():
            try:
                yield snapshot(retry=1000)
                while True:
                    try:
                        item = await sub.next()
                    except trio.EndOfChannel:
                        return
                    if item is None:
                        yield snapshot()
                    else:
                        yield ServerSentEvent(data=item[1].decode(), event="patch", id=str(item[0]))
            finally:
                hub.unsubscribe(sub)

        return EventSourceResponse(stream(), ping=15, send_timeout=30, headers={"cache-control": "no-store"})

    async def tree_json(self, request: Request) -> Response:
        return Response(orjson.dumps(self.rt.tree().to_json()), media_type="application/json")

    def _root(self, goal: str):
        n = self.rt.tree().node(goal)
        return n if n is not None and n.depth == 0 else None

    async def plan_md(self, request: Request) -> Response:
        goal = request.path_params["goal"]
        root = self._root(goal)
        if root is None:
            return PlainTextResponse("no such goal", 404)
        text = markdown_plan(self.rt.tree(), goal)
        return PlainTextResponse(text, media_type="text/markdown; charset=utf-8", headers={
            "content-disposition": f'attachment; filename="{slug(root.title)}.md"'})

    async def plan_json(self, request: Request) -> Response:
        goal = request.path_params["goal"]
        root = self._root(goal)
        if root is None:
            return JSONResponse({"error": "no such goal"}, 404)
        body = {"goals": [root.to_json()]}
        doc = {**body, "digest": hashlib.sha256(canonical(body)).hexdigest(), "done": root.state.value == "done"}
        return Response(orjson.dumps(doc, option=orjson.OPT_INDENT_2), media_type="application/json", headers={
            "content-disposition": f'attachment; filename="{slug(root.title)}.json"'})

    # ------------------------------------------------------------------ actions
    def _error(self, exc: FormError) -> Response:
        headers = {"connection": "close"} if exc.status == 413 else None
        return JSONResponse({"ok": False, "error": exc.message, "field": exc.field}, exc.status, headers=headers)

    async def submit(self, request: Request) -> Response:
        try:
            form = parse_goal_form(await read_json(request), self.settings)
            try:
                electorate = await choose_electorate(self.settings, self.rt, self.electorate_timeout)
            except SubmitError as exc:
                raise FormError(None, f"{exc}. Nothing was published.", 503) from None
            if form["include_me"] and self.rt.me not in electorate:
                cred = self.rt.credential
                if self.rt.membership is not None and cred is not None and "scorer" not in cred.roles:
                    raise FormError("include_me", "You cannot be one of the electors: this page's credential "
                                                  f"grants {', '.join(cred.roles)}, not scorer. Untick 'include "
                                                  "me', or issue the page a credential with the scorer role. "
                                                  "Nothing was published.", 403)
                electorate = electorate + [self.rt.me]
            n = electorate_size(self.settings, len(electorate) - int(self.rt.me in electorate),
                                self.rt.me in electorate)
            q = form["quorum"]
            if q is not None and not is_majority(q, n):
                raise FormError("quorum", f"quorum {q} does not fit the electorate of {n} "
                                          f"({'including' if form['include_me'] else 'without'} you): it must be "
                                          f"a strict majority, from {majority(n)} to {n}.")
            s = self.settings.model_copy(update={"max_depth": form["depth"], "max_children": form["width"],
                                                 "max_rounds": form["rounds"], "quorum": q, "scorers": n})
            try:
                body = make_goal(s, form["title"], form["description"], electorate, author=self.rt.me)
            except ValidationError as exc:
                first = exc.errors()[0]
                raise FormError(None, f"{'.'.join(map(str, first['loc']))}: {first['msg']}") from None
        except FormError as exc:
            self.rt.log.info("web: goal refused", field=exc.field, error=exc.message[:200])
            return self._error(exc)
        try:
            ev = await self.rt.publish(body)
        except NotMember as exc:
            self.rt.log.warning("web: goal not published", error=str(exc)[:200])
            return self._error(FormError(None, f"This page's agent may not submit goals ({exc}). "
                                               "Nothing was published.", 403))
        except Rejected as exc:  # our own fold refuses it: what every peer would do
            self.rt.log.warning("web: goal not published", reason=exc.reason.value, error=str(exc)[:200])
            return self._error(FormError(None, f"The swarm's rules refuse this goal ({exc}). "
                                               "Nothing was published.", 409))
        self.submitted += 1
        p = body.params
        self.rt.log.info("web: goal submitted", event_id=ev.id, electorate=len(p.electorate), quorum=p.quorum,
                         person_votes=self.rt.me in p.electorate)
        return JSONResponse({
            "ok": True, "goal": ev.id, "electorate": list(p.electorate), "quorum": p.quorum,
            "counted": self.rt.me in p.electorate,
            "message": (f"Goal submitted to an electorate of {len(p.electorate)} (quorum {p.quorum})"
                        + ("; you are one of them." if self.rt.me in p.electorate else ".")),
        })

    async def judge(self, request: Request) -> Response:
        try:
            data = await read_json(request)
            if not isinstance(data, dict):
                raise FormError(None, "expected a JSON object")
            feedback = data.get("feedback") or ""
            if not isinstance(feedback, str):
                raise FormError("feedback", "feedback must be text")
            if not isinstance(data.get("approve"), bool):
                raise FormError("approve", "say approve (true) or reject (false)")
            j = Judgment(str(data.get("node", "")), str(data.get("proposal", "")), data["approve"],
                         " ".join(feedback.split()))
            tree = self.rt.tree()
            why = self.person.problem(tree, j)
            if why is not None:
                raise FormError(None, why, 404 if "no such" in why else 400)
            n = tree.node(j.node)
            assert n is not None
            if n.decided is not None or n.leaf:
                raise FormError(None, "This node is already decided: no judgment can change it.", 409)
            if not j.approve and not j.feedback:
                raise FormError("feedback", "Say why you reject it: the decomposers refine with your feedback.")
            if self.person.judged(tree, j.node, j.proposal):
                raise FormError(None, "You already judged this split: a judgment, once published, stands.", 409)
        except FormError as exc:
            return self._error(exc)
        elector = self.rt.me in n.params.electorate
        self.person.judge(j)
        self.driver.kick()
        timeout = self.settings.startup_sync + 10.0
        with trio.move_on_after(timeout):
            while not self._scored(j):
                await self.rt.wait_change(0.5)
        if not self._scored(j):
            return JSONResponse({"ok": False, "error": f"your judgment was not published within {timeout:.0f}s"}, 504)
        if elector:
            msg = ("Counted: you are in this goal's electorate, so your judgment decides your prevote "
                   "(a polka or a lock from an earlier round still comes first, as for every elector).")
        else:
            msg = ("Not counted: this page is not in the goal's electorate (fixed when the goal was "
                   "submitted). Your judgment is published as a score: shown to everyone and given to "
                   "the decomposers as feedback for their refinements.")
        return JSONResponse({"ok": True, "counted": elector, "message": msg})

    async def amend_brief(self, request: Request) -> Response:
        """The goal's author amends its brief: a Brief event of the goal's own author, which the
        fold takes over any decided one (agent.core.plan.Plan.brief); prompts made from now on
        carry it, and results that contradict it are sent back by their review."""
        try:
            data = await read_json(request)
            if not isinstance(data, dict):
                raise FormError(None, "expected a JSON object")
            goal_id = str(data.get("goal", ""))
            goal = self.rt.plan.goals.get(goal_id)
            if goal is None:
                raise FormError(None, "no such goal", 404)
            if goal.author != self.rt.me:
                raise FormError(None, "Only the person who submitted this goal (from this page) can amend its "
                                      "working assumptions.", 403)
            if not goal.body.params.brief:
                raise FormError(None, "This goal settles no working assumptions.", 409)
            fields = {}
            for key in BRIEF_FIELDS:
                value = data.get(key, "")
                if not isinstance(value, str):
                    raise FormError(key, f"{key} must be text")
                fields[key] = " ".join(value.split())
            fields["currency"] = fields["currency"].upper()
            try:
                body = Brief(node=goal_id, **fields)
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(x) for x in first["loc"])
                raise FormError(where, f"{where}: {first['msg']}") from None
            if not body.facts():
                raise FormError(None, "Write at least one assumption.")
        except FormError as exc:
            return self._error(exc)
        ev = await self.rt.publish(body)
        return JSONResponse({"ok": True, "brief": ev.id,
                             "message": "Amended: every step planned from now on keeps to it, and results "
                                        "that contradict it are sent back by their review."})

    def _scored(self, j: Judgment) -> bool:
        n = self.rt.tree().node(j.node)
        p = n.proposal(j.proposal) if n is not None else None
        return p is not None and any(s.author == self.rt.me for s in p.scores)


class _ToStructlog(logging.Handler):
    def __init__(self, log: Any) -> None:
        super().__init__(logging.WARNING)
        self.log = log

    def emit(self, record: logging.LogRecord) -> None:
        self.log.warning("web server: " + record.getMessage()[:300])


def hypercorn_config(settings: Settings, rt: Runtime):
    from hypercorn.config import Config

    config = Config()
    host = settings.web_host
    config.bind = [f"[{host}]:{settings.web_port}" if ":" in host else f"{host}:{settings.web_port}"]
    config.accesslog = None
    logger = logging.getLogger(f"agent.web.server.{rt.me[-8:]}")
    logger.propagate = False
    logger.handlers[:] = [_ToStructlog(rt.log)]
    config.errorlog = logger
    config.graceful_timeout = 1.0
    config.keep_alive_timeout = 30
    return config


def page_token(settings: Settings) -> tuple[str | None, bool]:
    """(token the page requires or None, whether it was generated): required whenever one is
    set, and always when the page is bound beyond loopback (then generated if none is set)."""
    if settings.web_token is not None:
        return settings.web_token, False
    if is_loopback(settings.web_host):
        return None, False
    return secrets.token_urlsafe(24), True


async def serve_web(settings: Settings, rt: Runtime, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> str:
    """Serve the page for this observer until cancelled; ``task_status.started(url)``."""
    from hypercorn.trio import serve

    host = settings.web_host
    token, generated = page_token(settings)
    web = Web(settings, rt, token=token)
    async with trio.open_nursery() as nursery:
        await nursery.start(web.run)
        binds = await nursery.start(partial(serve, web.app, hypercorn_config(settings, rt)))
        port = int(binds[0].rsplit(":", 1)[1]) if binds else settings.web_port
        shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
        url = f"http://{shown if ':' not in shown else '[' + shown + ']'}:{port}/"
        if token is None:
            rt.log.info("web view up", url=url, identity=rt.me)
        elif generated:
            rt.log.warning("web view exposed beyond loopback: it requires a token (generated; set "
                           "SWARM_WEB_TOKEN to choose one)", url=url + "?token=" + token, identity=rt.me)
        elif is_loopback(host):
            rt.log.info("web view up; it requires SWARM_WEB_TOKEN (open the page with ?token=...)",
                        url=url, identity=rt.me)
        else:
            rt.log.warning("web view exposed beyond loopback: it requires SWARM_WEB_TOKEN "
                           "(open the page with ?token=...)", url=url, identity=rt.me)
        task_status.started(url)
    return url


__all__ = ["FormError", "Guard", "Web", "is_loopback", "page_token", "parse_goal_form", "serve_web"]
