"""The template cache in front of the parser: a text read from a template compiles to
exactly what the parser gives it, and a text it does not read fails exactly as the
parser fails (the same message, the same position)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import mqo
import predicates
from indexes.template_kernels import scan_bytes
from predicates import Catalog, QueryError
from predicates.frontend import front_end
from predicates.records import CompiledQuery
from predicates.template_scan import Scan
from predicates.token_cache import TokenCache
from tests.unit.test_compile_alike import DDL, summary


def scanning_compiler(catalog: Catalog) -> TokenCache:
    """A compiler whose template cache scans with the kernel (as the matcher's does)."""
    compiler = TokenCache(catalog)
    compiler.templates.scanner = scan_bytes
    return compiler


# shapes of queries: each {} is a constant
SHAPES = [
    "SELECT * FROM B WHERE B.pressure >= {} AND B.pressure <= {} AND B.temp > {}",
    "SELECT * FROM B WHERE {} <= B.alert AND B.alert < {}",
    "SELECT B.pressure AS p FROM B WHERE B.temp >= -{} AND B.pressure <> {}",
    "SELECT * FROM B, H MAXWINDOW 10 WHERE B.pressure <= H.vib + {} AND B.temp > {}",
    "SELECT * FROM B b1, B b2 MAXWINDOW 5 sec WHERE b1.pressure < b2.pressure - {} AND b1.temp = {}",
    "SELECT * FROM B, H WINDOW B.ts <= H.ts + {} MAXWINDOW 20 WHERE 2 * B.pressure > {}",
    "SELECT * FROM P WHERE P.level >= {} AND P.name = 'it''s {}'",
    "SELECT * FROM B WHERE B.pressure > {} -- the {} limit\n AND B.temp < {}",
    "SELECT * FROM B WHERE B.pressure > {} AND B.pressure > {}",
    "SELECT * FROM B WHERE B.pressure + {} > {} AND B.temp * {} < 1",
    "SELECT * FROM B WHERE B.pressure > {} MAXWINDOW {}",
]

# constants: at the boundaries of what the cache takes (15 digits), past them, and
# literals the parser rejects or reads otherwise
CONSTANTS = st.one_of(
    st.integers(0, 10**20).map(str),
    st.integers(0, 8).flatmap(lambda p: st.decimals(min_value=0, max_value=10**9, places=p)).map(str),
    st.sampled_from(
        [
            "0", "00", "007", "5.", ".5", "0.1", "0.3", "999999999999999", "1000000000000000",
            "123456789.012345", "1234567890.123456", "9007199254740993", "1e5", "1.5e-3", "2E+3",
            "1" * 40, "1.2.3", "1e999999", "0.000000000000001", "3 ", "(4)", "-6", "- 7", "8a", "'9'",
            "1" + "0" * 400, "1e-400", "0.1e-350", "2E-330", "1e-999999", "5e-324",
        ]
    ),
)  # fmt: skip
NAMES = st.one_of(
    st.none(),
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True),
    st.sampled_from(["17", "'it''s'", '"quoted"', "select", "a-b", "9x"]),
)


def text_of(shape: str, constants: list[str], name: str | None) -> str:
    body = shape.format(*constants[: shape.count("{}")])
    return body if name is None else f"Query ID: {name}\n{body}"


