"""Queries built around a witness (see tests/references/exact_workloads.py): predicates whose
constants put the witness exactly on their boundary, or a small step off it."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from tests.references.exact_ops import Chooser, Op, Push
from tests.references.reference import (
    COMPARISONS,
    SPELLINGS,
    STRING,
    And,
    Bin,
    Cmp,
    Col,
    Cond,
    Duration,
    Expr,
    Item,
    Neg,
    Not,
    Num,
    Or,
    Query,
    Schema,
    Spelling,
    Star,
    Str,
    const,
    decimal_text,
    evaluate,
    exact,
)

TAGS = ("a", "b", "ab", "B")  # no "" or "NULL": a CSV file would read those as NULL
FACTORS = ("1", "3", "-3", "0.1", "1.5", "7", "0.3333333333", "1/3", "-0.5", "2")
OFFSETS = ("1", "0.1", "0.3", "2", "1.5", "0.001", "4")
BIASES = (Fraction(0),) * 6 + (Fraction(1, 1000), Fraction(-1, 1000), Fraction(1, 10), Fraction(-1), Fraction(1, 3))
FIXED_WINDOWS = (Duration("0.3", "sec"), Duration("100", "ms"), Duration("1.5", "sec"), Duration("0.1", "min"))


def factor_value(text: str) -> Fraction:
    return Fraction(1, 3) if text == "1/3" else Fraction(text)


def scaled(c: Chooser, expr: Expr, factor: str) -> Expr:
    """``factor`` times ``expr``, in one of its spellings."""
    if factor == "1":
        return expr
    if factor == "1/3":
        return c.pick((Bin("/", expr, Num("3")), Bin("*", Bin("/", Num("1"), Num("3")), expr)))
    lit: Expr = Neg(Num(factor[1:])) if factor.startswith("-") else Num(factor)
    return c.pick((Bin("*", lit, expr), Bin("*", expr, lit)))


def linear(c: Chooser, ref: Col) -> Expr:
    """``ref`` with a boundary-prone factor and/or offset."""
    form = c.pick(("plain", "factor", "factor", "offset", "divide", "negate", "inner"))
    factor = c.pick(FACTORS)
    offset = Num(c.pick(OFFSETS))
    if form == "plain":
        return ref
    if form == "factor":
        return scaled(c, ref, factor)
    if form == "offset":
        return Bin(c.pick(("+", "-")), scaled(c, ref, factor), offset)
    if form == "divide":
        return Bin("/", ref, Num(c.pick(("3", "7", "0.1", "1.5"))))
    if form == "negate":
        return Neg(ref)
    return scaled(c, Bin(c.pick(("+", "-")), ref, offset), factor)


def place(c: Chooser, left: Expr, right: Expr | None) -> Any:
    """A function from a constant expression to (left, right) sides with the constant
    somewhere in them, linearly with coefficient +-1 (or /3): solved for in :func:`atom`."""
    if right is None:
        return c.pick((lambda k: (left, k), lambda k: (k, left)))
    return c.pick(
        (
            lambda k: (Bin("+", left, k), right),
            lambda k: (left, Bin("+", right, k)),
            lambda k: (Bin("+", k, left), right),
            lambda k: (left, Bin("-", k, right)),
            lambda k: (Bin("/", Bin("+", left, k), Num("3")), right),
            lambda k: (Bin("-", left, k), right),
        )
    )


def atom(c: Chooser, env: dict[str, dict[str, Any]], left: Expr, right: Expr | None, want: bool | None) -> Cond:
    """A comparison of ``left`` and ``right`` with a constant derived from the witness
    ``env`` so that it lies exactly on the boundary (plus a bias, sometimes). ``want``:
    the truth it must have on the witness (True/False), or None for any."""
    sides = place(c, left, right)
    bias = c.pick(BIASES)
    lo0, ro0 = (evaluate(e, env) for e in sides(Num("0")))
    lo1, ro1 = (evaluate(e, env) for e in sides(Num("1")))
    if None in (lo0, ro0, lo1, ro1) or (ro1 - lo1) == (ro0 - lo0):  # type: ignore[operator]
        k = Fraction(c.integer(-3, 3))  # a NULL on the witness: any constant will do
    else:
        gap0 = ro0 - lo0  # type: ignore[operator]
        k = -gap0 / ((ro1 - lo1) - gap0) + bias  # type: ignore[operator]
    lhs, rhs = sides(const(k))
    op = c.pick(("<=", ">=", "=", "<", ">", "!=", "<=", ">="))
    lv, rv = evaluate(lhs, env), evaluate(rhs, env)
    if want is not None and lv is not None and rv is not None:
        ok = [o for o in COMPARISONS if _holds(o, lv, rv) == want]
        if op not in ok:
            op = c.pick(ok)
    spelling = c.pick(SPELLINGS[op]) if c.chance(10) else None
    return Cmp(op, lhs, rhs, spelling)


def _holds(op: str, left: Any, right: Any) -> bool:
    return {
        "<": left < right,
        "<=": left <= right,
        ">": left > right,
        ">=": left >= right,
        "=": left == right,
        "!=": left != right,
    }[op]


def numeric(schema: Schema, stream: str) -> list[str]:
    return [col.name for col in schema.stream(stream).columns if col.type != STRING]


def predicate(c: Chooser, schema: Schema, sources: Sequence[tuple[str, str]], env: Any, want: bool | None) -> Cond:
    """One boundary predicate over the query's aliases."""
    aliases = [a for a, _ in sources]
    stream_of = dict(sources)
    kinds = ["attribute", "attribute", "same", "ts", "residual_one", "string"]
    if len(aliases) > 1:
        kinds += ["join", "join", "join", "window", "window", "residual"]
    kind = c.pick(kinds)
    a = c.pick(aliases)
    others = [x for x in aliases if x != a]
    b = c.pick(others) if others else a
    ra = Col(a, c.pick(numeric(schema, stream_of[a])))
    rb = Col(b, c.pick(numeric(schema, stream_of[b])))
    if kind == "attribute":
        return atom(c, env, linear(c, ra), None, want)
    if kind == "same":
        rb = Col(a, c.pick(numeric(schema, stream_of[a])))
        return atom(c, env, linear(c, ra), linear(c, rb), want)
    if kind == "ts":
        return atom(c, env, Col(a, c.pick(("ts", "ts", "id"))), None, want)
    if kind == "join":
        if c.chance(10):  # a timestamp against another stream's data column
            ra = Col(a, "ts")
        return atom(c, env, linear(c, ra), linear(c, rb), want)
    if kind == "window":
        left: Expr = Col(a, "ts")
        if c.chance(10):
            left = scaled(c, left, c.pick(("2", "0.5", "3")))
        return atom(c, env, left, Col(b, "ts"), want)
    if kind == "residual_one":
        rb = Col(a, c.pick(numeric(schema, stream_of[a])))
        if c.chance(25):  # a square against another column of the tuple
            return atom(c, env, Bin("*", ra, ra), rb, want)
        return atom(c, env, Bin(c.pick(("*", "/")), ra, rb), None, want)  # x / y: division by zero is NULL
    if kind == "residual":
        form = c.pick(("+", "-", "*", "three", "square", "ts"))
        if form == "square":  # linear on one side only: x OP y * y
            return atom(c, env, ra, Bin("*", rb, rb), want)
        if form == "ts":  # a difference of timestamps against a constant (a window, rewritten)
            return atom(c, env, Bin("-", Col(a, "ts"), Col(b, "ts")), None, want)
        if form == "three" and len(aliases) > 2:
            third = next(x for x in aliases if x not in (a, b))
            rc = Col(third, c.pick(numeric(schema, stream_of[third])))
            if c.chance(50):  # x OP y - 2 * z (+ the constant)
                return atom(c, env, ra, Bin("-", rb, Bin("*", Num("2"), rc)), want)
            return atom(c, env, Bin("+", ra, rb), rc, want)
        return atom(c, env, Bin(form if form in ("+", "-", "*") else "+", ra, rb), None, want)
    # strings: a tag against a literal (the witness's, mostly) or another tag
    tagged = [x for x in aliases if "tag" in [col.name for col in schema.stream(stream_of[x]).columns]]
    if not tagged:
        return atom(c, env, linear(c, ra), None, want)
    t = c.pick(tagged)
    mine = env[t]["tag"]
    other = [x for x in tagged if x != t]
    right: Expr = (
        Col(other[0], "tag")
        if other and c.chance(40)
        else Str(mine if mine is not None and c.chance(70) else c.pick(TAGS))
    )
    op = c.pick(("=", "!=", "<", ">=", "<=", ">")) if want is None else "="
    left: Expr = Col(t, "tag")
    if want is not None and mine is not None and evaluate(right, env) is not None:
        op = "=" if (mine == evaluate(right, env)) == want else "!="
    # the literal on either side (the engine turns 'a' < t.tag into t.tag > 'a')
    return Cmp(op, right, left) if isinstance(right, Str) and c.chance(25) else Cmp(op, left, right)


