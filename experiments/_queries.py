"""Seeded random query sets with a controlled shape, for the sweeps past the thesis.

Each query joins ``arity`` streams (a chain of join predicates, so it is connected),
has ``attributes`` attribute predicates and ``joins`` join predicates, an optional
window predicate (``X.ts <= Y.ts``) and a MAXWINDOW. Constants are drawn so that each
predicate's selectivity on the generators' default data (uniform 0..200, see
:mod:`experiments._data`) is known:

* attribute ``X.c < k`` (or ``<=, >, >=``) keeps ``attr_selectivity`` of the tuples
  (a range, each query drawing its own value);
* join ``X.c <= Y.d + k`` (or ``>=``) keeps about ``join_selectivity`` of the pairs.

**Overlap** is what the thesis means by it: predicates overlap when they fall into one
predicate list (same streams, columns, operator and factor; the constant may differ).
With ``overlap = f`` each predicate takes, with probability ``f``, a shape from a small
shared pool (a column compared with ``<`` or ``>``; two columns of two streams compared
with ``<=`` or ``>=`` and factor 1: it lands in a list other queries use) and
otherwise a shape of its own: a factor no other predicate has (``X.c <= 1.0007*Y.d + k``
for joins, ``X.c <= 1.0007*X.d + k`` for attributes, which need a second column of the
stream; a stream with one column falls back to the shared shape). Selectivities stay
about the same either way, so a sweep over ``f`` changes sharing, not the data's work.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from experiments._data import StreamSpec

SPAN = 200.0  # the default value range 0..SPAN


@dataclass(frozen=True)
class QueryShape:
    arity: int = 2
    attributes: int = 1
    joins: int = 1
    window: float = 10.0
    overlap: float = 1.0
    attr_selectivity: tuple[float, float] = (0.2, 0.8)
    join_selectivity: float = 0.1
    window_predicate: bool = True

    def __post_init__(self) -> None:
        if self.arity < 1:
            raise ValueError("arity must be >= 1")
        if self.arity > 1 and self.joins < self.arity - 1:
            raise ValueError(f"{self.arity} streams need at least {self.arity - 1} join predicates to be connected")
        if not 0.0 <= self.overlap <= 1.0:
            raise ValueError("overlap must be in [0, 1]")


def diff_constant(selectivity: float) -> float:
    """``k`` with P(X - Y <= k) = selectivity for X, Y independent uniform on 0..SPAN."""
    s = min(max(selectivity, 1e-6), 1 - 1e-6)
    if s <= 0.5:
        return SPAN * math.sqrt(2 * s) - SPAN
    return SPAN - SPAN * math.sqrt(2 * (1 - s))


def _value_columns(stream: StreamSpec) -> list[str]:
    """The FLOAT columns (values on 0..SPAN); flags such as ``alert`` (0/1) would make
    the selectivities meaningless."""
    cols = [c.name for c in stream.columns if c.ctype == "FLOAT"]
    if not cols:
        raise ValueError(f"stream {stream.name} has no FLOAT column to put predicates on")
    return cols


class QueryGenerator:
    """Makes query texts; one generator numbers its unique factors so none repeats."""

    def __init__(self, streams: Sequence[StreamSpec], shape: QueryShape, seed: int = 0) -> None:
        if shape.arity > len(streams):
            raise ValueError(f"arity {shape.arity} needs at least {shape.arity} streams, got {len(streams)}")
        self.streams = list(streams)
        self.shape = shape
        self.rng = random.Random(seed)
        self._unique = 0

    def _factor(self, shared: bool) -> str:
        if shared:
            return ""
        self._unique += 1
        return f"{1 + self._unique * 1e-4:.4f} * "

    def _shared(self) -> bool:
        return self.rng.random() < self.shape.overlap

    def attribute(self, stream: StreamSpec) -> str:
        rng = self.rng
        lo, hi = self.shape.attr_selectivity
        sel = rng.uniform(lo, hi)
        cols = _value_columns(stream)
        col = rng.choice(cols)
        if self._shared() or len(cols) < 2:
            # The shared pool: a column of the stream, < or > (two lists per column).
            op = rng.choice(["<", ">"])
            k = round(SPAN * sel) if op == "<" else round(SPAN * (1 - sel))
            return f"{stream.name}.{col} {op} {k}"
        other = rng.choice([c for c in cols if c != col])
        k = round(diff_constant(sel))
        return f"{stream.name}.{col} <= {self._factor(False)}{stream.name}.{other} + ({k})"

    def join(self, x: StreamSpec, y: StreamSpec) -> str:
        rng = self.rng
        sel = self.shape.join_selectivity * rng.uniform(0.8, 1.2)
        cx = rng.choice(_value_columns(x))
        cy = rng.choice(_value_columns(y))
        factor = self._factor(self._shared())
        if rng.random() < 0.5:
            return f"{x.name}.{cx} <= {factor}{y.name}.{cy} + ({round(diff_constant(sel))})"
        return f"{x.name}.{cx} >= {factor}{y.name}.{cy} + ({round(-diff_constant(sel))})"

    def query(self, name: str) -> str:
        rng = self.rng
        shape = self.shape
        chosen = rng.sample(self.streams, shape.arity)
        preds = [self.attribute(rng.choice(chosen)) for _ in range(shape.attributes)]
        for i in range(shape.joins if shape.arity > 1 else 0):
            if i < shape.arity - 1:
                x, y = chosen[i], chosen[i + 1]
            else:
                x, y = rng.sample(chosen, 2)
            preds.append(self.join(x, y))
        lines = [f"Query ID: {name}", "SELECT *", f"FROM {', '.join(s.name for s in chosen)}"]
        if shape.arity > 1:
            if shape.window_predicate:
                op = rng.choice(["<=", ">="])
                lines.append(f"WINDOW {chosen[0].name}.ts {op} {chosen[1].name}.ts")
            lines.append(f"MAXWINDOW {shape.window:g} sec")
        if preds:
            lines.append("WHERE " + " AND ".join(preds))
        return "\n".join(lines) + "\n"

    def queries(self, n: int, prefix: str = "q") -> list[str]:
        return [self.query(f"{prefix}{i}") for i in range(n)]


def make_queries(n: int, streams: Sequence[StreamSpec], shape: QueryShape, seed: int = 0) -> list[str]:
    """``n`` query texts of ``shape`` over ``streams`` (ids ``q0, q1, ...``)."""
    return QueryGenerator(streams, shape, seed).queries(n)
