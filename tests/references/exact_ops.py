"""Operations of an exact workload, the workload itself (printable as a repro script), the
random choices generators make, and tuples in the forms the engine's batch and file
inputs read. Nothing here imports the engine (see tests/references/reference.py)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pyarrow as pa
from hypothesis import strategies as st

from tests.references.reference import FLOAT, INTEGER, Query, Reference, Schema, Stream

T = TypeVar("T")


class Chooser:
    """Random choices, from hypothesis (``draw``) or from a seeded :class:`random.Random`.
    Under hypothesis every choice shrinks toward its first option, ``chance`` to False."""

    def __init__(self, draw: Any = None, rnd: random.Random | None = None) -> None:
        self.draw = draw
        self.rnd = rnd

    def pick(self, options: Sequence[T]) -> T:
        if self.draw is not None:
            # an index rather than sampled_from: st.integers is cached, so this costs
            # a third (generation dominates the time hypothesis spends shrinking)
            return options[self.integer(0, len(options) - 1)]
        assert self.rnd is not None
        return self.rnd.choice(options)

    def integer(self, lo: int, hi: int) -> int:
        if self.draw is not None:
            return self.draw(st.integers(lo, hi))
        assert self.rnd is not None
        return self.rnd.randint(lo, hi)

    def chance(self, percent: int) -> bool:
        return self.integer(0, 99) >= 100 - percent


# ------------------------------------------------------------------ operations


@dataclass(frozen=True)
class Push:
    stream: str
    ts: float
    values: dict[str, Any]
    id: int | None = None  # None: the automatic id


@dataclass(frozen=True)
class Heartbeat:
    ts: float
    stream: str | None = None  # None: every stream


@dataclass(frozen=True)
class Idle:
    """A stream stops holding time back (declared idle, or silent past the timeout)."""

    stream: str


@dataclass(frozen=True)
class Register:
    query: Query
    by_argument: bool = False  # the id given beside the text rather than in a header

    def call_args(self) -> tuple[str, str | None]:
        """The arguments of ``register_query``: (text, id or None)."""
        if self.by_argument:
            return self.query.to_text(header=False), self.query.name
        return self.query.to_text(), None


@dataclass(frozen=True)
class Unregister:
    name: str


Op = Push | Heartbeat | Idle | Register | Unregister


@dataclass
class Workload:
    schema: Schema
    lateness: float
    ops: list[Op] = field(default_factory=list)
    time: str = "global"  # the clock rule (tests/references/reference.py, rule 4)
    stream_lateness: dict[str, float] = field(default_factory=dict)

    def reference(self, **options: Any) -> Reference:
        return Reference(self.schema, self.lateness, time=self.time, stream_lateness=self.stream_lateness, **options)

    @property
    def queries(self) -> list[Query]:
        return [op.query for op in self.ops if isinstance(op, Register)]

    def effective_ids(self) -> list[int | None]:
        """The id of each op's tuple (rule 3 of tests/references/reference.py); None for other ops."""
        pushed = {s.name: 0 for s in self.schema.streams}
        out: list[int | None] = []
        for op in self.ops:
            if isinstance(op, Push):
                out.append(pushed[op.stream] if op.id is None else op.id)
                pushed[op.stream] += 1
            else:
                out.append(None)
        return out

    def reference_runs(self) -> list[list[Any]]:
        """The reference's results of every op (empty for ops other than pushes)."""
        ref = self.reference()
        out: list[list[Any]] = []
        for op in self.ops:
            out.append(apply_reference(ref, op))
        return out

    def script(
        self,
        engine_call: str = (
            "mqo.Matcher(DDL, allowed_lateness=LATENESS, order=ORDER, missing='null', time=TIME,"
            " stream_lateness=OWN, idle_timeout=None)"
        ),
    ) -> str:
        """Python that replays the workload on the engine and the reference and prints
        every difference (run it from the repository root; set ORDER to the order a
        failure names)."""
        lines = [
            "import os, sys, warnings",
            "from fractions import Fraction",
            "sys.path.insert(0, os.getcwd())  # the repository root, for tests.references.reference",
            "import mqo",
            "from tests.references.reference import *",
            "warnings.simplefilter('ignore')",
            f"SCHEMA = {self.schema!r}",
            "DDL = SCHEMA.ddl()",
            f"LATENESS = {self.lateness!r}",
            "ORDER = 'AJW'",
            f"TIME, OWN = {self.time!r}, {self.stream_lateness!r}",
            f"eng = {engine_call}",
            "ref = Reference(SCHEMA, LATENESS, time=TIME, stream_lateness=OWN)",
            "def show(what, got, want):",
            "    got, want = sorted(map(str, engine_results(got))), sorted(map(str, want))",
            "    print(what, 'OK' if got == want else f'DIFFERS\\n  engine:    {got}\\n  reference: {want}')",
        ]
        for op in self.ops:
            if isinstance(op, Register):
                lines.append(f"q = {op.query!r}")
                call = "q.to_text(header=False), q.name" if op.by_argument else "q.to_text()"
                lines.append(f"print(q.to_text()); eng.register_query({call}); ref.register(q)")
            elif isinstance(op, Unregister):
                lines.append(f"eng.unregister_query({op.name!r}); ref.unregister({op.name!r})")
            elif isinstance(op, Heartbeat):
                beat = f"{op.ts!r}" if op.stream is None else f"{op.stream!r}, {op.ts!r}"
                lines.append(f"eng.heartbeat({beat}); ref.heartbeat({op.ts!r}, {op.stream!r})")
            elif isinstance(op, Idle):
                lines.append(f"eng.set_idle({op.stream!r}); ref.set_idle({op.stream!r})")
            else:
                args = f"{op.stream!r}, {op.ts!r}, {op.values!r}, id={op.id!r}"
                lines.append(f"show('push {op.stream}@{op.ts!r}', eng.push({args}), ref.push({args}))")
        lines.append("print('late', eng.late_count, 'reference', ref.late_count)")
        return "\n".join(lines)

    def describe(self) -> str:
        """Human-readable: DDL, queries and ops."""
        out = [self.schema.ddl(), f"allowed lateness {self.lateness!r}"]
        for op in self.ops:
            if isinstance(op, Register):
                out.append("register " + op.query.to_text().replace("\n", " "))
            else:
                out.append(repr(op))
        return "\n".join(out)


