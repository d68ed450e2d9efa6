"""The SQL side of the NEXMark benchmark (:mod:`experiments.bench_nexmark`), in two
dialects: DuckDB's and Spark SQL's.

Each query variant is one SQL body (:func:`query_bodies`), as a user with one query at a
time writes it; each family is one set-based body over its parameter table
``p_<family>`` (:func:`set_bodies`), as an expert writes it. Both write their results as
``mqo match`` does (``query``, ``ts`` or ``window_end``, ``ids``, ``values``), less the
ids of view rows, which only mqo numbers. The dialects differ in three spellings only:
a struct (``{'k': v}`` / ``named_struct('k', v)``), integer division (``//`` / ``div``)
and the windows a timestamp falls in (DuckDB's ``range`` table function / Spark's
``LATERAL VIEW explode(sequence(...))``).

DuckDB runs in a process of its own (:data:`RUNNER_SCRIPT`: one ``INSERT`` per query,
one ``COPY`` per family); Spark in another (:data:`SPARK_RUNNER`: a local session on
every core, the CSV files as cached temporary views, one job per body writing JSON).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from experiments.bench_nexmark import Variant

SLICE_MS = 1000  # the set-based Q5 and Q7 fold their windows from one-second slices
PARAMETER_TABLES = ("p_q2", "p_q3", "p_q3_states", "p_q5", "p_q7")


@dataclass(frozen=True)
class Dialect:
    name: str  # "duckdb" or "spark"

    def struct(self, fields: Sequence[tuple[str, str]]) -> str:
        if self.name == "spark":
            return "named_struct(" + ", ".join(f"'{k}', {v}" for k, v in fields) + ")"
        return "{" + ", ".join(f"'{k}': {v}" for k, v in fields) + "}"

    def div(self, a: str, b: str) -> str:
        return f"({a}) {'div' if self.name == 'spark' else '//'} ({b})"

    def windows(self, ts_ms: str, range_ms: str, slide_ms: str) -> str:
        """The FROM clause's tail giving ``k``: each window ``(k*s - r, k*s]`` holding ``ts_ms``."""
        first = self.div(f"{ts_ms} + {slide_ms} - 1", slide_ms)
        stop = self.div(f"{ts_ms} + {range_ms} + {slide_ms} - 1", slide_ms)
        if self.name == "spark":
            return f" LATERAL VIEW explode(sequence({first}, {stop} - 1)) w AS k"
        return f", range({first}, {stop}) AS w(k)"

    # ------------------------------------------------------------- result rows

    def match_q2(self, query: str) -> str:
        ids = self.struct([("B", "b.id")])
        values = self.struct([("B.auction", "b.auction"), ("B.price", "b.price")])
        return f'{query} AS query, b.ts AS ts, {ids} AS ids, {values} AS "values"'.replace('"', self._quote)

    def match_q3(self, query: str, col: Callable[[str, str], str]) -> str:
        """Q3's result; ``col(alias, column)`` spells a column of the auction (``A``) or person (``P``)."""
        ids = self.struct([("A", col("A", "id")), ("P", col("P", "id"))])
        values = self.struct(
            [("P.name", col("P", "name")), ("P.city", col("P", "city")), ("P.state", col("P", "state")),
             ("A.item_name", col("A", "item_name"))]
        )  # fmt: skip
        ts = f"greatest({col('A', 'ts')}, {col('P', 'ts')})"
        return f'{query} AS query, {ts} AS ts, {ids} AS ids, {values} AS "values"'.replace('"', self._quote)

    def row_q5(self, query: str, slide: str) -> str:
        """Q5's result: the window end and the auction's count (no ids: they are view rows')."""
        values = self.struct([("c.auction", "auction"), ("c.bids", "n")])
        return f'{query} AS query, k * {slide} / 1000 AS ts, {values} AS "values"'.replace('"', self._quote)

    def row_q7(self, query: str, slide: str) -> str:
        """Q7's result: the window end and the bid (its id; not the view row's)."""
        ids = self.struct([("B", "id")])
        values = self.struct([("B.auction", "auction"), ("B.bidder", "bidder"), ("B.price", "price")])
        return f'{query} AS query, k * {slide} / 1000 AS ts, {ids} AS ids, {values} AS "values"'.replace(
            '"', self._quote
        )

    @property
    def _quote(self) -> str:
        return "`" if self.name == "spark" else '"'


DUCKDB, SPARK = Dialect("duckdb"), Dialect("spark")


