"""Click through every feature of the web page in headless Chromium, checking what it shows
against the JSON API and taking a screenshot at each step.

Used by tests/test_web_page.py, and by hand against a running server (e.g. scripts/demo):

    .venv/bin/python tests/browser/walkthrough.py http://127.0.0.1:8080/ [--admin-token T]

Needs the ``playwright`` Python package and a Chromium binary (Debian's ``chromium``);
playwright drives that binary, it never downloads a browser of its own.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo

import httpx

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TIMEOUT_MS = 15_000
# The browser's own zone in a walk: far from any board's, so a time shown in the browser's
# zone instead of the boards' would not pass for it.
BROWSER_ZONE = "Pacific/Kiritimati"
PHONE = {"width": 390, "height": 844}
LAPTOP = {"width": 1280, "height": 900}
# WCAG AA for normal text.
MIN_CONTRAST = 4.5
MIN_LABEL_PX = 12


@dataclass
class Walk:
    """What a walk saw: screenshots taken, and JavaScript errors and failed requests."""

    screenshots: list[Path] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    failed_requests: list[str] = field(default_factory=list)
    opened_on: str = ""  # the board the page opened on
    offsite_requests: list[str] = field(default_factory=list)  # requests to another host
    contrast: dict[str, float] = field(default_factory=dict)  # "dark: Find" -> ratio
    # The rewards rows the operator view showed: (season, board, granted, claimed).
    rewards: list[tuple[str, str, int, int]] = field(default_factory=list)
    # Fair play: the held events approved and rejected in the page, and the member hidden and
    # made visible again (empty where the board holds nothing, e.g. a server without limits).
    approved: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    hidden: str = ""
    audit_actions: list[str] = field(default_factory=list)  # the audit rows' actions shown
    # The league view (empty where no board has a league): the board, and per period asked
    # (current, previous) the member asked for and the cohort rows shown as (rank, member,
    # zone), or the message shown for a member in no cohort; the tiers shown (tier, members,
    # cohorts), highest first.
    league_board: str = ""
    league_cohorts: dict[str, tuple[str, list[tuple[int | None, str, str | None]]]] = field(
        default_factory=dict
    )
    league_messages: dict[str, str] = field(default_factory=dict)
    league_tiers: dict[str, list[tuple[str, int, int]]] = field(default_factory=dict)


def _js_score(x: float) -> str:
    """A score as the page's fmtScore writes it (fractions to 12 significant digits)."""
    return f"{int(x):,}" if float(x).is_integer() else repr(float(f"{float(x):.12g}"))


def _zoned(iso: str, zone: str, seconds: bool = False, year: bool = True) -> str:
    """An instant as the page shows it: wall-clock time in ``zone``."""
    local = datetime.fromisoformat(iso.replace("Z", "+00:00")).astimezone(ZoneInfo(zone))
    text = local.strftime("%m-%d %H:%M" + (":%S" if seconds else ""))
    return f"{local.year}-{text}" if year else text


def _number(x: Any) -> float | None:
    """A JSON number, or a number sent as a string ("7"), as the page reads it."""
    return None if x is None or x == "" else float(x)


def _luminance(color: str) -> float:
    """The WCAG relative luminance of a CSS ``rgb()``/``rgba()`` colour."""
    r, g, b = (int(float(v)) for v in re.findall(r"[\d.]+", color)[:3])

    def channel(c: int) -> float:
        v = c / 255
        return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4

    return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)


