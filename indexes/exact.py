"""Numbers mean what they print as: exact comparisons at the speed of doubles.

The contract (docs/ARCHITECTURE.md, Exact numbers): a predicate holds iff it holds in exact arithmetic on

* an INTEGER value: the integer itself;
* a FLOAT value (and every timestamp): the shortest decimal that reads back as the
  same double, which is what ``repr`` prints (2.3 means 2.3, not 2.29999...);
* a constant of a query: exactly as written (``1/3`` is a third).

A normalizing optimizer needs this. In double arithmetic ``x * 0.1 = 0.3`` is false
for x = 3 while the equivalent ``x = 3`` is true; ``3 * A.x + 1 > B.x`` becomes
``A.x > 1/3 * B.x - 1/3``, which rounds either way for A.x = 3, B.x = 10. A matcher
that rewrites predicates must give the answers of the predicates as written, however
they were spelled, normalized or ordered.

Two tools keep that exact without giving up doubles on the hot paths:

**Cuts.** For a constant ``c`` and a column type, :func:`float_cut` and
:func:`integer_cut` give two thresholds ``(lt, le)`` such that for every value ``x``
of that type, ``x < c`` iff ``x < lt`` and ``x <= c`` iff ``x <= le``, compared as
plain doubles (or ints). The shortest decimal of a double grows with the double, so
each side of ``c`` is a run of doubles and the cut is where the run ends. Every
single-column predicate (``x OP c``, in any list, per tuple or in a kernel) is then a
binary search over thresholds: no rounding can put a value on the wrong side.

**A filter with an exact fallback.** For ``x OP k*y + c`` (joins, windows, two columns
of one tuple, MAXWINDOW, lateness) :func:`linear_sign` computes ``x - (k*y + c)`` in
doubles; when the result is farther from zero than the rounding error could be
(:data:`RELATIVE_BAND` of the magnitudes involved), its sign is the exact sign.
Otherwise, rarely, it is decided with :class:`~fractions.Fraction` arithmetic on the
decimal values. The band is a proven bound: each of the at most six roundings (the
decimal of ``x`` and of ``y`` against their doubles, ``k`` and ``c`` against their
nearest doubles, the product, the two sums) is within 2**-53 of its operands'
magnitude, and the band is 2**-46 of their sum.

Values reaching these functions are finite: inputs reject infinities (NaN is NULL and
never compared).
"""

from __future__ import annotations

import math
from fractions import Fraction

from predicates.numbers import EXACT_INTEGERS, Number, decimal_of, exact, faithful, to_float

RELATIVE_BAND = 2.0**-46
ABSOLUTE_BAND = 1e-300  # covers the absolute rounding of subnormal results

__all__ = [
    "ABSOLUTE_BAND",
    "EXACT_INTEGERS",
    "RELATIVE_BAND",
    "at_least",
    "decimal_of",
    "exact",
    "faithful",
    "float_cut",
    "integer_cut",
    "linear_sign",
    "span_sign",
    "to_float",
]


def float_cut(constant: Fraction | float) -> tuple[float, float]:
    """Thresholds ``(lt, le)``: for every finite double ``x``, ``x < c`` iff
    ``x < lt`` and ``x <= c`` iff ``x <= le`` (``x`` meaning its shortest decimal)."""
    if not isinstance(constant, Fraction):
        return constant, constant  # a faithful float: the double is the cut
    d = to_float(constant)
    if not math.isfinite(d):
        return d, d
    shown = Fraction(repr(d))
    if shown == constant:
        return d, d
    if shown < constant:
        # d and every smaller double are below c; the next double is above it
        return math.nextafter(d, math.inf), d
    return d, math.nextafter(d, -math.inf)


def integer_cut(constant: Fraction | float) -> tuple[int | float, int | float]:
    """Thresholds ``(lt, le)`` for integer values: ``x < c`` iff ``x < ceil(c)`` and
    ``x <= c`` iff ``x <= floor(c)`` (infinite constants stay infinite)."""
    if isinstance(constant, float):
        if not math.isfinite(constant):
            return constant, constant
        if constant.is_integer() and abs(constant) < EXACT_INTEGERS:
            whole = int(constant)
            return whole, whole
    c = exact(constant)
    return math.ceil(c), math.floor(c)


def linear_sign(x: Number, k: Fraction, kf: float, y: Number, c: Fraction | float, cf: float) -> int:
    """The sign of ``x - (k*y + c)`` in exact arithmetic on what the numbers mean.

    ``kf`` and ``cf`` are the nearest doubles of ``k`` and ``c``; ``c`` is a constant
    as lists keep it (a float that means what it prints as, or a Fraction), made exact
    only when the doubles cannot decide. With ``k = 0`` this compares ``x`` with ``c``;
    with ``k = 1`` and ``y`` a timestamp it is a time difference against a duration."""
    ky = kf * y
    d = x - ky - cf
    if abs(d) > RELATIVE_BAND * (abs(x) + abs(ky) + abs(cf)) + ABSOLUTE_BAND:
        return 1 if d > 0 else -1
    # Within the band, two forms are decided exactly by comparing the numbers as they
    # are, with no Fraction (an equality join or a tie sits here on every match): a
    # value against a double constant, and ``x - y`` (k = 1, c = 0), when both are
    # doubles or both integers. A double means its shortest decimal, and that mapping
    # keeps the doubles' order, so comparing doubles compares what they mean; integers
    # compare exactly. (Mixed int and double go the exact way: past 2**53 a double's
    # decimal and its binary value can lie either side of an integer.)
    if kf == 0.0:
        if type(x) is float and type(c) is float and x == x and k == 0:
            return (x > c) - (x < c)
    elif kf == 1.0 and cf == 0.0 and k == 1 and c == 0:
        tx = type(x)
        if tx is type(y) and (tx is int or (tx is float and x == x and y == y)):
            return (x > y) - (x < y)
    c = exact(c)
    e = decimal_of(x) - k * decimal_of(y) - c if k else decimal_of(x) - c
    return (e > 0) - (e < 0)


ONE = Fraction(1)
ZERO = Fraction(0)


def span_sign(lo: Number, hi: Number, window: Fraction | float, window_f: float) -> int:
    """The sign of ``(hi - lo) - window``: positive when two timestamps are farther
    apart than a MAXWINDOW allows."""
    if hi == lo:
        # one timestamp (every single-stream result): the span is exactly 0, and
        # deciding ``0 - window`` in Fractions cost ~0.1 ms per result
        return -1 if window_f > 0 else (0 if window == 0 else (1 if window < 0 else -1))
    return linear_sign(hi, ONE, 1.0, lo, window, window_f)


def at_least(x: Number, bound: Fraction | float, bound_f: float) -> bool:
    """``x >= bound`` exactly."""
    return linear_sign(x, ZERO, 0.0, 0, bound, bound_f) >= 0
