"""Seeded, shift-able generators for the thesis' ICU streams (and generic ones).

The thesis generated its data with CAPE's data generator and never gives the
distributions. Its chapter 5 constants sit between 40 and 125, so every experiment
here draws values from explicit distributions that exercise those predicates:

=========  ===========================  ==========================================
stream     columns                      default distribution (per tuple, independent)
=========  ===========================  ==========================================
B (blood)  pressure, temp FLOAT         integer-valued uniform on 0..200 inclusive
           alert INTEGER                0 or 1 with probability 1/2 each
T (temp.)  fluct, degree, incr FLOAT    integer-valued uniform on 0..200
H (heart)  beatrate, vib FLOAT          integer-valued uniform on 0..200
           alert INTEGER                0 or 1
K (kidney) fluid FLOAT                  integer-valued uniform on 0..200
=========  ===========================  ==========================================

Values are whole numbers (stored as floats in FLOAT columns) so that the thesis'
equality predicates (``H.beatrate = 115``, ``B.pressure = H.beatrate``) hold now and
then (about 1 in 201) instead of never. Timestamps are seconds: each stream is a Poisson
process of ``rate`` tuples per second (exponential gaps, rounded to milliseconds), or
evenly spaced with ``arrival="regular"``. Streams are independent.

**Phases** shift distributions mid-stream: ``Phase(start, {"B.pressure": Uniform(0, 50)})``
makes every B tuple with ``ts >= start`` draw its pressure from 0..50, until the next
phase; columns a phase does not name keep their base distribution. The reordering
experiment uses this to change which predicate type is most selective.

**Reproducibility**: every (seed, stream, column) and (seed, stream, arrival times) has
its own random generator, so adding a stream, adding a phase for one column or
changing one column's distribution leaves every other column's values unchanged.

API::

    events = generate(["B", "H"], n_per_stream=500, rate=2.0, seed=7,
                      phases=[Phase(100.0, {"B.pressure": Uniform(0, 60)})])
    for e in events:                 # arrival order: ts, then the order of `streams`
        matcher.push(e.stream, e.ts, e.values, id=e.id)
    write_csv(events, "data/")       # data/B.csv, data/H.csv (ts,id,<columns>)
    ddl(["B", "H"])                  # REGISTER STREAM lines for those streams
"""

from __future__ import annotations

import csv
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import numpy as np

__all__ = [
    "ICU",
    "Choice",
    "Column",
    "Constant",
    "Dist",
    "Event",
    "Normal",
    "Phase",
    "StreamSpec",
    "Uniform",
    "by_stream",
    "columns_of",
    "ddl",
    "describe",
    "generate",
    "generic_streams",
    "resolve",
    "write_csv",
]


# ------------------------------------------------------------------ distributions


class Dist(Protocol):
    """A value distribution: ``sample`` draws ``n`` values, ``describe`` says which."""

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray: ...

    def describe(self) -> str: ...


@dataclass(frozen=True)
class Uniform:
    """Uniform on ``[lo, hi]``; with ``integer`` (the default) whole numbers only."""

    lo: float = 0.0
    hi: float = 200.0
    integer: bool = True

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.integer:
            return rng.integers(int(self.lo), int(self.hi), size=n, endpoint=True).astype(np.float64)
        return rng.uniform(self.lo, self.hi, size=n)

    def describe(self) -> str:
        kind = "integer uniform" if self.integer else "uniform"
        return f"{kind} {self.lo:g}..{self.hi:g}"


@dataclass(frozen=True)
class Normal:
    """Normal(mean, sd), clipped to ``[lo, hi]``; rounded to whole numbers by default."""

    mean: float = 100.0
    sd: float = 30.0
    lo: float = 0.0
    hi: float = 200.0
    integer: bool = True

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        values = np.clip(rng.normal(self.mean, self.sd, size=n), self.lo, self.hi)
        return np.round(values) if self.integer else values

    def describe(self) -> str:
        return f"normal(mean {self.mean:g}, sd {self.sd:g}) clipped to {self.lo:g}..{self.hi:g}"


