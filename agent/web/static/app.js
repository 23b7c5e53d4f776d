// swarm-planner: the observer's live page. Plain JS, no dependencies, nothing loaded from
// elsewhere. The server pushes a snapshot, then patches (only the nodes that changed) over
// server-sent events; the page never polls. Everything shown is built with textContent.
"use strict";

const S = {
  nodes: new Map(),      // id -> node (flat; children by id)
  meta: null,
  seq: -1,
  instance: null,
  selected: null,        // node id
  es: null,
  dirty: false,
  letters: new Map(),    // proposal id -> "A", "B", ... within its node
  items: new Map(),      // node id -> tree <li>
  cards: new Map(),      // proposal id -> card element
  cardKeys: new Map(),   // proposal id -> JSON of what the card shows
  formsReady: false,
};

window.swarmState = S;  // for the browser test (read only)

// What the browser test and the benchmark read: load and update figures.
const stats = window.swarmStats = {
  snapshots: 0, patches: 0, reconnects: 0, firstSnapshotAt: null, firstTreeAt: null,
  updates: [],  // {seq, changed_at, latest_wall, sent_at, received, rendered}
};

const $ = (sel) => document.querySelector(sel);

function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k === "text") el.textContent = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const kid of kids.flat(Infinity)) {
    if (kid === null || kid === undefined || kid === false) continue;
    el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  return el;
}

const shortId = (id) => (id ? "…" + id.slice(-6) : "");
const STATE_TEXT = {open: "open", voting: "voting", split: "split", waiting: "waiting", ready: "ready",
  claimed: "claimed", review: "in review", done: "done"};
const BRIEF_LABELS = {duration: "Duration", dates: "Dates", budget: "Budget", currency: "Currency",
  place: "Place", people: "People", constraints: "Constraints", done: "Done when"};

function peerName(peer) {
  if (S.meta && peer === S.meta.me) return "you (this page)";
  const m = S.meta && S.meta.members.find((x) => x.peer === peer);
  return m && m.name ? m.name : shortId(peer);
}

function secondsSince(t0, t) {
  if (t0 === null || t0 === undefined || t === null || t === undefined) return "";
  return `+${((t - t0) / 1000).toFixed(1)} s`;
}

// ------------------------------------------------------------------ the stream
function connect() {
  if (S.es) S.es.close();
  const es = S.es = new EventSource("/events");
  setStatus("connecting", "connecting…");
  es.addEventListener("snapshot", (e) => onSnapshot(JSON.parse(e.data)));
  es.addEventListener("patch", (e) => onPatch(JSON.parse(e.data)));
  es.onopen = () => setStatus("live", "live");
  es.onerror = () => {
    setStatus("reconnecting", "reconnecting…");
    if (es.readyState === EventSource.CLOSED) {  // the browser gave up: start a new stream
      stats.reconnects += 1;
      setTimeout(connect, 1500);
    }
  };
}

function setStatus(kind, text) {
  const el = $("#status");
  el.dataset.status = kind;
  el.textContent = text;
}

function onSnapshot(msg) {
  const received = Date.now();
  stats.snapshots += 1;
  if (stats.firstSnapshotAt === null) stats.firstSnapshotAt = performance.now();
  S.nodes = new Map(Object.entries(msg.nodes));
  S.meta = msg.meta;
  S.seq = msg.seq;
  S.instance = msg.instance;
  S.clockOffset = msg.timing.now - received;
  setStatus("live", "live");
  schedule({seq: msg.seq, ...msg.timing, received, snapshot: true});
}

function onPatch(msg) {
  const received = Date.now();
  if (msg.instance === S.instance && msg.seq <= S.seq) return;  // already in the snapshot
  if (msg.instance !== S.instance || msg.seq !== S.seq + 1) {
    connect();  // missed something (or a restarted observer): start over from a snapshot
    return;
  }
  stats.patches += 1;
  S.seq = msg.seq;
  if (msg.meta) S.meta = msg.meta;
  for (const [id, n] of Object.entries(msg.nodes)) S.nodes.set(id, n);
  for (const id of msg.removed || []) S.nodes.delete(id);
  S.clockOffset = msg.timing.now - received;
  schedule({seq: msg.seq, ...msg.timing, received});
}

