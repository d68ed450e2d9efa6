"""What a number means (docs/ARCHITECTURE.md, Exact numbers): the exact value every comparison is held to.

An INTEGER value is the integer itself; a FLOAT value (and a timestamp) is the
shortest decimal that reads back as the same double, which is what ``repr`` prints;
a constant of a query is exactly what was written. :mod:`indexes.exact` compares
with these meanings at the speed of doubles.
"""

from __future__ import annotations

import math
from fractions import Fraction
from numbers import Integral

EXACT_INTEGERS = 2**53  # every integer of smaller magnitude is a double

Number = int | float


def decimal_of(value: Number | Integral) -> Fraction:
    """The exact number a value means: an int itself, a float its shortest decimal."""
    if isinstance(value, float):
        return Fraction(float.__repr__(value))  # numpy's float64 repr adds its type name
    if isinstance(value, Integral):
        return Fraction(int(value))
    return Fraction(float.__repr__(float(value)))


def to_float(value: Fraction | float | int) -> float:
    """The nearest double, or an infinity past the double range."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def faithful(value: Fraction) -> float | Fraction:
    """``value`` as a float when that float means exactly ``value`` (it prints as
    ``value``), else ``value`` itself. Constants are kept this way: the common ones
    (``90``, ``52.5``, ``0.1``) as plain doubles, the rest (``1/3``) exact."""
    f = to_float(value)
    if not math.isfinite(f):
        return value
    if value.denominator == 1 and -EXACT_INTEGERS < value.numerator < EXACT_INTEGERS:
        return f
    return f if Fraction(repr(f)) == value else value


def decimal_text(value: Fraction) -> str | None:
    """``value`` written as an exact decimal (``0.1234567890123456789``), or None when
    it has none (a denominator with a prime factor other than 2 and 5: ``1/3``)."""
    d, k2, k5 = value.denominator, 0, 0
    while d % 2 == 0:
        d, k2 = d // 2, k2 + 1
    while d % 5 == 0:
        d, k5 = d // 5, k5 + 1
    if d != 1:
        return None
    places = max(k2, k5)
    digits = str(abs(value.numerator) * 10**places // value.denominator).rjust(places + 1, "0")
    sign = "-" if value < 0 else ""
    return f"{sign}{digits[: len(digits) - places]}.{digits[len(digits) - places :]}" if places else f"{sign}{digits}"


def exact(constant: Fraction | float | int) -> Fraction:
    """What a stored constant (see :func:`faithful`) means."""
    if isinstance(constant, Fraction):
        return constant
    return decimal_of(constant)
