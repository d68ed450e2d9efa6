"""HAVING decided over whole columns (mqo.aggregation.having) gives, row by row, the
verdicts of the exact scalar path (results.holds) and of plain Fraction arithmetic on
what the numbers mean: constants from the data, ties exactly at the constant, decimals
that no double holds (0.1, a third), INTEGER values near 2^53 and 2^63, NULL groups,
AND/OR/NOT, and arithmetic between aggregates (decided by the scalar path on the rows
the columns leave open)."""

from __future__ import annotations

import warnings
from fractions import Fraction
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqo.aggregation.having import having_verdicts
from mqo.aggregation.results import holds
from predicates.ast import Aggregate, And, Arith, ColumnRef, Comparison, Condition, Negate, Not, Number, Or
from predicates.errors import Span
from tests.differential.test_aggregation import compare
from tests.references.agg_reference import RefQuery

AT = Span(0, 0)
INT_MIN, INT_MAX = -(2**63), 2**63 - 1
OPS = ["<", "<=", ">", ">=", "=", "!="]
# (func, column): INTEGER-valued columns are int64, the others doubles
INT_KEYS = [("COUNT", None), ("SUM", "a"), ("MIN", "a"), ("MAX", "a")]
FLOAT_KEYS = [("AVG", "a"), ("SUM", "x"), ("AVG", "x"), ("MAX", "x"), ("STDDEV", "x")]
KEYS = INT_KEYS + FLOAT_KEYS

ints = st.one_of(
    st.sampled_from([0, 1, -1, 2**53, 2**53 + 1, -(2**53) - 1, INT_MAX, INT_MIN, INT_MAX - 1, INT_MIN + 1, 2**62]),
    st.integers(INT_MIN, INT_MAX),
)
floats = st.one_of(
    st.sampled_from([0.1, 0.3, 1 / 3, 2.0**53, 9007199254740993.0, -0.1, 1e300, float("inf"), float("nan")]),
    st.floats(allow_nan=False, allow_infinity=False),
)


@st.composite
def columns(draw: Any) -> tuple[int, dict[tuple[str, str | None], tuple[np.ndarray, np.ndarray]]]:
    rows = draw(st.integers(0, 12))
    out = {}
    for key in KEYS:
        integer = key in INT_KEYS
        values = draw(st.lists(ints if integer else floats, min_size=rows, max_size=rows))
        null = draw(st.lists(st.booleans(), min_size=rows, max_size=rows)) if key[0] != "COUNT" else [False] * rows
        out[key] = (np.array(values, np.int64 if integer else np.float64), np.array(null, bool))
    return rows, out


def _aggregate(key: tuple[str, str | None]) -> Aggregate:
    func, column = key
    return Aggregate(func, None if column is None else ColumnRef("G", column, AT), AT)


def _number(value: Fraction) -> Any:
    node = Number(abs(value), str(abs(value)), AT)
    return Negate(node, AT) if value < 0 else node


def _data_constants(cols: dict) -> list[Fraction]:
    """Every value in the columns as the exact number it means (ties at the constant)."""
    out = []
    for values, _ in cols.values():
        for v in values.tolist():
            if not isinstance(v, float) or np.isfinite(v):
                out.append(Fraction(repr(v)) if isinstance(v, float) else Fraction(v))
    return out


@st.composite
def conditions(draw: Any, cols: dict, depth: int = 0) -> Condition:
    kind = draw(st.sampled_from(["cmp", "cmp", "cmp", "arith", "and", "or", "not"] if depth < 3 else ["cmp"]))
    if kind in ("and", "or"):
        items = tuple(draw(st.lists(conditions(cols, depth + 1), min_size=2, max_size=3)))
        return And(items, AT) if kind == "and" else Or(items, AT)
    if kind == "not":
        return Not(draw(conditions(cols, depth + 1)), AT)
    key = draw(st.sampled_from(KEYS))
    if kind == "arith":  # arithmetic between aggregates: the scalar path
        left: Any = Arith(draw(st.sampled_from("+-*/")), _aggregate(key), _aggregate(draw(st.sampled_from(KEYS))), AT)
    else:
        left = _aggregate(key)
    near = _data_constants(cols)
    constant = draw(
        st.one_of(
            # a value of the data, or just beside it (a decimal between two doubles)
            st.builds(
                lambda c, d: c + d,
                st.sampled_from(near) if near else st.just(Fraction(0)),
                st.sampled_from([0, 0, 1, -1, Fraction(1, 10**20), -Fraction(1, 10**20)]),
            ),
            st.sampled_from([Fraction(1, 10), Fraction(1, 3), Fraction(-3, 10), Fraction(2**53 + 1), Fraction(2**63)]),
            st.fractions(max_denominator=10**6),
            st.integers(INT_MIN - 2, INT_MAX + 2).map(Fraction),
        )
    )
    op = draw(st.sampled_from(OPS))
    right = _number(constant)
    return Comparison(op, right, left, AT, AT) if draw(st.booleans()) else Comparison(op, left, right, AT, AT)


