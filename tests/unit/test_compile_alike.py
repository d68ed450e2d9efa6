"""The compile entry through a matcher's caches (templates, comparisons, the lexer's kernels)
gives the full front end's queries, cold and warm."""

from __future__ import annotations

from functools import partial

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mqo
import predicates
from predicates import Catalog, Kind, QueryError
from predicates.frontend import compile_queries
from predicates.records import from_normalized
from predicates.token_cache import TokenCache
from tests.conftest import WORKLOADS, workload_schema
from tests.references.exact_workloads import Register, workloads

# these tests push sparse tuples: a column left out is NULL
sparse_matcher = partial(mqo.Matcher, missing="null")

DDL = """
REGISTER STREAM B (pressure FLOAT, temp FLOAT, alert INTEGER);
REGISTER STREAM H (beatrate FLOAT, vib FLOAT, alert INTEGER);
REGISTER STREAM P (name VARCHAR, level INT);
"""


def summary(compiled) -> tuple:
    disjuncts = sorted(
        # (a constant by its type and value, not repr: 1e999999 is exact, and Python will not
        # print an int of more than 4,300 digits)
        (tuple(sorted((k.describe(), type(v).__name__, v) for k, v in preds)), tuple(sorted(r.text for r in res)))
        for preds, res in compiled.disjuncts
    )
    return (compiled.name, compiled.maxwindow, tuple(disjuncts), compiled.context.aliases, compiled.context.bound.roles)


def caches(catalog: Catalog) -> TokenCache:
    """A matcher's compile caches for ``catalog`` (with the numba kernels), empty."""
    registry = mqo.Matcher(catalog).registry
    return registry.compiler


def both(text: str, catalog: Catalog, cache: TokenCache | None = None):
    """(the entry's query of ``text``, the front end's)."""
    cache = cache or caches(catalog)
    (got,) = predicates.compile(text, catalog, compiler=cache)
    (nq,) = compile_queries(text, catalog)
    want = from_normalized(nq)
    return got, want


@pytest.mark.parametrize(
    "text",
    [
        "SELECT * FROM B WHERE B.pressure < 90",
        "SELECT * FROM B WHERE 90 > B.pressure AND B.temp >= -5 AND B.temp <= 1e2",
        "SELECT * FROM B WHERE B.pressure * 2 = 103 AND B.temp - 5 < 7.25",
        "SELECT B.alert FROM B, H WINDOW B.ts <= H.ts MAXWINDOW 20 sec WHERE B.pressure <= 2 * H.vib AND H.beatrate > 199.5",
        "SELECT * FROM B, H MAXWINDOW 500 ms WHERE B.pressure + 3 < H.vib - 1 AND B.ts - H.ts >= -2",
        "SELECT * FROM B, H Max Window 1 minute WHERE B.pressure * B.temp > 5 AND B.alert = H.alert",
        "SELECT P.name FROM P WHERE P.name = 'x' AND P.level > 3",
        "SELECT * FROM B WHERE (B.pressure < 1 OR B.temp > 2) AND NOT B.alert = 1",
        "SELECT * FROM B WHERE 1 < 2 AND B.pressure < 3",
        "SELECT * FROM B WHERE 1 > 2",
        "SELECT * FROM B WHERE B.pressure < 0.1 AND B.pressure < 0.1",
        "Query ID: named\nSELECT * FROM B WHERE B.pressure lt= 4",
        "SELECT * FROM B WHERE B.pressure < 3 / 4 AND B.temp > -.5",
        "SELECT * FROM B;",
        "SELECT * FROM B, H MAXWINDOW 20 WHERE B.pressure<=0.5*H.vib AND B.temp>-3 AND B.temp!=1e+2",
        "SELECT * FROM B WHERE B.pressure-3 > 2 AND B.temp*2<=B.pressure/4",
        "SELECT * FROM B WHERE B.pressure+1e+2 >= 7",
        "SELECT * FROM B b1, B b2 WHERE b2.pressure > b1.pressure + 20 AND b1.ts < b2.ts MAXWINDOW 5 sec",
        "SELECT * FROM B b2, B b1 WHERE b2.pressure > b1.pressure + 20 AND b1.ts < b2.ts MAXWINDOW 5 sec",
        "SELECT b1.temp, x.temp FROM B b1, H, B x MAXWINDOW 2 WHERE x.temp >= 2 * b1.temp - 1 AND H.vib > x.pressure",
        "SELECT * FROM B a, B b, B c MAXWINDOW 1 WHERE a.ts <= b.ts AND b.ts <= c.ts AND c.alert = a.alert",
        "SELECT * FROM P p1, P p2 MAXWINDOW 1 WHERE p1.name = p2.name AND p2.level > 3",
        "SELECT * FROM B, B b2 MAXWINDOW 1 WHERE B.pressure * b2.temp > 5 AND b2.pressure < B.temp",
    ],
)
def test_the_entry_equals_the_front_end(text):
    catalog = Catalog.from_ddl(DDL)
    got, want = both(text, catalog)
    assert summary(got) == summary(want)
    # the text a registered query is written back as (snapshots) compiles to it again
    assert summary(both(got.text, catalog)[1]) == summary(want)