def query_bodies(variants: Sequence[Variant], d: Dialect) -> list[tuple[str, str]]:
    """(family, SELECT) per variant: the query alone, from the definitions."""
    out = []
    for v in variants:
        q = f"'{v.qid}'"
        if v.family == "q2":
            auctions = ", ".join(map(str, v.auctions))
            body = f"SELECT {d.match_q2(q)} FROM bid b WHERE b.auction IN ({auctions})"
        elif v.family == "q3":
            states = ", ".join(f"'{s}'" for s in v.states)
            body = (
                f"SELECT {d.match_q3(q, lambda side, c: f'{side.lower()}.{c}')} FROM auction a JOIN person p ON a.seller = p.id "
                f"WHERE p.state IN ({states}) AND a.category = {v.category} "
                f"AND abs(a.ts_ms - p.ts_ms) <= {v.window * 1000}"
            )
        elif v.family == "q5":
            r, s = v.range_s * 1000, v.slide_s * 1000
            counts = (
                f"SELECT k, auction, count(*) AS n FROM bid{d.windows('ts_ms', str(r), str(s))} GROUP BY k, auction"
            )
            body = (
                f"WITH c AS ({counts}), m AS (SELECT k, max(n) AS most FROM c GROUP BY k) "
                f"SELECT {d.row_q5(q, str(s))} FROM c JOIN m USING (k) "
                f"WHERE c.n = m.most AND c.n >= {v.threshold}"
            )
        else:
            r, s = v.range_s * 1000, v.slide_s * 1000
            where = f" WHERE channel = '{v.channel}'" if v.channel else ""
            also = f" AND b.channel = '{v.channel}'" if v.channel else ""
            maxima = f"SELECT k, max(price) AS m FROM bid{d.windows('ts_ms', str(r), str(s))}{where} GROUP BY k"
            body = (
                f"SELECT {d.row_q7(q, str(s))} FROM ({maxima}) w JOIN bid b ON b.price = w.m "
                f"AND b.ts_ms > w.k * {s} - {r} AND b.ts_ms <= w.k * {s}{also}"
            )
        out.append((v.family, body))
    return out


def set_bodies(d: Dialect, families: Sequence[str]) -> list[tuple[str, str]]:
    """(family, SELECT) per family over its parameter table: the set-based statements."""
    q2 = f"SELECT {d.match_q2('q.qid')} FROM bid b JOIN p_q2 q ON b.auction = q.auction"
    q3 = _q3_set(d)
    # Q5, Q7: per one-second slice first (every range and slide is whole seconds), then
    # each distinct window folded from its slices, then the parameters
    sliced = f"{d.div(f'ts_ms + {SLICE_MS} - 1', str(SLICE_MS))} * {SLICE_MS}"
    q5 = (
        f"WITH s AS (SELECT auction, {sliced} AS e, count(*) AS n FROM bid GROUP BY ALL), "
        "d AS (SELECT DISTINCT range_ms, slide_ms FROM p_q5), "
        f"c AS (SELECT range_ms, slide_ms, k, auction, sum(n) AS n FROM s, d{d.windows('e', 'range_ms', 'slide_ms')} GROUP BY ALL), "
        "m AS (SELECT range_ms, slide_ms, k, max(n) AS most FROM c GROUP BY ALL) "
        f"SELECT {d.row_q5('q.qid', 'c.slide_ms')} FROM c JOIN m USING (range_ms, slide_ms, k) "
        "JOIN p_q5 q USING (range_ms, slide_ms) WHERE c.n = m.most AND c.n >= q.threshold"
    )  # fmt: skip
    q7 = (
        f"WITH s AS (SELECT channel, {sliced} AS e, max(price) AS m FROM bid GROUP BY ALL), "
        "d AS (SELECT DISTINCT range_ms, slide_ms, coalesce(channel, '') AS channel FROM p_q7), "
        f"c AS (SELECT range_ms, slide_ms, d.channel, k, max(m) AS m FROM s JOIN d "
        f"ON d.channel = '' OR d.channel = s.channel{d.windows('e', 'range_ms', 'slide_ms')} GROUP BY ALL), "
        "x AS (SELECT c.range_ms, c.slide_ms, c.channel, c.k, b.id, b.auction, b.bidder, b.price FROM c JOIN bid b "
        "ON b.price = c.m AND b.ts_ms > c.k * c.slide_ms - c.range_ms AND b.ts_ms <= c.k * c.slide_ms "
        "AND (c.channel = '' OR b.channel = c.channel)) "
        f"SELECT {d.row_q7('q.qid', 'x.slide_ms')} FROM x JOIN p_q7 q "
        "ON x.range_ms = q.range_ms AND x.slide_ms = q.slide_ms AND x.channel = coalesce(q.channel, '')"
    )  # fmt: skip
    bodies = {"q2": q2, "q3": q3, "q5": q5, "q7": q7}
    return [(f, bodies[f]) for f in families]