let pending = [];
function schedule(update) {
  pending.push(update);
  if (S.dirty) return;
  S.dirty = true;
  requestAnimationFrame(() => {
    S.dirty = false;
    render();
    const rendered = Date.now();
    for (const u of pending) {
      if (!u.snapshot) stats.updates.push({...u, rendered});
    }
    if (stats.updates.length > 5000) stats.updates.splice(0, stats.updates.length - 5000);
    pending = [];
    if (stats.firstTreeAt === null && S.nodes.size > 0) stats.firstTreeAt = performance.now();
  });
}

// ------------------------------------------------------------------ render
function render() {
  const m = S.meta;
  if (!m) return;
  if (!S.formsReady) setupForm(m.form);
  $("#me").textContent = `this page: ${shortId(m.me)}` + (m.token_required ? " · token-protected" : "");
  $("#me").title = `This page signs what you do here with its own identity ${m.me}`;
  const c = m.counts || {};
  $("#counts").textContent = Object.entries(c).filter(([, v]) => v).map(([k, v]) => `${k} ${v}`).join(" · ")
    + ` · ${m.events} events`;
  const g = $("#grafana");
  if (m.grafana) { g.href = m.grafana; g.hidden = false; } else g.hidden = true;
  letterProposals();
  if (S.selected && !S.nodes.has(S.selected)) S.selected = null;
  if (!S.selected && m.goals.length) S.selected = m.goals[m.goals.length - 1];
  renderTree();
  renderPeers();
  renderGoal();
  renderNode();
  renderTimeline();
  renderResults();
}

function letterProposals() {
  S.letters.clear();
  for (const n of S.nodes.values()) {
    n.proposals.forEach((p, i) => S.letters.set(p.id, String.fromCharCode(65 + (i % 26)) + (i >= 26 ? i : "")));
  }
}

function valueLabel(v) {
  if (v === "leaf") return "leaf";
  if (v === "nil") return "nil";
  return S.letters.has(v) ? `split ${S.letters.get(v)}` : shortId(v);
}

// tree: keyed, updated in place so focus and scroll survive updates
function renderTree() {
  const root = $("#tree");
  reconcile(root, S.meta.goals.filter((id) => S.nodes.has(id)), treeItem);
  $("#tree-empty").hidden = S.meta.goals.length > 0;
}

function reconcile(container, ids, make) {
  const want = ids.map(make);
  want.forEach((el, i) => {
    if (container.children[i] !== el) container.insertBefore(el, container.children[i] || null);
  });
  while (container.children.length > want.length) container.lastElementChild.remove();
}

function treeItem(id) {
  const n = S.nodes.get(id);
  let li = S.items.get(id);
  if (!li) {
    const btn = h("button", {type: "button", class: "node-btn", dataset: {id}});
    btn.addEventListener("click", () => select(id));
    li = h("li", {class: "tree-item", dataset: {id}}, btn, h("ul", {class: "tree-children"}));
    S.items.set(id, li);
  }
  const btn = li.firstElementChild;
  li.dataset.state = n.state;
  const extra = nodeExtra(n);
  btn.replaceChildren(
    h("span", {class: `state state-${n.state}`, text: STATE_TEXT[n.state] || n.state}),
    h("span", {class: "label"}, h("span", {class: "title", text: n.title}),
      extra ? h("span", {class: "extra", text: extra}) : null),
  );
  btn.setAttribute("aria-current", S.selected === id ? "true" : "false");
  btn.setAttribute("aria-label", `${n.title}: ${n.state}. ${nodeExtra(n)}`);
  reconcile(li.lastElementChild, n.children.filter((c) => S.nodes.has(c)), treeItem);
  return li;
}

