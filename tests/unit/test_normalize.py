"""Normalization to canonical predicates, classification, list keys, DNF."""

from __future__ import annotations

import operator
from fractions import Fraction

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from predicates import Catalog, ColumnKey, Kind, QueryError
from predicates.ast import And, Arith, Comparison, Negate, Not, Number, Or
from predicates.frontend import compile_queries
from predicates.normalize import Predicate, Residual, dnf_size, push_not, to_dnf

DDL = """
REGISTER STREAM B (pressure FLOAT, temp FLOAT, alert INTEGER);
REGISTER STREAM T (fluct FLOAT, degree FLOAT, incr FLOAT);
REGISTER STREAM H (beatrate FLOAT, vib FLOAT, alert INTEGER);
REGISTER STREAM K (fluid FLOAT);
REGISTER STREAM P (name VARCHAR, ok BOOLEAN);
REGISTER STREAM Q (name VARCHAR);
"""
CATALOG = Catalog.from_ddl(DDL)


def normalized(where: str, streams: str = "B, T, H, K"):
    multi = "," in streams
    text = f"SELECT * FROM {streams} {'MAXWINDOW 5' if multi else ''} WHERE {where}"
    (nq,) = compile_queries(text, CATALOG)
    return nq


def only_predicate(where: str, streams: str = "B, T, H, K") -> Predicate | Residual:
    nq = normalized(where, streams)
    (conj,) = nq.disjuncts
    items = list(conj.predicates) + list(conj.residuals)
    (item,) = items
    return item


def test_attribute_divides_through():
    p = only_predicate("T.fluct * 2 = 103")
    assert p.kind is Kind.ATTRIBUTE
    assert p.key.left == ColumnKey("T", "fluct") and p.key.op == "="
    assert p.constant == Fraction(103, 2) and p.value == 51.5
    assert p.describe() == "T.fluct = 51.5"


def test_negative_factor_flips_the_operator():
    p = only_predicate("-2 * B.pressure < 4")
    assert (p.key.op, p.constant) == (">", -2)
    p = only_predicate("10 - B.pressure >= 3")
    assert (p.key.op, p.constant) == ("<=", 7)


def test_constant_on_the_left_mirrors():
    p = only_predicate("90 > B.pressure")
    assert (p.key.op, p.constant) == ("<", 90)


def test_join_orientation_and_factor_split_lists():
    a = only_predicate("B.pressure > T.fluct")
    b = only_predicate("T.fluct < 0.5 * B.pressure")
    assert a.kind is b.kind is Kind.JOIN
    assert (a.key.left, a.key.op, a.key.right) == (b.key.left, b.key.op, b.key.right)
    assert a.key.left == ColumnKey("B", "pressure") and a.key.op == ">"
    assert (a.key.factor, b.key.factor) == (1, 2)
    assert a.key != b.key
    assert b.describe() == "B.pressure > 2*T.fluct"


def test_join_with_offset_and_negative_factor():
    p = only_predicate("B.pressure - 5 <= H.vib * -0.5")
    assert p.key.op == "<=" and p.key.factor == Fraction(-1, 2) and p.constant == 5
    assert p.describe() == "B.pressure <= -0.5*H.vib + 5"
    p = only_predicate("H.vib * -2 >= B.pressure")
    assert (p.key.left, p.key.op, p.key.factor, p.constant) == (ColumnKey("B", "pressure"), "<=", -2, 0)


def test_window_predicates():
    p = only_predicate("T.ts > B.ts")
    assert p.kind is Kind.WINDOW and p.describe() == "B.ts < T.ts"
    p = only_predicate("B.ts <= H.ts + 2")
    assert p.kind is Kind.WINDOW and p.constant == 2
    assert only_predicate("B.ts - H.ts < 1").describe() == "B.ts < H.ts + 1"


def test_timestamp_against_a_constant_or_a_value_column():
    assert only_predicate("B.ts > 100").kind is Kind.ATTRIBUTE
    assert only_predicate("B.ts > H.vib").kind is Kind.JOIN