@dataclass(frozen=True)
class Constant:
    """Always ``value``."""

    value: float

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return np.full(n, self.value, dtype=np.float64)

    def describe(self) -> str:
        return f"constant {self.value:g}"


@dataclass(frozen=True)
class Choice:
    """One of ``values`` (with ``weights``, else equally likely)."""

    values: tuple[float, ...] = (0, 1)
    weights: tuple[float, ...] | None = None

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        p = None
        if self.weights is not None:
            w = np.asarray(self.weights, dtype=np.float64)
            p = w / w.sum()
        return rng.choice(np.asarray(self.values, dtype=np.float64), size=n, p=p)

    def describe(self) -> str:
        shown = ", ".join(f"{v:g}" for v in self.values)
        if self.weights is None:
            return f"one of {{{shown}}}"
        return f"one of {{{shown}}} weighted {self.weights}"


# ------------------------------------------------------------------------ streams


@dataclass(frozen=True)
class Column:
    name: str
    ctype: str  # "FLOAT" or "INTEGER" (the DDL type)
    dist: Dist


@dataclass(frozen=True)
class StreamSpec:
    """A stream's name, typed columns and their base distributions."""

    name: str
    columns: tuple[Column, ...]

    def ddl(self) -> str:
        cols = ", ".join(f"{c.name} {c.ctype}" for c in self.columns)
        return f"REGISTER STREAM {self.name} ({cols});"

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name.lower() == name.lower():
                return c
        raise KeyError(
            f"stream {self.name} has no column {name!r} (columns: {', '.join(c.name for c in self.columns)})"
        )


_U = Uniform()
_ALERT = Choice((0, 1))

ICU: dict[str, StreamSpec] = {
    "B": StreamSpec(
        "B", (Column("pressure", "FLOAT", _U), Column("temp", "FLOAT", _U), Column("alert", "INTEGER", _ALERT))
    ),
    "T": StreamSpec("T", (Column("fluct", "FLOAT", _U), Column("degree", "FLOAT", _U), Column("incr", "FLOAT", _U))),
    "H": StreamSpec(
        "H", (Column("beatrate", "FLOAT", _U), Column("vib", "FLOAT", _U), Column("alert", "INTEGER", _ALERT))
    ),
    "K": StreamSpec("K", (Column("fluid", "FLOAT", _U),)),
}
"""The thesis' ICU streams (experiments/workloads/streams.ddl) with default distributions."""


def generic_streams(n: int, columns: Sequence[str] = ("a", "b"), dist: Dist = _U) -> list[StreamSpec]:
    """``n`` streams ``S1..Sn`` with the same FLOAT columns: for sweeps past the four ICU streams."""
    if n < 1:
        raise ValueError("need at least one stream")
    return [StreamSpec(f"S{i}", tuple(Column(c, "FLOAT", dist) for c in columns)) for i in range(1, n + 1)]


def resolve(streams: Iterable[str | StreamSpec]) -> list[StreamSpec]:
    """Stream specs for names of ICU streams (or specs passed through)."""
    out = []
    for s in streams:
        if isinstance(s, StreamSpec):
            out.append(s)
        elif s.upper() in ICU:
            out.append(ICU[s.upper()])
        else:
            raise KeyError(f"unknown stream {s!r}: the ICU streams are {', '.join(ICU)}; pass a StreamSpec for others")
    names = [s.name for s in out]
    if len(set(names)) != len(names):
        raise ValueError(f"a stream is listed twice: {names}")
    return out


def ddl(streams: Iterable[str | StreamSpec]) -> str:
    """DDL declaring ``streams`` (one REGISTER STREAM line each)."""
    return "\n".join(s.ddl() for s in resolve(streams)) + "\n"


# ------------------------------------------------------------------------- phases


@dataclass(frozen=True)
class Phase:
    """From ``start`` (seconds, inclusive) on, the named columns draw from new
    distributions. Keys are ``"STREAM.column"``; unnamed columns keep their base."""

    start: float
    columns: Mapping[str, Dist] = field(default_factory=dict)

    def dist_for(self, stream: str, column: str) -> Dist | None:
        for key, dist in self.columns.items():
            s, _, c = key.partition(".")
            if s.lower() == stream.lower() and c.lower() == column.lower():
                return dist
        return None