def _row(cols: dict, r: int) -> dict:
    return {key: (None if null[r] else values[r].item()) for key, (values, null) in cols.items()}


def _exact(cond: Condition, row: dict) -> bool | None:
    """The verdict of an aggregate-with-constant comparison in Fractions (None: not one)."""
    if not isinstance(cond, Comparison):
        return None
    for agg, const, op in ((cond.left, cond.right, cond.op), (cond.right, cond.left, None)):
        if isinstance(agg, Aggregate):
            value = row[(agg.func, None if agg.arg is None else agg.arg.name)]
            c = const.value if isinstance(const, Number) else -const.operand.value
            if value is None or (isinstance(value, float) and not np.isfinite(value)):
                return False
            x = Fraction(repr(value)) if isinstance(value, float) else Fraction(value)
            op = op or {"<": ">", ">": "<", "<=": ">=", ">=": "<="}.get(cond.op, cond.op)
            return {"<": x < c, "<=": x <= c, ">": x > c, ">=": x >= c, "=": x == c, "!=": x != c}[op]
    return None


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_column_verdicts_equal_the_scalar_path(data: Any) -> None:
    rows, cols = data.draw(columns())
    cond = data.draw(conditions(cols))

    def scalar(c: Condition, at: np.ndarray) -> np.ndarray:
        return np.array([holds(c, _row(cols, r), {}) for r in at.tolist()], bool)

    got = having_verdicts(cond, cols, scalar, rows)
    assert got.dtype == bool and got.shape == (rows,)
    for r in range(rows):
        row = _row(cols, r)
        assert bool(got[r]) == holds(cond, row, {}), (r, row, cond)
        exact = _exact(cond, row)
        if exact is not None:
            assert bool(got[r]) == exact, (r, row, cond)


def test_scalar_path_keeps_constants_exact() -> None:
    """A constant no double holds is compared as written: 2^53 is not >= 2^53 + 1, and a
    quotient of aggregates equal to a third is not above 0.3333333333333333."""
    row = {("SUM", "a"): 2**53, ("COUNT", None): 3, ("SUM", "b"): 1}
    at_least = Comparison(">=", _aggregate(("SUM", "a")), Number(Fraction(2**53 + 1), "9007199254740993", AT), AT, AT)
    assert not holds(at_least, row, {})
    third = Arith("/", _aggregate(("SUM", "b")), _aggregate(("COUNT", None)), AT)
    below = Comparison("<", Number(Fraction("0.3333333333333333"), "0.3333333333333333", AT), third, AT, AT)
    assert holds(below, row, {})


def test_having_past_the_doubles_equals_the_reference() -> None:
    """End to end: sums of 2^53 and 2^53 + 1 against HAVING SUM >= 2^53 + 1, per group,
    against the exact reference (the constant rounded to a double let both through)."""
    data = [
        (0.5, {"patient": 1, "alert": 2**53, "beatrate": 1.0, "vib": 0.0}),
        (0.5, {"patient": 2, "alert": 2**53, "beatrate": 1.0, "vib": 0.0}),
        (0.6, {"patient": 2, "alert": 1, "beatrate": 1.0, "vib": 0.0}),
        (3.0, {"patient": 1, "alert": 0, "beatrate": 1.0, "vib": 0.0}),
    ]
    calls = [("COUNT", None), ("SUM", "H.alert")]
    for op in (">=", "=", "<"):
        queries = [
            RefQuery(
                "q", "H", Fraction(1), Fraction(1), [], ["H.patient"], calls, having=("SUM", "H.alert", op, 2**53 + 1)
            ),
            RefQuery(
                "r", "H", Fraction(1), Fraction(1), [], ["H.patient"], calls, having=("AVG", "H.beatrate", op, 0.1)
            ),
        ]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for batch in (False, True):
                compare(queries, data, 0.0, batch)
