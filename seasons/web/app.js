// Seasons web page: plain DOM, no framework, no downloads. Talks only to this server's JSON API.
// Everything the API returns is put on the page with textContent, never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
// windows: the windows of GET /v1/boards (the server's one table), by name.
// timezone: the zone of the boards' days (GET /v1/boards); every time on the page is shown in it.
const state = {
  boards: [], windows: {}, seasons: null, offset: 0, member: "", timezone: "UTC", defaultBoard: null,
  history: null, leagueMember: "",
};
// Each kind of request carries a number; an answer to an older one than the latest is dropped,
// so quick changes of board/window/period never leave a stale table on the page.
const latest = { top: 0, find: 0, history: 0, ops: 0, cohort: 0, tiers: 0 };
const begin = (kind) => ++latest[kind];
const stale = (kind, n) => n !== latest[kind];

// --- talking to the API ----------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, body) {
    super((body && body.message) || `HTTP ${status}`);
    this.status = status;
    this.code = body && body.error;
    this.body = body;
  }
}

async function api(method, path, { body, token } = {}) {
  const headers = { Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (token) headers.Authorization = `Bearer ${token}`;
  const res = await fetch(path, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body),
  });
  let data = null;
  try { data = await res.json(); } catch (_) { /* empty or not JSON */ }
  if (!res.ok) throw new ApiError(res.status, data);
  return data;
}

const enc = encodeURIComponent;
const boardPath = () => `/v1/boards/${enc($("board").value)}/${enc($("window").value)}`;

// --- small DOM helpers -----------------------------------------------------------------------

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c instanceof Node ? c : String(c));
  return node;
}

// A number as shown: whole numbers grouped; fractions to 12 significant digits, so that a
// difference of two scores reads 0.3, not 0.29999999999999716.
function fmtScore(x) {
  if (x === null || x === undefined) return "–";
  return Number.isInteger(x) ? x.toLocaleString("en-US") : String(Number(x.toPrecision(12)));
}

// A composite board's entries carry their parts ({"level": 5, "power": 117771}) beside the
// packed score: the parts are what a person reads.
function fmtParts(parts) {
  return Object.entries(parts).map(([k, v]) => `${k} ${fmtScore(v)}`).join(" · ");
}

function fmtEntryScore(e) {
  return e.parts ? fmtParts(e.parts) : fmtScore(e.score);
}

function scoreCell(e) {
  if (!e.parts) return el("td", { class: "num" }, fmtScore(e.score));
  return el("td", { class: "num", title: `score ${fmtScore(e.score)}` },
    el("span", { class: "parts" }, fmtParts(e.parts)), el("span", { class: "raw" }, fmtScore(e.score)));
}

// A JSON number, or a number the API sent as a string ("7"); null when absent.
function num(x) {
  if (x === null || x === undefined || x === "") return null;
  const n = Number(x);
  return Number.isFinite(n) ? n : null;
}

// An instant (ISO 8601, any offset) as a wall-clock time in the boards' zone: the days and
// periods are that zone's, so the times are too (the zone is named beside them).
function fmtTime(iso, { seconds = false, year = true } = {}) {
  const d = new Date(iso);
  if (iso === null || iso === undefined || Number.isNaN(d.getTime())) return iso == null ? "–" : String(iso);
  const opts = { timeZone: state.timezone, year: "numeric", month: "2-digit", day: "2-digit",
    hour: "2-digit", minute: "2-digit", hourCycle: "h23" };
  if (seconds) opts.second = "2-digit";
  const p = Object.fromEntries(new Intl.DateTimeFormat("en-CA", opts).formatToParts(d).map((x) => [x.type, x.value]));
  return `${year ? `${p.year}-` : ""}${p.month}-${p.day} ${p.hour}:${p.minute}${seconds ? `:${p.second}` : ""}`;
}

function say(id, text, isError = false) {
  const node = $(id);
  node.textContent = text;
  node.classList.toggle("error", isError);
}

function errorText(err) {
  if (!(err instanceof ApiError)) return `error: ${err.message}`;
  let text = `${err.code || "error"} (${err.status}): ${err.message}`;
  if (err.code === "invalid_events" && Array.isArray(err.body.details)) {
    text += "\n" + err.body.details.map((p) => `  event ${p.index} ${p.field}: ${p.message}`).join("\n");
  }
  return text;
}

// --- board, window, period ----------------------------------------------------------------------

function currentBoard() {
  return state.boards.find((b) => b.board === $("board").value);
}

function addDays(iso, n) {
  const d = new Date(`${iso}T00:00:00Z`);
  d.setUTCDate(d.getUTCDate() + n);
  return d.toISOString().slice(0, 10);
}

function periodOptions() {
  const board = currentBoard();
  const win = $("window").value;
  const info = state.windows[win];
  // A window that never expires (alltime) has one period: there is no previous one.
  if (info && info.expires === false) return [["current", "current"]];
  const opts = [["current", "current"], ["previous", "previous"]];
  if (!board) return opts;
  if (info && info.archived && state.seasons) {  // seasons: with their state and snapshots
    for (const s of [...state.seasons.seasons].reverse()) {
      if (s.status === "upcoming") continue;
      const b = s.boards[board.board];
      const tag = b && b.state === "archived" ? "archived" : s.status;
      opts.push([s.season, `${s.season} (${tag}, ${s.first_day} – ${s.last_day})`]);
      for (const snap of (b && b.snapshots) || []) opts.push([snap.season, `${snap.season} (snapshot)`]);
    }
  } else if (info) {
    for (const p of info.recent) {
      const span = p.first_day === p.last_day ? "" : ` (${p.first_day} – ${p.last_day})`;
      opts.push([p.period, `${p.period}${span}`]);
    }
  }
  return opts;
}