function nodeExtra(n) {
  const bits = [];
  if (n.decided && n.decided !== "leaf") bits.push(`split ${S.letters.get(n.decided) || ""} won in round ${n.decided_round}`);
  else if (n.decided === "leaf") bits.push(`leaf (voted, round ${n.decided_round})`);
  else if (n.proposals.length) bits.push(`${n.proposals.length} split${n.proposals.length > 1 ? "s" : ""}`);
  if (!n.decided && n.rounds.length) bits.push(`round ${n.rounds[n.rounds.length - 1].round}`);
  if (n.collisions) bits.push(`${n.collisions} collision${n.collisions > 1 ? "s" : ""}`);
  if (n.takeovers) bits.push(`${n.takeovers} takeover${n.takeovers > 1 ? "s" : ""}`);
  if (n.task === "synthesis") bits.push("synthesis");
  return bits.join(" · ");
}

function select(id, focus) {
  S.selected = id;
  render();
  if (focus) $("#detail").focus();
}

// keyboard: arrows move between the tree's nodes
document.addEventListener("keydown", (e) => {
  const t = e.target;
  if (!(t instanceof HTMLElement) || !t.classList.contains("node-btn")) return;
  const all = [...document.querySelectorAll("#tree .node-btn")];
  const i = all.indexOf(t);
  let next = null;
  if (e.key === "ArrowDown") next = all[i + 1];
  else if (e.key === "ArrowUp") next = all[i - 1];
  else if (e.key === "Home") next = all[0];
  else if (e.key === "End") next = all[all.length - 1];
  else if (e.key === "ArrowLeft") {
    const parent = S.nodes.get(t.dataset.id)?.parent;
    next = parent ? document.querySelector(`#tree .node-btn[data-id="${CSS.escape(parent)}"]`) : null;
  } else if (e.key === "ArrowRight") {
    const kid = S.nodes.get(t.dataset.id)?.children[0];
    next = kid ? document.querySelector(`#tree .node-btn[data-id="${CSS.escape(kid)}"]`) : null;
  } else return;
  e.preventDefault();
  if (next) { next.focus(); select(next.dataset.id); }
});

// a clock more than a second off the swarm's: its stamps are held or its claims come late
function clockNote(m) {
  if (m.clock_ms === null || m.clock_ms === undefined || Math.abs(m.clock_ms) < 1000) return null;
  const s = (m.clock_ms / 1000).toFixed(1);
  return h("span", {class: "clock-off", title: "this peer's clock against the swarm's, estimated from the stamps of its events",
                    text: ` clock ${m.clock_ms > 0 ? "+" + s : s} s`});
}

function renderPeers() {
  const roles = ["decomposer", "scorer", "executor", "observer", "submitter", ""];
  const box = $("#peers");
  const groups = roles.map((r) => {
    const ms = S.meta.members.filter((m) => (r ? m.roles.includes(r) : m.roles.length === 0));
    if (!ms.length) return null;
    const live = ms.filter((m) => m.connected).length;
    return h("div", {class: "peer-group"},
      h("h3", {text: `${r ? r[0].toUpperCase() + r.slice(1) + "s" : "Other peers"} (${live} connected of ${ms.length})`}),
      h("ul", {}, ms.map((m) => h("li", {class: m.connected ? "peer on" : "peer off", title: m.peer},
        h("span", {class: "dot", "aria-hidden": "true"}),
        `${m.name || shortId(m.peer)}${m.peer === S.meta.me ? " (this page)" : ""} `,
        h("span", {class: "muted", text: m.connected ? "connected" : (m.peer === S.meta.me ? "" : "not connected")}),
        clockNote(m)))));
  }).filter(Boolean);
  box.replaceChildren(...(groups.length ? groups : [h("p", {class: "muted", text: "No peer yet."})]));
}

function currentGoal() {
  const n = S.selected && S.nodes.get(S.selected);
  return n ? S.nodes.get(n.root) : null;
}

function isElector(goal) {
  return !!(goal && goal.params && goal.params.electorate.includes(S.meta.me));
}