@pytest.mark.parametrize("path", sorted(WORKLOADS.glob("fig*.mqo")), ids=lambda p: p.name)
def test_thesis_workloads_compile_alike(path):
    ddl = workload_schema(path)
    catalog = Catalog.from_ddl(ddl.read_text())
    want = [summary(from_normalized(nq)) for nq in compile_queries(path.read_text(), catalog)]
    cache = caches(catalog)
    for _ in range(2):  # cold, then warm
        assert [summary(q) for q in predicates.compile(path.read_text(), catalog, compiler=cache)] == want


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(workloads(max_queries=6))
def test_generated_queries_compile_alike(workload):
    catalog = Catalog.from_ddl(workload.schema.ddl())
    cache = caches(catalog)
    for op in workload.ops:
        if isinstance(op, Register):
            text, _ = op.call_args()
            got, want = both(text, catalog, cache)
            assert summary(got) == summary(want), text
            # a second time through the caches
            (again,) = predicates.compile(text, catalog, compiler=cache)
            assert summary(again) == summary(want), text


@given(
    st.lists(st.tuples(st.sampled_from(["pressure", "temp"]), st.sampled_from(["<", "<=", ">", ">=", "=", "!="]),
                       st.integers(-10**6, 10**6), st.sampled_from(["", ".5", ".25", "e-3", "e2"])), min_size=1, max_size=6)
)  # fmt: skip
@settings(max_examples=200, deadline=None)
def test_thresholds_are_exact(conds):
    catalog = Catalog.from_ddl(DDL)
    text = "SELECT * FROM B WHERE " + " AND ".join(f"B.{c} {op} {n}{frac}" for c, op, n, frac in conds)
    got, want = both(text, catalog)
    assert summary(got) == summary(want)


def test_a_family_learns_each_comparison_once():
    catalog = Catalog.from_ddl(DDL)
    cache = caches(catalog)
    text = "SELECT * FROM B, H MAXWINDOW {} sec WHERE B.pressure < {}.5 AND B.pressure <= {} * H.vib"
    for i in range(200):
        predicates.compile(text.format(i, i, 1 + i % 3), catalog, compiler=cache)
    # B.pressure < #, and one template per factor 1, 2, 3 (a factor is no parameter)
    assert cache.learned == 4
    for i in (7, 8, 9, 150):
        (nq,) = compile_queries(text.format(i, i, 1 + i % 3), catalog)
        (got,) = predicates.compile(text.format(i, i, 1 + i % 3), catalog, compiler=cache)
        assert summary(got) == summary(from_normalized(nq))


def test_operators_without_spaces_are_read_by_the_caches():
    catalog = Catalog.from_ddl(DDL)
    cache = caches(catalog)
    for i in range(50):
        text = f"SELECT * FROM B, H MAXWINDOW 20 WHERE B.pressure<{i}.5 AND B.pressure<={1 + i % 3}*H.vib"
        (got,) = predicates.compile(text, catalog, compiler=cache)
        assert summary(got) == summary(both(text, catalog)[1])
    assert cache.learned == 4  # (B.pressure<#, and one per factor 1, 2, 3)


def test_queries_the_parser_reads_share_contexts_with_the_same_select():
    catalog = Catalog.from_ddl(DDL)
    cache = caches(catalog)
    texts = [
        f"SELECT B.alert, H.vib * 2 AS v FROM B, H MAXWINDOW 5 WHERE B.pressure < {i} OR H.vib > {i}" for i in range(5)
    ]
    compiled = [predicates.compile(text, catalog, compiler=cache)[0] for text in texts]
    assert len({id(c.context) for c in compiled}) == 1
    (other,) = predicates.compile(
        "SELECT B.alert, H.vib * 3 AS v FROM B, H MAXWINDOW 5 WHERE B.pressure < 1 OR H.vib > 1",
        catalog,
        compiler=cache,
    )
    assert other.context is not compiled[0].context
    m = sparse_matcher(DDL)
    m.register_queries(texts)
    m.push("B", 0, {"pressure": 2, "temp": 0, "alert": 7})
    found = m.push("H", 1, {"beatrate": 0, "vib": 3, "alert": 0})
    # named by position, from 1
    assert sorted((x.query, x.values["v"], x.values["B.alert"]) for x in found) == [
        (str(q), 6.0, 7) for q in range(1, 6)
    ]