// The windows the board keeps, in both pickers; the chosen ones stay if the board keeps them.
function fillWindows(want) {
  const board = currentBoard();
  const names = board ? board.windows : [];
  for (const [id, fallback] of [["window", "season"], ["h-window", "day"]]) {
    const sel = $(id);
    const keep = (id === "window" && want) || sel.value || fallback;
    sel.replaceChildren(...names.map((w) => el("option", { value: w }, w)));
    sel.value = names.includes(keep) ? keep : (names.includes(fallback) ? fallback : names[0] || "");
  }
}

function fillPeriods(keep) {
  const sel = $("period");
  const want = keep || sel.value || "current";
  sel.replaceChildren(...periodOptions().map(([v, t]) => el("option", { value: v }, t)));
  sel.value = [...sel.options].some((o) => o.value === want) ? want : "current";
}

function describeBoard() {
  const b = currentBoard();
  if (!b) return say("board-info", "No boards are configured.");
  const cur = b.current[$("window").value];
  const when = cur && (cur.resets_at ? `resets ${fmtTime(cur.resets_at)} ${state.timezone}` : "never resets");
  const resets = cur ? ` · current ${$("window").value} ${cur.period} ${when}` : "";
  say("board-info", `${b.aggregate}, ${b.order === "desc" ? "high first" : "low first"}, ties ${b.ties}` +
    (b.max_entries ? `, best ${b.max_entries} kept` : "") + resets + ` · days are ${state.timezone} days`);
  $("s-board").textContent = b.board;
}

function fillSeasonsForAdmin() {
  const sel = $("a-season");
  const seasons = state.seasons ? [...state.seasons.seasons].reverse().filter((s) => s.status !== "upcoming") : [];
  sel.replaceChildren(...seasons.map((s) => el("option", { value: s.season }, `${s.season} (${s.status})`)));
}

// --- URL hash: board/window/period/member survive a reload and can be shared -------------------

function saveHash() {
  const p = new URLSearchParams({ board: $("board").value, window: $("window").value, period: $("period").value });
  if (state.member) p.set("member", state.member);
  if (state.leagueMember) p.set("league", state.leagueMember);
  if ($("l-period").value !== "current") p.set("league_period", $("l-period").value);
  history.replaceState(null, "", `#${p}`);
}

function readHash() {
  return new URLSearchParams(location.hash.slice(1));
}

// --- top N -----------------------------------------------------------------------------------

function entryRow(e, highlight) {
  const meta = el("div", { class: "meta" }, ...Object.entries(e.metadata || {}).map(([k, v]) => el("span", {}, `${k}: ${v}`)));
  const who = el("button", { type: "button", title: "find this member", onclick: () => find(e.member) }, e.member);
  return el("tr", highlight === e.member ? { class: "hit" } : {},
    el("td", { class: "rank" }, e.rank), el("td", { class: "member" }, who),
    scoreCell(e), el("td", {}, meta));
}

async function loadTop() {
  const limit = Number($("limit").value);
  const q = new URLSearchParams({ period: $("period").value, limit, offset: state.offset });
  const body = $("top").tBodies[0];
  const n = begin("top");
  try {
    const page = await api("GET", `${boardPath()}?${q}`);
    if (stale("top", n)) return;
    body.replaceChildren(...page.entries.map((e) => entryRow(e, state.member)));
    const last = state.offset + page.entries.length;
    $("top-title").textContent = `Top · ${page.board} · ${page.window} ${page.period}`;
    say("top-summary", page.total ? `${state.offset + 1}–${last} of ${page.total} ranked` : "Nobody is ranked in this period.");
    $("prev").disabled = state.offset === 0;
    $("next").disabled = last >= page.total;
  } catch (err) {
    if (stale("top", n)) return;
    body.replaceChildren();
    say("top-summary", errorText(err), true);
    $("prev").disabled = $("next").disabled = true;
  }
}

// --- find a member: around + history chart ---------------------------------------------------------

async function find(member) {
  member = (member || "").trim();
  state.member = member;
  $("member").value = member;
  saveHash();
  const table = $("around");
  if (!member) {
    table.hidden = true; $("history").hidden = true; say("find-result", ""); say("find-standing", "");
    return;
  }
  const period = $("period").value;
  const q = new URLSearchParams({ period, size: 7 });
  const n = begin("find");
  try {
    const path = `${boardPath()}/members/${enc(member)}`;
    const [page, me] = await Promise.all([
      api("GET", `${path}/around?${q}`), api("GET", `${path}?${new URLSearchParams({ period })}`),
    ]);
    if (stale("find", n)) return;
    say("find-result", `${member} is #${me.rank} of ${me.total} with ${fmtEntryScore(me)}`);
    say("find-standing", standing(me));
    table.tBodies[0].replaceChildren(...page.entries.map((e) => entryRow(e, member)));
    table.hidden = false;
  } catch (err) {
    if (stale("find", n)) return;
    table.hidden = true;
    say("find-standing", "");
    say("find-result", err.code === "not_ranked" ? `${member} is not ranked in this period.` : errorText(err), err.code !== "not_ranked");
  }
  loadTop();  // highlight the member in the top list too
  await loadHistory(member);
}