function renderGoal() {
  const g = currentGoal();
  $("#goal-head").hidden = !g;
  if (!g) return;
  $("#goal-title").textContent = g.title;
  badge($("#goal-state"), g.state);
  const p = g.params;
  $("#goal-params").textContent = `electorate ${p.electorate.length}, quorum ${p.quorum}, depth ${p.max_depth}, `
    + `width ${p.max_children}, rounds ${p.max_rounds}`
    + (g.submitted ? ` · submitted by ${peerName(g.submitted.author)}` : "");
  $("#goal-vote").textContent = isElector(g)
    ? `You are in this goal's electorate (${p.electorate.length} electors, quorum ${p.quorum}): your approval of a split is your prevote, and counts. The goal's working assumptions and the reviews of its results are not yours to judge: there this page's agent votes as every elector does (no model), so a quorum that needs your vote is not blocked.`
    : "You are not in this goal's electorate (it is fixed when the goal is submitted): your judgments of splits are published as scores, shown and used as feedback for refinements, but not counted as votes.";
  $("#goal-vote").dataset.counted = isElector(g) ? "yes" : "no";
  $("#dl-md").href = `/plan/${g.id}.md`;
  $("#dl-json").href = `/plan/${g.id}.json`;
  $("#dl-note").textContent = g.state === "done" ? "(final)" : "(partial: the plan is still growing)";
  const ans = g.result && g.result.output;
  $("#goal-answer").hidden = !ans;
  $("#goal-answer-text").textContent = ans || "";
  renderBrief(g);
  const b = g.budget;
  $("#goal-budget").hidden = !(b && (b.tokens || b.spent_total));
  if (b) {
    $("#goal-budget").textContent = `tokens spent: ${b.spent_total}` + (b.tokens ? ` of a budget of ${b.tokens}` : "")
      + (b.phase === "no_splits" ? " · nothing is split further: the rest goes to executing the steps" : "")
      + (b.phase === "spent" ? " · the budget is spent: no new work starts, the plan is cut here" : "")
      + " · " + Object.entries(b.spent).map(([k, v]) => `${k} ${v[0] + v[1]}`).join(", ");
  }
}

function renderBrief(g) {
  $("#goal-brief").hidden = !g.brief_wanted;
  if (!g.brief_wanted) return;
  const facts = g.brief || {};
  const own = g.submitted && S.meta && g.submitted.author === S.meta.me;
  $("#goal-brief-note").textContent = g.brief
    ? "Every step of the plan keeps to these; the electors chose them among the decomposers' proposals"
      + (g.briefs.length ? ` (${g.briefs.length} proposed)` : "") + ", or the person who submitted the goal wrote them."
    : (g.brief_settled ? "No assumptions were agreed on: the plan goes on without." : "Being settled: the tree grows once the electors agree on them.");
  $("#goal-brief-facts").replaceChildren(...Object.entries(BRIEF_LABELS).filter(([k]) => facts[k])
    .flatMap(([k, label]) => [h("dt", {text: label}), h("dd", {text: facts[k]})]));
  $("#brief-amend").hidden = !own;
  if (own && !$("#brief-fields").childElementCount) {
    $("#brief-fields").replaceChildren(...Object.entries(BRIEF_LABELS).map(([k, label]) =>
      h("label", {}, label, h("input", {name: k, value: facts[k] || "", maxlength: k === "currency" ? 3 : 300}))));
    $("#brief-form").onsubmit = async (e) => {
      e.preventDefault();
      const body = {goal: g.id};
      for (const input of $("#brief-fields").querySelectorAll("input")) body[input.name] = input.value;
      const r = await fetch("/api/brief", {method: "POST", headers: {"content-type": "application/json"},
        body: JSON.stringify(body)});
      const msg = await r.json();
      $("#brief-msg").textContent = msg.ok ? msg.message : msg.error;
    };
  }
}

function badge(el, state) {
  el.className = `badge state state-${state}`;
  el.textContent = STATE_TEXT[state] || state;
}

