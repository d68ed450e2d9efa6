"""The page of ``mqo serve --http`` in a real browser: Debian's chromium, driven by
playwright (``scripts/install-browser.sh`` installs it; without it this test fails).
It must show the queries, the shared lists with their readers and selectivities, the
evaluation order, the plots and the results, update as new results come, and show no
error. A screenshot of each state is kept in the test's folder."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect, sync_playwright

from tests.http.running import QUERIES, Service, arrival_runs, post, random_rows

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = pytest.mark.browser


def _no_error(page: Page) -> None:
    expect(page.locator("#error")).to_be_hidden()
    expect(page.locator("#status")).to_have_text("live")


def test_the_page_shows_what_is_shared_and_updates_live(tmp_path: Path) -> None:
    service = Service("--http", "127.0.0.1:0")
    errors: list[str] = []
    try:
        c = service.client
        c.post("/queries", content=QUERIES + "Query ID: high2\nSELECT * FROM B WHERE B.pressure > 130;\n")
        runs = arrival_runs(random_rows(5, 80))
        for stream, rows in runs[: len(runs) // 2]:
            assert post(c, stream, rows, "ndjson").status_code == 200
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            try:
                page = browser.new_page(viewport={"width": 1200, "height": 1400})
                page.on("pageerror", lambda err: errors.append(str(err)))
                page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
                page.goto(service.url + "/")
                _no_error(page)
                expect(page.locator("#n-queries")).to_have_text("5")
                lists = page.locator("#lists tbody tr")
                expect(lists.filter(has_text="B.pressure > c")).to_contain_text("high, high2")
                # its selectivity, measured on the recent tuples, is shown as a number
                expect(lists.filter(has_text="B.pressure > c").locator("td").nth(4)).to_have_text(
                    re.compile(r"0\.\d{3}")
                )
                expect(page.locator("#graph text", has_text="high2")).to_have_count(1)
                sharing = c.get("/explain").json()["sharing"]
                expect(page.locator("#sharing")).to_contain_text(f"sharing ratio {sharing['ratio']:.2f} (")
                # the evaluation order the adaptive policy chose for each stream, as /explain says
                for shown_order in c.get("/explain").json()["order"]["streams"]:
                    row = page.locator("#order tbody tr", has_text=shown_order["stream"])
                    expect(row).to_contain_text(shown_order["order"])
                expect(page.locator("#queries tbody tr")).to_have_count(5)
                expect(page.locator("#results li").first).to_be_visible()
                page.wait_for_timeout(2500)  # a few samples for the plots
                page.screenshot(path=str(tmp_path / "page-first-half.png"), full_page=True)
                shown = int(page.locator("#n-tuples").inner_text().replace(",", ""))
                assert shown > 0

                # the rest of the tuples: counters and results move without a reload
                for stream, rows in runs[len(runs) // 2 :]:
                    post(c, stream, rows, "csv")
                post(c, "B", [{"ts": 1e5, "pressure": 155, "temp": 1.0, "alert": 0}], "ndjson")
                expect(page.locator("#results li").first).to_contain_text('"ts":100000')
                expect(page.locator("#n-tuples")).not_to_have_text(f"{shown:,}")
                page.wait_for_timeout(1500)
                page.screenshot(path=str(tmp_path / "page-live.png"), full_page=True)
                _no_error(page)
                # the throughput plot has drawn something besides its frame
                drawn = page.evaluate(
                    """() => { const c = document.getElementById('plot-throughput');
                         const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
                         let coloured = 0;
                         for (let i = 0; i < d.length; i += 4) if (d[i + 2] > 100 && d[i] < 120) coloured++;
                         return coloured; }"""
                )
                assert drawn > 20
            finally:
                browser.close()
    finally:
        assert service.stop() == 0
    assert errors == []
    assert (tmp_path / "page-live.png").stat().st_size > 10_000