def contrast_ratio(fg: str, bg: str) -> float:
    """WCAG contrast ratio of two colours, 1..21."""
    hi, lo = sorted((_luminance(fg), _luminance(bg)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def chromium_path() -> str | None:
    return CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")


def walk(
    base_url: str, out_dir: Path, *, write_token: str = "", admin_token: str = "",
    reset: bool = True,
) -> Walk:  # fmt: skip
    """Walk through the page at ``base_url``; screenshots go to ``out_dir``. Raises
    AssertionError on the first thing that is not as the API says."""
    from playwright.sync_api import sync_playwright

    executable = chromium_path()
    if executable is None:
        raise RuntimeError("no chromium binary: apt-get install chromium")
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob("[0-9][0-9]-*.png"):  # a previous walk's, numbered as these are
        old.unlink()
    seen = Walk()
    api = httpx.Client(base_url=base_url, timeout=30)
    local = urlsplit(base_url).netloc
    with tempfile.TemporaryDirectory(prefix="seasons-chromium-") as profile, sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            profile, executable_path=executable, args=FLAGS, headless=True,
            viewport=LAPTOP, timezone_id=BROWSER_ZONE, color_scheme="light",
        )  # fmt: skip
        try:
            # Offline as a firewalled machine: a request to any other host is refused and noted.
            def only_local(route: Any) -> None:
                if urlsplit(route.request.url).netloc == local or route.request.url.startswith(
                    "data:"
                ):
                    route.continue_()
                else:
                    seen.offsite_requests.append(route.request.url)
                    route.abort()

            context.route("**/*", only_local)
            page = context.new_page()
            page.set_default_timeout(TIMEOUT_MS)
            page.on("pageerror", lambda e: seen.page_errors.append(str(e)))
            page.on(
                "response",
                lambda r: seen.failed_requests.append(f"{r.status} {r.url}")
                if r.status >= 500 else None,
            )  # fmt: skip

            def shot(name: str, target: Any = None) -> None:
                path = out_dir / f"{len(seen.screenshots) + 1:02d}-{name}.png"
                if target is not None and not hasattr(target, "goto"):  # one element
                    target.screenshot(path=str(path))
                else:
                    (target or page).screenshot(path=str(path), full_page=True)
                seen.screenshots.append(path)

            _docs(page, api, shot)
            # Before the demo reset, which clears job runs.
            seen.rewards = _operator_view(page, api, shot)
            _league(page, api, shot, seen)  # before the reset too: it clears the cohorts
            seen.opened_on = _steps(page, api, shot, write_token, admin_token, reset)
            _fair_play(page, api, shot, seen, write_token, admin_token)
            _chart_of_a_low_is_best_board(page, api, shot)
            _composite_parts(page, api, shot)
            _views(page, api, shot, seen)
            _phone(context, base_url, shot)
        finally:
            context.close()
            api.close()
    return seen


def _top_members(page: Any, table: str = "#top") -> list[str]:
    return page.locator(f"{table} tbody td.member").all_inner_texts()


def _wait_title(page: Any, text: str) -> None:
    page.wait_for_function(
        "t => document.getElementById('top-title').textContent.includes(t)", arg=text
    )


def _open(page: Any, url: str) -> None:
    """Load the page afresh (a URL that differs only in its #fragment would not reload)."""
    page.goto("about:blank")
    page.goto(url)
    page.wait_for_selector("body[data-ready='1']")


def _docs(page: Any, api: httpx.Client, shot: Any) -> None:
    """/docs renders Swagger UI's list of operations with no network but this server's."""
    page.goto(str(api.base_url).rstrip("/") + "/docs")
    schema = api.get("/openapi.json").json()
    methods = ("get", "post", "put", "delete")
    operations = sum(1 for item in schema["paths"].values() for m in item if m in methods)
    page.wait_for_selector(".opblock")
    page.wait_for_function(
        "n => document.querySelectorAll('.opblock').length === n", arg=operations
    )
    assert "Seasons" in page.locator(".information-container .title").inner_text()
    shot("docs")


def _operator_view(page: Any, api: httpx.Client, shot: Any) -> list[tuple[str, str, int, int]]:
    """The operator view lists the seasons and the job runs as /v1/seasons and /v1/jobs
    give them, times in the boards' zone, and the seasons' rewards; the rewards rows shown."""
    _open(page, str(api.base_url))
    zone = api.get("/v1/boards").json()["timezone"]
    jobs = api.get("/v1/jobs").json()["jobs"]
    page.wait_for_function(
        "n => document.querySelectorAll('#jobs tbody tr').length === n", arg=len(jobs)
    )
    assert page.locator("#jobs tbody tr").evaluate_all(
        "rows => rows.map(r => r.dataset.job)"
    ) == list(jobs)  # fmt: skip
    for name, job in jobs.items():
        row = page.locator(f"#jobs tr[data-job='{name}']")
        runs = _number(job.get("runs"))
        assert row.locator("td.runs").inner_text() == _js_score(runs or 0), (name, job)
        failures = _number(job.get("failures"))
        assert row.locator("td.failures").inner_text() == _js_score(failures or 0), (name, job)
        status = job.get("last_status") or ("?" if runs else "never run")
        assert row.locator("td.last-status").inner_text() == status, (name, job)
        for cell, key in (("last-start", "last_start"), ("next-run", "next_run")):
            want = _zoned(job[key], zone, seconds=True, year=False) if job.get(key) else "–"
            assert row.locator(f"td.{cell}").inner_text() == want, (name, key, job)
    assert page.locator("#jobs-zone").inner_text() == f"times in {zone}"

    seasons = api.get("/v1/seasons").json()["seasons"]
    rows = page.locator("#seasons tbody tr")
    assert rows.evaluate_all("rows => rows.map(r => r.dataset.season)") == [
        s["season"] for s in reversed(seasons)
    ]
    for season in seasons:
        row = page.locator(f"#seasons tr[data-season='{season['season']}']")
        assert row.locator("td.season-status").inner_text() == season["status"]
        states = row.locator(".chip").evaluate_all(
            "cs => Object.fromEntries(cs.map(c => [c.dataset.board, c.dataset.state]))"
        )
        assert states == {b: v["state"] for b, v in season["boards"].items()}, season
        for board, info in season["boards"].items():
            chip = row.locator(f".chip[data-board='{board}']").inner_text()
            if info["archive"] and info["archive"].get("count") is not None:
                assert f"{_js_score(info['archive']['count'])} archived" in chip, (chip, info)
            if info["snapshots"]:
                assert f"{len(info['snapshots'])} snapshot" in chip, (chip, info)
    shown = _rewards_and_lifecycle(page, api)
    page.locator("#ops-section").scroll_into_view_if_needed()
    shot("operator", page.locator("#ops-section"))
    return shown


# Season statuses whose rewards the page shows, and how many seasons (newest first) at most.
ENDED = ("ended", "closing", "archived")
REWARD_SEASONS = 6


def _rewards_and_lifecycle(page: Any, api: httpx.Client) -> list[tuple[str, str, int, int]]:
    """The rewards panel shows each ended season's results summary per board as
    GET /v1/seasons/{season}/rewards gives it (tiers, granted, claimed); the lifecycle panel
    shows GET /v1/lifecycle's events, newest first, and is hidden where that route is absent."""
    page.wait_for_selector("#ops-section[data-loaded]", state="attached")
    zone = api.get("/v1/boards").json()["timezone"]
    seasons = api.get("/v1/seasons").json()["seasons"]
    ended = [s for s in reversed(seasons) if s["status"] in ENDED][:REWARD_SEASONS]
    want = []
    for season in ended:
        for board in season["boards"]:
            got = api.get(
                f"/v1/seasons/{season['season']}/rewards", params={"board": board, "limit": 1}
            )
            if got.status_code == 409:
                assert got.json()["error"] == "rewards_not_ready", got.text
                continue
            assert got.status_code == 200, got.text
            want.append(got.json()["summary"])
    rows = page.locator("#rewards tbody tr")
    assert rows.evaluate_all("rs => rs.map(r => [r.dataset.season, r.dataset.board])") == [
        [s["season"], s["board"]] for s in want
    ]
    for summary in want:
        row = page.locator(
            f"#rewards tr[data-season='{summary['season']}'][data-board='{summary['board']}']"
        )
        assert row.locator("td.granted").inner_text() == _js_score(summary["granted"])
        assert row.locator("td.claimed").inner_text() == _js_score(summary["claimed"])
        version = summary["version"]
        state = "provisional" if summary["provisional"] else "final"
        state = f"amended v{version}" if version > 1 and state == "final" else state
        assert row.locator("td.rewards-state").inner_text() == state
        assert row.locator(".chip.tier").all_inner_texts() == [
            f"{t['tier']}: {t['reward']} · {_js_score(t['count'])} granted · "
            f"{_js_score(t['claimed'])} claimed"
            for t in summary["tiers"]
        ]
    assert page.locator("#rewards-none").inner_text() == (
        "" if want else "No season's results yet: a season's close computes them."
    )
    shown = [(s["season"], s["board"], s["granted"], s["claimed"]) for s in want]
    lifecycle = api.get("/v1/lifecycle", params={"limit": 20})
    if lifecycle.status_code == 404:
        assert page.locator("#lifecycle-panel").is_hidden()
        # A server with the route: its answer stood in for, in the close's order of events.
        body = json.dumps(SAMPLE_EVENTS)
        page.route(
            "**/v1/lifecycle?*",
            lambda route: route.fulfill(status=200, content_type="application/json", body=body),
        )
        try:
            _open(page, str(api.base_url))
            page.wait_for_selector("#ops-section[data-loaded]", state="attached")
            _lifecycle_rows(page, SAMPLE_EVENTS["events"], zone)
        finally:
            page.unroute("**/v1/lifecycle?*")
        return shown
    _lifecycle_rows(page, lifecycle.json()["events"], zone)
    return shown


# What GET /v1/lifecycle answers (docs/contract.md: the lifecycle stream), newest first.
SAMPLE_EVENTS = {
    "events": [
        {"id": f"{kind}:kills:S2", "type": kind, "at": f"2035-06-11T04:0{n}:00+00:00",
         "data": json.dumps({"board": "kills", "season": "S2"})}
        for n, kind in enumerate(("season_closing", "season_archived", "rewards_ready"))
    ][::-1]
}  # fmt: skip


def _lifecycle_rows(page: Any, events: list[dict[str, Any]], zone: str) -> None:
    assert page.locator("#lifecycle-panel").is_visible()
    found = page.locator("#lifecycle tbody tr")
    assert found.evaluate_all("rs => rs.map(r => r.dataset.event)") == [e["id"] for e in events]
    for event in events:
        row = page.locator(f"#lifecycle tr[data-event='{event['id']}']")
        assert row.locator("td.event-type").inner_text() == event["type"]
        assert row.locator("td.when").inner_text() == _zoned(
            event["at"], zone, seconds=True, year=False
        )
        data = event["data"]
        shown = json.loads(row.locator("td.event-data").inner_text())
        assert shown == (json.loads(data) if isinstance(data, str) else data), event


def _steps(
    page: Any, api: httpx.Client, shot: Any, write_token: str, admin_token: str, reset: bool
) -> str:
    """The player's walk through the page; returns the board it opened on."""
    _open(page, str(api.base_url))
    catalog = api.get("/v1/boards").json()
    boards = [b["board"] for b in catalog["boards"]]
    assert page.locator("#board option").all_inner_texts() == boards
    # It opens on the board the server names (api.default_board, or its rule).
    board = page.locator("#board").input_value()
    assert board == catalog["default_board"], (board, catalog["default_board"])
    limit = int(page.locator("#limit").input_value())

    # The current period's reset, in the boards' zone and named so (not the browser's zone).
    zone = catalog["timezone"]
    current = next(b for b in catalog["boards"] if b["board"] == board)["current"]["season"]
    info = page.locator("#board-info").inner_text()
    if current and current["resets_at"]:
        assert f"resets {_zoned(current['resets_at'], zone)} {zone}" in info, info
    assert f"days are {zone} days" in info, info

    # 1. The top N of the current season, with metadata, as the API has it.
    expected = api.get(f"/v1/boards/{board}/season", params={"limit": limit}).json()
    assert expected["entries"], "the data set is empty"
    page.wait_for_function("n => document.querySelectorAll('#top tbody tr').length === n",
                           arg=len(expected["entries"]))  # fmt: skip
    assert _top_members(page) == [e["member"] for e in expected["entries"]]
    first_meta = expected["entries"][0]["metadata"]
    if first_meta:
        key, value = next(iter(first_meta.items()))
        assert f"{key}: {value}" in page.locator("#top tbody tr").first.inner_text()
    shot("top-season")

    # 1b. Each board's window picker lists the windows that board keeps (GET /v1/boards), and a
    # month board, where one is kept, shows the API's month page.
    listed = {b["board"]: b["windows"] for b in api.get("/v1/boards").json()["boards"]}
    for name, windows in listed.items():
        page.select_option("#board", name)
        page.wait_for_function(
            "w => [...document.querySelectorAll('#window option')].map(o => o.value).join() === w",
            arg=",".join(windows),
        )
        for picker in ("#window", "#h-window"):
            values = page.locator(f"{picker} option").evaluate_all("os => os.map(o => o.value)")
            assert values == windows, (name, picker, values)
    monthly = [name for name, windows in listed.items() if "month" in windows]
    if monthly:
        page.select_option("#board", monthly[0])
        page.select_option("#window", "month")
        month = api.get(f"/v1/boards/{monthly[0]}/month", params={"limit": limit}).json()
        _wait_title(page, f"{monthly[0]} · month {month['period']}")
        page.wait_for_function("n => document.querySelectorAll('#top tbody tr').length === n",
                               arg=len(month["entries"]))  # fmt: skip
        assert _top_members(page) == [e["member"] for e in month["entries"]]
        periods = page.locator("#period option").evaluate_all("os => os.map(o => o.value)")
        assert month["period"] in periods and "previous" in periods
        shot("month")
    page.select_option("#board", board)
    page.select_option("#window", "season")

    # 2. Another board, the day window, the previous day; then page 2.
    other = boards[-1]
    page.select_option("#board", other)
    page.select_option("#window", "day")
    page.select_option("#period", "previous")
    day = api.get(f"/v1/boards/{other}/day", params={"period": "previous", "limit": limit}).json()
    _wait_title(page, f"{other} · day {day['period']}")
    page.wait_for_function("n => document.querySelectorAll('#top tbody tr').length === n",
                           arg=len(day["entries"]))  # fmt: skip
    assert _top_members(page) == [e["member"] for e in day["entries"]]
    if day["total"] > limit:
        page.click("#next")
        second = api.get(
            f"/v1/boards/{other}/day",
            params={"period": "previous", "limit": limit, "offset": limit},
        ).json()
        page.wait_for_function(
            "m => document.querySelector('#top tbody td.member')?.textContent === m",
            arg=second["entries"][0]["member"],
        )
        assert _top_members(page) == [e["member"] for e in second["entries"]]  # fmt: skip
    shot("day-previous-page2")

    # 3. A past season, picked from the list /v1/seasons gives.
    page.select_option("#board", board)
    page.select_option("#window", "season")
    seasons = api.get("/v1/seasons").json()
    past = [s["season"] for s in seasons["seasons"] if s["status"] in ("ended", "archived")]
    options = page.locator("#period option").evaluate_all("os => os.map(o => o.value)")
    for sid in past:
        assert sid in options, (sid, options)
    if past:
        page.select_option("#period", past[-1])
        old = api.get(f"/v1/boards/{board}/season",
                      params={"period": past[-1], "limit": limit}).json()  # fmt: skip
        _wait_title(page, f"season {past[-1]}")
        page.wait_for_function("n => document.querySelectorAll('#top tbody tr').length === n",
                               arg=len(old["entries"]))  # fmt: skip
        assert _top_members(page) == [e["member"] for e in old["entries"]]
        shot("past-season")
        page.select_option("#period", "current")

    # 4. Find a member: the entries around them, and the rank history chart.
    current = api.get(f"/v1/boards/{board}/season", params={"limit": 100}).json()
    member = current["entries"][min(len(current["entries"]) - 1, 40)]["member"]
    page.fill("#member", member)
    page.click("#find button")
    page.wait_for_selector("#around:not([hidden]) tbody tr.hit")
    around = api.get(f"/v1/boards/{board}/season/members/{member}/around",
                     params={"size": 7}).json()  # fmt: skip
    assert _top_members(page, "#around") == [e["member"] for e in around["entries"]]
    assert page.locator("#around tbody tr.hit td.member").inner_text() == member
    # Where the member stands: its percentile and gap up, from the member's entry.
    entry = api.get(f"/v1/boards/{board}/season/members/{member}").json()
    assert page.locator("#find-result").inner_text() == (
        f"{member} is #{entry['rank']} of {entry['total']} with {_js_score(entry['score'])}"
    )
    top = 100 - entry["percentile"]
    gap = ("no better score on the board" if entry["gap_up"] is None
           else f"{_js_score(entry['gap_up'])} to the next better score")  # fmt: skip
    shown = page.locator("#find-standing").inner_text()
    assert shown.startswith("top ") and shown.endswith(f"% · {gap}"), shown
    if top >= 10:
        assert shown == f"top {math.floor(top + 0.5)}% · {gap}", shown
    page.wait_for_selector("#chart figure.rank svg circle")
    history = api.get(f"/v1/boards/{board}/members/{member}/history",
                      params={"window": "day", "last": 14}).json()  # fmt: skip
    ranked = [h for h in history["history"] if h["rank"] is not None]
    for kind in ("rank", "score"):  # two small charts, a dot per ranked period each
        assert page.locator(f"#chart figure.{kind} svg circle").count() == len(ranked), kind
    shot("find-member")
    page.select_option("#h-window", "week")
    page.wait_for_function("() => document.getElementById('history-title')"
                           ".textContent.includes('per week')")  # fmt: skip
    shot("history-weeks")

    # Clicking a member name in the table finds that member.
    other_member = _top_members(page)[0]
    page.locator("#top tbody td.member button").first.click()
    page.wait_for_function("m => document.querySelector('#around tr.hit td.member')"
                           "?.textContent === m", arg=other_member)  # fmt: skip

    # 5. Submit a score: it shows up on the board at once.
    # A score that ranks first whichever way the board orders (a lap time: low is best).
    order = next(b["order"] for b in api.get("/v1/boards").json()["boards"] if b["board"] == board)
    page.fill("#s-member", "web-tester")
    page.fill("#s-value", "1" if order == "asc" else "1000000000")
    page.fill("#s-meta", "team=blue, level=7")
    if write_token:
        page.fill("#s-token", write_token)
    page.click("#submit button[type=submit]")
    page.wait_for_function("() => document.getElementById('submit-result')"
                           ".textContent.startsWith('applied')")  # fmt: skip
    entry = api.get(f"/v1/boards/{board}/season/members/web-tester").json()
    assert entry["metadata"] == {"team": "blue", "level": 7}, entry
    # The new rank, read back after the write: the member's entry as the API gives it.
    page.wait_for_selector("#submit-rank")
    shown_rank = page.locator("#submit-rank").get_attribute("data-rank")
    assert shown_rank == str(entry["rank"]), (shown_rank, entry)
    assert page.locator("#submit-rank").inner_text() == f"now #{entry['rank']} of {entry['total']}"
    page.wait_for_function("() => [...document.querySelectorAll('#top td.member')]"
                           ".some(td => td.textContent === 'web-tester')")  # fmt: skip
    shot("submitted")
    # A bad value is refused with the API's message.
    page.fill("#s-value", "1e300")  # a finite number the API refuses (over 2^53)
    page.click("#submit button[type=submit]")
    page.wait_for_function("() => document.getElementById('submit-result')"
                           ".classList.contains('error')")  # fmt: skip

    # 6. Admin: without the token the call is refused, with it each action runs.
    if admin_token:
        page.click("#a-rollup")
        page.wait_for_function("() => document.getElementById('admin-result')"
                               ".textContent.includes('unauthorized')")  # fmt: skip
        page.fill("#a-token", admin_token)
    for button, marker in (("#a-rollup", '"rollups"'), ("#a-snapshot", '"snapshots"'),
                           ("#a-rebuild", '"rebuilt"')):  # fmt: skip
        page.locator("#admin-result").evaluate("n => n.textContent = ''")
        page.click(button)
        page.wait_for_function(
            "m => document.getElementById('admin-result').textContent.includes(m)", arg=marker
        )
        text = page.locator("#admin-result").inner_text()
        assert "error" not in page.locator("#admin-result").get_attribute("class").split(), text
        shot(button.removeprefix("#a-"))
    if reset:
        page.once("dialog", lambda d: d.accept())
        page.click("#a-reset")
        page.wait_for_function("() => document.getElementById('admin-result')"
                               ".textContent.includes('seeded')", timeout=60_000)  # fmt: skip
        gone = api.get(f"/v1/boards/{board}/season/members/web-tester")
        assert gone.status_code == 404, gone.text  # the reset removed what we submitted
        shot("reset")
    return board


def _rows(page: Any, table: str, attr: str) -> list[str]:
    return list(page.locator(f"#{table} tbody tr").evaluate_all(
        f"rs => rs.map(r => r.dataset.{attr})"
    ))  # fmt: skip


def _load(page: Any, table: str, button: str) -> None:
    """Click a fair-play list's button and wait for that table's answer (a new data-loaded)."""
    before = page.locator(f"#{table}").get_attribute("data-loaded")
    page.click(button)
    page.wait_for_function(
        "([t, b]) => (document.getElementById(t).dataset.loaded || '') !== b",
        arg=[table, before or ""],
    )


def _wait_admin(page: Any, marker: str) -> str:
    page.wait_for_function(
        "m => document.getElementById('admin-result').textContent.includes(m)", arg=marker
    )
    text = page.locator("#admin-result").inner_text()
    assert "error" not in (page.locator("#admin-result").get_attribute("class") or ""), text
    return str(text)


# A held event's row is gone from the page's list (its decision refreshed the list).
_GONE = "e => ![...document.querySelectorAll('#held tbody tr')].some(r => r.dataset.event === e)"


def _fair_play(
    page: Any, api: httpx.Client, shot: Any, seen: Walk, write_token: str, admin_token: str
) -> None:
    """The operator view's fair play: a held event approved (the board then counts it) and
    another rejected (it never does), a member hidden (gone from the top) and made visible
    (back at its rank), and the audit trail listing those decisions, as the API has them."""
    admin = {"Authorization": f"Bearer {admin_token}"} if admin_token else {}
    board = api.get("/v1/boards").json()["default_board"]
    page.select_option("#board", board)
    page.select_option("#window", "season")
    member, value, sent = "fair-tester", 7, 6
    events = [{"board": board, "member": member, "value": value, "event_id": f"fair-{n}"}
              for n in range(sent)]  # fmt: skip
    got = api.post(
        "/v1/scores",
        json={"events": events},
        headers={"Authorization": f"Bearer {write_token}"} if write_token else {},
    )
    assert got.status_code == 200, got.text
    result = got.json()
    mine = {e["event_id"] for e in result.get("held_events") or []}
    held_url = f"/v1/admin/boards/{board}/held"

    def listed() -> list[str]:
        page_ = api.get(held_url, params={"limit": 20}, headers=admin).json()
        return [e["event_id"] for e in page_["events"]]

    def season_score() -> float | None:
        entry = api.get(f"/v1/boards/{board}/season/members/{member}")
        return entry.json()["score"] if entry.status_code == 200 else None

    _load(page, "held", "#f-held-load")
    assert _rows(page, "held", "event") == listed(), (
        _rows(page, "held", "event"),
        listed(),
        result,
    )
    if len(mine) >= 2:
        # The model: the member's season score is the value times the events applied.
        assert season_score() == value * result["applied"] == value * (sent - len(mine))
        approve, reject = sorted(mine)[:2]
        page.fill("#f-reason", "web test: a real player")
        page.locator(f"#held tr[data-event='{approve}'] button[data-action='approve']").click()
        _wait_admin(page, '"applied": 1')
        page.wait_for_function(
            _GONE,
            arg=approve,
        )
        assert season_score() == value * (result["applied"] + 1)
        page.locator(f"#held tr[data-event='{reject}'] button[data-action='reject']").click()
        _wait_admin(page, '"action": "reject"')
        page.wait_for_function(
            _GONE,
            arg=reject,
        )
        assert season_score() == value * (result["applied"] + 1)  # a reject applies nothing
        assert _rows(page, "held", "event") == listed()
        assert approve not in listed() and reject not in listed()
        seen.approved, seen.rejected = [approve], [reject]
        shot("held-events", page.locator("#fair-section"))

    # Hide the board's leader: gone from the API's top (the others close up), then back.
    top = api.get(f"/v1/boards/{board}/season", params={"limit": 100}).json()
    leader = top["entries"][0]["member"]
    page.fill("#m-member", leader)
    # Without a reason the API refuses (nothing changes): the page shows its code and message.
    page.fill("#m-reason", "")
    page.click("#m-hide")
    page.wait_for_function(
        "() => document.getElementById('admin-result').classList.contains('error')"
    )
    refused = api.put(f"/v1/admin/members/{leader}/moderation", headers=admin,
                      json={"state": "hidden", "mode": "shadow", "reason": ""})  # fmt: skip
    assert 400 <= refused.status_code < 500, refused.text
    error = refused.json()
    shown = page.locator("#admin-result").inner_text()
    assert f"{error['error']} ({refused.status_code}): {error['message']}" in shown, shown
    assert [
        e["member"]
        for e in api.get(f"/v1/boards/{board}/season", params={"limit": 100}).json()["entries"]
    ] == [e["member"] for e in top["entries"]]
    page.fill("#m-reason", "web test: under review")
    page.click("#m-hide")
    _wait_admin(page, '"state": "hidden"')
    after = api.get(f"/v1/boards/{board}/season", params={"limit": 100}).json()
    assert leader not in [e["member"] for e in after["entries"]]
    assert after["total"] == top["total"] - 1
    assert [e["member"] for e in after["entries"][:5]] == [
        e["member"] for e in top["entries"][1:6]
    ]  # fmt: skip
    records = api.get(f"/v1/admin/members/{leader}/moderation", headers=admin).json()["boards"]
    page.wait_for_function(
        "s => [...document.querySelectorAll('#moderation tbody tr')].map(r => r.dataset.state)"
        ".join() === s",
        arg=",".join(r["state"] for r in records),
    )
    assert _rows(page, "moderation", "board") == [r["board"] for r in records]
    assert "hidden" in [r["state"] for r in records]
    shot("member-hidden", page.locator("#fair-section"))
    page.click("#m-visible")
    _wait_admin(page, '"state": "visible"')
    back = api.get(f"/v1/boards/{board}/season", params={"limit": 100}).json()
    assert back["entries"][:6] == top["entries"][:6] and back["total"] == top["total"]
    page.wait_for_function(
        "() => [...document.querySelectorAll('#moderation tbody tr')]"
        ".every(r => r.dataset.state === 'visible')"
    )
    seen.hidden = leader

    # The audit trail, newest first, as the API pages it; filtered by action; older page.
    _load(page, "audit", "#au-load")
    newest = api.get("/v1/admin/audit", params={"limit": 20}, headers=admin).json()
    assert _rows(page, "audit", "id") == [e["stream_id"] for e in newest["entries"]]
    seen.audit_actions = page.locator("#audit td.audit-action").all_inner_texts()
    assert seen.audit_actions == [e["action"] for e in newest["entries"]]
    shot("audit", page.locator("#audit"))
    page.select_option("#au-action", "hide")
    _load(page, "audit", "#au-load")
    hides = api.get("/v1/admin/audit", params={"limit": 20, "action": "hide"},
                    headers=admin).json()  # fmt: skip
    assert _rows(page, "audit", "id") == [e["stream_id"] for e in hides["entries"]]
    page.select_option("#au-action", "")
    _load(page, "audit", "#au-load")
    if newest["next"]:
        _load(page, "audit", "#au-older")
        older = api.get("/v1/admin/audit", params={"limit": 20, "after": newest["next"]},
                        headers=admin).json()  # fmt: skip
        assert _rows(page, "audit", "id") == [e["stream_id"] for e in older["entries"]]


def _when_loaded(page: Any, table: str, before: str | None) -> None:
    page.wait_for_function(
        "([t, b]) => (document.getElementById(t).dataset.loaded || '') !== b",
        arg=[table, before or ""],
    )


def _league(page: Any, api: httpx.Client, shot: Any, seen: Walk) -> None:
    """The league view of the first board with a league (GET /v1/boards: ``league``), for the
    current and the previous period: the tiers as GET /v1/leagues/{board} counts them, highest
    first; a member's cohort as GET /v1/leagues/{board}/members/{member} gives it (rank,
    member, score, zone, next tier, reward, what moves and when, in the boards' zone); the
    API's message for a member in no cohort; no view for a board without a league."""
    catalog = api.get("/v1/boards").json()
    zone = catalog["timezone"]
    leagues = [b for b in catalog["boards"] if b.get("league")]
    base = str(api.base_url).rstrip("/")
    if not leagues:
        _open(page, base + "/")
        assert page.locator("#league-section").is_hidden()
        return
    info = leagues[0]
    board, league = info["board"], info["league"]
    seen.league_board = board
    _open(page, f"{base}/#board={board}")
    assert page.locator("#league-section").is_visible()
    assert page.locator("#league-nav").is_visible()
    assert page.locator("#league-info").inner_text() == (
        f"cohorts of up to {league['cohort_size']} members per {league['window']}"
        f" · tiers, lowest first: {' → '.join(league['tiers'])}"
    )
    for period in ("current", "previous"):
        if period != "current":
            before = [page.locator(f"#{t}").get_attribute("data-loaded")
                      for t in ("league-tiers", "league-cohort")]  # fmt: skip
            page.select_option("#l-period", period)
            _when_loaded(page, "league-tiers", before[0])
            if page.locator("#l-member").input_value():
                _when_loaded(page, "league-cohort", before[1])
        overview = api.get(f"/v1/leagues/{board}", params={"period": period}).json()
        tiers = [(t["tier"], t["members"], t["cohorts"]) for t in reversed(overview["tiers"])]
        rows = page.locator("#league-tiers tbody tr")
        shown = [
            (r[0], int(r[1].replace(",", "")), int(r[2].replace(",", "")))
            for r in rows.evaluate_all("rs => rs.map(r => [...r.cells].map(c => c.textContent))")
        ]
        assert shown == tiers, (period, shown, tiers)
        assert page.locator("#league-overview-title").inner_text() == (
            f"{overview['window']} {overview['period']} · highest first"
        )
        seen.league_tiers[period] = shown
        # A member of the period's cohort that shows the most kinds of zone (no zone counts
        # as one), the first such: its second row.
        member, kinds = None, 0
        for cid in range(1, 1 + sum(t[2] for t in tiers)):
            got = api.get(f"/v1/leagues/{board}/{overview['period']}/cohorts/{cid}")
            cohort_rows = got.json()["rows"] if got.status_code == 200 else []
            if len(cohort_rows) >= 2 and len({r["zone"] for r in cohort_rows}) > kinds:
                member, kinds = cohort_rows[1]["member"], len({r["zone"] for r in cohort_rows})
        if member is None:
            continue
        page.fill("#l-member", member)
        _load(page, "league-cohort", "#l-show")
        want = api.get(f"/v1/leagues/{board}/members/{member}", params={"period": period}).json()
        _cohort_shown(page, want, zone)
        seen.league_cohorts[period] = (member, [
            (r["rank"], r["member"], r["zone"]) for r in want["rows"]
        ])  # fmt: skip
        shot(f"league-{period}", page.locator("#league-section"))
    # A member in no cohort: the API's message, as an answer (not in red).
    stranger = "nobody-in-this-league"
    page.fill("#l-member", stranger)
    _load(page, "league-cohort", "#l-show")
    got = api.get(f"/v1/leagues/{board}/members/{stranger}", params={"period": "previous"})
    assert got.status_code == 404 and got.json()["error"] == "not_in_league", got.text
    assert page.locator("#league-cohort").is_hidden()
    assert page.locator("#league-result").inner_text() == got.json()["message"]
    assert "error" not in (page.locator("#league-result").get_attribute("class") or "")
    seen.league_messages["previous"] = got.json()["message"]
    # The view follows the board: none for a board without a league.
    plain = [b["board"] for b in catalog["boards"] if not b.get("league")]
    if plain:
        page.select_option("#board", plain[0])
        page.wait_for_selector("#league-section", state="hidden")
        assert page.locator("#league-nav").is_hidden()


def _cohort_shown(page: Any, want: dict[str, Any], zone: str) -> None:
    """The cohort table and its lines are the API's cohort ``want``."""
    assert page.locator("#league-cohort").is_visible()
    rows = page.locator("#league-cohort tbody tr").evaluate_all(
        "rs => rs.map(r => [r.dataset.member, r.dataset.zone, r.className,"
        " ...[...r.cells].map(c => c.textContent)])"
    )
    expected = []
    for r in want["rows"]:
        rank = "–" if r["rank"] is None else str(r["rank"])
        score = "–" if r["score"] is None else _js_score(r["score"])
        zone_text = {"promote": "▲ promote", "stay": "stay", "demote": "▼ demote"}.get(
            r["zone"], "–"
        )
        member = r["member"] + (" hidden" if r["hidden"] else "")
        expected.append([r["member"], r["zone"] or "", rank, member, score, zone_text,
                         r["tier_after"], r["reward"] or "–"])  # fmt: skip
    assert [[r[0], r[1], *r[3:]] for r in rows] == expected, (rows, expected)
    # The member asked for is marked; each ranked row carries its zone's class.
    for r, w in zip(rows, want["rows"], strict=True):
        classes = r[2].split()
        assert ("hit" in classes) == (w["member"] == want["member"]), r
        assert (f"zone-{w['zone']}" in classes) == (w["zone"] is not None), r
    tier_now = want["member_tier"]
    now = f" · tier now {tier_now}" if tier_now and tier_now != want["tier"] else ""
    group = f" ({want['group']})" if want["group"] else ""
    assert page.locator("#league-result").inner_text() == (
        f"{want['member']} · cohort {want['cohort']} of tier {want['tier']}{group}"
        f" · {want['window']} {want['period']}{now}"
    )
    up = "nobody moves up" if want["promote"] == 0 else f"promotion: top {want['promote']}" + (
        "" if want["promotion_score"] is None
        else f", the last at {_js_score(want['promotion_score'])}"
    )  # fmt: skip
    down = "nobody moves down" if want["demote"] == 0 else f"demotion: bottom {want['demote']}"
    when = ("final: the close's decision" if want["final"]
            else f"live · resets {_zoned(want['resets_at'], zone)} {zone}")  # fmt: skip
    assert page.locator("#league-note").inner_text() == f"{up} · {down} · {when}"


def _chart_of_a_low_is_best_board(page: Any, api: httpx.Client, shot: Any) -> None:
    """On a board where low is best, the history's best score is drawn at the top (as rank 1
    is), and the charts' labels are at least 12 px as shown."""
    boards = api.get("/v1/boards").json()["boards"]
    low = next((b["board"] for b in boards if b["order"] == "asc"), None)
    if low is None:
        return
    top = api.get(f"/v1/boards/{low}/season", params={"limit": 50}).json()["entries"]
    # A member whose day scores differ, so that "the best on top" means something.
    for e in top:
        history = api.get(f"/v1/boards/{low}/members/{e['member']}/history",
                          params={"window": "day", "last": 14}).json()["history"]  # fmt: skip
        scores = [h["score"] for h in history if h["rank"] is not None]
        ranks = [h["rank"] for h in history if h["rank"] is not None]
        if len(set(scores)) > 1 and len(set(ranks)) > 1:
            break
    else:
        raise AssertionError(f"no member of {low} has day scores that differ")
    page.select_option("#board", low)
    page.select_option("#h-window", "day")
    page.fill("#member", e["member"])
    page.click("#find button")
    # This member's chart, not the one drawn before it (which may have as many points).
    page.wait_for_function(
        """([n, top]) => {
            const svg = document.querySelector('#chart figure.score svg');
            return svg !== null && svg.querySelectorAll('circle').length === n
                && Number(svg.dataset.top) === top;
        }""",
        arg=[len(scores), min(scores)],
    )
    for kind, values in (("score", scores), ("rank", ranks)):
        chart = page.locator(f"#chart figure.{kind} svg")
        # Low is best for both: the smallest value at the top, the largest at the bottom.
        assert float(chart.get_attribute("data-top") or "nan") == min(values), kind
        assert float(chart.get_attribute("data-bottom") or "nan") == max(values), kind
        dots = chart.locator("circle").evaluate_all(
            "cs => cs.map(c => [Number(c.dataset.value), Number(c.getAttribute('cy'))])"
        )
        assert sorted(v for v, _ in dots) == sorted(values), (kind, dots)
        # Drawn the right way up: a better (lower) value is never below a worse one.
        by_value = sorted(dots)
        assert all(a[1] <= b[1] for a, b in zip(by_value, by_value[1:], strict=False)), dots
        assert by_value[0][1] < by_value[-1][1], dots
    sizes = page.locator("#chart svg text").evaluate_all(
        "ts => ts.map(t => parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a)"
    )
    assert sizes and min(sizes) >= MIN_LABEL_PX, sizes
    shot("history-low-is-best", page.locator("#find-section"))


def _composite_parts(page: Any, api: httpx.Client, shot: Any) -> None:
    """A composite board's entries carry ``parts`` beside the score; the table shows the
    parts. The server's own page of a board is given parts here (as a composite board's
    reads have them), so the page's side is checked whatever boards are configured."""
    board = api.get("/v1/boards").json()["default_board"]
    expected: list[str] = []

    def with_parts(route: Any) -> None:
        body = route.fetch().json()
        for e in body["entries"]:
            score = int(e["score"])
            e["parts"] = {"level": score // 10, "power": score % 10 * 1000 + 117}
        expected[:] = [
            f"level {_js_score(e['parts']['level'])} · power {_js_score(e['parts']['power'])}"
            for e in body["entries"]
        ]
        route.fulfill(status=200, content_type="application/json", body=json.dumps(body))

    pattern = re.compile(rf"/v1/boards/{re.escape(board)}/season\?")
    page.route(pattern, with_parts)
    try:
        _open(page, f"{str(api.base_url).rstrip('/')}/#board={board}&window=season")
        page.wait_for_selector("#top tbody td.num .parts")
        shown = page.locator("#top tbody td.num .parts").all_inner_texts()
        assert shown == expected, (shown, expected)
        shot("composite-parts")
    finally:
        page.unroute(pattern, with_parts)


# In the page: each visible, enabled button's text colour and the first opaque background
# behind it (its own, or an ancestor's for a link-like button).
_BUTTON_COLOURS = """() => {
        const opaque = (c) => !/^rgba\\(.*,\\s*0\\)$/.test(c) && c !== "transparent";
        const behind = (node) => {
            for (let n = node; n; n = n.parentElement) {
                const c = getComputedStyle(n).backgroundColor;
                if (opaque(c)) return c;
            }
            return "rgb(255, 255, 255)";
        };
        return [...document.querySelectorAll("button")]
            .filter((b) => !b.disabled && b.offsetParent !== null)
            .map((b) => ({ name: b.id || b.textContent.trim(), fg: getComputedStyle(b).color,
                           bg: behind(b) }));
    }"""


def _button_colours(page: Any) -> list[dict[str, str]]:
    """Each visible, enabled button's text colour and the background behind its text."""
    return list(page.evaluate(_BUTTON_COLOURS))


def _views(page: Any, api: httpx.Client, shot: Any, seen: Walk) -> None:
    """The page at 1280 and 390 px, light and dark, with a member found: screenshots, and
    every button's text at WCAG AA contrast."""
    board = api.get("/v1/boards").json()["default_board"]
    member = api.get(f"/v1/boards/{board}/season", params={"limit": 5}).json()["entries"][-1]
    _open(page, f"{str(api.base_url).rstrip('/')}/#board={board}&member={member['member']}")
    page.wait_for_selector("#chart figure.score svg")
    for size, name in ((LAPTOP, "1280"), (PHONE, "390")):
        page.set_viewport_size(size)
        # The charts are redrawn at the width they are shown.
        page.wait_for_function(
            "() => Number(document.querySelector('#chart svg').getAttribute('width'))"
            " === Math.max(240, Math.floor(document.getElementById('chart').clientWidth))"
        )
        for scheme in ("light", "dark"):
            page.emulate_media(color_scheme=scheme)
            colours = _button_colours(page)
            assert colours, "no buttons"
            for c in colours:
                seen.contrast[f"{scheme}: {c['name']}"] = contrast_ratio(c["fg"], c["bg"])
            shot(f"{name}-{scheme}")
    page.emulate_media(color_scheme="light")
    page.set_viewport_size(LAPTOP)


def _phone(context: Any, base_url: str, shot: Any) -> None:
    """On a 390 px phone, nothing is wider than the screen and the member search is on the
    first screen."""
    phone = context.new_page()
    phone.set_viewport_size(PHONE)
    _open(phone, base_url)
    wide = phone.evaluate("document.documentElement.scrollWidth")
    assert wide <= PHONE["width"] + 1, f"page is {wide}px wide on a 390px phone"
    box = phone.locator("#member").bounding_box()
    assert box is not None and box["y"] + box["height"] <= PHONE["height"], box
    shot("phone", phone)
    phone.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", nargs="?", default="http://127.0.0.1:8080/")
    parser.add_argument("--out", type=Path, default=Path("screenshots"))
    parser.add_argument("--write-token", default="")
    parser.add_argument("--admin-token", default="")
    parser.add_argument("--no-reset", action="store_true", help="skip 'Reset demo data'")
    args = parser.parse_args(argv)
    seen = walk(args.url, args.out, write_token=args.write_token,
                admin_token=args.admin_token, reset=not args.no_reset)  # fmt: skip
    for path in seen.screenshots:
        print(path)
    problems = seen.page_errors + seen.failed_requests
    problems += [f"request to another host: {url}" for url in seen.offsite_requests]
    problems += [
        f"button contrast {ratio:.2f} < {MIN_CONTRAST}: {name}"
        for name, ratio in seen.contrast.items()
        if ratio < MIN_CONTRAST
    ]
    for problem in problems:
        print("problem:", problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