def _q3_set(d: Dialect) -> str:
    """Q3 set-based: the person-auction pairs within the largest window, joined with the parameters."""
    return (
        "WITH pairs AS (SELECT a.id AS a_id, a.ts AS a_ts, a.ts_ms AS a_ms, a.category, a.item_name AS a_item_name, "
        "p.id AS p_id, p.ts AS p_ts, p.ts_ms AS p_ms, p.name AS p_name, p.city AS p_city, p.state AS p_state "
        "FROM auction a JOIN person p ON a.seller = p.id AND abs(a.ts_ms - p.ts_ms) <= (SELECT max(window_ms) FROM p_q3)) "
        f"SELECT {d.match_q3('q.qid', lambda side, c: f'pairs.{side.lower()}_{c}')} FROM pairs "
        "JOIN p_q3 q ON pairs.category = q.category AND abs(pairs.a_ms - pairs.p_ms) <= q.window_ms "
        "JOIN p_q3_states s ON s.qid = q.qid AND s.state = pairs.p_state"
    )


# ------------------------------------------------------------------- DuckDB


def duckdb_load(folder: Path, parameters: bool) -> list[tuple[str, str]]:
    out = []
    for name in ("person", "auction", "bid"):
        read = f"read_csv('{folder / name}.csv', header = true, quote = '\"')"
        out.append(("load", f"CREATE TABLE {name} AS SELECT *, CAST(round(ts * 1000) AS BIGINT) AS ts_ms FROM {read}"))
    for name in PARAMETER_TABLES if parameters else ():
        read = f"read_csv('{folder / name}.csv', header = true, all_varchar = false)"
        out.append(("load", f"CREATE TABLE {name} AS SELECT * FROM {read}"))
    return out


def duckdb_per_query(variants: Sequence[Variant], folder: Path) -> list[tuple[str, str]]:
    """One INSERT per query into ``r_<family>``, then one COPY per family to ``each_<family>.json``."""
    out = duckdb_load(folder, parameters=False)
    bodies = query_bodies(variants, DUCKDB)
    families = sorted({f for f, _ in bodies})
    for f in families:
        first = next(body for g, body in bodies if g == f)
        out.append(("load", f"CREATE TABLE r_{f} AS SELECT * FROM ({first}) LIMIT 0"))
    out += [(f, f"INSERT INTO r_{f} {body}") for f, body in bodies]
    out += [("copy", f"COPY r_{f} TO '{folder / f'each_{f}.json'}' (FORMAT JSON)") for f in families]
    return out


def duckdb_set_based(folder: Path, families: Sequence[str]) -> list[tuple[str, str]]:
    """One statement per family: results to ``set_<family>.json``."""
    out = duckdb_load(folder, parameters=True)
    for family, body in set_bodies(DUCKDB, families):
        out.append((family, f"COPY ({body}) TO '{folder / f'set_{family}.json'}' (FORMAT JSON)"))
    return out


# -------------------------------------------------------------------- Spark

SPARK_RUNNER = """
import json, sys, time
from experiments.spark import session
spark = session("local[*]", "4g")
plan = json.load(open(sys.argv[1]))
spent = {}
def timed(label, run):
    t0 = time.perf_counter()
    run()
    spent[label] = spent.get(label, 0.0) + time.perf_counter() - t0
def load():
    for name, path in plan["tables"].items():
        frame = spark.read.csv(path, header=True, inferSchema=True, quote='"', escape='"')
        if "ts" in frame.columns and name in ("person", "auction", "bid"):
            frame = frame.selectExpr("*", "CAST(round(ts * 1000) AS BIGINT) AS ts_ms")
        frame.cache().count()
        frame.createOrReplaceTempView(name)
timed("load", load)
for label, body, out in plan["jobs"]:
    timed(label, lambda: spark.sql(body).write.mode("append").json(out))
spark.stop()
print(json.dumps(spent))
"""


def spark_plan(folder: Path, jobs: list[tuple[str, str, str]], parameters: bool) -> dict[str, object]:
    """The Spark runner's input: the tables to load (CSV paths) and the jobs (label, SELECT, output folder)."""
    names = ["person", "auction", "bid", *(PARAMETER_TABLES if parameters else ())]
    return {"tables": {name: str(folder / f"{name}.csv") for name in names}, "jobs": jobs}


def spark_per_query(variants: Sequence[Variant], folder: Path) -> dict[str, object]:
    """One Spark SQL job per query, appending to ``spark_each_<family>/``."""
    jobs = [(f, body, str(folder / f"spark_each_{f}")) for f, body in query_bodies(variants, SPARK)]
    return spark_plan(folder, jobs, parameters=False)


def spark_set_based(folder: Path, families: Sequence[str]) -> dict[str, object]:
    """One Spark SQL job per family over its parameter table, to ``spark_set_<family>/``."""
    jobs = [(f, body, str(folder / f"spark_set_{f}")) for f, body in set_bodies(SPARK, families)]
    return spark_plan(folder, jobs, parameters=True)


def write_plan(plan: object, path: Path) -> Path:
    path.write_text(json.dumps(plan))
    return path
