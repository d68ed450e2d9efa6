"""The watermark each tuple of a batch meets (``Clock.late_mask``'s marks, made when
read): the same whatever the batch is cut into, with ties, decimal lateness and a
stream that speaks late; read by position (negative too) or a chunk of positions at a
time, and extended by ``append``."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mqo.clock import Clock, marks_at


def clock(lateness: float) -> Clock:
    return Clock(lateness, ["A", "B"], now=lambda: 0.0)


@settings(max_examples=150, deadline=None)
@given(
    rows=st.lists(
        st.tuples(st.integers(0, 1), st.sampled_from([0.0, 0.1, 0.2, 0.3, 1.0, 1.1, 2.5, 2.5, 7.0])),
        min_size=1,
        max_size=30,
    ),
    lateness=st.sampled_from([0.0, 0.1, 1.5]),
    cut=st.integers(0, 30),
)
def test_marks_do_not_depend_on_how_the_batch_is_cut(rows: list[Any], lateness: float, cut: int) -> None:
    streams = np.array([s for s, _ in rows], np.int64)
    ts = np.array([t for _, t in rows], np.float64)
    whole = clock(lateness)
    late, marks = whole.late_mask(streams, ts)
    assert len(marks) == len(rows)
    # one tuple at a time: each batch of one meets the watermark the tuples before made
    stepwise = clock(lateness)
    expected_late, expected = [], []
    for s, t in rows:
        one_late, one_marks = stepwise.late_mask(np.array([s]), np.array([t]))
        expected_late.append(bool(one_late[0]))
        expected.append(one_marks[0])
    assert [marks[j] for j in range(len(rows))] == expected
    assert late.tolist() == expected_late
    assert whole.mark == stepwise.mark
    # two pieces meet the same marks as the whole
    k = min(cut, len(rows))
    split = clock(lateness)
    first = split.late_mask(streams[:k], ts[:k])[1] if k else []
    second = split.late_mask(streams[k:], ts[k:])[1] if k < len(rows) else []
    assert [first[j] for j in range(len(first))] + [second[j] for j in range(len(second))] == expected
    # read from the end, and extended (as the replay adds the mark after the batch)
    assert marks[-1] == expected[-1]
    marks.append(whole.mark)
    assert len(marks) == len(rows) + 1 and marks[len(rows)] == whole.mark and marks[-1] == whole.mark
    # read a chunk at a time (as the replay reads the mark after each row it visits)
    picks = np.arange(cut % (len(rows) + 1), len(rows) + 1)
    assert marks_at(marks, picks) == [marks[j] for j in picks.tolist()]
    assert marks_at([*expected, whole.mark], picks) == [marks[j] for j in picks.tolist()]


def test_no_watermark_before_a_stream_has_spoken() -> None:
    c = clock(0.0)
    late, marks = c.late_mask(np.array([0, 0, 1]), np.array([5.0, 6.0, 4.0]))
    # B is silent (not idle) until its first tuple: no watermark before it
    assert [marks[j] for j in range(3)] == [None, None, None]
    assert late.tolist() == [False, False, False]
    assert c.mark is not None and c.mark[0] == 4.0


def test_the_horizon_is_the_latest_moves_read_between_moves() -> None:
    # the horizon's exact value is kept between moves (every registration reads it):
    # read after each move it is that move's, watermark - lateness - widest window
    from fractions import Fraction

    c = Clock(0.1, ["A"], now=lambda: 0.0)
    assert c.horizon == float("-inf")
    highest = None
    for ts, window in [(1.0, "1/3"), (1.3, "1/3"), (1.3, "2/3"), (2.0, "1/3"), (7.25, "0")]:
        c.observe(0, ts)
        c.advance(Fraction(window), c.current())
        want = Fraction(str(ts)) - Fraction("0.1") - Fraction(window)
        highest = want if highest is None else max(highest, want)  # (the horizon never goes back)
        horizon = c.horizon  # (a double stands for its shortest decimal)
        assert (Fraction(repr(horizon)) if isinstance(horizon, float) else horizon) == highest
        c._check()