def outcome(compile_it) -> tuple:  # type: ignore[no-untyped-def]
    """What compiling gives: the queries (as the tests of the fast paths compare them)
    or the error's text."""
    try:
        records = compile_it()
    except QueryError as err:
        return ("error", str(err))
    return (
        "queries",
        [
            (*summary(q), tuple(o.name for o in q.context.bound.outputs))
            if isinstance(q, CompiledQuery)
            else type(q).__name__
            for q in records
        ],
    )


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(SHAPES),
    st.lists(st.from_regex(r"[1-9][0-9]{0,5}(\.[0-9]{1,3})?", fullmatch=True), min_size=4, max_size=4),
    st.lists(CONSTANTS, min_size=4, max_size=4),
    NAMES,
    st.sampled_from(["list", "file"]),
)
@example(SHAPES[0], ["1", "2", "3", "4"], ["1" * 16, "2", "3", "4"], "s1", "list")
@example(SHAPES[2], ["1", "2", "3", "4"], ["0", "-0", "0", "0"], None, "file")
@example(
    SHAPES[9], ["1", "1", "2", "1"], ["0", "1" + "0" * 400, "0", "0"], None, "list"
)  # (the comparison caches took it)
@example(SHAPES[0], ["1", "2", "3", "4"], ["1e-400", "2", "3", "4"], None, "file")  # (not the double 0.0)
@example(SHAPES[0], ["1", "2", "3", "4"], ["1e999999", "2", "3", "4"], None, "list")  # (out of range: an error)
def test_a_text_read_from_a_template_compiles_as_the_parser_reads_it(shape, teacher, constants, name, form):
    """The cache learns the shape from one text, then reads others of the shape with
    other constants and names: what it gives is the parser's, queries or error."""
    catalog = Catalog.from_ddl(DDL)
    compiler = scanning_compiler(catalog)
    compiler.templates.fewest = 1  # (it reads a call of a few texts too)
    first = text_of(shape, teacher, "t0")
    second = text_of(shape, constants, name)
    texts = [first, second, second.replace("Query ID: ", "Query ID: z", 1)]
    if form == "file":
        args: list[str] = ["\n".join(t + ";" for t in texts)]
    else:
        args = texts
    for _ in range(2):  # the cache cold, then warm
        got = outcome(lambda: predicates.compile_many(args, catalog, compiler=compiler, first_position=3))
        want = outcome(lambda: _front_end_many(args, catalog, 3))
        assert got == want, (args, got, want)


def _front_end_many(texts: list[str], catalog: Catalog, first_position: int) -> list:  # type: ignore[type-arg]
    out: list = []  # type: ignore[type-arg]
    for k, text in enumerate(texts):
        where = "<string>" if len(texts) == 1 else f"<string>[{k}]"
        out += front_end(text, catalog, source_name=where, first_position=first_position + len(out))
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet="0123456789.e+- ;x(-\n\t", max_size=16), min_size=1, max_size=6))
def test_the_scan_finds_exactly_the_lexers_plain_numbers(texts: list[str]) -> None:
    """Where the scan marks a constant, the lexer reads a number token of exactly that
    text (the scan's double is then float()'s), or the constant is inside a longer
    token (``0e-5``: no template is learned from such a text) or in a comment."""
    from predicates.errors import Source
    from predicates.lexer import T, tokenize

    scan = Scan(texts, [], scan_bytes)
    for k in range(len(scan)):
        piece = scan.piece(k)
        every = tokenize(Source(piece))
        tokens = {(t.start, t.end): t for t in every if t.kind is T.NUMBER}
        for (start, end), value in zip(scan.runs(k), scan.piece_values(k).tolist(), strict=True):
            token = tokens.get((start, end))
            if scan.flags[k] and piece[start:end].count(".") > 1:
                continue  # (a piece with such a run is not read from a template)
            if token is None:  # inside a longer token, or in a comment (which is no token)
                line = piece[:start].rpartition("\n")[2]
                assert any(t.start < start < t.end for t in every) or "--" in line, (piece, start, end)
                continue
            assert value == float(piece[start:end]), (piece, start, end)


def test_a_million_character_literal_is_the_parsers_error_on_either_path() -> None:
    m = mqo.Matcher(DDL)
    m.register_queries([f"SELECT * FROM B WHERE B.pressure > {i}" for i in range(100)])
    with_cache = None
    try:
        m.register_queries([f"SELECT * FROM B WHERE B.pressure > {'9' * 1001}"])
    except QueryError as err:
        with_cache = str(err)
    catalog = Catalog.from_ddl(DDL)
    try:
        front_end(f"SELECT * FROM B WHERE B.pressure > {'9' * 1001}", catalog, first_position=101)
    except QueryError as err:
        assert with_cache == str(err).replace("<string>", "<queries>")
    else:
        raise AssertionError("the literal was taken")


