"""NEXMark: the generator keeps the model's rules (proportions, hot items, bounded
disorder, seeds), and every query of examples/nexmark/ run by ``mqo match`` on its
data reports what DuckDB computes from the definitions."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import pytest

from experiments.nexmark import DDL, Config, generate, write
from tests.cli.clirun import match, strict_lines
from tests.conftest import REPO

EXAMPLES = REPO / "examples" / "nexmark"
QUERY_FILES = ("q1.mqo", "q2.mqo", "q3.mqo", "q5.mqo", "q7.mqo", "q8.mqo")
OUT_OF_ORDER = 0.5


# ----------------------------------------------------------------- generator


def test_generator_is_seeded() -> None:
    a, b = generate(Config(2000, seed=4)), generate(Config(2000, seed=4))
    assert a == b and a != generate(Config(2000, seed=5))


def test_generator_keeps_the_proportions_and_ids() -> None:
    events = generate(Config(5000, seed=1))
    kinds = Counter(e.stream for e in events)
    assert kinds == {"Person": 100, "Auction": 300, "Bid": 4600}  # 1 : 3 : 46
    for stream, first in (("Person", 1000), ("Auction", 1000), ("Bid", 0)):
        ids = [e.id for e in events if e.stream == stream]
        assert ids == list(range(first, first + kinds[stream])), stream


def test_generator_has_hot_auctions_and_bidders() -> None:
    bids = [e for e in generate(Config(20000, seed=2)) if e.stream == "Bid"]
    hot_auction = sum((e.values[0] - 1000) % 100 == 0 for e in bids) / len(bids)
    hot_bidder = sum((e.values[1] - 1000) % 100 == 0 for e in bids) / len(bids)
    assert 0.45 < hot_auction < 0.6  # the hot auction half the time (ratio 2), by chance now and then
    assert 0.7 < hot_bidder < 0.85  # a hot bidder three times in four (ratio 4)


@pytest.mark.parametrize("delay", [0.0, 0.3, 2.0])
def test_generator_disorder_is_bounded(delay: float) -> None:
    events = generate(Config(3000, seed=3, rate=500.0, out_of_order=delay))
    newest, behind = 0.0, 0.0
    for e in events:
        behind = max(behind, newest - e.ts)
        newest = max(newest, e.ts)
    assert behind <= delay
    assert (behind > 0) == (delay > 0)
    assert sorted(e.ts for e in events) == [n * 2 / 1000 for n in range(3000)]  # n / rate, whole ms


def test_written_schema_is_the_examples(tmp_path: Path) -> None:
    written = write(generate(Config(100)), tmp_path, ("csv",))
    assert (tmp_path / "nexmark.ddl").read_text() == (EXAMPLES / "streams.ddl").read_text() == DDL
    assert sorted(p.name for p in written) == ["auction.csv", "bid.csv", "nexmark.ddl", "person.csv"]


# ------------------------------------------------------- queries against DuckDB


@pytest.fixture(scope="module")
def nexmark(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Generated data, out of order by up to half a second, and every example query's
    rows from ``mqo match`` (CSV inputs; the same from Parquet inputs)."""
    root = tmp_path_factory.mktemp("nexmark")
    write(generate(Config(20000, seed=7, rate=1000.0, out_of_order=OUT_OF_ORDER)), root)
    queries = root / "all.mqo"
    queries.write_text("\n".join((EXAMPLES / name).read_text() for name in QUERY_FILES))
    outputs = {}
    for fmt in ("csv", "parquet"):
        inputs = [
            f"{s}={root / f'{n}.{fmt}'}" for s, n in (("Person", "person"), ("Auction", "auction"), ("Bid", "bid"))
        ]
        out = root / f"out-{fmt}.jsonl"
        done = match(
            "--output",
            str(out),
            "--allowed-lateness",
            str(OUT_OF_ORDER),
            schema=str(EXAMPLES / "streams.ddl"),
            queries=str(queries),
            inputs=inputs,
        )
        assert done.returncode == 0, done.stderr
        assert "late:     0" in done.stderr  # the lateness covers the disorder
        outputs[fmt] = strict_lines(out.read_text())
    db = duckdb.connect()
    for name in ("person", "auction", "bid"):
        db.execute(f"CREATE TABLE {name} AS SELECT * FROM read_csv('{root / name}.csv', header = true)")
        db.execute(f"ALTER TABLE {name} ADD COLUMN ts_ms BIGINT")
        db.execute(f"UPDATE {name} SET ts_ms = CAST(round(ts * 1000) AS BIGINT)")
    by_query: dict[str, list[dict[str, Any]]] = {}
    for row in outputs["csv"]:
        by_query.setdefault(row["query"], []).append(row)
    return {"db": db, "rows": by_query, "csv": outputs["csv"], "parquet": outputs["parquet"]}


