"""How one-query texts were read, by their shape: the comparison cache's reading of a
text of a shape read before, without the cut's walk.

A text's **shape** (:func:`predicates.token_cut.shape_of`) is its runs but for their
numbers and its header's name: texts of one shape are the same tokens but for those,
which the cut does not look at, so they cut alike, into the same prefix and comparison
skeletons, whose templates the comparison cache keeps. A text of a shape read before
is then read as that one was where its prefix's numbers (part of the prefix's
skeleton) and its templates' fixed numbers (a factor: the template holds for its
value) are the same; its other numbers are its constants.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from predicates.normalize import ListKey
from predicates.records import Context, Formula
from predicates.token_cut import plain_values

_KEPT = 8192  # shapes kept (then forgotten and learned again)
_PLANS_KEPT = 64  # readings of one shape kept, for other prefix numbers or fixed numbers' values


@dataclass(frozen=True, slots=True, eq=False)
class Shortcut:
    """A comparison template: its list key and how its constant follows from its
    numbers (``alpha`` times number ``number``, else ``formula`` of the numbers
    ``params``), for the values ``fixed_values`` of its other numbers ``fixed``."""

    key: ListKey
    key_number: int  # one per distinct key (comparisons written apart may make one key)
    number: int  # which of the comparison's numbers (with ``alpha``)
    alpha: float  # 1.0 or -1.0; 0.0: the constant is ``formula``'s
    formula: Formula | None
    params: tuple[int, ...]  # the numbers that are the formula's parameters, in its order
    fixed: tuple[int, ...]  # the numbers that are no parameters...
    fixed_values: tuple[float, ...]  # ...and their values, for which this template holds

    def constant(self, numbers: list[float], first: int) -> float | Fraction:
        """The constant of a comparison whose numbers start at ``numbers[first]``."""
        if self.formula is None:
            return numbers[first + self.number] * self.alpha + 0.0
        # (a plain decimal of at most 15 digits prints as itself: repr is its text)
        return self.formula.value([repr(numbers[first + i]) for i in self.params])


@dataclass(frozen=True, slots=True, eq=False)
class Prefix:
    """What a prefix (SELECT to WHERE) gives each query: its shared context, its
    MAXWINDOW, its WINDOW's predicates, and the text its comparisons are learned in."""

    context: Context
    head: str
    maxwindow: float | Fraction | None
    keys: tuple[ListKey, ...]
    values: tuple[float, ...]
    key_numbers: tuple[int, ...]


@dataclass(frozen=True, slots=True, eq=False)
class Plan:
    """How a one-query text was read: its prefix, its comparisons' templates and first
    numbers (from the first after the WHERE), whether one has fixed numbers or a formula."""

    prefix: Prefix
    shortcuts: list[Shortcut]
    firsts: list[int]
    general: bool


@dataclass(frozen=True, slots=True, eq=False)
class _Shape:
    """The one-query texts of a shape read so far: the count of numbers before the
    WHERE, which after it are templates' fixed numbers, and a :class:`Plan` per the
    prefix's numbers and the fixed numbers' values."""

    start: int
    fixed_at: tuple[int, ...]
    plans: dict[tuple[tuple[str, ...], tuple[float, ...]], Plan]


class Shapes:
    """The readings of one-query texts by shape (for one catalog: the comparison cache
    makes a new one when it forgets what it learned)."""

    def __init__(self) -> None:
        self._shapes: dict[tuple[object, ...], _Shape] = {}

    def plan(self, key: tuple[object, ...], numbers: list[str]) -> tuple[Plan, list[float]] | None:
        """How a text of shape ``key`` and numbers ``numbers`` (their texts) reads, and
        the values of its numbers after the WHERE; None where no text of its shape, its
        prefix's numbers and its fixed numbers' values was read, or a number is not a
        plain decimal of at most 15 digits."""
        shape = self._shapes.get(key)
        if shape is None:
            return None
        values = plain_values(numbers[shape.start :])
        total = sum(values)  # (NaN if a number is not plain: the others are finite, under 1e15)
        if total != total:
            return None
        plan = shape.plans.get((tuple(numbers[: shape.start]), tuple([values[i] for i in shape.fixed_at])))
        return None if plan is None else (plan, values)

    def keep(self, key: tuple[object, ...], numbers: list[str], values: list[float], plan: Plan) -> None:
        """Keep how a one-query text of shape ``key`` was read (``numbers``: its
        numbers' texts; ``values``: the values of those after its WHERE)."""
        start = len(numbers) - len(values)  # (the numbers before the WHERE: the prefix's)
        fixed_at = tuple([n + i for n, s in zip(plan.firsts, plan.shortcuts, strict=True) for i in s.fixed])
        shape = self._shapes.get(key)
        if shape is None or shape.start != start or shape.fixed_at != fixed_at:
            if len(self._shapes) >= _KEPT:
                self._shapes.clear()
            shape = self._shapes[key] = _Shape(start, fixed_at, {})
        if len(shape.plans) >= _PLANS_KEPT:
            shape.plans.clear()
        shape.plans[(tuple(numbers[:start]), tuple([values[i] for i in fixed_at]))] = plan


__all__ = ["Plan", "Shapes"]
