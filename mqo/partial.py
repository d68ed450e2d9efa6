"""A partial (or complete) result of the shared join: what :mod:`mqo.engine` grows."""

from __future__ import annotations

from indexes.stored import StoredTuple


class Partial:
    """A partial (or complete) result: one tuple per stream it has so far.

    ``cand`` are the slots it may still satisfy; ``sat_j``/``sat_w`` the join and
    window predicates it satisfied (SatPBS) and ``rel_j``/``rel_w`` the ones it was
    tested against (RelPBS), kept only for the QED check (``check_qed``);
    ``lo``/``hi`` its smallest and largest timestamp.
    """

    __slots__ = ("cand", "hi", "lo", "mask", "rel_j", "rel_w", "sat_j", "sat_w", "tuples")

    def __init__(
        self,
        tuples: list[StoredTuple | None],
        mask: int,
        cand: int,
        sat_j: int,
        sat_w: int,
        rel_j: int,
        rel_w: int,
        lo: float,
        hi: float,
    ) -> None:
        self.tuples = tuples
        self.mask = mask
        self.cand = cand
        self.sat_j = sat_j
        self.sat_w = sat_w
        self.rel_j = rel_j
        self.rel_w = rel_w
        self.lo = lo
        self.hi = hi