MAX_DISJUNCTS = 32  # worst-case disjuncts of a generated condition; the engine's bound is larger


def tree(
    c: Chooser, schema: Schema, sources: Sequence[tuple[str, str]], env: Any, want: bool | None, depth: int = 2
) -> Cond:
    """A predicate, or an AND/OR/NOT tree of them whose truth on the witness is ``want``
    (None: any). Each is normalized by the engine to DNF, each disjunct a sub-query."""
    if depth == 0 or not c.chance(35):
        return predicate(c, schema, sources, env, want)
    kind = c.pick(("or", "and", "not", "or"))
    if kind == "not":
        return Not(tree(c, schema, sources, env, None if want is None else not want, depth - 1))
    n = c.integer(2, 3)
    # AND is TRUE when all its items are, FALSE when one is; OR is FALSE when all are,
    # TRUE when one is; the others may be anything (UNKNOWN included)
    one = c.integer(0, n - 1)
    if want is not None and want == (kind == "and"):
        wants: list[bool | None] = [want] * n
    else:
        wants = [want if i == one else None for i in range(n)]
    items = tuple(tree(c, schema, sources, env, w, depth - 1) for w in wants)
    return And(items) if kind == "and" else Or(items)


def dnf_size(cond: Cond) -> tuple[int, int]:
    """(disjuncts of ``cond``, disjuncts of NOT ``cond``) at worst, ``!=`` counting as
    two (< or >) and ``=`` negated as two."""
    if isinstance(cond, Cmp):
        return (2 if cond.op == "!=" else 1, 2 if cond.op == "=" else 1)
    if isinstance(cond, Not):
        pos, neg = dnf_size(cond.item)
        return neg, pos
    sizes = [dnf_size(i) for i in cond.items]
    prod_pos, prod_neg = 1, 1
    for pos, neg in sizes:
        prod_pos, prod_neg = prod_pos * pos, prod_neg * neg
    if isinstance(cond, And):
        return prod_pos, sum(n for _, n in sizes)
    return sum(p for p, _ in sizes), prod_neg


