"""Benchmarks (b) and (b') of :mod:`experiments.bench`: ``mqo match`` against DuckDB.

Each side runs as a whole process over the same files (two CSV streams B and H, the
queries as text for mqo, their constants as one CSV table per query shape for SQL):

* ``mqo match`` with every query registered, writing JSON lines;
* DuckDB with one SQL statement per query (each ``INSERT``-ing its results), then
  ``COPY ... TO (FORMAT JSON)``;
* DuckDB with the set-based statements a DuckDB expert writes: one per query *shape*
  (the predicate structure its queries share), the shape's constants in a table that
  the statement joins, the streams pre-cut by the loosest constants of the shape's
  one-stream predicates, ``COPY ... TO (FORMAT JSON)``;
* the same two again writing Parquet (``mqo match --output mqo.parquet``, ``COPY ... TO
  (FORMAT PARQUET)``): results as columns on both sides, checked equal as well.

(b) is the homogeneous case: 10,000 queries of the thesis' shape; every per-query
statement runs. (b') is heterogeneous: 10,000 queries of seven shapes (different
columns, join conditions such as ``B.pressure <= k * H.vib`` and ``B.temp + c <
H.beatrate``, windows of 5 to 20 seconds in either order or none, one-stream filters
among the joins), so the SQL user writes seven set-based statements, run in one
process; the per-query statements are timed on a sample of each shape and scaled:
each shape's statements by its queries, the ``COPY`` by results, the start-up and
loading counted once. Results are checked equal:
(query, ids) as a multiset against the per-query SQL (on its sample), and (query, ts,
ids, values) as a multiset against the set-based statements.

Where mqo's time goes: a second, instrumented ``mqo match`` process
(:data:`PHASES_SCRIPT`) times the command's phases in self time: the imports (numba,
Arrow, mqo), registering the queries (parsing, templates), compiling the plan, reading
the CSV files, loading the numba kernels from their cache, matching, writing JSON lines,
the rest of the command, and what is left of the process's wall time (interpreter
start and exit). Measured in CPU seconds of one process (an instrumented ``mqo match``
in this process, each phase in self time; a busy 2-core machine, so about 2x the
committed table's wall times), at 2 x 50,000 / 2 x 250,000 tuples:

========================  ===========  ===========  ===========  ===========
phase                      (b) 50k      (b) 250k     (b') 50k     (b') 250k
========================  ===========  ===========  ===========  ===========
imports (numpy, Arrow)       0.28         0.30         0.28         0.28
register (with numba's       0.54         0.56         0.54         0.55
import, ~0.25)
read the CSV files           0.04         0.29         0.04         0.34
attribute kernels            0.09         0.46         0.19         1.02
(``prepare``)
clock (``late_mask``)        0.04         0.19         0.04         0.18
join engine                  0.02         0.10         0.33         1.63
adaptive order's             0.01         0.03         0.08         0.42
statistics
the row loop (rows,          0.03         0.13         0.16         0.80
candidates as ints)
store and purge              0.01         0.04         0.08         0.41
write JSON lines             0.12         0.43         0.14         0.64
rest                         0.04         0.14         0.04         0.15
whole process                1.24         2.69         1.95         6.46
========================  ===========  ===========  ===========  ===========

(b) is fixed costs at 50k (imports, numba, registering: two thirds of the process)
and at 250k the attribute kernels, reading, the clock and writing 3.8 million lines
(1,292 assignments of tuples, ~3,000 queries each: the lines are a ``bytes.join``
per assignment, about memcpy's speed). (b') is the per-tuple join engine, in Python:
26,636 tuples reach it at 250k, ~60 us each spread over a dozen functions (partial
results, bounds, pair tests on 10,000-bit Python-int candidate sets), with only ~2.5
stored tuples fetched per probe (the window holds a few dozen tuples per stream: the
value-index scan is not the cost). The set-based DuckDB process takes 0.9 / 2.7 s on
(b) and 1.0 / 2.7 s on (b') on the same busy machine.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from experiments._common import row, speed_up
from experiments._data import ICU, ICU_DDL, icu_streams
from experiments.bench_pubsub import progress
from experiments.result_sets import check_equal, parquet_results, results, same_ids, same_result

ROOT = Path(__file__).resolve().parent.parent

# A draw of one constant for ``n`` queries: the texts both sides read.
Draw = Callable[[np.random.Generator, int], list[str]]


def decimals(lo: float, hi: float) -> Draw:
    """Uniform on [lo, hi), rounded to 3 decimals (the data's grid: a tie is possible)."""
    return lambda rng, n: [repr(float(x)) for x in rng.uniform(lo, hi, n).round(3)]


def halves(lo: float, hi: float, off: float = 0.0005) -> Draw:
    """Uniform thousandths on [lo, hi) plus ``off``: between two data values (and, with
    0.00025, between two halves of them), so no value, or half a value, sits on a
    constant and doubles (DuckDB) decide as exactly as mqo does."""
    return lambda rng, n: [
        f"{m / 1000 + off:.5f}".rstrip("0") for m in rng.integers(round(lo * 1000), round(hi * 1000), n)
    ]


def integers(lo: int, hi: int) -> Draw:
    """Whole numbers in [lo, hi)."""
    return lambda rng, n: [str(int(x)) for x in rng.integers(lo, hi, n)]


@dataclass(frozen=True, eq=False)
class Shape:
    """A query template: its streams (``"B"``, ``"H"`` or ``"BH"``), for two streams the
    MAXWINDOW and which stream comes first (``"B"``: ``B.ts <= H.ts``, ``"H"``, or
    ``""``: either order), and its WHERE conjuncts in mqo's syntax, constants written
    ``{name}`` and drawn by ``constants`` (in their order). A constant in a conjunct of
    one stream sits at its end (``X op {c}``, ``X op Y + ({c})``), so that the loosest
    constant of the shape bounds the stream for the set-based statement."""

    name: str
    streams: str
    where: str
    constants: dict[str, Draw]
    window: float = 0.0
    first: str = ""

    def mqo(self, qid: str, values: dict[str, str]) -> str:
        window = ""
        if len(self.streams) == 2:
            order = f"WINDOW {self.first}.ts <= {self.other(self.first)}.ts " if self.first else ""
            window = f"{order}MAXWINDOW {self.window:g} sec "
        return f"Query ID: {qid}\nSELECT * FROM {', '.join(self.streams)} {window}WHERE {self.where.format(**values)};"

    def other(self, stream: str) -> str:
        return self.streams.replace(stream, "")

    def window_sql(self) -> str:
        if not self.first:
            return f"abs(b.ts - h.ts) <= {self.window:g}"
        x, y = self.first.lower(), self.other(self.first).lower()
        return f"{x}.ts <= {y}.ts AND {y}.ts - {x}.ts <= {self.window:g}"

    def conjuncts(self) -> list[str]:
        return self.where.split(" AND ")


THESIS = Shape(
    "thesis",
    "BH",
    "B.pressure < {c1} AND H.beatrate > {c2} AND B.pressure <= {k} * H.vib",
    {"c1": decimals(0.1, 1.0), "c2": decimals(199.0, 199.9), "k": integers(1, 5)},
    window=20,
    first="B",
)

# About 50 to 150 results per query each, over the uniform 0..200 values of
# _data.icu_streams at 10 tuples/s per stream.
SHAPES = (
    THESIS,
    Shape(
        "temp_beat",
        "BH",
        "B.temp > {c1} AND H.vib < {c2} AND B.temp + ({c3}) < H.beatrate",
        {"c1": halves(190, 199), "c2": halves(0.5, 2), "c3": halves(-15, -5)},
        window=10,
        first="B",
    ),
    Shape(
        "alerts",
        "BH",
        "H.alert = 1 AND B.alert = 1 AND B.pressure > {c1} AND H.beatrate < {c2} AND B.temp >= H.vib + ({c3})",
        {"c1": halves(196, 199.5), "c2": halves(1, 8), "c3": halves(-50, 50)},
        window=5,
        first="H",
    ),
    Shape(
        "either",
        "BH",
        "B.pressure > {c1} AND H.vib > {c2} AND B.temp <= {k} * H.beatrate + ({c3})",
        {"c1": halves(199, 199.8), "c2": halves(199, 199.8), "k": integers(1, 4), "c3": halves(-20, 20)},
        window=20,
    ),
    Shape("b_range", "B", "B.pressure < {c1} AND B.temp > {c2}", {"c1": halves(5, 15), "c2": halves(190, 196)}),
    Shape(
        "h_alert",
        "H",
        "H.beatrate > {c1} AND H.vib < {c2} AND H.alert = 1",
        {"c1": halves(180, 190), "c2": halves(5, 15)},
    ),
    Shape("b_ratio", "B", "B.alert = 0 AND B.pressure <= 0.5 * B.temp + ({c1})", {"c1": halves(-90, -85, 0.00025)}),
)


@dataclass
class Query:
    qid: str
    shape: Shape
    values: dict[str, str]


# ------------------------------------------------------------------------- SQL

_STREAM = re.compile(r"\b([BH])\.")
_CONSTANT = re.compile(r"\{(\w+)\}")
_OPERATOR = re.compile(r" (<=|>=|<|>|=) ")


def sql(text: str, constant: Callable[[str], str]) -> str:
    """mqo's conjuncts as SQL over the tables ``b`` and ``h``; constants by ``constant(name)``."""
    return _CONSTANT.sub(lambda m: constant(m.group(1)), _STREAM.sub(lambda m: m.group(1).lower() + ".", text))


def cuts(shape: Shape, table: str) -> dict[str, list[str]]:
    """Per stream, the shape's one-stream conjuncts with each constant replaced by its
    loosest value in ``table`` (``X < c``, ``X <= Y + c``: the largest; ``>``: the smallest)."""
    out: dict[str, list[str]] = {s: [] for s in shape.streams}
    for conjunct in shape.conjuncts():
        streams = set(_STREAM.findall(conjunct))
        names = _CONSTANT.findall(conjunct)
        op = _OPERATOR.search(conjunct)
        if len(streams) != 1 or len(names) > 1 or op is None:
            continue
        bound = ""
        if names:
            c = names[0]
            loosest = {"<": "max", "<=": "max", ">": "min", ">=": "min"}.get(op.group(1))
            if loosest is None or not conjunct.endswith((f"{op.group(1)} {{{c}}}", f"+ ({{{c}}})")):
                continue
            bound = f"(SELECT {loosest}({c}) FROM {table})"
        out[streams.pop()].append(sql(conjunct, lambda _, bound=bound: bound))
    return out


def select_list(shape: Shape, query: str, fmt: str = "json") -> str:
    """query, ts, ids and values of a result, as ``mqo match`` writes them: in JSON
    lines ``ids`` and ``values`` objects (structs), in Parquet ``ids`` a map and one
    column per value."""
    aliases = [(s, s.lower()) for s in shape.streams]
    ts = "greatest(b.ts, h.ts)" if len(aliases) == 2 else f"{aliases[0][1]}.ts"
    ids = ", ".join(f"'{s}': {a}.id" for s, a in aliases)
    if fmt == "parquet":
        columns = ", ".join(f'{a}.{c.name} AS "{s}.{c.name}"' for s, a in aliases for c in ICU[s].columns)
        return f"{query} AS query, {ts} AS ts, MAP {{{ids}}} AS ids, {columns}"
    values = ", ".join(f"'{s}.{c.name}': {a}.{c.name}" for s, a in aliases for c in ICU[s].columns)
    return f'{query} AS query, {ts} AS ts, {{{ids}}} AS ids, {{{values}}} AS "values"'


def sources(shape: Shape, cut: dict[str, list[str]] | None = None) -> str:
    """The streams of a FROM clause, each pre-cut by ``cut`` (joined on the window)."""
    tables = []
    for s in shape.streams:
        a = s.lower()
        conds = (cut or {}).get(s)
        tables.append(f"(SELECT * FROM {a} WHERE {' AND '.join(conds)}) {a}" if conds else a)
    return f"{tables[0]} JOIN {tables[1]} ON {shape.window_sql()}" if len(tables) == 2 else tables[0]


def load_statements(folder: Path) -> list[tuple[str, str]]:
    return [
        ("load", f"CREATE TABLE {s.lower()} AS SELECT row_number() OVER () - 1 AS id, * FROM read_csv_auto('{folder / f'{s}.csv'}')")
        for s in "BH"
    ]  # fmt: skip


def set_based(shapes: list[Shape], folder: Path, fmt: str = "json") -> list[tuple[str, str]]:
    """One statement per shape, its constants in ``q_<shape>``: results to
    ``set_<shape>.json`` (``fmt`` ``json``) or ``set_<shape>.parquet`` (``parquet``)."""
    out = load_statements(folder)
    for shape in shapes:
        table = f"q_{shape.name}"
        out.append(("load", f"CREATE TABLE {table} AS SELECT * FROM read_csv_auto('{folder / f'{table}.csv'}')"))
        where = sql(shape.where, lambda c: f"q.{c}")
        source, pairs = sources(shape, cuts(shape, table)), ""
        if len(shape.streams) == 2:
            # the window's pairs first (the rows b and h as structs, which DuckDB does not
            # reorder across): left to itself, it joins the constants to one stream first
            # and takes 20 s for some shapes instead of 0.1 s; on (b) both take the same
            # (MATERIALIZED, or the pairs' columns flattened, were slower)
            source, pairs = "p", f"WITH p AS (SELECT b, h FROM {source}) "
        body = f"{pairs}SELECT {select_list(shape, 'q.qid', fmt)} FROM {source} JOIN {table} q ON {where}"
        out.append((shape.name, f"COPY ({body}) TO '{folder / f'set_{shape.name}.{fmt}'}' (FORMAT {fmt.upper()})"))
    return out


def per_query(queries: list[Query], folder: Path) -> list[tuple[str, str]]:
    """One INSERT per query into ``r_<streams>`` (labelled by its shape), then a COPY of
    each table to ``each_<streams>.json``."""
    out = load_statements(folder)
    tables: dict[str, Shape] = {}
    for q in queries:
        tables.setdefault(q.shape.streams, q.shape)
    for streams, shape in tables.items():
        empty = select_list(shape, "''")
        out.append(("load", f"CREATE TABLE r_{streams} AS SELECT {empty} FROM {sources(shape)} LIMIT 0"))
    for q in queries:
        s = q.shape
        where = sql(s.where, lambda c, values=q.values: values[c])
        if len(s.streams) == 2:
            where = f"{s.window_sql()} AND {where}"
        source = ", ".join(a.lower() for a in s.streams)
        chosen = select_list(s, f"'{q.qid}'")
        out.append((s.name, f"INSERT INTO r_{s.streams} SELECT {chosen} FROM {source} WHERE {where}"))
    out += [("copy", f"COPY r_{t} TO '{folder / f'each_{t}.json'}' (FORMAT JSON)") for t in tables]
    return out


# A process that runs labelled SQL statements and prints the seconds spent per label.
RUNNER_SCRIPT = """
import json, sys, time
import duckdb
con = duckdb.connect()
spent = {}
for label, statement in json.load(open(sys.argv[1])):
    t0 = time.perf_counter()
    con.execute(statement)
    spent[label] = spent.get(label, 0.0) + time.perf_counter() - t0
print(json.dumps(spent))
"""


def run_duckdb(statements: list[tuple[str, str]], folder: Path, name: str) -> tuple[float, dict[str, float]]:
    """Wall seconds of a DuckDB process running ``statements``, and its seconds per label."""
    (folder / f"{name}.json").write_text(json.dumps(statements))
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", RUNNER_SCRIPT, str(folder / f"{name}.json")], check=True, capture_output=True, text=True
    )
    return time.perf_counter() - t0, json.loads(done.stdout.splitlines()[-1])  # after any progress bar