function renderNode() {
  const n = S.selected && S.nodes.get(S.selected);
  $("#node").hidden = !n;
  if (!n) return;
  // path
  const path = [];
  for (let cur = n; cur; cur = cur.parent ? S.nodes.get(cur.parent) : null) path.unshift(cur);
  $("#crumbs").replaceChildren(...path.map((x, i) => h("span", {},
    i ? " › " : "",
    x.id === n.id ? h("span", {text: x.title, "aria-current": "page"})
      : h("button", {type: "button", class: "link", text: x.title, onclick: () => select(x.id)}))));
  $("#node-title").textContent = n.title;
  badge($("#node-state"), n.state);
  $("#node-desc").textContent = n.description || "";
  const facts = [];
  if (n.leaf) facts.push(n.leaf_reason === "max_depth" ? "a leaf: at the depth limit" : `a leaf: voted to execute it as it is (round ${n.decided_round})`);
  if (n.decided && n.decided !== "leaf") facts.push(`split ${S.letters.get(n.decided)} won in round ${n.decided_round}`);
  if (n.task) facts.push(n.task === "synthesis" ? "task: summarise the done children" : "task: execute it");
  if (n.atomic_hint) facts.push("its proposer called it atomic");
  $("#node-facts").textContent = facts.join(" · ");
  renderSplits(n);
  renderVotes(n);
  renderClaims(n);
  renderReviews(n);
  renderResult(n);
}

function renderReviews(n) {
  const all = [...(n.history || []).flatMap((h) => (h.reviews || []).map((r) => ({...r, attempt: h.attempt, sent: true}))),
               ...(n.reviews || []).map((r) => ({...r, attempt: n.attempt}))];
  $("#review-sec").hidden = !all.length && n.state !== "review";
  $("#review-note").textContent = n.state === "review"
    ? `Attempt ${n.attempt}'s result is in review: the electors accept it, or send it back with their reasons.`
    : (n.history && n.history.length ? `${n.history.length} result(s) were sent back before this one.` : "");
  $("#reviews").replaceChildren(...all.map((r) => h("li", {},
    `attempt ${r.attempt}, ${peerName(r.author)}: ${r.accept ? "accepts" : "sends it back"}`
    + (r.problems && r.problems.length ? `: ${r.problems.join("; ")}` : ""))));
}

function renderSplits(n) {
  const g = S.nodes.get(n.root);
  const elector = isElector(g);
  const open = !n.decided && !n.leaf;
  $("#splits-empty").hidden = n.proposals.length > 0;
  $("#person-note").textContent = !n.proposals.length ? "" : elector
    ? (open ? "You are an elector of this goal: approving a split chooses it as your prevote (rejecting every split prevotes nil). Once you judged a split here, this page's agent votes on this node for you under every elector's rules, but only for what you approved: when the rules call for a split you did not approve (the others' majority, or the fallback round once the rounds ran out), it abstains. Approve that split to vote for it."
            : "This node is decided.")
    : (open ? "Your judgment is published as a score: shown here and given to the decomposers as feedback, not counted as a vote."
            : "This node is decided.");
  $("#person-note").dataset.counted = elector && open ? "yes" : "no";
  const cards = n.proposals.map((p) => card(n, p, elector, open));
  reconcile($("#splits"), cards.map((c) => c), (c) => c);
}

function card(n, p, elector, open) {
  let el = S.cards.get(p.id);
  if (!el) {
    el = h("section", {class: "card", dataset: {proposal: p.id}},
      h("div", {class: "card-info"}), judgeForm(n.id, p.id));
    S.cards.set(p.id, el);
  }
  const mine = p.scores.find((s) => s.author === S.meta.me);
  const won = n.decided === p.id;
  const key = JSON.stringify([p, won, n.decided, mine ? 1 : 0, elector, open, S.letters.get(p.id),
    S.meta.members.length]);
  el.classList.toggle("won", won);
  el.classList.toggle("lost", !!n.decided && !won);
  if (S.cardKeys.get(p.id) !== key) {
    S.cardKeys.set(p.id, key);
    fillCard(el.firstElementChild, n, p, won);
  }
  const form = el.lastElementChild;
  form.hidden = !open && !mine;  // a decided node takes no more judgments
  form.querySelectorAll("button, textarea").forEach((x) => { x.disabled = !!mine; });
  const letter = S.letters.get(p.id);
  form.querySelector("textarea").setAttribute("aria-label", `Feedback on split ${letter}`);
  form.querySelector("button.approve").setAttribute("aria-label", `Approve split ${letter}`);
  form.querySelector("button.reject").setAttribute("aria-label", `Reject split ${letter}`);
  form.querySelector(".judge-done").textContent = mine
    ? `You ${mine.acceptable ? "approved" : "rejected"} this split${mine.feedback ? `: “${mine.feedback}”` : ""}.` : "";
  return el;
}