def test_same_stream_columns_are_attribute_predicates():
    p = only_predicate("B.temp > B.pressure", "B")
    assert p.kind is Kind.ATTRIBUTE
    assert p.describe() == "B.pressure < B.temp"
    assert p.key.right == ColumnKey("B", "temp")


@pytest.mark.parametrize(
    "where",
    [
        "B.pressure * B.temp > 5",
        "B.pressure + H.vib > K.fluid",
        "B.pressure / H.vib > 1",
        "B.pressure - B.pressure + H.vib > 1",
        "0 * B.pressure > -1",
    ],
)
def test_residuals(where):
    p = only_predicate(where)
    assert isinstance(p, Residual)


@pytest.mark.parametrize("where", ["B.pressure / 0 > 1", "NOT (B.pressure / (2 - 2) <= 1)", "-(B.temp / 0) = 1"])
def test_division_by_zero_never_holds(where):
    """x / 0 is NULL, so the comparison is never true, negated or not."""
    assert normalized(where).disjuncts == ()


def test_constant_comparisons_are_decided_at_registration():
    nq = normalized("1 < 2 AND B.pressure < 3")
    assert [p.describe() for p in nq.disjuncts[0].predicates] == ["B.pressure < 3"]
    assert normalized("1 > 2 AND B.pressure < 3").disjuncts == ()
    assert len(normalized("1 > 2 OR B.pressure < 3").disjuncts) == 1


def test_strings_and_booleans():
    p = only_predicate("'m' < P.name", "P")
    assert (p.key.op, p.constant, p.key.family) == (">", "m", "string")
    p = only_predicate("P.ok = FALSE", "P")
    assert (p.key.op, p.constant, p.key.family) == ("=", False, "boolean")
    p = only_predicate("Q.name = P.name", "P, Q")
    assert p.kind is Kind.JOIN and p.describe() == "P.name = Q.name"


def test_duplicates_within_a_conjunct_collapse():
    nq = normalized("B.pressure < 3 AND 3 > B.pressure AND B.pressure * 2 < 6")
    assert len(nq.disjuncts[0].predicates) == 1


def test_dnf_of_or_and_not():
    nq = normalized("(B.pressure < 1 OR B.temp > 2) AND NOT (H.vib = 3 AND H.beatrate != 4)")
    texts = sorted(sorted(p.describe() for p in conj.predicates) for conj in nq.disjuncts)
    assert texts == [
        ["B.pressure < 1", "H.beatrate = 4"],
        ["B.pressure < 1", "H.vib != 3"],
        ["B.temp > 2", "H.beatrate = 4"],
        ["B.temp > 2", "H.vib != 3"],
    ]


def test_identical_disjuncts_collapse():
    nq = normalized("B.pressure < 1 OR 1 > B.pressure")
    assert len(nq.disjuncts) == 1


def test_dnf_expansion_is_bounded_before_expanding():
    where = " AND ".join(f"(B.pressure < {i} OR B.temp > {i})" for i in range(40))
    with pytest.raises(QueryError) as err:
        normalized(where)
    assert "expands to 1099511627776 alternatives (the limit is 64)" in err.value.message
    assert err.value.query == "1"


def test_max_disjuncts_is_configurable():
    where = " AND ".join(f"(B.pressure < {i} OR B.temp > {i})" for i in range(7))
    (nq,) = compile_queries(f"SELECT * FROM B WHERE {where}", CATALOG, max_disjuncts=128)
    assert len(nq.disjuncts) == 128


# ----------------------------------------------------------------- properties

COLUMNS = [("B", "pressure"), ("B", "temp"), ("T", "fluct"), ("H", "vib"), ("B", "ts"), ("H", "ts")]
POW2 = [Fraction(1), Fraction(2), Fraction(4), Fraction(1, 2), Fraction(1, 4)]
OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "=": operator.eq, "!=": operator.ne}