def window_duration(c: Chooser, span: Fraction, must_cover: bool, narrow: bool = False) -> Duration:
    """MAXWINDOW: the witness's span exactly (in sec, ms, min or bare), a step more, or
    a fixed decimal; at least the span when ``must_cover``; ``narrow``: no wider than
    needed (many queries over dense data would otherwise have results by the million)."""
    options: list[Duration] = []
    units = (("sec", 1), ("ms", Fraction(1, 1000)), ("", 1), ("min", 60))
    if c.chance(10):  # the other spellings of the units
        units = ((c.pick(("s", "second", "seconds")), 1), (c.pick(("minute", "minutes")), 60))
    for unit, scale in units:
        text = decimal_text(span / scale)
        if text is not None and span > 0:
            options.append(Duration(text, unit))
    if not narrow:
        options.append(Duration(decimal_text(span + Fraction(1, 10)) or "1", "sec"))
    fixed = [d for d in FIXED_WINDOWS[: 2 if narrow else None] if not must_cover or d.seconds >= span]
    choice = c.pick(options + fixed) if options or fixed else Duration("1", "sec")
    if must_cover and choice.seconds < span:
        return Duration(decimal_text(span) or "1", "sec")
    return choice


def make_query(
    c: Chooser,
    schema: Schema,
    name: str,
    ops: Sequence[Op],
    candidates: Sequence[int],
    designated: bool,
    narrow: bool = False,
    self_joins: int = 30,
    bare: bool = False,
    expressions: bool = False,
    contradictions: int = 0,
) -> Query:
    """A query around a witness drawn from the pushes ``candidates`` (indexes into ops).
    ``designated``: a condition TRUE on the witness, MAXWINDOW covering it.
    ``narrow``: at most two aliases and tight windows (see :func:`window_duration`).
    ``self_joins``: the percentage of queries reading a stream under two or three aliases.
    ``bare``: no WINDOW or WHERE, so every assignment within MAXWINDOW is a result and
    what a query registered mid-stream may still see (the retention horizon) shows.
    ``expressions``: the SELECT list may hold arithmetic and constants.
    ``contradictions``: the percentage of queries (not ``designated``) whose condition
    is never TRUE (:func:`never`)."""
    streams = [s.name for s in schema.streams]
    if designated:  # only streams with a tuple to be the witness
        streams = [s for s in streams if any(ops[i].stream == s for i in candidates)] or streams  # type: ignore[union-attr]
    if c.chance(self_joins):
        # a self-join: a stream read under two or three aliases (and maybe another stream)
        k = c.integer(2, 2 if narrow else 3)
        chosen = [c.pick(streams) for _ in range(k)]
        chosen[1] = chosen[0]  # at least one stream twice
    else:
        k = c.integer(1, min(len(streams), 2 if narrow else 3))
        chosen = [streams.pop(c.integer(0, len(streams) - 1)) for _ in range(k)]
    # an alias of its own for each reading of a stream read several times
    aliases = [s if chosen.index(s) == i and not c.chance(20) else f"{s.lower()}{i}" for i, s in enumerate(chosen)]
    sources = tuple(zip(aliases, chosen, strict=True))
    env = witness(c, schema, sources, ops, candidates)
    stamps = [row["ts"] for row in env.values()]
    maxwindow = window_duration(c, max(stamps) - min(stamps), designated, narrow) if k > 1 else None
    if k == 1 and c.chance(15):  # allowed on one stream, and without effect
        maxwindow = c.pick(FIXED_WINDOWS)
    spelling = Spelling(
        maxwindow=c.pick(("MAXWINDOW", "MAX WINDOW", "MaxWindow")) if c.chance(20) else "MAXWINDOW",
        alias_as=c.chance(30),
    )
    if bare:
        return Query(name, sources, maxwindow, spelling=spelling)
    want = True if designated else (True if c.chance(50) else None)
    deep = 0 if narrow else 2  # many narrow queries: plain conjunctions keep them quick
    preds = [tree(c, schema, sources, env, want, deep) for _ in range(c.integer(1, 4 if k > 1 else 3))]
    while len(preds) > 1 and dnf_size(And(tuple(preds)))[0] > MAX_DISJUNCTS:
        preds.pop()
    window_preds = [p for p in preds if _is_window(p)]
    where_preds = [p for p in preds if not _is_window(p)]
    where: Cond | None = And(tuple(where_preds)) if len(where_preds) > 1 else (where_preds or [None])[0]
    if not designated and where is not None and c.chance(25) and dnf_size(where)[0] < MAX_DISJUNCTS // 2:
        # OR with another boundary predicate (a result is reported once however many hold)
        where = Or((where, predicate(c, schema, sources, env, None)))
    if not designated and where is not None and c.chance(10) and dnf_size(where)[1] <= MAX_DISJUNCTS:
        where = Not(where)
    if not designated and c.chance(contradictions):
        # a query that never matches (the engine gives it no slot), beside the workload's
        # disjunctions (several slots each): its neighbours must keep their own slots
        false = never(c, schema, sources)
        where = And((where, false)) if where is not None and c.chance(50) else false
    window: Cond | None = None
    if window_preds and c.chance(60):
        window = And(tuple(window_preds)) if len(window_preds) > 1 else window_preds[0]
    elif window_preds:
        where = And((*window_preds, where)) if where is not None else And(tuple(window_preds))
    select: tuple[Item | Star, ...] | None = None
    if c.chance(50 if expressions else 25):
        items: list[Item | Star] = []
        for i in range(c.integer(1, 3)):
            alias, stream = c.pick(sources)
            if expressions and c.chance(50):
                items.append(Item(select_expression(c, schema, sources), f"v{i}", with_as=c.chance(70)))
            elif c.chance(20) and Star(alias) not in items:
                items.append(Star(alias))
            else:
                cols = [col.name for col in schema.stream(stream).columns] + ["ts", "id"]
                items.append(Item(Col(alias, c.pick(cols)), f"v{i}"))
        select = tuple(items)
    return Query(name, sources, maxwindow, where, window, select, spelling)


