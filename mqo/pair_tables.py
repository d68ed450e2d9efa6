"""The plan's two-stream slots and lists as flat arrays, for the columnar join step.

:class:`PairTables` holds, for the slots whose streams are exactly two streams ``s0``
and ``s1``: their mask as ``uint64`` words, every join and window list between the two
streams (operator, factor and constants as doubles, prefix and suffix checkpoint rows
of its kill table, its users as CSR), and the MAXWINDOW and registration levels with
their slot masks: what :func:`indexes.join_kernels.join_rows` reads
(docs/columnar-join.md). Made once per plan, in a few ms.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from indexes.exact import to_float
from indexes.kill_bitsets import bitset_of, words_for
from indexes.kill_table import kill_stride
from mqo.plan import CompiledList, CompiledPlan
from predicates import ColumnType, Kind


class Unsupported(Exception):
    """Slots the columnar step does not decide (the engine decides them): self-joins,
    queries over both streams and a third, lists comparing texts or booleans."""


def words_of(flags: np.ndarray, words: int) -> np.ndarray:
    """A bitset row (``uint64`` words) with bit ``q`` set where ``flags[q]``."""
    return bitset_of(np.flatnonzero(flags), words)


def _integer(plan: CompiledPlan, stream: int, position: int) -> bool:
    """Whether a row position of a stream holds integers (``id``, INTEGER and BYTE columns)."""
    if position < 2:
        return position == 1
    return plan.streams[stream].columns[position - 2].ctype in (ColumnType.INTEGER, ColumnType.BYTE)


@dataclass
class PairTables:
    """The plan's flat arrays for the slots over exactly streams ``s0`` and ``s1``."""

    plan: CompiledPlan
    streams: tuple[int, int]
    words: int
    mask: np.ndarray
    lists: list[CompiledList]
    columns: tuple[dict[int, int], dict[int, int]]  # per side: row position -> column of ``vals``
    integer_columns: tuple[list[int], list[int]]  # per side: the columns holding integers
    arrays: dict[str, Any]
    reach: float
    special: np.ndarray  # the slots of ``mask`` needing a check of their own (bools per slot)
    key: tuple[int, int] | None = None  # per side, the column of an equality every slot requires

    def keys(self, vals: np.ndarray, side: np.ndarray) -> np.ndarray:
        """Each row's key (its side's key column; NaN for NULL), 0 for every row
        when the slots share no equality (every partner within reach is met)."""
        if self.key is None:
            return np.zeros(len(side))
        return np.where(side == 0, vals[:, self.key[0]], vals[:, self.key[1]])

    @classmethod
    def of(cls, plan: CompiledPlan, s0: int, s1: int) -> PairTables:
        if any(plan.roles_of[s] for s in range(plan.n_real)):
            raise Unsupported("self-joins")
        pair = (1 << s0) | (1 << s1)
        masks = plan.slot_stream_mask
        if np.any(((masks & pair) == pair) & ((masks & ~pair) != 0)):
            raise Unsupported("queries over these two streams and more")
        mine = masks == pair
        words = words_for(plan.n_slots)
        lo_s, hi_s = min(s0, s1), max(s0, s1)
        lists = list(plan.pair_lists[Kind.JOIN][lo_s][hi_s]) + list(plan.pair_lists[Kind.WINDOW][lo_s][hi_s])
        columns: tuple[dict[int, int], dict[int, int]] = ({}, {})
        side_of = {s0: 0, s1: 1}
        op, kf, left_side, left_col, right_col, n, cbase, stride, rbase, obase = ([] for _ in range(10))
        unit, k_exact, same_kind = [], [], []
        consts, c_exact, prefix, suffix, offsets, users = [], [], [], [], [], []
        n_consts = n_rows = n_offsets = n_users = 0
        from indexes.join_kernels import OP_CODES  # numba, on first use (importing mqo stays light)
        from indexes.kernels import build_checkpoints

        for lst in lists:
            if not lst.numeric or lst.right_pos is None or lst.right_stream is None:
                raise Unsupported(f"list {lst.key} compares strings or booleans")
            ls, rs = side_of[lst.left_stream], side_of[lst.right_stream]
            lcol = columns[ls].setdefault(lst.left_pos, len(columns[0]) + len(columns[1]))
            rcol = columns[rs].setdefault(lst.right_pos, len(columns[0]) + len(columns[1]))
            floats = np.asarray(lst.covering.floats, np.float64)
            own = lst.offsets - lst.offsets[0]
            flat = np.ascontiguousarray(lst.own_users, np.int32)
            st = kill_stride(lst.n, words * 64)
            factor = lst.key.factor
            assert factor is not None  # (a numeric two-column list has one)
            op.append(OP_CODES[lst.key.op])
            kf.append(to_float(factor))
            left_side.append(ls)
            left_col.append(lcol)
            right_col.append(rcol)
            n.append(lst.n)
            cbase.append(n_consts)
            stride.append(st)
            rbase.append(n_rows)
            obase.append(n_offsets)
            consts.append(floats)
            # which constants are the doubles they are kept as (else a Fraction's nearest double)
            exact_c = np.ones(lst.n, bool) if lst.doubles else np.array([type(c) is float for c in lst.values], bool)
            c_exact.append(exact_c)
            unit.append(factor == 1)
            k_exact.append(Fraction(to_float(factor)) == factor)
            same_kind.append(
                _integer(plan, lst.left_stream, lst.left_pos) == _integer(plan, lst.right_stream, lst.right_pos)
            )
            own64 = np.ascontiguousarray(own, np.int64)
            prefix.append(build_checkpoints(own64, flat, lst.n, st, words, False))
            suffix.append(build_checkpoints(own64, flat, lst.n, st, words, True))
            offsets.append(own64 + n_users)
            users.append(flat)
            n_consts += lst.n
            n_rows += len(prefix[-1])
            n_offsets += len(own64)
            n_users += len(flat)
        windows, sinces = plan.windows, plan.sinces
        level_masks = [words_of(plan.slot_window_level >= i, words) for i in range(len(windows))]
        since_masks = [words_of(plan.slot_since_level <= i, words) for i in range(len(sinces))]
        empty_rows = np.zeros((0, words), np.uint64)
        arrays: dict[str, Any] = {
            "l_op": np.array(op, np.int64),
            "l_kf": np.array(kf, np.float64),
            "l_left_side": np.array(left_side, np.int64),
            "l_left_col": np.array(left_col, np.int64),
            "l_right_col": np.array(right_col, np.int64),
            "l_n": np.array(n, np.int64),
            "l_cbase": np.array(cbase, np.int64),
            "consts": np.concatenate(consts) if consts else np.zeros(0),
            "c_exact": np.concatenate(c_exact) if c_exact else np.zeros(0, bool),
            "l_unit": np.array(unit, bool),
            "l_k_exact": np.array(k_exact, bool),
            "l_same_kind": np.array(same_kind, bool),
            "l_stride": np.array(stride, np.int64),
            "l_rbase": np.array(rbase, np.int64),
            "prefix_rows": np.concatenate(prefix) if prefix else empty_rows,
            "suffix_rows": np.concatenate(suffix) if suffix else empty_rows,
            "l_obase": np.array(obase, np.int64),
            "offsets": np.concatenate(offsets) if offsets else np.zeros(0, np.int64),
            "users": np.concatenate(users) if users else np.zeros(0, np.int32),
            "w_floats": np.array(windows.floats, np.float64),
            "w_masks": np.array(level_masks, np.uint64).reshape(len(windows), words),
            "s_floats": np.array(sinces.floats, np.float64),
            "s_masks": np.array(since_masks, np.uint64).reshape(len(sinces), words),
        }
        integer = tuple(
            [col for pos, col in columns[side].items() if _integer(plan, (s0, s1)[side], pos)] for side in (0, 1)
        )
        mask = words_of(mine, words)
        widest = float(max(windows.floats)) if len(windows) else 0.0
        special = np.zeros(plan.n_slots, bool)
        special[: len(plan.slot_special)] = plan.slot_special
        return cls(
            plan,
            (s0, s1),
            words,
            mask,
            lists,
            columns,
            integer,  # type: ignore[arg-type]
            arrays,
            widest,
            special & mine,
            _equality_key(lists, columns, side_of, mask, words),
        )


def _equality_key(
    lists: list[CompiledList],
    columns: tuple[dict[int, int], dict[int, int]],
    side_of: dict[int, int],
    mask: np.ndarray,
    words: int,
) -> tuple[int, int] | None:
    """The columns (per side) of an equality ``left = right`` that every slot of
    ``mask`` requires: a list ``=`` of factor 1 whose users at its constant 0 are all
    the slots. A pair whose two values differ then satisfies no slot, so the kernel
    meets only the partners of a row's own value (an equi-join is a probe, not a walk
    of the window)."""
    for lst in lists:
        if lst.key.op != "=" or lst.key.factor != 1:
            continue
        zero = [p for p, c in enumerate(lst.values) if c == 0]
        if not zero:
            continue
        if np.any(mask & ~bitset_of(np.concatenate([lst.users_of(p) for p in zero]), words)):
            continue
        assert lst.right_stream is not None and lst.right_pos is not None  # (a join list)
        left, right = side_of[lst.left_stream], side_of[lst.right_stream]
        cols = {left: columns[left][lst.left_pos], right: columns[right][lst.right_pos]}
        return cols[0], cols[1]
    return None
