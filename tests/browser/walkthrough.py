"""Click through every feature of the web page in headless Chromium, checking what it shows
against the JSON API and taking a screenshot at each step.

Used by tests/test_web_page.py, and by hand against a running server (e.g. scripts/demo):

    .venv/bin/python tests/browser/walkthrough.py http://127.0.0.1:8080/ [--admin-token T]

Needs the ``playwright`` Python package and a Chromium binary (Debian's ``chromium``);
playwright drives that binary, it never downloads a browser of its own.
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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


@dataclass
class Walk:
    """What a walk saw: screenshots taken, and JavaScript errors and failed requests."""

    screenshots: list[Path] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    failed_requests: list[str] = field(default_factory=list)


def _js_score(x: float) -> str:
    """A score as the page's fmtScore writes it."""
    return f"{int(x):,}" if float(x).is_integer() else repr(float(x))


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
    seen = Walk()
    api = httpx.Client(base_url=base_url, timeout=30)
    with tempfile.TemporaryDirectory(prefix="seasons-chromium-") as profile, sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            profile, executable_path=executable, args=FLAGS, headless=True,
            viewport={"width": 1280, "height": 900},
        )  # fmt: skip
        try:
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
                (target or page).screenshot(path=str(path), full_page=True)
                seen.screenshots.append(path)

            _steps(page, api, shot, write_token, admin_token, reset)
            # The same page on a phone.
            phone = context.new_page()
            phone.set_viewport_size({"width": 390, "height": 844})
            phone.goto(base_url)
            phone.wait_for_selector("body[data-ready='1']")
            wide = phone.evaluate("document.documentElement.scrollWidth")
            assert wide <= 390 + 1, f"page is {wide}px wide on a 390px phone"
            shot("phone", phone)
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


def _steps(
    page: Any, api: httpx.Client, shot: Any, write_token: str, admin_token: str, reset: bool
) -> None:
    page.goto(str(api.base_url))
    page.wait_for_selector("body[data-ready='1']")
    boards = [b["board"] for b in api.get("/v1/boards").json()["boards"]]
    assert page.locator("#board option").all_inner_texts() == boards
    board = boards[0]
    limit = int(page.locator("#limit").input_value())

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
    page.wait_for_selector("#chart svg circle.rank")
    history = api.get(f"/v1/boards/{board}/members/{member}/history",
                      params={"window": "day", "last": 14}).json()  # fmt: skip
    ranked = [h for h in history["history"] if h["rank"] is not None]
    assert page.locator("#chart svg circle.rank").count() == len(ranked)
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
    for problem in problems:
        print("problem:", problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