// Where a member's entry stands: "top 12% · 40 to the next better score". The share is of
// the members ranked level with or ahead of it (100 - percentile), shown as a whole number
// from 10% up.
function standing(me) {
  const top = 100 - me.percentile;
  const share = top >= 10 ? String(Math.round(top)) : String(Number(top.toPrecision(2)));
  const gap = me.gap_up === null ? "no better score on the board"
    : `${fmtScore(me.gap_up)} to the next better score`;
  return `top ${share}% · ${gap}`;
}

async function loadHistory(member) {
  const win = $("h-window").value;
  const q = new URLSearchParams({ window: win, last: state.windows[win].history_last });
  const n = begin("history");
  try {
    const h = await api("GET", `/v1/boards/${enc($("board").value)}/members/${enc(member)}/history?${q}`);
    if (stale("history", n)) return;
    $("history-title").textContent = `${member} per ${win} (last ${h.history.length})`;
    $("history").hidden = false;  // shown before drawing: the charts take the width they get
    state.history = { points: h.history, order: (currentBoard() || {}).order || "desc" };
    drawHistory();
  } catch (err) {
    if (stale("history", n)) return;
    state.history = null;
    $("history").hidden = true;
  }
}

function drawHistory() {
  if (!state.history) return;
  const { points, order } = state.history;
  const ranked = points.filter((p) => p.rank !== null);
  if (!ranked.length) {
    $("chart").replaceChildren(el("p", { class: "muted" }, "not ranked in these periods"));
    return;
  }
  const width = Math.max(240, Math.floor($("chart").clientWidth || 480));
  $("chart").replaceChildren(
    smallChart("rank", "Rank (1 at the top)", points, width, {
      value: (p) => p.rank, lowIsBest: true, label: (r) => `#${r}`,
    }),
    smallChart("score", `Score (${order === "asc" ? "lowest" : "highest"}, the best, at the top)`, points, width, {
      value: (p) => p.score, lowIsBest: order === "asc",
      label: (v, p) => (p && p.parts ? fmtParts(p.parts) : fmtScore(v)),
    }),
  );
}

const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