def select_expression(c: Chooser, schema: Schema, sources: Sequence[tuple[str, str]]) -> Expr:
    """Arithmetic over one or two aliases' columns, or a constant, for the SELECT list."""
    (a, sa), (b, sb) = c.pick(sources), c.pick(sources)
    x = Col(a, c.pick([*numeric(schema, sa), "ts", "id"]))
    y = Col(b, c.pick(numeric(schema, sb)))
    forms: list[Expr] = [
        Bin("+", x, y),
        Bin("*", x, y),
        Bin("/", x, y),  # division by zero is NULL
        Neg(x),
        Bin("-", x, Num("1.5")),
        Bin("*", Num("2"), x),
        Bin("*", x, Num("0.1")),
        Num(c.pick(("1.5", "0.1", "7"))),
        Neg(Num("2")),
    ]
    return c.pick(forms)


def never(c: Chooser, schema: Schema, sources: Sequence[tuple[str, str]]) -> Cond:
    """A condition no assignment satisfies: constants compared (``1 > 2``) or one
    column both below and at or above a constant (``A.x < 0 AND A.x >= 0``)."""
    if c.chance(50):
        return c.pick((Cmp(">", Num("1"), Num("2")), Cmp("<=", Num("3"), Num("0.5")), Cmp("!=", Num("7"), Num("7"))))
    alias, stream = c.pick(sources)
    col = Col(alias, c.pick(numeric(schema, stream)))
    k: Expr = Num(c.pick(("0", "1", "0.5")))
    if c.chance(30):
        k = Neg(k)
    return And((Cmp("<", col, k), Cmp(">=", col, k)))


