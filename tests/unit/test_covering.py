"""Covering-order lists (``indexes/covering.py``) against a plain exact model.

The model evaluates every predicate of a list on its own, in Fraction arithmetic on
what the numbers mean (docs/ARCHITECTURE.md, Exact numbers: a float is its shortest decimal, an int itself,
a constant exactly what it is). The list must give the same answer with one search,
per value (:meth:`CoveringList.satisfied`, ``satisfied_pair``) and for a whole column
at once (:meth:`CoveringList.satisfied_many`), whatever the rounding of doubles.
"""

from __future__ import annotations

import math
import operator
import pickle
import random
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from indexes.covering import NOTHING, NULL, OPERATORS, CoveringList
from indexes.exact import float_cut, integer_cut, linear_sign, span_sign

OPS = ("<", "<=", ">", ">=", "=", "!=")
_OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "=": operator.eq, "!=": operator.ne}
NAN = float("nan")

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def meaning(value: object) -> Fraction:
    """What a number means, written here without the engine's helpers."""
    if isinstance(value, Fraction):
        return value
    if isinstance(value, int):
        return Fraction(value)
    return Fraction(repr(float(value)))


def canonical(c: Fraction) -> float | Fraction:
    """A constant in the form lists take: a float when it prints as ``c``, else ``c``."""
    f = float(c)
    return f if Fraction(repr(f)) == c else c


def is_null(v: object) -> bool:
    return v is None or v != v


def model(op: str, constants: list, left: object, k: Fraction | None = None, right: object = None) -> list[bool]:
    if is_null(left) or (k is not None and is_null(right)):
        return [False] * len(constants)
    x = meaning(left)
    rhs_base = k * meaning(right) if k is not None else Fraction(0)
    return [_OPS[op](x, rhs_base + meaning(c)) for c in constants]


def as_bools(sat: tuple[int, int, bool], n: int) -> list[bool]:
    lo, hi, negated = sat
    assert 0 <= lo <= hi <= n, f"range {sat} outside [0, {n}]"
    return [(lo <= i < hi) != negated for i in range(n)]


def kernel_bools(lo: int, hi: int, op: str, n: int) -> list[bool]:
    """The kernels' (lo, hi) form as one bool per position."""
    if lo == NULL:
        return [False] * n
    if op in ("<", "<="):
        return [i >= lo for i in range(n)]
    if op in (">", ">="):
        return [i < hi for i in range(n)]
    run = [lo <= i < hi for i in range(n)]
    return run if op == "=" else [not r for r in run]


def sorted_constants(values: list[Fraction]) -> list:
    return [canonical(c) for c in sorted(set(values))] + []


def check(op: str, exact_constants: list[Fraction], left: object, k: Fraction | None = None, right=None, integer=False):
    constants = sorted((canonical(c) for c in exact_constants), key=meaning)
    cl = CoveringList(op, constants, integer=integer, factor=k)
    cl._check()
    want = model(op, constants, left, k, right)
    sat = cl.satisfied(left) if k is None else cl.satisfied_pair(left, right)
    assert as_bools(sat, len(constants)) == want, f"{op} {constants} left={left!r} k={k} right={right!r}: {sat}"
    if all(type(c) is float for c in constants):
        # doubles read in place from a plan's one array (a view between other values),
        # as compiled plans give them: the same answers, and after a pickle round trip
        whole = np.array([-1e308, *constants, 1e308], np.float64)
        shared = CoveringList(op, whole[1:-1], integer=integer, factor=k, doubles=True)
        for cl_view in (shared, pickle.loads(pickle.dumps(shared))):
            got_view = cl_view.satisfied(left) if k is None else cl_view.satisfied_pair(left, right)
            assert as_bools(got_view, len(constants)) == want, f"view: {op} {constants} left={left!r}"
    if left is None or isinstance(left, (float, int)):
        lefts = np.array([NAN if left is None else float(left)])
        rights = None if k is None else np.array([NAN if right is None else float(right)])
        if integer and left is not None and abs(int(left)) >= 2**53:
            return  # a float64 column cannot hold it; the batch path keeps such ints exact elsewhere
        lo, hi = cl.satisfied_many(lefts, rights)
        got = kernel_bools(int(lo[0]), int(hi[0]), op, len(constants))
        assert got == want, f"many: {op} {constants} left={left!r} k={k} right={right!r}: {(lo, hi)}"


# ------------------------------------------------------------------ strategies