// One small line chart over the periods, drawn at its shown size (no viewBox scaling, so
// its 12 px labels stay 12 px on a phone). The best value is at the top whichever way the
// board orders; the values at the top and bottom are on the svg as data-top/data-bottom.
function smallChart(kind, caption, points, W, { value, lowIsBest, label }) {
  const H = 130, T = 10, B = 24, R = 8;
  const ranked = points.filter((p) => p.rank !== null);
  const values = ranked.map(value);
  const best = lowIsBest ? Math.min(...values) : Math.max(...values);
  const worst = lowIsBest ? Math.max(...values) : Math.min(...values);
  const bestPoint = ranked[values.indexOf(best)], worstPoint = ranked[values.indexOf(worst)];
  const topText = label(best, bestPoint), bottomText = label(worst, worstPoint);
  const L = Math.min(W / 3, 12 + 7.2 * Math.max(topText.length, bottomText.length));
  const n = points.length;
  const x = (i) => L + (n <= 1 ? (W - L - R) / 2 : (i * (W - L - R)) / (n - 1));
  const y = (v) => (best === worst ? (T + H - B) / 2 : T + ((v - best) * (H - T - B)) / (worst - best));
  const root = svg("svg", {
    width: W, height: H, role: "img", "aria-label": caption,
    "data-top": best, "data-bottom": worst,
  });
  root.append(svg("line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }));
  root.append(svg("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }));
  root.append(svg("text", { x: L - 6, y: y(best) + 4, "text-anchor": "end" }, topText));
  if (best !== worst) root.append(svg("text", { x: L - 6, y: y(worst) + 4, "text-anchor": "end" }, bottomText));
  // Period labels, the last always, others where they fit (~56 px each) without overlap.
  const GAP = 56;
  const shown = [n - 1];
  for (let i = n - 2; i >= 0; i--) if (x(shown[shown.length - 1]) - x(i) >= GAP) shown.push(i);
  for (const i of shown) {
    const anchor = n > 1 && i === n - 1 ? "end" : "middle";  // the last one ends at the edge
    root.append(svg("text", { x: x(i) + (anchor === "end" ? 4 : 0), y: H - B + 16, "text-anchor": anchor }, points[i].period.slice(-5)));
  }
  // A gap where the member was not ranked: one polyline per run of ranked periods.
  let run = [];
  const flush = () => { if (run.length > 1) root.append(svg("polyline", { points: run.join(" ") })); run = []; };
  points.forEach((p, i) => {
    if (p.rank === null) return flush();
    const v = value(p), px = x(i), py = y(v);
    run.push(`${px.toFixed(1)},${py.toFixed(1)}`);
    const dot = svg("circle", { cx: px.toFixed(1), cy: py.toFixed(1), r: 3.5, "data-value": v });
    dot.append(svg("title", {}, `${p.period}: #${p.rank}, score ${p.parts ? fmtParts(p.parts) : fmtScore(p.score)}`));
    root.append(dot);
  });
  flush();
  return el("figure", { class: kind }, el("figcaption", { class: kind }, caption), root);
}

// --- league: a member's cohort and the tiers (docs/leagues.md#the-web-page) ---------------------------
// Shown for a board whose GET /v1/boards entry has a league; its period is the league's
// window's (current or previous), picked apart from the board's window above.

const ZONES = { promote: "▲ promote", stay: "stay", demote: "▼ demote" };

async function showLeague() {
  const league = (currentBoard() || {}).league;
  $("league-section").hidden = $("league-nav").hidden = !league;
  if (!league) return;
  say("league-info", `cohorts of up to ${league.cohort_size} members per ${league.window}` +
    ` · tiers, lowest first: ${league.tiers.join(" → ")}`);
  await Promise.all([loadTiers(), loadCohort(state.leagueMember)]);
}

function cohortRow(r, asked) {
  const classes = [r.member === asked ? "hit" : "", r.zone ? `zone-${r.zone}` : ""].filter(Boolean);
  const who = el("button", { type: "button", title: "find this member", onclick: () => find(r.member) }, r.member);
  const member = el("td", { class: "member" }, who);
  if (r.hidden) member.append(" ", el("span", { class: "chip", title: "hidden: only you see this row" }, "hidden"));
  return el("tr", { "data-member": r.member, "data-zone": r.zone || "", class: classes.join(" ") },
    el("td", { class: "rank" }, r.rank === null ? "–" : r.rank), member,
    el("td", { class: "num" }, fmtScore(r.score)),
    el("td", { class: "zone-cell" }, r.zone ? el("span", { class: `zone ${r.zone}` }, ZONES[r.zone]) : "–"),
    el("td", { class: "tier-after" }, r.tier_after), el("td", { class: "reward" }, r.reward || "–"));
}

// What moves and when: "promotion: top 3, the last at 120 · demotion: bottom 3 · resets …".
function cohortNote(c) {
  const up = c.promote === 0 ? "nobody moves up"
    : `promotion: top ${c.promote}` + (c.promotion_score === null ? "" : `, the last at ${fmtScore(c.promotion_score)}`);
  const down = c.demote === 0 ? "nobody moves down" : `demotion: bottom ${c.demote}`;
  const when = c.final ? "final: the close's decision" : `live · resets ${fmtTime(c.resets_at)} ${state.timezone}`;
  return `${up} · ${down} · ${when}`;
}

async function loadCohort(member) {
  member = (member || "").trim();
  state.leagueMember = member;
  $("l-member").value = member;
  saveHash();
  const table = $("league-cohort");
  const n = begin("cohort");
  if (!member) {
    table.hidden = true; say("league-result", ""); say("league-note", "");
    return;
  }
  const q = new URLSearchParams({ period: $("l-period").value });
  try {
    const c = await api("GET", `/v1/leagues/${enc($("board").value)}/members/${enc(member)}?${q}`);
    if (stale("cohort", n)) return;
    const now = c.member_tier && c.member_tier !== c.tier ? ` · tier now ${c.member_tier}` : "";
    say("league-result", `${member} · cohort ${c.cohort} of tier ${c.tier}${c.group ? ` (${c.group})` : ""}` +
      ` · ${c.window} ${c.period}${now}`);
    say("league-note", cohortNote(c));
    table.tBodies[0].replaceChildren(...c.rows.map((r) => cohortRow(r, member)));
    table.hidden = false;
  } catch (err) {
    if (stale("cohort", n)) return;
    table.hidden = true;
    say("league-note", "");
    // Not in a cohort is an answer, not a fault: the API's message says why (joined none, or
    // waiting for the previous period's close).
    say("league-result", err.code === "not_in_league" ? err.message : errorText(err), err.code !== "not_in_league");
  }
  table.dataset.loaded = String(n);  // the browser test waits for a new value
}

async function loadTiers() {
  const body = $("league-tiers").tBodies[0];
  const q = new URLSearchParams({ period: $("l-period").value });
  const n = begin("tiers");
  try {
    const o = await api("GET", `/v1/leagues/${enc($("board").value)}?${q}`);
    if (stale("tiers", n)) return;
    $("league-overview-title").textContent = `${o.window} ${o.period} · highest first`;
    body.replaceChildren(...[...o.tiers].reverse().map((t) => el("tr", { "data-tier": t.tier },
      el("td", {}, t.tier), el("td", { class: "num members" }, fmtScore(t.members)),
      el("td", { class: "num cohorts" }, fmtScore(t.cohorts)))));
    const members = o.tiers.reduce((a, t) => a + t.members, 0), cohorts = o.tiers.reduce((a, t) => a + t.cohorts, 0);
    say("league-overview-note", members ? `${fmtScore(members)} members in ${fmtScore(cohorts)} cohorts` +
      (o.final ? " · closed" : "") : "Nobody has joined a cohort in this period.");
  } catch (err) {
    if (stale("tiers", n)) return;
    body.replaceChildren();
    say("league-overview-note", errorText(err), true);
  }
  $("league-tiers").dataset.loaded = String(n);
}

// --- submitting a score ---------------------------------------------------------------------

function parseMeta(text) {
  const meta = {};
  for (const part of text.split(",")) {
    if (!part.trim()) continue;
    const i = part.indexOf("=");
    if (i < 1) throw new Error(`metadata ${JSON.stringify(part.trim())} is not key=value`);
    const key = part.slice(0, i).trim(), raw = part.slice(i + 1).trim();
    meta[key] = raw === "" ? null : /^-?\d+(\.\d+)?$/.test(raw) ? Number(raw) : raw === "true" ? true : raw === "false" ? false : raw;
  }
  return meta;
}

async function submitScore(ev) {
  ev.preventDefault();
  const event = { board: $("board").value, member: $("s-member").value.trim(), value: Number($("s-value").value) };
  if ($("s-value").value.trim() === "" || !Number.isFinite(event.value)) return say("submit-result", "value must be a finite number", true);
  if ($("s-event").value.trim()) event.event_id = $("s-event").value.trim();
  try {
    const meta = parseMeta($("s-meta").value);
    if (Object.keys(meta).length) event.metadata = meta;
    const res = await api("POST", "/v1/scores", { body: { events: [event] }, token: $("s-token").value.trim() });
    const head = res.applied ? `applied: ${event.member} ${fmtScore(event.value)}` : "duplicate: this event id was already applied";
    say("submit-result", head);
    // Where the member stands now: their entry read back after the write, in the window on
    // screen, current period (where a score sent without a time lands).
    const win = $("window").value, cur = (currentBoard() || { current: {} }).current[win];
    try {
      const me = await api("GET", `${boardPath()}/members/${enc(event.member)}?period=current`);
      $("submit-result").append("\n", el("strong", { id: "submit-rank", "data-rank": me.rank },
        `now #${me.rank} of ${me.total}`), ` on ${event.board} · ${win} ${cur ? cur.period : ""} with ${fmtEntryScore(me)}`);
    } catch (err) {
      $("submit-result").append(`\n${err.code === "not_ranked" ? "not ranked in this period" : errorText(err)}`);
    }
    await loadTop();
    if (state.member === event.member) await find(event.member);
  } catch (err) {
    say("submit-result", errorText(err), true);
  }
}

// --- admin -------------------------------------------------------------------------------------

async function admin(method, path, body, confirmText) {
  if (confirmText && !window.confirm(confirmText)) return;
  const out = $("admin-result");
  out.classList.remove("error");
  out.textContent = `${method} ${path} …`;
  try {
    const res = await api(method, path, { body, token: $("a-token").value.trim() });
    out.textContent = `${method} ${path}\n${JSON.stringify(res, null, 2)}`;
    await refreshCatalog();
    await refreshOps();
    await loadTop();
    if (state.member) await find(state.member);
    return res;
  } catch (err) {
    out.textContent = `${method} ${path}\n${errorText(err)}`;
    out.classList.add("error");
    return undefined;
  }
}

// --- operator view: fair play (held events, a member's moderation, the audit trail) -----------
// Every call is an admin call with the tab's admin token; lists are loaded on the operator's
// click (not on the 15 s refresh), and a decision's answer goes to the admin result box.

const HELD_PAGE = 20, AUDIT_PAGE = 20;
const fair = { heldNext: null, auditNext: null, loads: 0 };
const adminGet = (path) => api("GET", path, { token: $("a-token").value.trim() });

function heldRow(e) {
  const decide = (action) => el("button", {
    type: "button", class: action === "reject" ? "danger" : "", "data-action": action,
    onclick: () => decideHeld(e.event_id, action),
  }, action === "approve" ? "Approve" : "Reject");
  return el("tr", { "data-event": e.event_id, title: `batch ${e.batch_id} · arrived ${fmtTime(new Date(e.arrived_at * 1000).toISOString(), { seconds: true })}` },
    el("td", { class: "event-id" }, e.event_id), el("td", { class: "member" }, e.member),
    el("td", { class: "num" }, fmtScore(e.value)), el("td", { class: "when" }, e.day),
    el("td", { class: "held-reason" }, `${e.reason} (limit ${fmtScore(e.limit)})`),
    el("td", { class: "decide" }, decide("approve"), decide("reject")));
}

// The first page (more = false) or the next one, appended.
async function loadHeld(more = false) {
  const board = $("board").value;
  $("held-board").textContent = `on ${board}`;
  const q = new URLSearchParams({ limit: HELD_PAGE });
  if (more && fair.heldNext) q.set("after", fair.heldNext);
  const body = $("held").tBodies[0];
  try {
    const page = await adminGet(`/v1/admin/boards/${enc(board)}/held?${q}`);
    const rows = page.events.map(heldRow);
    if (more) body.append(...rows); else body.replaceChildren(...rows);
    fair.heldNext = page.next;
    $("held-more").disabled = !page.next;
    say("held-note", body.rows.length ? "" : `no event is held on ${board}`);
  } catch (err) {
    if (!more) body.replaceChildren();
    $("held-more").disabled = true;
    say("held-note", errorText(err), true);
  }
  $("held").dataset.loaded = String(++fair.loads);  // the browser test waits for a new value
}

async function decideHeld(eventId, action) {
  const q = $("f-reason").value.trim() ? `?${new URLSearchParams({ reason: $("f-reason").value.trim() })}` : "";
  await admin("POST", `/v1/admin/boards/${enc($("board").value)}/held/${enc(eventId)}/${action}${q}`);
  await loadHeld();
}

function moderationRow(r) {
  return el("tr", { "data-board": r.board, "data-state": r.state },
    el("td", {}, r.board), el("td", { class: "mod-state" }, r.state), el("td", { class: "mod-mode" }, r.mode || "–"),
    el("td", {}, r.reason || "–"), el("td", { class: "when", title: r.at || "" }, r.at ? fmtTime(r.at) : "–"),
    el("td", {}, r.actor || "–"));
}

async function lookUpMember() {
  const member = $("m-member").value.trim();
  const body = $("moderation").tBodies[0];
  if (!member) { body.replaceChildren(); return say("moderation-note", "member is required", true); }
  try {
    const got = await adminGet(`/v1/admin/members/${enc(member)}/moderation`);
    body.replaceChildren(...got.boards.map(moderationRow));
    say("moderation-note", `${got.member} · times in ${state.timezone}`);
  } catch (err) {
    body.replaceChildren();
    say("moderation-note", errorText(err), true);
  }
}

// Hide, ban or make visible, on the boards named (none: every board). The reason is the
// API's to require: its message says what is missing.
async function moderate(targetState) {
  const member = $("m-member").value.trim();
  if (!member) return say("moderation-note", "member is required", true);
  const body = { state: targetState, mode: $("m-mode").value, reason: $("m-reason").value.trim() };
  const boards = $("m-boards").value.split(",").map((b) => b.trim()).filter(Boolean);
  if (boards.length) body.boards = boards;
  const confirmText = targetState === "banned" ? `Ban ${member}? Their new scores will be applied nowhere.` : undefined;
  await admin("PUT", `/v1/admin/members/${enc(member)}/moderation`, body, confirmText);
  await lookUpMember();
}

function auditRow(e) {
  const who = e.member === null ? (e.member_hash ? `hash ${e.member_hash.slice(0, 12)}…` : "–") : e.member;
  return el("tr", { "data-id": e.stream_id, title: JSON.stringify({ before: e.before, after: e.after, request_id: e.request_id }) },
    el("td", { class: "when", title: e.at }, fmtTime(e.at, { seconds: true })),
    el("td", { class: "audit-action" }, e.action), el("td", {}, e.actor),
    el("td", { class: "member" }, who), el("td", {}, e.boards.join(", ")), el("td", {}, e.reason || "–"));
}

// The newest entries (older = false), or the page older than the one shown.
async function loadAudit(older = false) {
  const q = new URLSearchParams({ limit: AUDIT_PAGE });
  if ($("au-member").value.trim()) q.set("member", $("au-member").value.trim());
  if ($("au-action").value) q.set("action", $("au-action").value);
  if (older && fair.auditNext) q.set("after", fair.auditNext);
  const body = $("audit").tBodies[0];
  try {
    const page = await adminGet(`/v1/admin/audit?${q}`);
    body.replaceChildren(...page.entries.map(auditRow));
    fair.auditNext = page.next;
    $("au-older").disabled = !page.next;
    say("audit-note", page.entries.length ? `times in ${state.timezone}` : "no audit entry");
  } catch (err) {
    body.replaceChildren();
    $("au-older").disabled = true;
    say("audit-note", errorText(err), true);
  }
  $("audit").dataset.loaded = String(++fair.loads);
}

// The audit filter's actions: the enum the server's schema declares for it (one table,
// seasons.audit.ACTIONS), so the page never lists an action the server does not know.
async function fillAuditActions() {
  try {
    const schema = await api("GET", "/openapi.json");
    const param = schema.paths["/v1/admin/audit"].get.parameters.find((p) => p.name === "action");
    const names = (param.schema.enum || (param.schema.anyOf || []).flatMap((s) => s.enum || []));
    $("au-action").append(...names.map((a) => el("option", { value: a }, a)));
  } catch (_) { /* no schema: the filter offers "any action" only */ }
}

// --- operator view: seasons and the worker's job runs ----------------------------------------

const JOB_FIELDS = new Set(["last_start", "last_end", "last_status", "last_error", "next_run", "runs", "failures", "total_duration"]);

const SHORT = { seconds: true, year: false };  // job times: this year's, to the second

function jobRow(name, job) {
  const runs = num(job.runs), failures = num(job.failures);
  const start = Date.parse(job.last_start), end = Date.parse(job.last_end);
  const took = Number.isFinite(start) && Number.isFinite(end) && end >= start ? end - start : null;
  const status = job.last_status || (runs ? "?" : "never run");
  // Whatever else the worker records for a job is shown as it is, in the row's tooltip.
  const extra = Object.entries(job).filter(([k]) => !JOB_FIELDS.has(k)).map(([k, v]) => `${k}: ${v}`);
  const attrs = { "data-job": name };
  if (job.last_error || extra.length) attrs.title = [job.last_error, ...extra].filter(Boolean).join("\n");
  return el("tr", attrs,
    el("td", {}, name),
    el("td", { class: `last-status ${status === "ok" ? "ok" : status === "error" ? "bad" : ""}` }, status),
    el("td", { class: "when last-start", title: job.last_start || "" }, job.last_start ? fmtTime(job.last_start, SHORT) : "–"),
    el("td", { class: "num" }, took === null ? "–" : took < 10000 ? `${Math.round(took)} ms` : `${(took / 1000).toFixed(1)} s`),
    el("td", { class: "num runs" }, runs === null ? "0" : fmtScore(runs)),
    el("td", { class: "num failures" }, failures === null ? "0" : fmtScore(failures)),
    el("td", { class: "when next-run", title: job.next_run || "" }, job.next_run ? fmtTime(job.next_run, SHORT) : "–"));
}

function seasonRow(s) {
  const chips = Object.entries(s.boards).map(([board, b]) => {
    let text = `${board} ${b.state}`;
    if (b.archive) text += num(b.archive.count) === null ? " · archive" : ` · ${fmtScore(num(b.archive.count))} archived`;
    const snaps = (b.snapshots || []).length;
    if (snaps) text += ` · ${snaps} snapshot${snaps === 1 ? "" : "s"}`;
    return el("span", { class: "chip", "data-board": board, "data-state": b.state }, text);
  });
  return el("tr", { "data-season": s.season, class: s.season === (state.seasons || {}).current ? "hit" : "" },
    el("td", {}, s.season), el("td", { class: "season-status" }, s.status),
    el("td", { class: "when" }, `${s.first_day} – ${s.last_day}`), el("td", {}, el("div", { class: "chips" }, ...chips)));
}

async function refreshOps() {
  const n = begin("ops");
  $("jobs-zone").textContent = `times in ${state.timezone}`;
  if (state.seasons) $("seasons").tBodies[0].replaceChildren(...[...state.seasons.seasons].reverse().map(seasonRow));
  try {
    const jobs = await api("GET", "/v1/jobs");
    if (stale("ops", n)) return;
    $("jobs").tBodies[0].replaceChildren(...Object.entries(jobs.jobs || {}).map(([name, job]) => jobRow(name, job)));
    const w = jobs.worker;
    let text = "no worker is running (no heartbeat)";
    if (w) text = `worker ${w.worker || "running"}` + (w.at ? ` · last beat ${fmtTime(w.at, { seconds: true })} ${state.timezone}` : "");
    if (jobs.safe_mode) text += ` · SAFE MODE: ${jobs.safe_mode.message || jobs.safe_mode.reason || "on"}`;
    say("ops-worker", text, !w || Boolean(jobs.safe_mode));
  } catch (err) {
    if (stale("ops", n)) return;
    say("ops-worker", errorText(err), true);
  }
  await Promise.all([refreshRewards(n), refreshLifecycle(n)]);
  if (!stale("ops", n)) $("ops-section").dataset.loaded = String(n);  // the browser test waits for it
}

// --- operator view: rewards of the ended seasons, and the lifecycle events -----------------------

const REWARD_SEASONS = 6;  // the newest ended seasons whose rewards are shown
const ENDED = new Set(["ended", "closing", "archived"]);

// A season's results summary on a board (GET /v1/seasons/{s}/rewards), or null before its
// close has computed them.
async function rewardsOf(season, board) {
  try {
    const page = await api("GET", `/v1/seasons/${enc(season)}/rewards?board=${enc(board)}&limit=1`);
    return page.summary;
  } catch (err) {
    if (err.code === "rewards_not_ready") return null;
    throw err;
  }
}

function rewardsRow(s) {
  const tiers = s.tiers.map((t) => el("span", { class: "chip tier", "data-tier": t.tier },
    `${t.tier}: ${t.reward} · ${fmtScore(t.count)} granted · ${fmtScore(t.claimed)} claimed`));
  return el("tr", { "data-season": s.season, "data-board": s.board, title: `computed ${s.computed_at}` },
    el("td", {}, s.season), el("td", {}, s.board),
    // An amended season's summary is its latest version's (docs/fair-play.md).
    el("td", { class: "rewards-state" }, s.provisional ? "provisional" : s.version > 1 ? `amended v${s.version}` : "final"),
    el("td", { class: "num granted" }, fmtScore(s.granted)),
    el("td", { class: "num claimed" }, fmtScore(s.claimed)),
    el("td", {}, el("div", { class: "chips" }, ...tiers)));
}

async function refreshRewards(n) {
  const seasons = state.seasons ? [...state.seasons.seasons].reverse() : [];
  const ended = seasons.filter((s) => ENDED.has(s.status)).slice(0, REWARD_SEASONS);
  try {
    const found = (await Promise.all(ended.flatMap((s) => Object.keys(s.boards).map((b) => rewardsOf(s.season, b)))))
      .filter(Boolean);
    if (stale("ops", n)) return;
    $("rewards").tBodies[0].replaceChildren(...found.map(rewardsRow));
    say("rewards-none", found.length ? "" : "No season's results yet: a season's close computes them.");
  } catch (err) {
    if (!stale("ops", n)) say("rewards-none", errorText(err), true);
  }
}

function eventRow(e) {
  const data = typeof e.data === "string" ? e.data : JSON.stringify(e.data);
  return el("tr", { "data-event": e.id },
    el("td", { class: "when", title: e.at }, fmtTime(e.at, SHORT)),
    el("td", { class: "event-type" }, e.type), el("td", { class: "event-id" }, e.id),
    el("td", { class: "event-data" }, data));
}

// The panel is shown only where the server has GET /v1/lifecycle.
async function refreshLifecycle(n) {
  try {
    const got = await api("GET", "/v1/lifecycle?limit=20");
    if (stale("ops", n)) return;
    $("lifecycle").tBodies[0].replaceChildren(...(got.events || []).map(eventRow));
    say("lifecycle-note", (got.events || []).length ? "" : "no lifecycle event yet");
    $("lifecycle-panel").hidden = false;
  } catch (err) {
    if (stale("ops", n)) return;
    if (err.status === 404) { $("lifecycle-panel").hidden = true; return; }
    say("lifecycle-note", errorText(err), true);
  }
}

// --- status and start-up ---------------------------------------------------------------------------

async function refreshStatus() {
  const node = $("status");
  try {
    await api("GET", "/readyz");
    node.textContent = "ready: Redis ok, worker running";
    node.className = "status ok";
  } catch (err) {
    node.textContent = err.code === "not_ready" ? "Redis ok, worker not running (no heartbeat)" : `not ready: ${err.message}`;
    node.className = "status bad";
  }
}

async function refreshCatalog() {
  const [boards, seasons] = await Promise.all([api("GET", "/v1/boards"), api("GET", "/v1/seasons").catch(() => null)]);
  state.boards = boards.boards;
  state.windows = Object.fromEntries(boards.windows.map((w) => [w.window, w]));
  state.seasons = seasons;
  state.timezone = boards.timezone || "UTC";
  state.defaultBoard = boards.default_board || (state.boards[0] || {}).board || null;
  const sel = $("board");
  const keep = sel.value || state.defaultBoard;
  sel.replaceChildren(...state.boards.map((b) => el("option", { value: b.board }, b.board)));
  if (keep) sel.value = keep;
  fillWindows();
  fillPeriods();
  fillSeasonsForAdmin();
  describeBoard();
}

function changed(resetPeriod) {
  state.offset = 0;
  if (resetPeriod) fillPeriods("current");
  describeBoard();
  saveHash();
  loadTop();
  if (state.member) find(state.member);
}

async function start() {
  const saved = readHash();
  try {
    await refreshCatalog();
  } catch (err) {
    say("top-summary", errorText(err), true);
    refreshStatus();
    return;
  }
  // The board in the URL, else the one the server names (api.default_board, or its rule).
  const wanted = saved.get("board");
  if (wanted && state.boards.some((b) => b.board === wanted)) $("board").value = wanted;
  fillWindows(saved.get("window"));
  fillPeriods(saved.get("period") || "current");
  describeBoard();
  if (saved.get("league_period") === "previous") $("l-period").value = "previous";
  state.leagueMember = saved.get("league") || "";
  $("board").addEventListener("change", () => {
    fillWindows(); changed(true); showLeague();
    if ($("held").dataset.loaded) loadHeld();  // the held list follows the board once shown
  });
  $("window").addEventListener("change", () => changed(true));
  $("period").addEventListener("change", () => changed(false));
  $("limit").addEventListener("change", () => changed(false));
  $("prev").addEventListener("click", () => { state.offset = Math.max(0, state.offset - Number($("limit").value)); loadTop(); });
  $("next").addEventListener("click", () => { state.offset += Number($("limit").value); loadTop(); });
  $("h-window").addEventListener("change", () => { if (state.member) loadHistory(state.member); });
  $("find").addEventListener("submit", (ev) => { ev.preventDefault(); find($("member").value); });
  $("submit").addEventListener("submit", submitScore);
  $("league-form").addEventListener("submit", (ev) => { ev.preventDefault(); loadCohort($("l-member").value); });
  $("l-period").addEventListener("change", () => { saveHash(); loadTiers(); loadCohort(state.leagueMember); });
  $("a-rollup").addEventListener("click", () => admin("POST", "/v1/admin/rollup", {}));
  $("a-snapshot").addEventListener("click", () => admin("POST", "/v1/admin/snapshot", { season: $("a-season").value }));
  $("a-rebuild").addEventListener("click", () => {
    // Rolled-up boards are rebuilt from day keys; on a day board rebuild every one, now.
    const win = $("window").value;
    const body = state.windows[win].rolled_up ? { board: $("board").value, window: win, period: $("period").value } : { board: $("board").value, window: "all" };
    admin("POST", "/v1/admin/rebuild", body);
  });
  $("a-reset").addEventListener("click", () => admin("POST", "/v1/admin/demo/reset", {}, "Delete every board's data and seed the demo data set again?"));
  $("held-form").addEventListener("submit", (ev) => { ev.preventDefault(); loadHeld(); });
  $("held-more").addEventListener("click", () => loadHeld(true));
  $("moderation-form").addEventListener("submit", (ev) => { ev.preventDefault(); lookUpMember(); });
  $("m-hide").addEventListener("click", () => moderate("hidden"));
  $("m-ban").addEventListener("click", () => moderate("banned"));
  $("m-visible").addEventListener("click", () => moderate("visible"));
  $("audit-form").addEventListener("submit", (ev) => { ev.preventDefault(); loadAudit(); });
  $("au-older").addEventListener("click", () => loadAudit(true));
  fillAuditActions();
  for (const id of ["s-token", "a-token"]) {  // kept for this tab only, never in the URL
    $(id).value = sessionStorage.getItem(id) || "";
    $(id).addEventListener("change", () => sessionStorage.setItem(id, $(id).value));
  }
  for (const b of document.querySelectorAll("nav [data-go]")) {
    b.addEventListener("click", () => $(b.dataset.go).scrollIntoView({ behavior: "smooth", block: "start" }));
  }
  let resizing = 0;  // the charts are drawn at their shown size: redraw when that changes
  window.addEventListener("resize", () => { clearTimeout(resizing); resizing = setTimeout(drawHistory, 150); });
  refreshStatus();
  refreshOps();
  setInterval(() => { refreshStatus(); refreshOps(); }, 15000);
  await Promise.all([loadTop(), showLeague()]);
  if (saved.get("member")) await find(saved.get("member"));
  document.body.dataset.ready = "1";  // the browser test waits for this
}

document.addEventListener("DOMContentLoaded", start);