@st.composite
def linear_side(draw, columns):
    """A linear expression text over at most the given columns, with exact factors."""
    terms = []
    for col in columns:
        factor = draw(st.sampled_from(POW2)) * draw(st.sampled_from([1, -1]))
        terms.append(f"{float(factor)!r} * {col[0]}.{col[1]}")
    offset = Fraction(draw(st.integers(-8, 8)), draw(st.sampled_from([1, 2])))
    terms.append(f"{float(offset)!r}")
    draw(st.randoms()).shuffle(terms)
    return " + ".join(terms)


@given(
    st.data(),
    st.sampled_from(list(OPS)),
    st.lists(st.sampled_from(range(len(COLUMNS))), min_size=1, max_size=2, unique=True),
)
@settings(max_examples=300, deadline=None)
def test_normalized_form_evaluates_like_the_original(data, op, picks):
    cols = [COLUMNS[i] for i in picks]
    split = data.draw(st.integers(0, len(cols)))
    left = data.draw(linear_side(cols[:split]))
    right = data.draw(linear_side(cols[split:]))
    item = only_predicate(f"{left} {op} {right}")
    values = {
        col: float(Fraction(data.draw(st.integers(-16, 16)), data.draw(st.sampled_from([1, 2])))) for col in COLUMNS
    }
    expected = _evaluate(f"{left} {op} {right}", values)
    if isinstance(item, Residual):
        return
    x = values[(item.key.left.stream, item.key.left.column)]
    rhs = item.value
    if item.key.right is not None:
        rhs = item.key.factor_value * values[(item.key.right.stream, item.key.right.column)] + item.value
    assert OPS[item.key.op](x, rhs) == expected


def _evaluate(text: str, values: dict) -> bool:
    """Evaluate the comparison as written, on the parsed (unnormalized) tree."""
    from predicates import parse_query

    cond = parse_query(f"SELECT * FROM B, T, H MAXWINDOW 1 WHERE {text}").where

    def value(node):
        if isinstance(node, Number):
            return float(node.value)
        if isinstance(node, Negate):
            return -value(node.operand)
        if isinstance(node, Arith):
            a, b = value(node.left), value(node.right)
            return a + b if node.op == "+" else a - b if node.op == "-" else a * b
        return values[(node.qualifier, node.name)]

    return OPS[cond.op](value(cond.left), value(cond.right))


# Three-valued logic: NOT pushed into the operators, then DNF with NULL comparisons
# false, decides exactly like Kleene logic on the original condition.

ATOMS = ["B.pressure < 1", "B.temp >= 2", "H.vib = 3", "H.beatrate != 4", "B.pressure > H.vib"]


@st.composite
def conditions(draw, depth=0):
    if depth > 2 or draw(st.booleans()):
        return draw(st.sampled_from(ATOMS))
    kind = draw(st.sampled_from(["AND", "OR", "NOT"]))
    if kind == "NOT":
        return f"NOT ({draw(conditions(depth + 1))})"
    parts = draw(st.lists(conditions(depth + 1), min_size=2, max_size=3))
    return "(" + f" {kind} ".join(parts) + ")"


def _kleene(cond, row) -> bool | None:
    if isinstance(cond, Comparison):
        left = row.get((cond.left.qualifier, cond.left.name))
        right = (
            float(cond.right.value)
            if isinstance(cond.right, Number)
            else row.get((cond.right.qualifier, cond.right.name))
        )
        if left is None or right is None:
            return None
        return OPS[cond.op](left, right)
    if isinstance(cond, Not):
        inner = _kleene(cond.operand, row)
        return None if inner is None else not inner
    results = [_kleene(item, row) for item in cond.items]
    if isinstance(cond, And):
        return False if False in results else (None if None in results else True)
    return True if True in results else (None if None in results else False)