def _sql(nexmark: dict[str, Any], text: str) -> list[tuple]:
    return sorted(nexmark["db"].execute(text).fetchall())


def _windows(slide_ms: int, range_ms: int) -> str:
    """Every (window number k, bid) with the bid in window (k*s - d, k*s]."""
    return (
        f"SELECT k, b.* FROM bid b, range((b.ts_ms + {slide_ms} - 1) // {slide_ms},"
        f" (b.ts_ms + {range_ms} + {slide_ms} - 1) // {slide_ms}) AS r(k)"
    )


def test_every_query_reports(nexmark: dict[str, Any]) -> None:
    assert set(nexmark["rows"]) == {
        *("q1", "q2", "q3", "q5", "q5_hot", "q5_cooled", "q5_hottest", "q7", "q7_changed", "q7_bids", "q8")
    }
    # Parquet inputs give the same rows as CSV inputs
    assert sorted(map(json.dumps, nexmark["csv"])) == sorted(map(json.dumps, nexmark["parquet"]))


def test_q1_currency_conversion(nexmark: dict[str, Any]) -> None:
    """A match query's SELECT arithmetic is in doubles (README), as DuckDB's on DOUBLEs."""
    got = sorted(
        (
            (
                r["ids"]["B"],
                r["values"]["B.auction"],
                r["values"]["B.bidder"],
                r["values"]["price_eur"],
                r["values"]["B.channel"],
            )
            for r in nexmark["rows"]["q1"]
        ),
    )
    want = _sql(nexmark, "SELECT id, auction, bidder, CAST(price AS DOUBLE) * CAST(0.908 AS DOUBLE), channel FROM bid")
    assert got == want and len(got) == 18400


def test_q2_selection(nexmark: dict[str, Any]) -> None:
    got = sorted((r["ids"]["B"], r["values"]["B.auction"], r["values"]["B.price"]) for r in nexmark["rows"]["q2"])
    want = _sql(nexmark, "SELECT id, auction, price FROM bid WHERE auction IN (1007, 1020, 2001, 2019, 2087)")
    assert got == want and got


def test_q3_local_item_suggestion(nexmark: dict[str, Any]) -> None:
    got = sorted(
        (
            r["ids"]["P"],
            r["ids"]["A"],
            r["values"]["P.name"],
            r["values"]["P.city"],
            r["values"]["P.state"],
            r["values"]["A.item_name"],
        )
        for r in nexmark["rows"]["q3"]
    )
    want = _sql(
        nexmark,
        "SELECT p.id, a.id, p.name, p.city, p.state, a.item_name FROM auction a JOIN person p ON a.seller = p.id"
        " WHERE p.state IN ('OR', 'ID', 'CA') AND a.category = 10 AND abs(a.ts_ms - p.ts_ms) <= 600000",
    )
    assert sorted(got) == sorted(want) and got