function fillCard(box, n, p, won) {
  const letter = S.letters.get(p.id);
  const refined = p.refines ? `refines split ${S.letters.get(p.refines) || shortId(p.refines)}` : null;
  const head = h("header", {class: "card-head"},
    h("h4", {}, `Split ${letter}`, h("span", {class: "muted", text: ` · ${p.strategy} · by ${peerName(p.author)}`})),
    won ? h("span", {class: "badge won-badge", text: `won in round ${n.decided_round}`}) : null,
    refined ? h("span", {class: "badge", text: refined}) : null);
  const subs = h("ol", {class: "subgoals"}, p.subgoals.map((s) => h("li", {},
    h("strong", {text: s.title}), s.atomic ? h("span", {class: "muted", text: " (atomic)"}) : null,
    s.description ? h("div", {class: "muted small", text: s.description}) : null)));
  const answers = p.answers.length ? h("div", {class: "answers"},
    h("p", {class: "small", text: `Feedback on split ${S.letters.get(p.refines)} that this refinement answers:`}),
    h("ul", {}, p.answers.map((a) => h("li", {class: "small"}, h("span", {class: "muted", text: `${peerName(a.author)}: `}), a.feedback))))
    : null;
  const scores = p.scores.length ? h("table", {class: "scores"},
    h("caption", {class: "small", text: `Scores (mean ${p.mean.toFixed(2)})`}),
    h("thead", {}, h("tr", {}, [["scorer", "who scored"], ["spec.", "specificity"], ["dist.", "non-overlap"],
      ["cov.", "coverage"], ["ok", "acceptable"]].map(([t, title]) => h("th", {scope: "col", text: t, title})))),
    h("tbody", {}, p.scores.map((s) => [
      h("tr", {class: s.author === S.meta.me ? "mine" : null},
        h("th", {scope: "row", text: peerName(s.author)}),
        h("td", {text: s.specificity.toFixed(2)}), h("td", {text: s.non_overlap.toFixed(2)}),
        h("td", {text: s.coverage.toFixed(2)}), h("td", {text: s.acceptable ? "yes" : "no"})),
      s.feedback ? h("tr", {class: "fb"}, h("td", {colspan: 5, class: "small", text: s.feedback})) : null,
    ]))) : h("p", {class: "muted small", text: "Not scored yet."});
  box.replaceChildren(...[head, subs, answers, scores].filter(Boolean));
}

function judgeForm(nodeId, pid) {
  const ta = h("textarea", {rows: 2, maxlength: 400, placeholder: "Feedback for the decomposers (required to reject)",
    "aria-label": "Feedback on this split"});
  const out = h("p", {class: "msg small", role: "status", "aria-live": "polite"});
  const done = h("p", {class: "judge-done small"});
  const send = async (approve) => {
    out.textContent = "publishing…";
    out.dataset.kind = "";
    try {
      const r = await fetch("/api/judge", {method: "POST", headers: {"Content-Type": "application/json"},
        body: JSON.stringify({node: nodeId, proposal: pid, approve, feedback: ta.value})});
      const body = await r.json();
      out.textContent = body.ok ? body.message : body.error;
      out.dataset.kind = body.ok ? (body.counted ? "counted" : "ok") : "error";
    } catch (err) {
      out.textContent = `could not reach the observer: ${err}`;
      out.dataset.kind = "error";
    }
  };
  return h("div", {class: "judge"},
    ta,
    h("div", {class: "judge-buttons"},
      h("button", {type: "button", class: "approve", onclick: () => send(true)}, "Approve"),
      h("button", {type: "button", class: "reject", onclick: () => send(false)}, "Reject")),
    done, out);
}