@given(conditions(), st.fixed_dictionaries({col: st.sampled_from([None, 0.0, 1.0, 2.0, 3.0, 4.0]) for col in COLUMNS}))
@settings(max_examples=300, deadline=None)
def test_dnf_decides_like_three_valued_logic(text, row):
    from predicates import parse_query

    cond = parse_query(f"SELECT * FROM B, H MAXWINDOW 1 WHERE {text}").where
    assume(dnf_size(push_not(cond)) <= 64)
    expected = _kleene(cond, row) is True

    def holds(cmp):
        return _kleene(cmp, row) is True

    got = any(all(holds(cmp) for cmp in conj) for conj in to_dnf(cond))
    assert got == expected


def test_push_not_flips_operators_and_swaps_connectives():
    from predicates import parse_query

    cond = parse_query("SELECT * FROM B WHERE NOT (B.pressure < 1 OR NOT B.temp = 2)").where
    nnf = push_not(cond)
    assert isinstance(nnf, And)
    assert [c.op for c in nnf.items] == [">=", "="]
    assert not isinstance(nnf, Or)


@settings(max_examples=300, deadline=None)
@given(st.floats(-1e307, 1e307), st.sampled_from([1, -1, 3]))
def test_a_query_with_double_constants_prints_them_as_what_they_mean(value: float, sign: int) -> None:
    """A compiled query's text prints a double constant straight from the double; it
    must be the very text printed from the exact number the double means (its
    shortest decimal), for one-column and two-column (``+ c`` / ``- c``) predicates."""
    import predicates
    from predicates.numbers import exact
    from predicates.records import CompiledQuery, Conjunction

    catalog = Catalog.from_ddl(
        "REGISTER STREAM B (pressure FLOAT, temp FLOAT); REGISTER STREAM H (vib FLOAT, beatrate FLOAT);"
    )
    (query,) = predicates.compile(
        "SELECT * FROM B, H MAXWINDOW 5 WHERE B.pressure < 1 AND B.temp <= 2 * H.vib + 1", catalog
    )
    ((preds, residuals),) = query.disjuncts
    doubles = Conjunction.of([(key, sign * value) for key, _ in preds], numeric=True)
    exacts = Conjunction.of([(key, exact(sign * value)) for key, _ in preds], numeric=False)
    as_doubles = CompiledQuery("q", query.context, query.maxwindow, ((doubles, residuals),))
    as_exact = CompiledQuery("q", query.context, query.maxwindow, ((exacts, residuals),))
    assert as_doubles.text == as_exact.text


@given(st.integers(-(10**30), 10**30), st.integers(0, 40), st.integers(0, 40), st.sampled_from([1, 3, 7]))
def test_decimal_text_is_the_exact_decimal_or_none(numerator: int, twos: int, fives: int, other: int) -> None:
    from predicates.numbers import decimal_text

    value = Fraction(numerator, 2**twos * 5**fives * other)
    text = decimal_text(value)
    if value.denominator % 3 == 0 or value.denominator % 7 == 0:
        assert text is None
    else:
        assert text is not None and Fraction(text) == value and "e" not in text


def test_a_window_past_the_doubles_prints_as_its_decimal_and_reads_back() -> None:
    """A MAXWINDOW no double holds exactly is printed as its exact decimal (not a/b,
    which does not parse): a query's text, and so a snapshot, reads back the same."""
    import mqo

    ddl = "REGISTER STREAM B (pressure FLOAT); REGISTER STREAM H (vib FLOAT);"
    for window in ("0.1234567890123456789", "0.1234567890123456789 MINUTES", "2.5", "3 HOURS"):
        m = mqo.Matcher(ddl)
        m.register_query(f"Query ID: a\nSELECT * FROM B, H MAXWINDOW {window} WHERE B.pressure < H.vib")
        first = m.registry.queries["a"]
        assert "/" not in first.text
        again = mqo.Matcher.restore(m.snapshot()).registry.queries["a"]
        assert again.exact_maxwindow == first.exact_maxwindow and again.text == first.text