def _check_phases(specs: list[StreamSpec], phases: Sequence[Phase]) -> list[Phase]:
    ordered = sorted(phases, key=lambda p: p.start)
    known = {s.name.lower(): s for s in specs}
    for p in ordered:
        for key in p.columns:
            stream, dot, column = key.partition(".")
            if not dot or stream.lower() not in known:
                raise KeyError(f"phase at {p.start:g}: {key!r} is not STREAM.column of a generated stream")
            known[stream.lower()].column(column)
    return ordered


# ------------------------------------------------------------------------- events


class Event(NamedTuple):
    """One tuple: ``stream``, ``ts`` (seconds), ``id`` (0, 1, ... per stream) and values."""

    stream: str
    ts: float
    id: int
    values: dict[str, Any]


def _rng(seed: int, *parts: str) -> np.random.Generator:
    words = [seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF] + [zlib.crc32(p.encode()) for p in parts]
    return np.random.default_rng(words)


def _timestamps(rng: np.random.Generator, n: int, rate: float, arrival: str, start: float) -> np.ndarray:
    if arrival == "regular":
        ts = start + np.arange(1, n + 1) / rate
    elif arrival == "poisson":
        ts = start + np.cumsum(rng.exponential(1.0 / rate, size=n))
    else:
        raise ValueError(f"arrival must be 'poisson' or 'regular', got {arrival!r}")
    # Milliseconds keep CSV files exact and short; rounding keeps the order (maybe ties).
    return np.round(ts, 3)


def generate(
    streams: Iterable[str | StreamSpec] = ("B", "T", "H", "K"),
    n_per_stream: int = 100,
    rate: float | Mapping[str, float] = 2.0,
    seed: int = 0,
    phases: Sequence[Phase] = (),
    arrival: str = "poisson",
    start: float = 0.0,
) -> list[Event]:
    """``n_per_stream`` tuples of each stream, merged in arrival order.

    ``rate`` is tuples per second per stream (a number, or a mapping by stream name).
    Arrival order is by ``ts``; ties go to the stream listed first, then the older
    tuple, which is also how ``mqo match`` merges input files.
    """
    specs = resolve(streams)
    if n_per_stream < 0:
        raise ValueError("n_per_stream must be >= 0")
    ordered = _check_phases(specs, phases)
    per_stream: list[tuple[np.ndarray, list[dict[str, Any]]]] = []
    for spec in specs:
        r = rate.get(spec.name, None) if isinstance(rate, Mapping) else rate
        if r is None or not r > 0:
            raise ValueError(f"stream {spec.name}: rate must be > 0 tuples per second, got {r!r}")
        ts = _timestamps(_rng(seed, spec.name, "ts"), n_per_stream, float(r), arrival, start)
        # Which phase each tuple falls in: -1 is the base distributions.
        starts = np.array([p.start for p in ordered], dtype=np.float64)
        which = np.searchsorted(starts, ts, side="right") - 1
        cols: dict[str, np.ndarray] = {}
        for col in spec.columns:
            rng = _rng(seed, spec.name, col.name)
            values = np.empty(n_per_stream, dtype=np.float64)
            for k in range(-1, len(ordered)):
                idx = np.nonzero(which == k)[0]
                if not len(idx):
                    continue
                dist = col.dist if k < 0 else (ordered[k].dist_for(spec.name, col.name) or col.dist)
                values[idx] = dist.sample(rng, len(idx))
            cols[col.name] = values.astype(np.int64) if col.ctype == "INTEGER" else values
        names = [c.name for c in spec.columns]
        lists = [cols[n].tolist() for n in names]
        rows = [dict(zip(names, vals, strict=True)) for vals in zip(*lists, strict=True)] if names else []
        if not names:
            rows = [{} for _ in range(n_per_stream)]
        per_stream.append((ts, rows))
    keyed = [
        (float(ts[i]), k, i, spec.name, rows[i])
        for k, (spec, (ts, rows)) in enumerate(zip(specs, per_stream, strict=True))
        for i in range(n_per_stream)
    ]
    keyed.sort(key=lambda item: (item[0], item[1], item[2]))
    return [Event(name, ts, i, values) for ts, _, i, name, values in keyed]