def test_q5_bids_per_auction_and_hot_items(nexmark: dict[str, Any]) -> None:
    counts = f"SELECT k, auction, count(*) AS n FROM ({_windows(5000, 10000)}) GROUP BY k, auction"
    got = sorted(
        (round(r["window_end"] / 5), r["values"]["B.auction"], r["values"]["bids"]) for r in nexmark["rows"]["q5"]
    )
    assert got == _sql(nexmark, counts)
    hot = f"SELECT k, auction FROM ({counts}) WHERE n >= 50"
    # ISTREAM: hot in window k and not in window k - 1
    became = _sql(
        nexmark,
        f"WITH h AS ({hot}) SELECT k, auction FROM h WHERE (k - 1, auction) NOT IN (SELECT (k, auction) FROM h)",
    )
    assert sorted((round(r["window_end"] / 5), r["values"]["B.auction"]) for r in nexmark["rows"]["q5_hot"]) == became
    # DSTREAM: hot in window k - 1 and not in window k (after the data, every window is empty)
    cooled = _sql(
        nexmark,
        f"WITH h AS ({hot}) SELECT k + 1, auction FROM h WHERE (k + 1, auction) NOT IN (SELECT (k, auction) FROM h)",
    )
    assert (
        sorted((round(r["window_end"] / 5), r["values"]["B.auction"]) for r in nexmark["rows"]["q5_cooled"]) == cooled
    )
    assert became and cooled


def test_q7_highest_bid(nexmark: dict[str, Any]) -> None:
    got = sorted(
        (round(r["window_end"] / 10), r["values"]["highest"], r["values"]["bids"]) for r in nexmark["rows"]["q7"]
    )
    assert got == _sql(nexmark, f"SELECT k, max(price), count(*) FROM ({_windows(10000, 10000)}) GROUP BY k")
    highest = f"SELECT k, max(price) AS m FROM ({_windows(2000, 10000)}) GROUP BY k"
    # ISTREAM of one row per window: when the window before has none or another maximum
    changed = _sql(
        nexmark,
        f"WITH w AS ({highest}) SELECT w.k, w.m FROM w LEFT JOIN w p ON p.k = w.k - 1 WHERE p.m IS NULL OR p.m <> w.m",
    )
    assert (
        sorted((round(r["window_end"] / 2), r["values"]["highest"]) for r in nexmark["rows"]["q7_changed"]) == changed
    )
    assert len(changed) < len(_sql(nexmark, highest))  # fewer rows than every window


def test_q5_hottest_auctions_through_views(nexmark: dict[str, Any]) -> None:
    """Q5 whole: per window, the auctions whose bid count is the window's largest."""
    counts = f"SELECT k, auction, count(*) AS n FROM ({_windows(5000, 10000)}) GROUP BY k, auction"
    want = _sql(
        nexmark,
        f"WITH c AS ({counts}) SELECT k, auction, n FROM c WHERE n = (SELECT max(n) FROM c AS d WHERE d.k = c.k)",
    )
    got = sorted(
        (round(r["ts"] / 5), r["values"]["c.auction"], r["values"]["c.bids"]) for r in nexmark["rows"]["q5_hottest"]
    )
    assert got == want and got


def test_q7_bids_that_made_the_highest_price(nexmark: dict[str, Any]) -> None:
    """Q7 whole: the bids whose price is their 10 s window's highest (ts: the window's end)."""
    want = _sql(
        nexmark,
        f"WITH w AS ({_windows(10000, 10000)}) SELECT k, id, auction, bidder, price FROM w"
        " WHERE price = (SELECT max(price) FROM w AS v WHERE v.k = w.k)",
    )
    got = sorted(
        (round(r["ts"] / 10), r["ids"]["B"], r["values"]["B.auction"], r["values"]["B.bidder"], r["values"]["B.price"])
        for r in nexmark["rows"]["q7_bids"]
    )
    assert got == want and got


def test_q8_new_users(nexmark: dict[str, Any]) -> None:
    """Q8: the persons who joined and opened an auction in the same 10 s window."""
    window = "(ts_ms + 9999) // 10000"
    want = _sql(
        nexmark,
        f"SELECT p.k, p.id, p.name, count(*) FROM (SELECT {window} AS k, id, name FROM person) p"
        f" JOIN (SELECT {window} AS k, seller FROM auction) a ON a.k = p.k AND a.seller = p.id"
        " GROUP BY p.k, p.id, p.name",
    )
    got = sorted(
        (round(r["ts"] / 10), r["values"]["p.person"], r["values"]["p.name"], r["values"]["s.auctions"])
        for r in nexmark["rows"]["q8"]
    )
    assert got == want and got