def apply_reference(ref: Reference, op: Op) -> list[Any]:
    if isinstance(op, Register):
        ref.register(op.query)
    elif isinstance(op, Unregister):
        ref.unregister(op.name)
    elif isinstance(op, Heartbeat):
        ref.heartbeat(op.ts, op.stream)
    elif isinstance(op, Idle):
        ref.set_idle(op.stream)
    else:
        return ref.push(op.stream, op.ts, dict(op.values), id=op.id)
    return []


# ------------------------------------------------- tuples as the engine reads them


def arrow_batch(stream: Stream, pushes: list[Push], ids: list[int] | None) -> pa.Table:
    """Tuples of one stream as an Arrow table; NULLs as nulls, NaN stays NaN."""
    columns: dict[str, pa.Array] = {"ts": pa.array([p.ts for p in pushes], pa.float64())}
    if ids is not None:
        columns["id"] = pa.array(ids, pa.int64())
    for col in stream.columns:
        values = [p.values.get(col.name) for p in pushes]
        if col.type == INTEGER:
            columns[col.name] = pa.array(values, pa.int64())
        elif col.type == FLOAT:
            columns[col.name] = pa.array([None if v is None else float(v) for v in values], pa.float64())
        else:
            columns[col.name] = pa.array(values, pa.string())
    return pa.table(columns)


def csv_cell(value: Any, ctype: str) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return ""
    return repr(float(value)) if ctype == FLOAT else str(value)
