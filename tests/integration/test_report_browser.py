"""report.html in a real browser: Debian's headless Chromium (installed by scripts/test.sh as root) opens the report
``specsweep report`` wrote, at a desktop's width (1280) and a phone's (390), and a script run in the page checks
that every figure loaded (``naturalWidth > 0``), that nothing sticks out of the page's edge (the page does not
scroll sideways, and no element reaches past the viewport unless a scrolling box of its own holds it) and that
the winners' section is shown, that every plot's axes are labelled and show tick labels (each ``<img>``
carries what its figure's axes say, ``data-axes``, orchestrator/report/axes.py: a numeric axis needs its label
and numbers, a colour bar its label and numbers, a categorical one its category names), and that the part of
each server command that differs between configurations is whole and visible at 1280 px. A full-page
screenshot of each width is kept for a person to look at; the test prints where.

Chromium is driven over the DevTools protocol on a loopback websocket (aiohttp's client): the viewport is set
exactly (the command line's ``--window-size`` has a floor of 500 px), the page is a ``file://`` one whose figures
are embedded, and a proxy on a closed loopback port keeps the browser from reaching any network.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.reliability.harness import ROOT, cli_env, run_cli
from tests.timing import scaled

pytestmark = pytest.mark.timeout(300)

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
RUNS = ROOT / "tests" / "data" / "runs"
WIDTHS = {"desktop": (1280, 900), "narrow": (390, 844)}

# Evaluated in the loaded page; returns what it found.
_CHECK = r"""
(() => {
  const W = document.documentElement.clientWidth;
  const images = [...document.images].map(i => ({
    alt: i.alt.slice(0, 60), complete: i.complete, natural: i.naturalWidth, shown: i.getBoundingClientRect().width,
    right: i.getBoundingClientRect().right, axes: i.dataset.axes ? JSON.parse(i.dataset.axes) : null}));
  // An element is held when an ancestor of its own scrolls or clips it and that box is inside the page.
  const held = el => {
    for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
      const o = getComputedStyle(p).overflowX;
      if (o === 'auto' || o === 'scroll' || o === 'hidden') {
        const r = p.getBoundingClientRect();
        if (r.left >= -1 && r.right <= W + 1) return true;
      }
    }
    return false;
  };
  const over = [];
  for (const el of document.body.querySelectorAll('*')) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) continue;
    if ((r.right > W + 1 || r.left < -1) && !held(el))
      over.push({tag: el.tagName, text: (el.textContent || '').trim().slice(0, 80), left: r.left, right: r.right});
  }
  const heading = [...document.querySelectorAll('h2')].find(h => h.textContent.trim() === 'Winners');
  let winners = null;
  if (heading) {
    const r = heading.getBoundingClientRect(), s = getComputedStyle(heading);
    const body = heading.nextElementSibling, b = body ? body.getBoundingClientRect() : {height: 0, right: 0};
    const table = [...document.querySelectorAll('caption')].find(c => c.textContent.startsWith('Best configuration'));
    winners = {shown: r.width > 0 && r.height > 0 && s.display !== 'none' && s.visibility !== 'hidden',
               left: r.left, right: r.right, top: r.top + scrollY, body_height: b.height, body_right: b.right,
               text: body ? body.textContent.trim().slice(0, 300) : '', table: !!table};
  }
  // The server-command table: the part of each command that differs, each cell whole and inside the page (not
  // behind a scrollbar of the table's box).
  const cap = [...document.querySelectorAll('caption')].find(c => c.textContent.startsWith('What each configuration'));
  let differs = null;
  if (cap) {
    const table = cap.closest('table'), box = table.parentElement.getBoundingClientRect();
    const column = [...table.querySelectorAll('th')].findIndex(th => th.textContent.trim() === 'in place of …');
    differs = [...table.querySelectorAll('tbody tr')].map(tr => {
      const td = tr.children[column], r = td.getBoundingClientRect();
      return {text: td.textContent.trim(), right: r.right, box_right: Math.min(box.right, W),
              whole: td.scrollWidth <= td.clientWidth + 1};
    });
  }
  return {width: W, scroll_width: document.documentElement.scrollWidth,
          height: document.documentElement.scrollHeight, images, overflowing: over.slice(0, 40), winners, differs};
})()
"""


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Headless Chromium with its DevTools endpoint on loopback; yields the browser's websocket URL. Stopped (by
    its PID) on the way out, whatever the tests did."""
    if CHROMIUM is None:
        pytest.skip("no chromium: scripts/test.sh installs Debian's chromium when run as root")
    profile = tmp_path_factory.mktemp("chromium-profile")
    proc = subprocess.Popen(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",  # as root, Chromium's sandbox will not start
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--proxy-server=http://127.0.0.1:9",  # nothing listens there: no request leaves this machine
            "--remote-debugging-address=127.0.0.1",
            "--remote-debugging-port=0",
            f"--user-data-dir={profile}",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        seen = []
        for line in proc.stderr:
            seen.append(line)
            found = re.search(r"DevTools listening on (ws://127\.0\.0\.1:\d+/\S+)", line)
            if found:
                break
        else:
            raise AssertionError("chromium did not start its DevTools endpoint: " + "".join(seen[-20:]))
        yield found.group(1)
    finally:
        proc.kill()
        proc.wait(timeout=scaled(30))


class _DevTools:
    """The few DevTools commands the test needs, on one page (a flat session of the browser's socket)."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.next_id = 0
        self.session: str | None = None
        self.events: list[dict[str, Any]] = []

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        message: dict[str, Any] = {"id": self.next_id, "method": method, "params": params}
        if self.session is not None:
            message["sessionId"] = self.session
        await self.ws.send_json(message)
        while True:
            reply = json.loads((await self.ws.receive(timeout=60)).data)
            if reply.get("id") == self.next_id:
                assert "error" not in reply, (method, reply["error"])
                return dict(reply.get("result", {}))
            self.events.append(reply)

    async def wait_for(self, event: str) -> None:
        while not any(e.get("method") == event for e in self.events):
            self.events.append(json.loads((await self.ws.receive(timeout=60)).data))


async def _open(url: str, page: Path, width: int, height: int, shot: Path) -> dict[str, Any]:
    async with aiohttp.ClientSession() as client, client.ws_connect(url, max_msg_size=0) as ws:
        tools = _DevTools(ws)
        target = (await tools.call("Target.createTarget", url="about:blank"))["targetId"]
        tools.session = (await tools.call("Target.attachToTarget", targetId=target, flatten=True))["sessionId"]
        # A phone's width is a phone: the page's viewport meta applies, as it would on one.
        metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600}
        await tools.call("Emulation.setDeviceMetricsOverride", **metrics)
        await tools.call("Page.enable")
        await tools.call("Page.navigate", url=page.as_uri())
        await tools.wait_for("Page.loadEventFired")
        found = await tools.call("Runtime.evaluate", expression=_CHECK, returnByValue=True)
        result = dict(found["result"]["value"])
        picture = await tools.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        shot.write_bytes(base64.b64decode(picture["data"]))
        tools.session = None
        await tools.call("Target.closeTarget", targetId=target)
        return result


def _reported(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    run = shutil.copytree(RUNS / name, tmp_path_factory.mktemp("browser") / name)
    proc = run_cli("report", str(run), "--quiet", env=cli_env())
    assert proc.returncode == 0, proc.stderr
    page = Path(proc.stdout.strip())
    assert page == run / "report.html"
    return page


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The field report's run (44 points, every kind of figure and table) reported by the real CLI."""
    return _reported(tmp_path_factory, "field-report")


_WORDS = re.compile(r"[A-Za-z]{2,}")


def _numeric(ticks: list[str]) -> bool:
    """Tick labels that are numbers (``1.5``, ``−2``, ``40%``, a log axis's ``$\\mathdefault{10^{2}}$``), not
    category names (``linear``, ``ddtree(budget=7, topk=1)``)."""
    return not any(_WORDS.search(t.replace("mathdefault", "")) for t in ticks)


def axes_problems(images: list[dict[str, Any]]) -> list[str]:
    """What a reader of the report could not read off a plot: an axis without tick labels, a numeric axis without
    its label or numbers, a colour bar without its label or numbers; an image that does not say its axes."""
    problems = []
    for image in images:
        where = image["alt"][:40]
        if not image.get("axes"):
            problems.append(f"{where}: says nothing of its axes (no data-axes)")
            continue
        for n, ax in enumerate(image["axes"]):
            name = f"{where} [axes {n} {ax.get('title', '')!r}]"
            sides = ["x", "y"]
            if ax["colorbar"]:  # one axis: the one its numbers are on
                sides = [max(("x", "y"), key=lambda s: len(ax[s]["ticks"]))]
            for side in sides:
                ticks, label = ax[side]["ticks"], ax[side]["label"]
                if not ticks:
                    problems.append(f"{name}: no tick labels on its {side} axis")
                elif _numeric(ticks) and not label:
                    problems.append(f"{name}: its {side} axis ({', '.join(ticks[:4])}) has no label")
                elif _numeric(ticks) and sum(any(c.isdigit() for c in t) for t in ticks) < 2:
                    problems.append(f"{name}: its {side} axis {label!r} shows fewer than two numbers: {ticks}")
    return problems


def test_axes_problems_finds_a_missing_label_missing_numbers_and_an_untagged_image() -> None:
    """The rule the browser test applies, on the shapes it must refuse and accept (so it can fail)."""
    good = {
        "title": "",
        "colorbar": False,
        "x": {"label": "C", "ticks": ["1", "8"]},
        "y": {"label": "", "ticks": ["ar", "linear"]},
    }
    bar = {
        "title": "",
        "colorbar": True,
        "x": {"label": "", "ticks": []},
        "y": {"label": "×AR", "ticks": ["0.5", "1.0"]},
    }
    assert axes_problems([{"alt": "ok", "axes": [good, bar]}]) == []
    unlabelled = {**good, "x": {"label": "", "ticks": ["1", "8"]}}
    no_numbers = {**good, "x": {"label": "time (ms)", "ticks": []}}
    bare_bar = {**bar, "y": {"label": "", "ticks": ["0.5", "1.0"]}}
    found = axes_problems([{"alt": "a", "axes": [unlabelled, no_numbers, bare_bar]}, {"alt": "b", "axes": None}])
    assert found == [
        "a [axes 0 '']: its x axis (1, 8) has no label",
        "a [axes 1 '']: no tick labels on its x axis",
        "a [axes 2 '']: its y axis (0.5, 1.0) has no label",
        "b: says nothing of its axes (no data-axes)",
    ]


@pytest.mark.parametrize("name", list(WIDTHS))
def test_the_report_in_chromium_loads_every_figure_fits_the_page_and_shows_the_winners(
    browser: str, report: Path, name: str
) -> None:
    width, height = WIDTHS[name]
    # Kept for a person to look at: the whole page at this width, beside the report.
    shot = report.parent / f"screenshot-{name}-{width}.png"
    result = asyncio.run(_open(browser, report, width, height, shot))
    assert shot.read_bytes().startswith(b"\x89PNG")
    print(f"\nscreenshot of report.html at {width} px: {shot}")

    assert result["width"] == width
    images = result["images"]
    assert len(images) == 6  # the field report's figures
    broken = [i["alt"] for i in images if not i["complete"] or i["natural"] <= 0 or i["shown"] <= 0]
    assert not broken, broken
    assert not axes_problems(images), axes_problems(images)
    assert all(i["right"] <= width + 1 for i in images)
    assert result["scroll_width"] <= width, f"the page scrolls sideways: {result['scroll_width']} > {width}"
    assert not result["overflowing"], result["overflowing"][:5]
    winners = result["winners"]
    assert winners is not None, "no Winners section"
    assert winners["shown"] and winners["right"] <= width + 1 and winners["body_height"] > 0
    assert winners["table"] and ("is fastest at" in winners["text"] or "indistinguishable" in winners["text"])
    # The server commands: the shared words once, and the speculative part of each configuration visible whole.
    differs = result["differs"]
    assert differs, "no table of what each configuration changes in the server command"
    assert all(d["text"].startswith("--") for d in differs if d["text"] != "(nothing)"), differs
    hidden = [d for d in differs if not d["whole"] or d["right"] > d["box_right"] + 1]
    if name == "desktop":
        assert not hidden, hidden[:3]
        assert all(d["right"] <= width + 1 for d in differs), differs


def test_every_plot_of_the_simulator_demos_report_has_labelled_axes_with_numbers(
    browser: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A second run's report (the simulator demo: a chain and trees on one host), its plots read in Chromium."""
    page = _reported(tmp_path_factory, "sim-demo")
    result = asyncio.run(_open(browser, page, *WIDTHS["desktop"], page.parent / "screenshot-desktop-1280.png"))
    images = result["images"]
    assert images and all(i["axes"] for i in images), [i["alt"] for i in images]
    assert not axes_problems(images), axes_problems(images)
