"""NEXMark: a seeded generator of the auction model, as CSV and Parquet files for mqo.

Written from the published description of the benchmark (Tucker, Tufte, Papadimos and
Maier, "NEXMark - A Benchmark for Queries over Data Streams", 2008) and the generator
every engine reports with (Apache Beam's ``nexmark`` package, which Flink, Spark and
RisingWave reuse): three streams of an online auction,

* **Person** (a new user): name, email, credit card, city, state;
* **Auction** (an item put up for sale): item name, initial bid, reserve, expiry,
  seller (a person), category;
* **Bid**: auction, bidder (a person), price, channel, url;

interleaved in the standard proportions: of every 50 events, 1 is a person, 3 are
auctions and 46 are bids, in that order. Ids count from 1000 per kind; a person or an
auction's id is its tuple's ``id``. Who and what they point to follows the reference
generator: a new auction's seller is, with probability ``1 - 1/hot_sellers_ratio``, a
**hot seller** (the first of the last 100 people), else a recent person (one of the
last 1000, or up to 10 ahead); a bid's auction is, with probability
``1 - 1/hot_auction_ratio``, the **hot auction** (the first of the last 100 auctions),
else one of the 100 auctions in flight (or up to 10 ahead); its bidder likewise a
**hot bidder** or a recent person. Prices are ``round(10 ** U(0, 6) * 100)`` cents
(1 dollar to 1,000,000, log-uniform); a reserve is the initial bid plus such a price.

**Time**: event ``n`` happens at ``n / rate`` seconds (milliseconds, exactly), so the
events are in event-time order; with ``out_of_order`` = ``D`` > 0 each event arrives
``U(0, D)`` seconds after it happened and the files hold the events in arrival order:
a tuple is never more than ``D`` seconds older than one that arrived before it, so
``mqo match --allowed-lateness D`` (or more) takes every tuple.

    python -m experiments.nexmark --events 1000000 --out data/nexmark [--seed 1]
           [--rate 10000] [--out-of-order 2.0] [--format csv|parquet|both]

writes ``person``, ``auction`` and ``bid`` (``.csv`` and/or ``.parquet``) and
``nexmark.ddl`` (the streams' declaration, as ``examples/nexmark/streams.ddl``).
"""

from __future__ import annotations

import argparse
import csv
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DDL = """\
-- NEXMark's three streams (experiments/nexmark.py); a person's and an auction's id is the tuple's id
REGISTER STREAM Person (name STRING, email STRING, credit_card STRING, city STRING, state STRING);
REGISTER STREAM Auction (item_name STRING, initial_bid INTEGER, reserve INTEGER, expires FLOAT,
                         seller INTEGER, category INTEGER);
REGISTER STREAM Bid (auction INTEGER, bidder INTEGER, price INTEGER, channel STRING, url STRING);
"""
COLUMNS = {
    "Person": ("name", "email", "credit_card", "city", "state"),
    "Auction": ("item_name", "initial_bid", "reserve", "expires", "seller", "category"),
    "Bid": ("auction", "bidder", "price", "channel", "url"),
}
FILES = {"Person": "person", "Auction": "auction", "Bid": "bid"}

PERSON_PROPORTION, AUCTION_PROPORTION, BID_PROPORTION = 1, 3, 46
PROPORTION = PERSON_PROPORTION + AUCTION_PROPORTION + BID_PROPORTION
FIRST_ID = 1000  # persons and auctions alike
FIRST_CATEGORY, CATEGORIES = 10, 5
HOT_GROUP = 100  # the hot seller/bidder/auction is the first of the last 100
ACTIVE_PEOPLE, PERSON_LEAD = 1000, 10
IN_FLIGHT_AUCTIONS, AUCTION_LEAD = 100, 10
US_STATES = ("AZ", "CA", "ID", "OR", "WA", "WY")
US_CITIES = (
    "Phoenix",
    "Los Angeles",
    "San Francisco",
    "Boise",
    "Portland",
    "Bend",
    "Redmond",
    "Seattle",
    "Kent",
    "Cheyenne",
)
FIRST_NAMES = ("Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter")
LAST_NAMES = ("Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris")
CHANNELS = ("Google", "Facebook", "Baidu", "Apple")


@dataclass(frozen=True)
class Config:
    events: int
    seed: int = 1
    rate: float = 10_000.0  # events per second of event time
    out_of_order: float = 0.0  # the largest arrival delay, seconds
    hot_auction_ratio: int = 2
    hot_sellers_ratio: int = 4
    hot_bidders_ratio: int = 4


@dataclass(frozen=True)
class Event:
    stream: str
    ts: float
    id: int
    values: tuple[Any, ...]  # COLUMNS[stream] order
    arrival: float


def kind_of(n: int) -> str:
    """The kind of event ``n``: of every 50, the first a person, the next 3 auctions."""
    offset = n % PROPORTION
    if offset < PERSON_PROPORTION:
        return "Person"
    return "Auction" if offset < PERSON_PROPORTION + AUCTION_PROPORTION else "Bid"


def last_person(n: int) -> int:
    """The base-0 id of the last person at or before event ``n``."""
    return n // PROPORTION * PERSON_PROPORTION + min(n % PROPORTION, PERSON_PROPORTION - 1)