# ------------------------------------------------------------------------- mqo

# ``mqo match`` (runtime.cli.main) with its phases timed in self time: a phase called
# inside another (kernels inside matching, writing inside matching) is not counted twice;
# "other" is the rest of the command, the imports are timed before it starts.
PHASES_SCRIPT = """
import json, sys, time
started = time.perf_counter()
import numba.core.dispatcher
import runtime.cli as cli
import runtime.local.match as local
import runtime.io.input_chunks as input_chunks
from runtime.io.writers import JsonlWriter
cli._import_libraries()
spent = {"imports": time.perf_counter() - started}
spent.update(dict.fromkeys(["register", "plan", "read", "kernels", "match", "write"], 0.0))
inside = []
def timed(name, f):
    def run(*args, **kwargs):
        t0 = time.perf_counter()
        inside.append(0.0)
        try:
            return f(*args, **kwargs)
        finally:
            total = time.perf_counter() - t0
            spent[name] += total - inside.pop()
            if inside:
                inside[-1] += total
    return run
register = timed("register", cli.load_matcher)
def load_matcher(*args, **kwargs):
    matcher = register(*args, **kwargs)
    timed("plan", matcher.ensure_plan)()
    return matcher
cli.load_matcher = load_matcher
# the inputs are read a chunk at a time, between the rounds of matching
local.ArrivingInputs.__init__ = timed("read", local.ArrivingInputs.__init__)
input_chunks._Input.refill = timed("read", input_chunks._Input.refill)
local.Matching.round = timed("match", local.Matching.round)
local.Matching.finish = timed("match", local.Matching.finish)
JsonlWriter.write_batch = timed("write", JsonlWriter.write_batch)
numba.core.dispatcher.Dispatcher._compile_for_args = timed("kernels", numba.core.dispatcher.Dispatcher._compile_for_args)
began = time.perf_counter()
assert cli.main() == 0  # as the program, reading sys.argv
spent["other"] = time.perf_counter() - began - sum(spent.values()) + spent["imports"]
print(json.dumps(spent))
"""