def test_registering_many_queries_keeps_all_or_nothing_and_positions():
    m = sparse_matcher(DDL)
    texts = [f"SELECT * FROM B WHERE B.pressure < {i}" for i in range(50)]
    texts[37] = "SELECT * FROM B WHERE B.presure < 3"
    with pytest.raises(QueryError) as err:
        m.register_queries(texts, source_name="many")
    assert "unknown column 'presure' of stream B (did you mean 'pressure'?)" in str(err.value)
    assert str(err.value).startswith("many[37]:1:23:")
    assert m.query_ids == []
    file_text = (
        "\n".join(f"SELECT * FROM B WHERE B.pressure < {i};" for i in range(20))
        + "\nSELECT * FROM B WHERE B.temp >> 3;"
    )
    with pytest.raises(QueryError) as err:
        m.register_queries(file_text, source_name="f.mqo")
    assert str(err.value).startswith("f.mqo:21:")
    assert m.query_ids == []


def test_out_of_range_threshold_is_reported_by_the_full_front_end():
    m = sparse_matcher(DDL)
    m.register_queries([f"SELECT * FROM B WHERE B.pressure < {i}" for i in range(3)])
    with pytest.raises(QueryError, match="too large"):
        m.register_query("SELECT * FROM B WHERE B.pressure < 1e999")


def test_unregistering_compacts_rows_and_keeps_the_plan_right():
    m = sparse_matcher(DDL)
    ids = m.register_queries([f"SELECT * FROM B WHERE B.pressure < {i} AND B.temp > {i}" for i in range(40)])
    for qid in ids[:30]:
        m.unregister_query(qid)
        m.registry._check()
    got = sorted(r.query for r in m.push("B", 1, {"pressure": 35.5, "temp": 100}))
    assert got == sorted(str(i + 1) for i in range(36, 40))  # query i + 1 is pressure < i
    lst = m.ensure_plan().lists[Kind.ATTRIBUTE][0]
    assert list(lst.constants) == [float(i) for i in range(30, 40)]


_NUMBER_FORMS = ["5", "40", "12.25", "0.5", "7.", ".5", "1e2", "3E-1", "007"]
_SCANNED_TEXTS = [
    "SELECT * FROM B, H WINDOW B.ts <= H.ts MAXWINDOW {0} sec WHERE B.temp > ({s1}{1}) AND B.temp + ({s2}{2}) < H.beatrate{end}",
    "SELECT P.name FROM P WHERE P.name = 'x {0}' AND P.level > ({s1}{1}) AND P.level <= {2}{end}",
    "SELECT * FROM B WHERE (B.pressure) < {0} AND B.temp * ({s1}{1}) >= {2}{end}",
    # numbers before the conditions' own, or outside them
    "SELECT * FROM B, H WINDOW B.ts <= H.ts + {0} MAXWINDOW {1} sec WHERE B.temp > ({s1}{2}){end}",
    "SELECT B.temp * {0} FROM B WHERE B.pressure < ({s1}{1}) AND B.alert = {2}{end}",
]
_WARM: dict[str, TokenCache] = {}


@given(
    st.sampled_from(_SCANNED_TEXTS),
    st.lists(st.sampled_from(_NUMBER_FORMS), min_size=3, max_size=3),
    st.sampled_from(["", "-"]),
    st.sampled_from(["", "-"]),
    st.sampled_from(["", ";", " ;"]),
)
@settings(max_examples=300, deadline=None)
def test_texts_with_parentheses_and_strings_compile_alike_warm(form, numbers, s1, s2, end):
    # one cache over every example: a text may meet the templates another one left,
    # with numbers written otherwise (a trailing dot, an exponent) that it must refuse
    catalog = _WARM.setdefault("catalog", Catalog.from_ddl(DDL))  # type: ignore[arg-type]
    cache = _WARM.setdefault("cache", caches(catalog))  # type: ignore[arg-type]
    text = form.format(*numbers, s1=s1, s2=s2, end=end)
    got, want = both(text, catalog, cache)  # type: ignore[arg-type]
    assert summary(got) == summary(want), text