function renderVotes(n) {
  const t = $("#votes");
  const sec = $("#votes-sec");
  const g = S.nodes.get(n.root);
  sec.hidden = n.leaf && n.leaf_reason === "max_depth";
  if (sec.hidden) return;
  if (!n.rounds.length) {
    t.replaceChildren(h("caption", {class: "muted", text: "No vote yet."}));
    return;
  }
  const electors = g.params.electorate;
  const head = h("thead", {},
    h("tr", {}, h("th", {rowspan: 2, scope: "col", text: "elector"}),
      n.rounds.map((r) => h("th", {colspan: 2, scope: "colgroup", text: `round ${r.round}`}))),
    h("tr", {}, n.rounds.map(() => [h("th", {scope: "col", text: "prevote"}), h("th", {scope: "col", text: "precommit"})])));
  const cell = (book, who, committed) => {
    const v = Object.keys(book).find((k) => book[k].includes(who));
    return h("td", {class: v ? `v ${v === "nil" ? "nil" : ""} ${committed && v === committed ? "decisive" : ""}` : "v none",
      text: v ? valueLabel(v) : "—"});
  };
  const body = h("tbody", {}, electors.map((who) => h("tr", {class: who === S.meta.me ? "mine" : null},
    h("th", {scope: "row", text: peerName(who)}),
    n.rounds.map((r) => [cell(r.prevotes, who, null), cell(r.precommits, who, r.committed)]))));
  const foot = h("tfoot", {}, h("tr", {}, h("th", {scope: "row", text: "outcome"}),
    n.rounds.map((r) => [
      h("td", {class: "small", text: r.polka ? `polka: ${valueLabel(r.polka)}` : "no polka"}),
      h("td", {class: "small", text: r.committed ? `decided: ${valueLabel(r.committed)}` : "—"})])));
  t.replaceChildren(h("caption", {class: "small", text: `quorum ${g.params.quorum} of ${electors.length}`}), head, body, foot);
}

function renderClaims(n) {
  const sec = $("#claims-sec");
  sec.hidden = !n.claims.length;
  const t0 = n.claims.length ? n.claims[0].start : 0;
  $("#claims").replaceChildren(...n.claims.map((c) => h("li", {class: `claim ${c.kind}`},
    h("strong", {text: peerName(c.author)}), ` ${c.kind === "first" ? "claimed first" : c.kind} ${secondsSince(t0, c.start)}`,
    `, lease to ${secondsSince(t0, c.end)}`, ` — ${c.outcome}`,
    c.result_at ? ` (result at ${secondsSince(t0, c.result_at)})` : "")));
}

function renderResult(n) {
  const r = n.result;
  $("#result-sec").hidden = !r;
  if (!r) return;
  $("#result-h").textContent = n.task === "synthesis" ? "Synthesized answer (from its subgoals' results)" : "Result";
  $("#result-meta").textContent = `by ${peerName(r.author)}` + (r.completion_tokens ? ` · ${r.completion_tokens} tokens` : "");
  $("#result-text").textContent = r.output;
}

function walk(id, out) {
  const n = S.nodes.get(id);
  if (!n) return out;
  out.push(n);
  for (const c of n.children) walk(c, out);
  return out;
}