def mqo_args(folder: Path, output: str = "mqo.jsonl") -> list[str]:
    return ["match", "--schema", str(folder / "streams.ddl"), "--queries", str(folder / "queries.mqo"),
            "--input", f"B={folder / 'B.csv'}", "--input", f"H={folder / 'H.csv'}",
            "--output", str(folder / output), "-q"]  # fmt: skip


def run_mqo(folder: Path, output: str = "mqo.jsonl") -> float:
    """Wall seconds of the ``mqo match`` process writing ``output`` (its format by
    the extension)."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "runtime.cli", *mqo_args(folder, output)], check=True, cwd=ROOT)
    return time.perf_counter() - t0


def mqo_phases(folder: Path) -> str:
    """Where an ``mqo match`` process spends its time, as a short note."""
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", PHASES_SCRIPT, *mqo_args(folder)], check=True, cwd=ROOT, capture_output=True, text=True
    )
    wall = time.perf_counter() - t0
    spent = json.loads(done.stdout.splitlines()[-1])
    spent["interpreter start and exit"] = wall - sum(spent.values())
    return "phases (another run): " + ", ".join(f"{name} {s:.2f}" for name, s in spent.items()) + " s"


# -------------------------------------------------------------------- workload


def write_workload(folder: Path, counts: dict[Shape, int], n_tuples: int, rng: np.random.Generator) -> list[Query]:
    """The stream files and the queries (mqo text, and one constants table per shape);
    constants are drawn shape by shape, then the streams."""
    queries: list[Query] = []
    for shape, n in counts.items():
        drawn = {name: draw(rng, n) for name, draw in shape.constants.items()}
        first = len(queries)
        queries += [Query(f"q{first + i}", shape, {c: v[i] for c, v in drawn.items()}) for i in range(n)]
        with open(folder / f"q_{shape.name}.csv", "w") as f:
            f.write(",".join(["qid", *drawn]) + "\n")
            f.writelines(",".join([q.qid, *q.values.values()]) + "\n" for q in queries[first:])
    streams = icu_streams(n_tuples, rng)
    for stream, data in streams.items():
        cols = list(data)
        with open(folder / f"{stream}.csv", "w") as f:
            f.write(",".join(cols) + "\n")
            f.writelines(
                ",".join(map(str, values)) + "\n" for values in zip(*[data[c].tolist() for c in cols], strict=True)
            )
    (folder / "streams.ddl").write_text(ICU_DDL)
    (folder / "queries.mqo").write_text("\n".join(q.shape.mqo(q.qid, q.values) for q in queries))
    return queries


# ------------------------------------------------------------------ benchmarks


def compare(
    bench: str,
    counts: dict[Shape, int],
    n_tuples: int,
    sample: int | None,
    rng: np.random.Generator,
    target: float = 1.5,
    prefix: str = "",
) -> list[dict[str, Any]]:
    """mqo, per-query SQL (every query, or ``sample`` of each shape, scaled) and
    set-based SQL over one workload; results checked; the rows of the table (each
    measurement named after ``prefix``; mqo held to ``target`` times the set-based
    statements' speed)."""
    shapes = list(counts)
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        queries = write_workload(d, counts, n_tuples, rng)
        n = len(queries)
        what = f"{n} queries of {len(shapes)} shape(s), 2 x {n_tuples} tuples"
        progress(f"{bench}: mqo match, {what}")
        mqo_s = run_mqo(d)
        n_ours = sum(1 for _ in results(d, "mqo.jsonl"))
        progress(f"{bench}: mqo match's phases")
        phases = mqo_phases(d)
        progress(f"{bench}: DuckDB, {len(shapes)} set-based statement(s)")
        set_s, set_spent = run_duckdb(set_based(shapes, d), d, "set")
        check_equal(
            lambda: results(d, "mqo.jsonl"),
            lambda: results(d, "set_*.json"),
            same_result,
            "the set-based DuckDB statements",
        )
        # the same with Parquet files on both sides (columns, not lines of text)
        progress(f"{bench}: mqo match and the set-based DuckDB statement(s), writing Parquet")
        mqo_parquet_s = run_mqo(d, "mqo.parquet")
        set_parquet_s, _ = run_duckdb(set_based(shapes, d, "parquet"), d, "set_parquet")
        n_parquet = check_equal(
            lambda: parquet_results(d, "mqo.parquet"),
            lambda: parquet_results(d, "set_*.parquet"),
            same_result,
            "the set-based DuckDB statements (Parquet)",
        )
        assert n_parquet == n_ours, f"mqo wrote {n_parquet} results to Parquet, {n_ours} to JSON lines"
        timed = queries
        if sample is not None:
            of = {s: [k for k, q in enumerate(queries) if q.shape is s] for s in shapes}
            picked = [rng.choice(of[s], min(sample, counts[s]), replace=False) for s in shapes]
            timed = [queries[k] for k in sorted(np.concatenate(picked).tolist())]
        progress(f"{bench}: DuckDB, one statement per query, {len(timed)} of {n}")
        each_s, spent = run_duckdb(per_query(timed, d), d, "each")
        names = {q.qid for q in timed}
        n_theirs = check_equal(
            lambda: (r for r in results(d, "mqo.jsonl") if r["query"] in names),
            lambda: results(d, "each_*.json"),
            same_ids,
            "DuckDB's per-query SQL",
        )
    # scaled: each shape's statements by its queries, the COPY by the results
    scaled = each_s
    for s in shapes:
        scaled += spent.get(s.name, 0.0) * (counts[s] / sum(q.shape is s for q in timed) - 1)
    scaled += spent["copy"] * (n_ours / max(n_theirs, 1) - 1)
    inside = ", ".join(f"{label} {seconds:.2f}" for label, seconds in set_spent.items())
    if len(shapes) > 1:
        inside += f" (statements together {sum(set_spent[s.name] for s in shapes):.2f})"
    rows = [
        row(bench, prefix + "mqo match (whole process), seconds", mqo_s, note=f"{what}, {n_ours} results; {phases}"),
        row(
            bench,
            prefix + "DuckDB, one SQL query per query (whole process), seconds",
            scaled,
            note=f"{n_theirs} results"
            + ("" if timed is queries else f" of {len(timed)} queries timed ({each_s:.2f} s), scaled shape by shape"),
        ),
        speed_up(bench, prefix + "speed-up mqo / DuckDB", scaled, mqo_s, 20),
        row(
            bench,
            prefix + f"DuckDB, {'one set-based statement' if len(shapes) == 1 else 'one set-based statement per shape'}"
            " for all queries (whole process), seconds",
            set_s,
            note=f"{n_ours} results; query constants in a table, streams pre-cut by the loosest constants; "
            f"in the process: {inside} s",
        ),
        speed_up(bench, prefix + "speed-up mqo / set-based DuckDB", set_s, mqo_s, target),
        row(bench, prefix + "Parquet output: mqo match (whole process), seconds", mqo_parquet_s),
        row(bench, prefix + "Parquet output: set-based DuckDB (whole process), seconds", set_parquet_s),
        speed_up(
            bench, prefix + "Parquet output: speed-up mqo / set-based DuckDB", set_parquet_s, mqo_parquet_s, target
        ),
    ]
    return rows


def duckdb_missing(bench: str) -> list[dict[str, Any]] | None:
    try:
        import duckdb  # noqa: F401
    except ImportError:
        return [row(bench, "DuckDB comparison", float("nan"), note="duckdb is not installed (pip install duckdb)")]
    return None


# The target against the set-based statements: 1.5x at 2 x 50,000 tuples, 2x from
# 2 x 250,000 on (where start-up weighs less on both sides).
def set_based_target(n_tuples: int) -> float:
    return 1.5 if n_tuples < 250_000 else 2.0


def size_prefix(n_tuples: int, first: bool) -> str:
    """Rows of the first size keep their names; other sizes say theirs."""
    return "" if first else f"2 x {n_tuples:,} tuples: "


def bench_duckdb(n_queries: int, sizes: list[int], seed: int, sample: int = 100) -> list[dict[str, Any]]:
    """(b): queries of the thesis' shape, at each of ``sizes`` tuples per stream; every
    per-query statement runs at the first size, ``sample`` of them (scaled) at the others."""
    missing = duckdb_missing("b")
    if missing:
        return missing
    rows = []
    for k, n in enumerate(sizes):
        rows += compare(
            "b",
            {THESIS: n_queries},
            n,
            None if k == 0 else sample,
            np.random.default_rng(seed + 1),
            set_based_target(n),
            size_prefix(n, k == 0),
        )
    return rows


def bench_hetero(n_queries: int, sizes: list[int], sample: int, seed: int) -> list[dict[str, Any]]:
    """(b'): ``n_queries`` split evenly over :data:`SHAPES`, at each of ``sizes`` tuples
    per stream; ``sample`` per shape timed with per-query SQL."""
    missing = duckdb_missing("b'")
    if missing:
        return missing
    counts = {s: n_queries // len(SHAPES) + (k < n_queries % len(SHAPES)) for k, s in enumerate(SHAPES)}
    rows = []
    for k, n in enumerate(sizes):
        rows += compare(
            "b'", counts, n, sample, np.random.default_rng(seed + 2), set_based_target(n), size_prefix(n, k == 0)
        )
    return rows
