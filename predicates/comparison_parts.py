"""The comparisons of a bound condition as the caches read them: a condition that is an
AND of comparisons as its list, and a comparison's additive numbers (its parameters)
replaced by symbols, so that normalizing it once gives its constant as a formula of
them (:mod:`predicates.template_cache`, :mod:`predicates.token_cache`)."""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction

from predicates.ast import And, Arith, Comparison, Condition, Expr, Negate, Number
from predicates.records import LinearConst


def flat_comparisons(cond: Condition | None) -> list[Comparison] | None:
    """The comparisons of a condition that is an AND of comparisons (a window's
    predicates come first, as an AND of their own beside the WHERE clause's), in the
    order the normalizer reads them; None for any other condition."""
    if isinstance(cond, Comparison):
        return [cond]
    if not isinstance(cond, And):
        return None
    out: list[Comparison] = []
    for item in cond.items:
        inner = flat_comparisons(item)
        if inner is None:
            return None
        out += inner
    return out


def token_start(number: Number) -> int:
    """Where the number's own token starts (the parser folds signs into literals:
    ``- 3`` is the literal -3, whose token ``3`` ends the span)."""
    return number.span.end - len(number.text.lstrip("-"))


def _sign(number: Number) -> int:
    return -1 if (len(number.text) - len(number.text.lstrip("-"))) % 2 else 1


def additive_numbers(expr: Expr) -> Iterator[Number]:
    """Numbers reached from ``expr`` through + - and signs only (a constant that only
    adds to a comparison: the predicate's constant is linear in it)."""
    if isinstance(expr, Number):
        yield expr
    elif isinstance(expr, Negate):
        yield from additive_numbers(expr.operand)
    elif isinstance(expr, Arith) and expr.op in ("+", "-"):
        yield from additive_numbers(expr.left)
        yield from additive_numbers(expr.right)


def with_symbols(cmp: Comparison, param_of: dict[int, int]) -> Comparison:
    """``cmp`` with the numbers whose tokens start at a key of ``param_of`` replaced by
    symbolic parameters (normalizing it then gives the constant as a formula)."""
    return Comparison(
        cmp.op, _expr_symbols(cmp.left, param_of), _expr_symbols(cmp.right, param_of), cmp.span, cmp.op_span
    )


def _expr_symbols(expr: Expr, param_of: dict[int, int]) -> Expr:
    if isinstance(expr, Number):
        start = token_start(expr)
        if start in param_of:
            symbol = LinearConst(Fraction(0), {param_of[start]: Fraction(_sign(expr))})
            return Number(symbol, expr.text, expr.span)  # type: ignore[arg-type]
        return expr
    if isinstance(expr, Negate):
        return Negate(_expr_symbols(expr.operand, param_of), expr.span)
    if isinstance(expr, Arith) and expr.op in ("+", "-"):
        return Arith(expr.op, _expr_symbols(expr.left, param_of), _expr_symbols(expr.right, param_of), expr.span)
    return expr


__all__ = ["additive_numbers", "flat_comparisons", "token_start", "with_symbols"]