decimals = st.builds(lambda digits, scale: Fraction(digits, 10**scale), st.integers(-(10**6), 10**6), st.integers(0, 4))
thirds = st.builds(lambda n, d: Fraction(n, d), st.integers(-30, 30), st.sampled_from([3, 7, 9, 11]))
huge = st.builds(lambda n, e: Fraction(n) * 10**e, st.integers(-99, 99), st.integers(14, 20))
constants_exact = st.one_of(decimals, thirds, huge)
floats = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False, width=64),
    st.sampled_from([0.1, 0.2, 0.3, 0.30000000000000004, 2.3, 0.3333333333333333, 1e16, 1e300, 5e-324, -0.0]),
)
factors = st.sampled_from([Fraction(1), Fraction(-1), Fraction(3), Fraction(1, 3), Fraction(1, 10), Fraction(7, 2)])


@SETTINGS
@given(op=st.sampled_from(OPS), cs=st.lists(constants_exact, max_size=10), data=st.data())
def test_one_column_float_lists_are_exact(op: str, cs: list[Fraction], data) -> None:
    """Values drawn on and beside the constants themselves (the doubles nearest them)."""
    pick = data.draw(st.one_of(floats, st.sampled_from(cs).map(float) if cs else floats))
    for step in (-1, 0, 1):
        x = pick if step == 0 else math.nextafter(pick, math.inf * step)
        if math.isfinite(x):
            check(op, cs, x)


@SETTINGS
@given(op=st.sampled_from(OPS), cs=st.lists(constants_exact, max_size=10), data=st.data())
def test_one_column_integer_lists_are_exact(op: str, cs: list[Fraction], data) -> None:
    near = [math.floor(c) + d for c in cs for d in (-1, 0, 1)] or [0]
    x = data.draw(st.one_of(st.sampled_from(near), st.integers(-(2**63), 2**63 - 1)))
    check(op, cs, x, integer=True)


@SETTINGS
@given(op=st.sampled_from(OPS), cs=st.lists(constants_exact, max_size=8), k=factors, data=st.data())
def test_two_column_lists_are_exact_on_the_boundary(op: str, cs: list[Fraction], k: Fraction, data) -> None:
    """``left`` chosen so that ``left = k*right + c`` holds exactly for a constant."""
    right = data.draw(st.one_of(decimals.map(float), floats.filter(lambda v: abs(v) < 1e200)))
    if cs:
        c = data.draw(st.sampled_from(cs))
        on_edge = k * meaning(right) + c
        left = float(on_edge)
    else:
        left = data.draw(floats)
    check(op, cs, left, k, right)
    check(op, cs, left, k, None)


def test_the_issue_examples() -> None:
    # 3*A.x + 1 > B.x normalizes to A.x > 1/3*B.x - 1/3: not for 3 and 10
    check(">", [Fraction(-1, 3)], 3, Fraction(1, 3), 10)
    assert CoveringList(">", [Fraction(-1, 3)], factor=Fraction(1, 3)).satisfied_pair(3, 10) == (0, 0, False)
    # C.z = A.z - 2 with 2.3 and 0.3
    assert CoveringList("=", [2.0], factor=Fraction(1)).satisfied_pair(2.3, 0.3) == (0, 1, False)
    # x*0.1 = 0.3 is x = 3
    assert CoveringList("=", [3.0]).satisfied(3.0) == (0, 1, False)


def test_cuts() -> None:
    third = Fraction(1, 3)
    lt, le = float_cut(third)
    assert lt == math.nextafter(le, math.inf) and float(Fraction(repr(le))) < third < Fraction(repr(lt))
    assert float_cut(0.3) == (0.3, 0.3)
    assert integer_cut(Fraction(10, 3)) == (4, 3)
    assert integer_cut(Fraction(-10, 3)) == (-3, -4)
    assert integer_cut(7.0) == (7, 7)
    big = Fraction(2**60 + 1)
    assert integer_cut(big) == (2**60 + 1, 2**60 + 1)


def test_linear_sign_on_and_off_the_boundary() -> None:
    one, zero = Fraction(1), Fraction(0)
    assert linear_sign(0.3, one, 1.0, 0.1, Fraction(1, 5), 0.2) == 0  # 0.3 - 0.1 - 0.2 = 0
    assert linear_sign(0.4, one, 1.0, 0.1, Fraction(3, 10), 0.3) == 0
    assert linear_sign(10, Fraction(3), 3.0, 3, one, 1.0) == 0
    assert linear_sign(2**60 + 1, zero, 0.0, 0, Fraction(2**60), float(2**60)) == 1
    assert linear_sign(1e300, Fraction(10**300), 1e300, 1e300, zero, 0.0) == -1  # k*y overflows
    # an integer against a double past 2**53: the double means its decimal (2.0**60 is
    # 1.152921504606847e+18), not its binary value, which is on the integer's other side
    assert linear_sign(2**60 + 10, one, 1.0, 2.0**60, zero, 0.0) == -1
    assert linear_sign(2.0**60, one, 1.0, 2**60 + 10, zero, 0.0) == 1
    assert linear_sign(0.1, zero, 0.0, 0, 0.1, 0.1) == 0 and linear_sign(0.1, zero, 0.0, 0, Fraction(1, 10), 0.1) == 0


