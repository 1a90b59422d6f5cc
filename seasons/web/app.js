// Seasons web page: plain DOM, no framework, no downloads. Talks only to this server's JSON API.
// Everything the API returns is put on the page with textContent, never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
// windows: the windows of GET /v1/boards (the server's one table), by name.
const state = { boards: [], windows: {}, seasons: null, offset: 0, member: "" };
// Each kind of request carries a number; an answer to an older one than the latest is dropped,
// so quick changes of board/window/period never leave a stale table on the page.
const latest = { top: 0, find: 0, history: 0 };
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

function fmtScore(x) {
  if (x === null || x === undefined) return "–";
  return Number.isInteger(x) ? x.toLocaleString("en-US") : String(x);
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
  const when = cur && (cur.resets_at ? `resets ${new Date(cur.resets_at).toLocaleString()}` : "never resets");
  const resets = cur ? ` · current ${$("window").value} ${cur.period} ${when}` : "";
  say("board-info", `${b.aggregate}, ${b.order === "desc" ? "high first" : "low first"}, ties ${b.ties}` +
    (b.max_entries ? `, best ${b.max_entries} kept` : "") + resets);
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
    el("td", { class: "num" }, fmtScore(e.score)), el("td", {}, meta));
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
    say("find-result", `${member} is #${me.rank} of ${me.total} with ${fmtScore(me.score)}`);
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
    $("history-title").textContent = `${member}: rank and score per ${win} (last ${h.history.length})`;
    $("chart").replaceChildren(chart(h.history));
    $("history").hidden = false;
  } catch (err) {
    if (stale("history", n)) return;
    $("history").hidden = true;
  }
}

const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

// Two lines over the periods: rank (1 at the top) and score, each on its own scale.
function chart(points) {
  const W = 640, H = 240, L = 44, R = 44, T = 14, B = 34;
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "rank and score history" });
  const ranked = points.filter((p) => p.rank !== null);
  const n = points.length;
  const x = (i) => L + (n <= 1 ? (W - L - R) / 2 : (i * (W - L - R)) / (n - 1));
  root.append(svg("line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }));
  root.append(svg("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }));
  root.append(svg("line", { class: "axis", x1: W - R, y1: T, x2: W - R, y2: H - B }));
  const step = Math.max(1, Math.ceil(n / 7));
  points.forEach((p, i) => {
    if (i % step === 0 || i === n - 1) root.append(svg("text", { x: x(i), y: H - B + 16, "text-anchor": "middle" }, p.period.slice(-5)));
  });
  if (!ranked.length) {
    root.append(svg("text", { x: W / 2, y: H / 2, "text-anchor": "middle" }, "not ranked in these periods"));
    return wrapChart(root);
  }
  const maxRank = Math.max(...ranked.map((p) => p.rank));
  const scores = ranked.map((p) => p.score);
  const lo = Math.min(...scores), hi = Math.max(...scores);
  const yRank = (r) => T + (maxRank === 1 ? 0 : ((r - 1) * (H - T - B)) / (maxRank - 1));
  const yScore = (s) => (hi === lo ? (T + H - B) / 2 : H - B - ((s - lo) * (H - T - B)) / (hi - lo));
  root.append(svg("text", { x: L - 6, y: T + 4, "text-anchor": "end" }, "#1"));
  root.append(svg("text", { x: L - 6, y: H - B, "text-anchor": "end" }, `#${maxRank}`));
  root.append(svg("text", { x: W - R + 6, y: T + 4 }, fmtScore(hi)));
  root.append(svg("text", { x: W - R + 6, y: H - B }, fmtScore(lo)));
  for (const [cls, y, value] of [["rank", yRank, (p) => p.rank], ["score", yScore, (p) => p.score]]) {
    // A gap where the member was not ranked: one polyline per run of ranked periods.
    let run = [];
    const flush = () => { if (run.length > 1) root.append(svg("polyline", { class: cls, points: run.join(" ") })); run = []; };
    points.forEach((p, i) => {
      if (p.rank === null) return flush();
      const px = x(i), py = y(value(p));
      run.push(`${px.toFixed(1)},${py.toFixed(1)}`);
      const dot = svg("circle", { class: cls, cx: px.toFixed(1), cy: py.toFixed(1), r: 3 });
      dot.append(svg("title", {}, `${p.period}: #${p.rank}, score ${fmtScore(p.score)}`));
      root.append(dot);
    });
    flush();
  }
  return wrapChart(root);
}

function wrapChart(root) {
  const legend = el("div", { class: "legend" }, el("span", { class: "r" }, "● rank (left, 1 at top)"), el("span", { class: "s" }, "● score (right)"));
  return el("div", {}, root, legend);
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
    say("submit-result", res.applied ? `applied: ${event.member} +${fmtScore(event.value)}` : "duplicate: this event id was already applied");
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
    await loadTop();
    if (state.member) await find(state.member);
  } catch (err) {
    out.textContent = `${method} ${path}\n${errorText(err)}`;
    out.classList.add("error");
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
  const sel = $("board");
  const keep = sel.value;
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
  if (saved.get("board")) $("board").value = saved.get("board");
  fillWindows(saved.get("window"));
  fillPeriods(saved.get("period") || "current");
  describeBoard();
  $("board").addEventListener("change", () => { fillWindows(); changed(true); });
  $("window").addEventListener("change", () => changed(true));
  $("period").addEventListener("change", () => changed(false));
  $("limit").addEventListener("change", () => changed(false));
  $("prev").addEventListener("click", () => { state.offset = Math.max(0, state.offset - Number($("limit").value)); loadTop(); });
  $("next").addEventListener("click", () => { state.offset += Number($("limit").value); loadTop(); });
  $("h-window").addEventListener("change", () => { if (state.member) loadHistory(state.member); });
  $("find").addEventListener("submit", (ev) => { ev.preventDefault(); find($("member").value); });
  $("submit").addEventListener("submit", submitScore);
  $("a-rollup").addEventListener("click", () => admin("POST", "/v1/admin/rollup", {}));
  $("a-snapshot").addEventListener("click", () => admin("POST", "/v1/admin/snapshot", { season: $("a-season").value }));
  $("a-rebuild").addEventListener("click", () => {
    // Rolled-up boards are rebuilt from day keys; on a day board rebuild every one, now.
    const win = $("window").value;
    const body = state.windows[win].rolled_up ? { board: $("board").value, window: win, period: $("period").value } : { board: $("board").value, window: "all" };
    admin("POST", "/v1/admin/rebuild", body);
  });
  $("a-reset").addEventListener("click", () => admin("POST", "/v1/admin/demo/reset", {}, "Delete every board's data and seed the demo data set again?"));
  for (const id of ["s-token", "a-token"]) {  // kept for this tab only, never in the URL
    $(id).value = sessionStorage.getItem(id) || "";
    $(id).addEventListener("change", () => sessionStorage.setItem(id, $(id).value));
  }
  refreshStatus();
  setInterval(refreshStatus, 15000);
  await loadTop();
  if (saved.get("member")) await find(saved.get("member"));
  document.body.dataset.ready = "1";  // the browser test waits for this
}

document.addEventListener("DOMContentLoaded", start);