def test_the_shapes_with_plain_constants_are_read_from_their_templates() -> None:
    """The cache does read (the comparisons above are not only of the parser with itself):
    every shape whose constants only add to one comparison each (a window's predicates
    too; a factor or a window length is learned per value), not a constant in a string
    that differs from text to text, nor a predicate written twice, nor two constants
    adding to one comparison."""
    catalog = Catalog.from_ddl(DDL)
    read = []
    for shape in SHAPES:
        compiler = scanning_compiler(catalog)
        compiler.templates.fewest = 1
        texts = [text_of(shape, [str(i), str(2 * i), "3", "4"], f"q{i}") for i in range(1, 5)]
        predicates.compile_many(texts, catalog, compiler=compiler)
        read.append(compiler.templates.hits == len(texts))
    assert read == [True, True, True, True, True, True, False, True, False, False, True]


def test_texts_read_a_chunk_at_a_time_compile_as_read_at_once(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Chunks of a few texts, with a query file among them and names given twice
    (the parser then names the text): the records are those of one chunk."""
    import predicates.template_scan as template_scan

    catalog = Catalog.from_ddl(DDL)
    texts = [f"Query ID: s{i}\nSELECT * FROM B WHERE B.pressure >= {i}.5 AND B.temp < {i * 3}" for i in range(60)]
    texts[20] = f"{texts[20]};\n{texts[21].replace('s21', 'x21')};"
    texts += texts[:3]
    want = outcome(lambda: predicates.compile_many(texts[:-3], catalog, compiler=scanning_compiler(catalog)))
    monkeypatch.setattr(template_scan, "CHUNK", 7)
    got = outcome(lambda: predicates.compile_many(texts[:-3], catalog, compiler=scanning_compiler(catalog)))
    assert got == want and len(want[1]) == 61
    twice = outcome(lambda: predicates.compile_many(texts, catalog, compiler=scanning_compiler(catalog)))
    assert twice == outcome(lambda: _front_end_many(texts, catalog, 1))


FILE_PIECES = [
    "Query ID: s{i}\nSELECT * FROM B WHERE B.pressure >= {i}.5 AND B.temp < {j}",
    "SELECT * FROM B WHERE B.pressure >= {i} AND B.temp < {j} -- a note; with a ';'\n",
    "SELECT * FROM P WHERE P.level >= {i} AND P.name = 'a;{j}'",
    "Query ID: s{i}\n  \n\tSELECT * FROM B, H MAXWINDOW 10 WHERE B.pressure <= H.vib + {j}",
    "SELECT * FROM B WHERE B.pressure > {i}e{j}",
    "SELECT * FROM B WHERE B.pressure >> {i}",
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(st.integers(0, len(FILE_PIECES) - 1), st.integers(0, 40), st.integers(0, 999)), max_size=60),
    st.integers(1, 300),
    st.sampled_from(["", "\n", "  \n"]),
    st.booleans(),
)
def test_a_query_file_read_in_parts_compiles_as_read_whole(pieces, part, tail, two) -> None:  # type: ignore[no-untyped-def]
    """A long text is scanned in parts cut after a ``;`` (``CHUNK_CHARS``, lowered here
    to a few characters): the queries, names and errors (with their positions) are
    those of the text read whole and those of the parser, whatever the cuts fall on (a
    ``;`` in a comment or a string, blanks, a name given twice, a query the parser
    rejects, a text after it)."""
    import predicates.template_scan as template_scan

    catalog = Catalog.from_ddl(DDL)
    file = "".join(FILE_PIECES[k].format(i=i, j=j) + ";\n" for k, i, j in pieces) + tail
    texts = [file, "SELECT * FROM B WHERE B.temp > 1;" * 20] if two else [file]
    want = outcome(lambda: _front_end_many(texts, catalog, 1))
    whole = scanning_compiler(catalog)
    whole.templates.fewest = 1
    assert outcome(lambda: predicates.compile_many(texts, catalog, compiler=whole)) == want
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(template_scan, "CHUNK_CHARS", part)
        cut = scanning_compiler(catalog)
        cut.templates.fewest = 1
        for _ in range(2):  # (the cache cold, then warm)
            assert outcome(lambda: predicates.compile_many(texts, catalog, compiler=cut)) == want


def test_a_long_query_file_is_read_from_its_templates_in_parts(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The parts are read from templates (not handed to the parser): a file of 3,000
    queries cut into parts of about 2,000 characters compiles to one block of rows."""
    import predicates.template_scan as template_scan
    from predicates.records import RowQueries

    catalog = Catalog.from_ddl(DDL)
    file = "".join(
        f"Query ID: s{i}\nSELECT * FROM B WHERE B.pressure >= {i}.5 AND B.temp < {i * 3};\n" for i in range(3000)
    )
    monkeypatch.setattr(template_scan, "CHUNK_CHARS", 2000)
    parts = list(template_scan.text_parts(file))
    assert len(parts) > 100 and "".join(parts) == file and all(p.endswith(";\n") or p.endswith(";") for p in parts[:-1])
    compiler = scanning_compiler(catalog)
    rows = predicates.compile_many([file], catalog, compiler=compiler)
    assert isinstance(rows, RowQueries) and compiler.templates.hits == 3000
    assert list(rows.names) == [f"s{i}" for i in range(3000)]
    assert summary(rows[1234]) == summary(front_end(file, catalog)[1234])


def test_a_short_text_before_a_long_one_is_scanned_with_it(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A text of fewer pieces than the cache scans at once, then a text cut into parts:
    the first batch holds both (not the short text alone, which would be too few to
    scan and leave every text to the parser)."""
    import predicates.template_scan as template_scan

    catalog = Catalog.from_ddl(DDL)
    one = "Query ID: s0\nSELECT * FROM B WHERE B.pressure >= 1.5 AND B.temp < 3;"
    file = "".join(
        f"Query ID: t{i}\nSELECT * FROM B WHERE B.pressure >= {i}.5 AND B.temp < {i * 3};\n" for i in range(500)
    )
    monkeypatch.setattr(template_scan, "CHUNK_CHARS", 3000)
    for texts in ([one, file], ["", file]):
        compiler = scanning_compiler(catalog)
        rows = predicates.compile_many(texts, catalog, compiler=compiler)
        assert compiler.templates.hits == len(rows) == 500 + bool(texts[0])


def test_texts_of_many_shapes_and_a_few_texts_go_to_the_parser_unscanned() -> None:
    """A call of fewer than FEWEST pieces, and a call whose first 256 pieces are mostly
    of shapes of their own, are not scanned (the comparison caches serve them)."""
    from predicates.template_cache import FEWEST

    catalog = Catalog.from_ddl(DDL)
    compiler = scanning_compiler(catalog)
    plain = [f"SELECT * FROM B WHERE B.pressure > {i}" for i in range(FEWEST - 1)]
    predicates.compile_many(plain, catalog, compiler=compiler)
    assert compiler.templates.learned == 0
    # (a factor is no parameter: each text is a template of its own)
    shapes = [f"SELECT * FROM B WHERE B.pressure * {k} > 1 AND B.temp < {k}" for k in range(1, 301)]
    got = predicates.compile_many(shapes, catalog, compiler=compiler)
    assert compiler.templates.hits < 16
    assert [summary(q) for q in got] == [summary(q) for q in _front_end_many(shapes, catalog, 1)]