_NEAR = st.sampled_from([0.1, 0.2, 0.3, 1 / 3, 2.5, 1e16, 2.0**53, 2.0**53 + 2, 2.0**60, -0.0, 0.0, 5e-324])


# integers beside 2**60, whose double's decimal (1.152921504606847e+18) is 24 past it
_NUMBERS = st.one_of(_NEAR, st.floats(-1e20, 1e20), st.integers(-(2**62), 2**62), st.integers(2**60, 2**60 + 50))


@SETTINGS
@given(
    _NUMBERS,
    _NUMBERS,
    st.sampled_from([Fraction(0), Fraction(1), Fraction(2), Fraction(1, 2), Fraction(1, 3)]),
    st.one_of(st.sampled_from([Fraction(0), Fraction(1, 10), Fraction(1, 3)]), _NEAR.map(meaning)),
    st.booleans(),
)
def test_linear_sign_is_the_sign_of_what_the_numbers_mean(x, y, k, c, nudge) -> None:
    """Ties and near-ties included (``y`` nudged onto ``x``): every form, the ones the
    doubles decide at once (a value against a double constant, ``x - y``) too."""
    if nudge:
        y = x  # (an equality join that matches)
    want = meaning(x) - k * meaning(y) - c
    got = linear_sign(x, k, float(k), y, canonical(c), float(c))
    assert got == (want > 0) - (want < 0), (x, y, k, c)


def test_null_satisfies_nothing() -> None:
    for op in OPS:
        cl = CoveringList(op, [-2.0, 0.0, 5.0])
        assert cl.satisfied(None) == NOTHING
        assert cl.satisfied(NAN) == NOTHING
        pair = CoveringList(op, [-2.0, 0.0, 5.0], factor=Fraction(2))
        assert pair.satisfied_pair(1.0, None) == NOTHING
        assert pair.satisfied_pair(NAN, 1.0) == NOTHING
        lo, _ = pair.satisfied_many(np.array([1.0, NAN]), np.array([NAN, 1.0]))
        assert lo.tolist() == [NULL, NULL]


def test_strings_and_booleans_compare_as_they_are() -> None:
    rnd = random.Random(5)
    words = ["", "a", "ab", "b", "B"]
    for _ in range(300):
        op = rnd.choice(OPS)
        cs = sorted(rnd.sample(words, rnd.randint(0, 4)))
        left = rnd.choice([*words, None])
        want = [left is not None and _OPS[op](left, c) for c in cs]
        assert as_bools(CoveringList(op, cs).satisfied(left), len(cs)) == want


def test_seeded_batches_equal_one_by_one() -> None:
    """``satisfied_many`` over a column equals ``satisfied`` row by row."""
    rnd = random.Random(11)
    pool = [0.1, 0.2, 0.3, 2.3, 0.30000000000000004, 1 / 3, 10.0, 3.0, -3.0, 0.0, NAN]
    for _ in range(300):
        op = rnd.choice(OPS)
        k = rnd.choice([None, Fraction(1), Fraction(3), Fraction(1, 3), Fraction(-1, 10)])
        cs = sorted({canonical(Fraction(rnd.randint(-30, 30), rnd.choice([1, 3, 10]))) for _ in range(6)}, key=meaning)
        cl = CoveringList(op, cs, factor=k)
        left = np.array([rnd.choice(pool) for _ in range(50)])
        right = None if k is None else np.array([rnd.choice(pool) for _ in range(50)])
        lo, hi = cl.satisfied_many(left, right)
        for i in range(50):
            one = cl.satisfied(float(left[i])) if k is None else cl.satisfied_pair(float(left[i]), float(right[i]))
            assert kernel_bools(int(lo[i]), int(hi[i]), op, len(cs)) == as_bools(one, len(cs))