function renderTimeline() {
  const g = currentGoal();
  const sec = $("#timeline-sec");
  const tasks = g ? walk(g.id, []).filter((n) => n.claims.length) : [];
  sec.hidden = !tasks.length;
  if (!tasks.length) return;
  const now = Date.now() + (S.clockOffset || 0);  // the observer's clock
  let t0 = Infinity, t1 = -Infinity;
  for (const n of tasks) for (const c of n.claims) {
    t0 = Math.min(t0, c.start);
    t1 = Math.max(t1, Math.min(c.result_at || c.end, Math.max(now, c.start)));
  }
  const span = Math.max(1, t1 - t0);
  const pct = (t) => `${(100 * (t - t0) / span).toFixed(2)}%`;
  const rows = tasks.map((n) => h("div", {class: "tl-row"},
    h("button", {type: "button", class: "tl-label link", text: n.title, title: n.title, onclick: () => select(n.id)}),
    h("div", {class: "tl-track"}, n.claims.map((c) => {
      const end = c.result_at || Math.min(c.end, Math.max(now, c.start));
      const bar = h("span", {class: `bar ${c.kind} ${c.outcome.replace(/ /g, "-")}`,
        title: `${peerName(c.author)}: ${c.kind}, ${c.outcome}`, text: peerName(c.author)});
      bar.style.left = pct(c.start);
      bar.style.width = `max(3px, ${(100 * (end - c.start) / span).toFixed(2)}%)`;
      const dot = c.result_at ? h("span", {class: "dot-result", title: "result"}) : null;
      if (dot) dot.style.left = pct(c.result_at);
      return [bar, dot];
    }))));
  $("#timeline").replaceChildren(
    h("div", {class: "tl-axis small muted"}, h("span", {text: "0 s"}), h("span", {text: `${(span / 1000).toFixed(1)} s`})),
    ...rows);
}

function renderResults() {
  const g = currentGoal();
  const done = g ? walk(g.id, []).filter((n) => n.result) : [];
  $("#results-sec").hidden = !done.length;
  $("#results").replaceChildren(...done.map((n) => h("li", {},
    h("button", {type: "button", class: "link", text: n.title, onclick: () => select(n.id)}),
    h("span", {class: "muted small", text: n.task === "synthesis" ? " (synthesis)" : ""}),
    h("p", {class: "prose", text: n.result.output}))));
}

// ------------------------------------------------------------------ submit form
function setupForm(limits) {
  if (!limits) return;
  S.formsReady = true;
  const set = (id, lim) => {
    const el = $(id);
    el.min = lim.min; el.max = lim.max;
    if (lim.default !== null && lim.default !== undefined) el.value = lim.default;
  };
  set("#f-depth", limits.depth);
  set("#f-width", limits.width);
  set("#f-rounds", limits.rounds);
  set("#f-quorum", limits.quorum);
  $("#f-title").maxLength = limits.title_max;
  $("#f-description").maxLength = limits.description_max;
}

$("#submit-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const msg = $("#submit-msg");
  const btn = $("#f-submit");
  const val = (id) => $(id).value;
  const body = {title: val("#f-title"), description: val("#f-description"), depth: val("#f-depth"),
    width: val("#f-width"), rounds: val("#f-rounds"), quorum: val("#f-quorum"), include_me: $("#f-include-me").checked};
  msg.textContent = "submitting… (waiting to know the scorers)";
  msg.dataset.kind = "";
  msg.setAttribute("role", "status");
  btn.disabled = true;
  try {
    const r = await fetch("/api/goals", {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)});
    let out;
    try { out = await r.json(); } catch { out = {ok: false, error: `the observer answered ${r.status}`}; }
    if (out.ok) {
      msg.textContent = out.message;
      msg.dataset.kind = "ok";
      msg.dataset.goal = out.goal;
      $("#f-title").value = "";
      $("#f-description").value = "";
      S.selected = out.goal;
      if (S.nodes.has(out.goal)) render();
    } else {
      msg.textContent = out.error;
      msg.dataset.kind = "error";
      msg.setAttribute("role", "alert");
      const field = {title: "#f-title", description: "#f-description", depth: "#f-depth", width: "#f-width",
        rounds: "#f-rounds", quorum: "#f-quorum"}[out.field];
      if (field) $(field).focus();
    }
  } catch (err) {
    msg.textContent = `could not reach the observer: ${err}`;
    msg.dataset.kind = "error";
  } finally {
    btn.disabled = false;
  }
});

connect();
