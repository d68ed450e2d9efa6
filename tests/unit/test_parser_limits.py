"""What the parser refuses up front, with a position, instead of failing later: deeply
nested expressions (a RecursionError anywhere downstream), number literals too big to
convert, and DDL column names no query could use."""

from __future__ import annotations

from pathlib import Path

import pytest

import mqo
from predicates import QueryError
from predicates.parser import MAX_DEPTH, parse_ddl
from tests.cli.clirun import match, write
from tests.cli.clirun import mqo as run_mqo

DDL = "REGISTER STREAM B (x FLOAT, y FLOAT);"


def register(query: str) -> mqo.Matcher:
    m = mqo.Matcher(DDL)
    m.register_query(query)
    return m


@pytest.mark.parametrize(
    "where",
    [
        " + ".join(["B.x"] * 2000) + " > 1",  # a 2,000-term sum
        "(" * 1000 + "B.x" + ")" * 1000 + " > 1",  # 1,000 nested parentheses
        "(" * 1000 + "B.x > 1" + ")" * 1000,
        "NOT " * 1000 + "B.x > 1",
        "B.x > " + "- " * 1000 + "B.y",
        "B.x > " + "B.y * (" * 1000 + "1" + ")" * 1000,
    ],
    ids=["sum", "parens-around-value", "parens-around-condition", "not", "negation", "right-nested"],
)
def test_deep_nesting_is_a_positioned_error(where: str) -> None:
    with pytest.raises(QueryError) as err:
        register(f"SELECT * FROM B WHERE {where}")
    text = str(err.value)
    assert f"nested too deeply (more than {MAX_DEPTH} levels" in text
    assert text.startswith("<query>:1:") and "^" in text


def test_nesting_within_the_bound_registers_and_matches() -> None:
    terms = MAX_DEPTH - 2  # the sum's operators plus the comparison
    m = register("SELECT * FROM B WHERE " + " + ".join(["B.x"] * terms) + f" >= {terms}")
    assert len(m.push("B", 1.0, {"x": 1.0, "y": 0.0})) == 1
    assert m.push("B", 2.0, {"x": 0.5, "y": 0.0}) == []
    m = register("SELECT * FROM B WHERE " + "(" * (MAX_DEPTH - 5) + "B.x > 1" + ")" * (MAX_DEPTH - 5))
    assert len(m.push("B", 1.0, {"x": 2.0, "y": 0.0})) == 1


def test_long_flat_conjunctions_are_not_nesting() -> None:
    m = register("SELECT * FROM B WHERE " + " AND ".join(f"B.x > {i}" for i in range(2000)))
    assert len(m.push("B", 1.0, {"x": 5000.0, "y": 0.0})) == 1


@pytest.mark.parametrize(
    ("literal", "said"),
    [
        ("1" * 5000, "more than 1000 significant digits"),
        ("1e99999999", "exponent out of range"),
        ("0e99999999", "exponent out of range"),
        ("0." + "0" * 1500 + "1", "too close to zero"),
        ("2e308", "too large"),
    ],
    ids=["5000-digits", "huge-exponent", "zero-huge-exponent", "tiny", "beyond-double"],
)
def test_number_literals_are_checked_before_they_are_converted(literal: str, said: str) -> None:
    with pytest.raises(QueryError, match=said):
        register(f"SELECT * FROM B WHERE B.x > {literal}")


def test_cli_deep_query_exits_2_without_a_traceback(tmp_path: Path) -> None:
    schema = write(tmp_path / "s.ddl", DDL)
    queries = write(tmp_path / "q.mqo", "SELECT * FROM B WHERE " + " + ".join(["B.x"] * 2000) + " > 1;\n")
    proc = run_mqo("explain", "--schema", schema, "--queries", queries)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "RecursionError" not in proc.stderr
    assert f"{queries}:1:" in proc.stderr and "nested too deeply" in proc.stderr


# ----------------------------------------------------------------------- DDL


@pytest.mark.parametrize("name", ["select", "SELECT", '"select"', "from", "where", "and"])
def test_a_reserved_word_cannot_name_a_column(name: str) -> None:
    text = f"REGISTER STREAM B (x FLOAT, {name} INTEGER);"
    with pytest.raises(QueryError) as err:
        parse_ddl(text)
    message = str(err.value)
    assert "reserved word" in message and "cannot name a column" in message
    assert message.startswith(f"<string>:1:{text.index(name) + 1}:")


def test_words_that_are_not_reserved_still_name_columns() -> None:
    m = mqo.Matcher("REGISTER STREAM B (max FLOAT, query FLOAT, lt FLOAT, stream FLOAT);")
    m.register_query("SELECT B.max FROM B WHERE B.query > 1 AND B.lt < 5 AND B.stream = 2")
    assert len(m.push("B", 1.0, {"max": 1.0, "query": 2.0, "lt": 3.0, "stream": 2.0})) == 1


def test_cli_reserved_column_is_a_positioned_error(tmp_path: Path) -> None:
    schema = write(tmp_path / "s.ddl", "REGISTER STREAM B (\n  x FLOAT,\n  select INTEGER\n);\n")
    queries = write(tmp_path / "q.mqo", "SELECT * FROM B;\n")
    data = write(tmp_path / "b.csv", "ts,x,select\n1,1,1\n")
    proc = match(schema=schema, queries=queries, inputs=[f"B={data}"])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"{schema}:3:3:" in proc.stderr and "reserved word" in proc.stderr