def test_check_catches_bad_lists() -> None:
    with pytest.raises(ValueError, match="unknown operator"):
        CoveringList("<>", [1.0])
    assert set(OPERATORS) == set(OPS)
    with pytest.raises(AssertionError):
        CoveringList("<", [2.0, 1.0])._check()
    with pytest.raises(AssertionError):
        CoveringList("<", [1.0, None])._check()
    with pytest.raises(AssertionError):
        CoveringList("<", [Fraction(1, 3), 0.3])._check()  # 1/3 > 0.3


def test_extreme_and_comparisons() -> None:
    cs = [1.0, 2.0, 3.0, 4.0]
    assert CoveringList("<", cs).extreme_for(1, 4) == 4.0
    assert CoveringList(">=", cs).extreme_for(0, 4) == 1.0
    assert CoveringList("<", []).comparisons() >= 1
    assert CoveringList("<", list(range(1000))).comparisons() <= 11


integer_doubles = st.one_of(
    st.floats(min_value=-(2.0**54), max_value=2.0**54, allow_nan=False),
    st.integers(-(2**54), 2**54).map(float),
    st.integers(-(2**20), 2**20).map(lambda n: n / 2),
    st.sampled_from([0.1, -0.1, 0.5, -0.5, -0.0, 2.0**53 - 1, 2.0**53, -(2.0**53), 2.0**53 + 2, 1e300, -1e300]),
)


@SETTINGS
@given(op=st.sampled_from(OPS), cs=st.lists(integer_doubles, max_size=12), data=st.data())
def test_integer_lists_of_doubles_cut_all_at_once_as_one_by_one(op: str, cs: list[float], data) -> None:
    """An INTEGER column's list of double constants (a plan's one array) is cut in
    numpy; its cuts and answers are those of integer_cut applied constant by constant."""
    constants = sorted(set(cs))
    whole = np.array([-1e308, *constants, 1e308], np.float64)
    at_once = CoveringList(op, whole[1:-1], integer=True, doubles=True)
    one_by_one = CoveringList(op, constants, integer=True)
    at_once._check()
    assert [float(t) for t in at_once._lt] == [float(integer_cut(c)[0]) for c in constants]
    assert [float(t) for t in at_once._le] == [float(integer_cut(c)[1]) for c in constants]
    lt, le = at_once.cuts()
    want_lt, want_le = one_by_one.cuts()
    assert lt.tolist() == want_lt.tolist() and le.tolist() == want_le.tolist()
    near = [math.floor(meaning(c)) + d for c in constants for d in (-1, 0, 1)] or [0]
    x = data.draw(st.one_of(st.sampled_from(near), st.integers(-(2**63), 2**63 - 1)))
    for cl in (at_once, pickle.loads(pickle.dumps(at_once))):
        assert as_bools(cl.satisfied(x), len(constants)) == model(op, constants, x, None, None)


def test_integral_constants_of_an_integer_column_are_read_in_place() -> None:
    """Whole-number doubles on an INTEGER column are their own cuts: both cut arrays are
    the plan's array itself (no copy per list; the batch kernels then read it in place),
    and a list with one fraction gets ceil and floor cuts of its own."""
    whole = np.array([-1e308, -3.0, 0.0, 2.0, 7.0, 1e308], np.float64)
    integral = CoveringList(">=", whole[1:-1], integer=True, doubles=True)
    integral._check()
    lt, le = integral.cuts()
    assert lt is le and np.shares_memory(lt, whole)
    assert lt.tolist() == [float(integer_cut(c)[0]) for c in (-3.0, 0.0, 2.0, 7.0)]
    with_fraction = np.array([-3.0, 0.5, 2.0])
    cut = CoveringList(">=", with_fraction, integer=True, doubles=True)
    lt, le = cut.cuts()
    assert lt.tolist() == [-3.0, 1.0, 2.0] and le.tolist() == [-3.0, 0.0, 2.0]
    assert not np.shares_memory(lt, with_fraction)


@given(
    st.one_of(st.integers(-(2**62), 2**62), st.floats(allow_nan=False, allow_infinity=False)),
    st.one_of(
        st.fractions(min_value=-10, max_value=10),
        st.sampled_from([Fraction(0), Fraction(1, 10**400), Fraction(-1, 10**400), Fraction(1, 3)]),
    ),
)
def test_span_sign_of_one_timestamp_is_the_exact_sign(ts: float, window: Fraction) -> None:
    # a result of one stream has lo == hi; its span (exactly 0) against the window is
    # decided without Fractions, and must agree with the exact difference
    expected = (window < 0) - (window > 0)  # the sign of 0 - window
    assert span_sign(ts, ts, window, float(window)) == expected
    assert span_sign(ts, ts, window, float(window)) == linear_sign(ts, Fraction(1), 1.0, ts, window, float(window))