def last_auction(n: int) -> int:
    """The base-0 id of the last auction at or before event ``n`` (-1: none yet, taken as 0)."""
    offset = n % PROPORTION - PERSON_PROPORTION
    offset = min(max(offset, -1), AUCTION_PROPORTION - 1)
    return max(n // PROPORTION * AUCTION_PROPORTION + offset, 0)


def _recent_person(n: int, rnd: random.Random) -> int:
    people = last_person(n) + 1
    active = min(people, ACTIVE_PEOPLE)
    return people - active + rnd.randrange(active + PERSON_LEAD)


def _recent_auction(n: int, rnd: random.Random) -> int:
    top = last_auction(n)
    low = max(top - IN_FLIGHT_AUCTIONS, 0)
    return low + rnd.randrange(top - low + 1 + AUCTION_LEAD)


def _hot_or(ratio: int, hot: int, other: Any, rnd: random.Random) -> int:
    """The hot one (first of the last HOT_GROUP) with probability 1 - 1/ratio."""
    return hot // HOT_GROUP * HOT_GROUP if rnd.randrange(ratio) > 0 else other(rnd)


def _price(rnd: random.Random) -> int:
    return round(10.0 ** (rnd.random() * 6.0) * 100.0)


def generate(config: Config) -> list[Event]:
    """Every event, in arrival order (event-time order when ``out_of_order`` is 0)."""
    rnd = random.Random(config.seed)
    counts = {"Person": 0, "Auction": 0, "Bid": 0}
    events: list[Event] = []
    for n in range(config.events):
        ts = math.floor(n * 1000 / config.rate) / 1000  # whole milliseconds
        kind = kind_of(n)
        if kind == "Person":
            first, last = rnd.choice(FIRST_NAMES), rnd.choice(LAST_NAMES)
            card = " ".join(f"{rnd.randrange(10000):04d}" for _ in range(4))
            email = f"{first.lower()}.{last.lower()}@example.com"
            values: tuple[Any, ...] = (f"{first} {last}", email, card, rnd.choice(US_CITIES), rnd.choice(US_STATES))
            ident = FIRST_ID + last_person(n)
        elif kind == "Auction":
            seller = _hot_or(config.hot_sellers_ratio, last_person(n), lambda r, n=n: _recent_person(n, r), rnd)
            initial = _price(rnd)
            expires = round(ts + rnd.uniform(1.0, 60.0), 3)
            category = FIRST_CATEGORY + rnd.randrange(CATEGORIES)
            ident = FIRST_ID + last_auction(n)
            values = (f"item-{ident}", initial, initial + _price(rnd), expires, FIRST_ID + seller, category)
        else:
            auction = _hot_or(config.hot_auction_ratio, last_auction(n), lambda r, n=n: _recent_auction(n, r), rnd)
            bidder = _hot_or(config.hot_bidders_ratio, last_person(n), lambda r, n=n: _recent_person(n, r), rnd)
            channel = rnd.choice(CHANNELS)
            ident = counts["Bid"]
            url = f"https://www.nexmark.com/{channel.lower()}/item.htm?query=1&auction={FIRST_ID + auction}"
            values = (FIRST_ID + auction, FIRST_ID + bidder, _price(rnd), channel, url)
        counts[kind] += 1
        delay = rnd.uniform(0.0, config.out_of_order) if config.out_of_order > 0 else 0.0
        events.append(Event(kind, ts, ident, values, ts + delay))
    if config.out_of_order > 0:
        events.sort(key=lambda e: e.arrival)  # stable: ties keep event order
    return events


def write(events: Sequence[Event], out: Path, formats: Sequence[str] = ("csv", "parquet")) -> list[Path]:
    """The events as one file per stream and format, in arrival order, and ``nexmark.ddl``."""
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "nexmark.ddl"]
    written[0].write_text(DDL)
    for stream, name in FILES.items():
        rows = [(e.ts, e.id, *e.values) for e in events if e.stream == stream]
        header = ("ts", "id", *COLUMNS[stream])
        if "csv" in formats:
            path = out / f"{name}.csv"
            with path.open("w", newline="") as f:
                writer = csv.writer(f)
                writer.writerow(header)
                writer.writerows([(repr(r[0]), *r[1:]) for r in rows])
            written.append(path)
        if "parquet" in formats:
            import pyarrow as pa
            import pyarrow.parquet as pq

            columns = list(zip(*rows, strict=True)) if rows else [() for _ in header]
            path = out / f"{name}.parquet"
            pq.write_table(pa.table({h: list(c) for h, c in zip(header, columns, strict=True)}), path)
            written.append(path)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.nexmark", description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, required=True, help="how many events (persons, auctions and bids)")
    parser.add_argument("--out", type=Path, required=True, help="the directory to write into")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rate", type=float, default=10_000.0, help="events per second of event time")
    parser.add_argument("--out-of-order", type=float, default=0.0, help="the largest arrival delay, in seconds")
    parser.add_argument("--format", choices=("csv", "parquet", "both"), default="both")
    args = parser.parse_args(argv)
    if args.events < 0 or not (args.rate > 0 and math.isfinite(args.rate)):
        parser.error("--events must be >= 0 and --rate a positive number")
    if not (args.out_of_order >= 0 and math.isfinite(args.out_of_order)):
        parser.error("--out-of-order must be a finite number of seconds >= 0")
    formats = ("csv", "parquet") if args.format == "both" else (args.format,)
    config = Config(args.events, args.seed, args.rate, args.out_of_order)
    for path in write(generate(config), args.out, formats):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