def _is_window(cond: Cond) -> bool:
    return (
        isinstance(cond, Cmp)
        and {x.name for x in _cols(cond.left) + _cols(cond.right)} == {"ts"}
        and len({x.alias for x in _cols(cond.left) + _cols(cond.right)}) == 2
    )


def _cols(expr: Expr) -> list[Col]:
    if isinstance(expr, Col):
        return [expr]
    if isinstance(expr, Neg):
        return _cols(expr.operand)
    if isinstance(expr, Bin):
        return _cols(expr.left) + _cols(expr.right)
    return []


def witness(
    c: Chooser, schema: Schema, sources: Sequence[tuple[str, str]], ops: Sequence[Op], candidates: Sequence[int]
) -> dict[str, dict[str, Any]]:
    """One accepted tuple per alias (exact values, ts and id), near an anchor in time."""
    ids = _ids(schema, ops)
    rows: dict[str, dict[str, Any]] = {}
    anchor: Fraction | None = None
    order = list(range(len(sources)))
    for n in order:
        alias, stream = sources[n]
        mine = [i for i in candidates if ops[i].stream == stream]  # type: ignore[union-attr]
        if anchor is not None and mine:
            mine.sort(key=lambda i: abs(Fraction(repr(ops[i].ts)) - anchor))  # type: ignore[union-attr]
            mine = mine[:3]
        if not mine:
            rows[alias] = {col.name: None for col in schema.stream(stream).columns}
            rows[alias].update(ts=anchor or Fraction(0), id=0)
            continue
        index = c.pick(mine)
        op = ops[index]
        assert isinstance(op, Push)
        spec = schema.stream(stream)
        rows[alias] = {col.name: exact(op.values.get(col.name), col.type) for col in spec.columns}
        rows[alias].update(ts=Fraction(repr(op.ts)), id=ids[index])
        anchor = rows[alias]["ts"] if anchor is None else anchor
    return rows


def _ids(schema: Schema, ops: Sequence[Op]) -> dict[int, int]:
    pushed = {s.name: 0 for s in schema.streams}
    out = {}
    for i, op in enumerate(ops):
        if isinstance(op, Push):
            out[i] = pushed[op.stream] if op.id is None else op.id
            pushed[op.stream] += 1
    return out
