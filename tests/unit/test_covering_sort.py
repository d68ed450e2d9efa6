"""A list's rows sorted into covering order (indexes/covering_sort.py): whichever way
the keys are made (integers packed with their slots, bit keys packed with slots or row
numbers, the argsort by value), the distinct constants come out ascending with the
slots of each, as a sort by value gives them: NaN last and each its own, -0.0 one
constant with 0.0, doubles alike in their high bits in their order."""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from indexes import covering_sort
from indexes.covering_sort import Scratch, sort_into


def naive(values: list[float], slots: list[int]) -> tuple[list[float], list[set[int]]]:
    """Distinct constants ascending (NaN last, each its own) and the slots of each."""
    users: dict[float, set[int]] = defaultdict(set)
    nans = []
    for v, s in zip(values, slots, strict=True):
        if math.isnan(v):
            nans.append({s})
        else:
            users[v].add(s)
    distinct = sorted(users)
    return distinct + [math.nan] * len(nans), [users[v] for v in distinct] + nans


def sorted_rows(values: np.ndarray, slots: np.ndarray, scratch: Scratch | None = None, base: int = 0) -> tuple:
    m = len(values)
    users = np.full(m, -1, np.int32)
    offsets = np.full(m + 1, -1, np.int64)
    constants = np.full(m, -7.0)
    n = sort_into(values, slots, users, offsets, constants, base, scratch)
    assert offsets[0] == base and offsets[n] == base + m
    sets = [set(users[offsets[p] - base : offsets[p + 1] - base].tolist()) for p in range(n)]
    return constants[:n], sets


def check(values: list[float], slots: list[int], scratch: Scratch | None = None, strided: bool = False) -> None:
    array = np.array(values, np.float64)
    if strided:  # a block's column: every third double of a wider table
        table = np.zeros((len(values), 3))
        table[:, 1] = array
        array = table[:, 1]
    constants, sets = sorted_rows(array, np.array(slots, np.int32), scratch, base=5)
    want, want_sets = naive(values, slots)
    assert np.array_equal(constants, np.array(want, np.float64), equal_nan=True)
    numbers = len(want) - sum(math.isnan(v) for v in want)  # (NaN positions last, in no given order)
    assert sets[:numbers] == want_sets[:numbers]
    assert sorted(map(sorted, sets[numbers:])) == sorted(map(sorted, want_sets[numbers:]))


NUMBERS = st.one_of(
    st.integers(-(2**53), 2**53).map(float),
    st.integers(-50, 50).map(float),
    st.floats(-1e6, 1e6, allow_nan=False).map(lambda v: round(v, 1)),
    st.floats(allow_nan=False, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 0.1, math.nan, 2.0**53, 2.0**53 + 2, 1e300, -1e300, 5e-324, 1.0 + 2**-52]),
)


@given(
    st.lists(st.lists(NUMBERS, max_size=80), min_size=1, max_size=4),
    st.integers(0, 2**31 - 400),
    st.sampled_from([1, 3]),
    st.booleans(),
)
@settings(max_examples=400, deadline=None)
def test_any_doubles_sort_as_by_value(lists: list[list[float]], first_slot: int, step: int, strided: bool) -> None:
    """Lists one after another with one scratch (it grows and is reused), slots up to
    the largest int32, consecutive (a block's rows: users not gathered) or not."""
    scratch = Scratch()
    for values in lists:
        check(values, [first_slot + step * k for k in range(len(values))], scratch, strided)


@pytest.mark.parametrize(
    "make",
    [
        lambda rng, n: rng.uniform(0, 5e5, n).round(1),  # decimals: bit keys by their high bits
        lambda rng, n: rng.uniform(-5e5, 5e5, n).round(2),  # both signs
        lambda rng, n: rng.uniform(0, 5e5, n).round(),  # integers packed with their slots
        lambda rng, n: rng.standard_normal(n) * 10.0 ** rng.integers(-300, 300, n),  # every exponent
        lambda rng, n: 1.0 + rng.integers(0, 50, n) * 2.0**-52,  # alike but in their last bits
        lambda rng, n: np.where(rng.random(n) < 0.01, np.nan, rng.uniform(0, 1, n)),  # NaN among them
        lambda rng, n: np.where(rng.random(n) < 0.1, -0.0, rng.uniform(-1, 1, n).round(1)),  # -0.0 and 0.0
    ],
)
def test_large_lists_sort_as_by_value(make) -> None:  # type: ignore[no-untyped-def]
    """Lists large enough that the row numbers take the slots' place (the keys' high
    bits sorted, their order then checked), shuffled slots."""
    rng = np.random.default_rng(7)
    n = 30_000
    values = make(rng, n)
    slots = rng.permutation(n) * 11
    check(values.tolist(), slots.tolist(), Scratch())


def test_decimals_are_sorted_without_an_argsort(monkeypatch: pytest.MonkeyPatch) -> None:
    """Decimals of one place (the usual FLOAT constants) and integers are sorted by
    their packed keys: the argsort by value is for NaN, -0.0 and keys alike in their
    high bits only."""

    def refuse(*args: object) -> None:
        raise AssertionError("argsort used")

    monkeypatch.setattr(covering_sort, "_by_argsort", refuse)
    rng = np.random.default_rng(3)
    for values in (rng.uniform(-5e5, 5e5, 50_000).round(1), rng.integers(-(10**6), 10**6, 50_000).astype(float)):
        check(values.tolist(), list(range(len(values))))


def test_an_empty_list_has_no_positions() -> None:
    offsets = np.full(3, -1, np.int64)
    n = sort_into(np.zeros(0), np.zeros(0, np.int32), np.zeros(0, np.int32), offsets, np.zeros(0), 9)
    assert n == 0 and offsets[0] == 9