def by_stream(events: Iterable[Event]) -> dict[str, list[Event]]:
    """The events of each stream, in arrival order."""
    out: dict[str, list[Event]] = {}
    for e in events:
        out.setdefault(e.stream, []).append(e)
    return out


def columns_of(events: Iterable[Event], stream: str) -> dict[str, np.ndarray]:
    """One stream's events as columns (``ts``, ``id``, values): the shape ``push_batch`` takes."""
    mine = [e for e in events if e.stream == stream]
    out: dict[str, np.ndarray] = {
        "ts": np.array([e.ts for e in mine], dtype=np.float64),
        "id": np.array([e.id for e in mine], dtype=np.int64),
    }
    if mine:
        for name in mine[0].values:
            out[name] = np.array([e.values[name] for e in mine])
    return out


def write_csv(
    events: Iterable[Event], folder: str | Path, streams: Iterable[str | StreamSpec] | None = None
) -> dict[str, Path]:
    """Write ``<folder>/<stream>.csv`` per stream (header ``ts,id,<columns>``), the
    format ``mqo match`` and ``mqo profile`` read. Returns the paths by stream."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    grouped = by_stream(events)
    if streams is not None:
        wanted = {spec.name: [c.name for c in spec.columns] for spec in resolve(streams)}
    else:
        wanted = {name: list(mine[0].values) for name, mine in grouped.items()}
    paths: dict[str, Path] = {}
    for name, columns in wanted.items():
        mine = grouped.get(name, [])
        path = folder / f"{name}.csv"
        with path.open("w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(["ts", "id", *columns])
            for e in mine:
                w.writerow([repr(e.ts), e.id, *(_cell(e.values[c]) for c in columns)])
        paths[name] = path
    return paths


def _cell(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return repr(value) if isinstance(value, float) else str(value)


def describe(
    streams: Iterable[str | StreamSpec],
    rate: float | Mapping[str, float],
    phases: Sequence[Phase] = (),
    arrival: str = "poisson",
) -> str:
    """A markdown description of the data: distributions, rates and phases."""
    specs = resolve(streams)
    lines = ["| stream | column | distribution |", "| --- | --- | --- |"]
    for spec in specs:
        for col in spec.columns:
            lines.append(f"| {spec.name} | {col.name} | {col.dist.describe()} |")
    rates = (
        ", ".join(f"{k}: {v:g}/s" for k, v in rate.items())
        if isinstance(rate, Mapping)
        else f"{rate:g} tuples/s per stream"
    )
    lines.append("")
    how = "Poisson" if arrival == "poisson" else "evenly spaced"
    lines.append(f"Arrival: {how}, {rates}; timestamps in seconds rounded to ms.")
    for p in sorted(phases, key=lambda p: p.start):
        shifts = "; ".join(f"{k} {d.describe()}" for k, d in p.columns.items())
        lines.append(f"From ts {p.start:g}: {shifts}.")
    return "\n".join(lines)


# the ICU streams' declarations, as the fast-path benchmarks (experiments.bench) read them
ICU_DDL = (Path(__file__).parent / "workloads" / "streams.ddl").read_text()


def icu_streams(n: int, rng: np.random.Generator, rate: float = 10.0) -> dict[str, dict[str, np.ndarray]]:
    """B and H tuples: values uniform on [0, 200], about ``rate`` tuples/s each."""
    out = {}
    for stream, cols in (("B", ("pressure", "temp")), ("H", ("beatrate", "vib"))):
        ts = np.sort(rng.uniform(0, n / rate, n)).round(3)
        data = {"ts": ts, **{c: rng.uniform(0, 200, n).round(3) for c in cols}, "alert": rng.integers(0, 2, n)}
        out[stream] = data
    return out
