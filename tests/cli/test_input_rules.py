"""One set of rules for input values, whichever reader runs (runtime/io/stream_rows.py,
csv_reader.py, parquet_reader.py).

CSV files are read by Arrow's reader unless a row breaks the rules; then the whole
file is read again by the exact reader. Each case is checked on both paths: once as
it is, once with a bad row added (read with ``on_bad_row='skip'``), which sends the
file down the exact path; the good rows must come out the same.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from predicates import Catalog
from runtime.io.csv_reader import CsvChunks, split_records
from runtime.io.inputs import InputSpec, StreamData, read_stream
from runtime.io.stream_rows import INT64_MAX, INT64_MIN, InputError
from tests.cli.clirun import match, strict_lines, write

DDL = "REGISTER STREAM S (x FLOAT, n INTEGER, s STRING, b BOOLEAN);"
SCHEMA = Catalog.from_ddl(DDL).require("S")
HEADER = "ts,x,n,s,b\n"
BAD = "99,not-a-number,1,k,true\n"  # a bad row: the exact path reads the file


def read(tmp: Path, body: str, *, exact: bool, name: str = "s.csv") -> StreamData:
    path = tmp / name
    path.write_text(HEADER + body + (BAD if exact else ""), encoding="utf-8")
    data = read_stream(InputSpec("S", str(path)), SCHEMA, "skip")
    if exact:
        assert [r.value for r in data.rejected] == ["not-a-number"]
    else:
        assert data.lines is None, "the fast path was expected to read this file"
    return data


def rows(data: StreamData) -> list[dict[str, Any]]:
    return [{"ts": data.ts[i], **data.values(i)} for i in range(len(data))]


BOTH = pytest.mark.parametrize("exact", [False, True], ids=["arrow", "exact"])


# ------------------------------------------------------------------ integers


@BOTH
def test_integers_are_exact_64_bit(tmp_path: Path, exact: bool) -> None:
    body = f"1,0,9007199254740993,a,true\n2,0,{INT64_MAX},a,true\n3,0,{INT64_MIN},a,true\n4,0,-0,a,true\n"
    assert [r["n"] for r in rows(read(tmp_path, body, exact=exact))] == [2**53 + 1, INT64_MAX, INT64_MIN, 0]


@pytest.mark.parametrize(
    "text",
    [str(INT64_MAX + 1), str(INT64_MIN - 1), "99999999999999999999", "1" * 300_000],
    ids=["max+1", "min-1", "20-digits", "300k-digits"],
)
def test_integers_beyond_64_bits_are_bad_rows(tmp_path: Path, text: str) -> None:
    path = write(tmp_path / "s.csv", HEADER + "1,0,5,a,true\n" + f"2,0,{text},a,true\n")
    data = read_stream(InputSpec("S", path), SCHEMA, "skip")
    assert [r["n"] for r in rows(data)] == [5]
    (bad,) = data.rejected
    assert (bad.line, bad.column) == (3, "n") and "out of range for INTEGER" in bad.reason
    with pytest.raises(InputError, match=r"s\.csv:3: column 'n': .* out of range for INTEGER \(a 64-bit integer"):
        read_stream(InputSpec("S", path), SCHEMA, "error")


def test_integer_spellings_python_would_take_but_arrow_would_not(tmp_path: Path) -> None:
    for text in ("1_000", "٣", "1e3", "1.0", "0x10"):
        data = read_stream(InputSpec("S", write(tmp_path / "s.csv", HEADER + f"1,0,{text},a,true\n")), SCHEMA, "skip")
        assert len(data) == 0 and "not an integer" in data.rejected[0].reason, text


# -------------------------------------------------------------------- floats


@pytest.mark.parametrize("text", ["1e400", "-1e400", "inf", "-Infinity", "INF", "9" * 300_000])
def test_floats_that_are_not_finite_are_bad_rows(tmp_path: Path, text: str) -> None:
    path = write(tmp_path / "s.csv", HEADER + f"1,{text},1,a,true\n2,2.5,1,a,true\n")
    data = read_stream(InputSpec("S", path), SCHEMA, "skip")
    assert [r["x"] for r in rows(data)] == [2.5]
    (bad,) = data.rejected
    assert bad.column == "x" and "not a finite number" in bad.reason
    assert len(bad.message()) < 300  # a 300,000-digit value is cut short in the message


@BOTH
def test_float_spellings_and_nan_as_null(tmp_path: Path, exact: bool) -> None:
    body = "1,+1.5,1,a,t\n2,.5,1,a,t\n3,5.,1,a,t\n4,1E2,1,a,t\n5, 7 ,1,a,t\n6,NaN,1,a,t\n7,-nan,1,a,t\n8,1e-400,1,a,t\n"
    assert [r["x"] for r in rows(read(tmp_path, body, exact=exact))] == [1.5, 0.5, 5.0, 100.0, 7.0, None, None, 0.0]


def test_ts_must_be_finite(tmp_path: Path) -> None:
    path = write(tmp_path / "s.csv", HEADER + "1,1,1,a,t\ninf,1,1,a,t\nNaN,1,1,a,t\n1e999,1,1,a,t\n")
    data = read_stream(InputSpec("S", path), SCHEMA, "skip")
    assert data.ts.tolist() == [1.0]
    assert [(r.line, r.column) for r in data.rejected] == [(3, "ts"), (4, "ts"), (5, "ts")]


# ---------------------------------------------------------- NULL and strings


@BOTH
def test_quoted_text_is_text_and_unquoted_null_spellings_are_null(tmp_path: Path, exact: bool) -> None:
    body = '1,1,1,"nan",t\n2,1,1,nan,t\n3,1,1,"",t\n4,1,1,,t\n5,1,1,"NULL",t\n6,1,1,NULL,t\n7,1,1, padded ,t\n'
    got = [r["s"] for r in rows(read(tmp_path, body, exact=exact))]
    assert got == ["nan", None, "", None, "NULL", None, " padded "]


@BOTH
def test_quoted_fields_with_commas_quotes_and_numbers(tmp_path: Path, exact: bool) -> None:
    body = '1,"2.5",1,"a, b",t\n2,1,"7","say ""hi""",t\n'
    got = rows(read(tmp_path, body, exact=exact))
    assert [(r["x"], r["n"], r["s"]) for r in got] == [(2.5, 1, "a, b"), (1.0, 7, 'say "hi"')]


def test_a_line_break_inside_quotes_and_line_numbers_after_it(tmp_path: Path) -> None:
    path = write(tmp_path / "s.csv", HEADER + '1,1,1,"two\nlines",t\n2,oops,1,a,t\n')
    data = read_stream(InputSpec("S", path), SCHEMA, "skip")
    assert [r["s"] for r in rows(data)] == ["two\nlines"]
    assert [r.line for r in data.rejected] == [4]


def test_an_unclosed_quote_is_named(tmp_path: Path) -> None:
    path = write(tmp_path / "s.csv", HEADER + '1,1,1,a,t\n2,1,1,"open,t\n3,1,1,a,t\n')
    with pytest.raises(InputError, match=r"s\.csv:3: a quoted field .* never closed"):
        read_stream(InputSpec("S", path), SCHEMA, "skip")


@pytest.mark.parametrize("column", ["s", "x"])
def test_a_field_over_131072_bytes_is_not_fatal(tmp_path: Path, column: str) -> None:
    long = "y" * 200_000
    line = f"1,1,1,{long},t\n" if column == "s" else f"1,{long},1,a,t\n"
    data = read_stream(InputSpec("S", write(tmp_path / "s.csv", HEADER + line + "2,2,2,b,f\n")), SCHEMA, "skip")
    if column == "s":
        assert [r["s"] for r in rows(data)] == [long, "b"]
    else:
        assert [r["x"] for r in rows(data)] == [2.0]
        assert data.rejected[0].column == "x" and data.rejected[0].value == long


@pytest.mark.parametrize("rows_before", [1, 3000], ids=["first-row", "past-the-first-block"])
@pytest.mark.parametrize("chunked", [False, True], ids=["whole", "chunks"])
def test_a_row_that_is_not_utf8_is_a_bad_row_named_by_its_line(tmp_path: Path, rows_before: int, chunked: bool) -> None:
    """A byte that is not UTF-8 makes its row bad, named by line and column, whether
    the file is read whole or in chunks and however far into the file (a text reader
    decodes a block ahead: the error once blamed the header, or gave a byte offset
    within a block); with ``skip`` the other rows are kept and the row goes to the
    rejects with the byte shown as ``\\xff``."""
    good = "".join(f"{i},1.5,{i},t{i},t\n" for i in range(rows_before)).encode()
    path = tmp_path / "s.csv"
    path.write_bytes(HEADER.encode() + good + b"99,2.5,7,caf\xff,t\n" + b"100,3.5,8,ok,f\n")
    line = rows_before + 2

    def read_all(on_bad_row: str) -> tuple[list[float], list[Any]]:
        if not chunked:
            data = read_stream(InputSpec("S", str(path)), SCHEMA, on_bad_row)
            return data.ts.tolist(), data.rejected
        parts = list(CsvChunks("S", str(path), SCHEMA, on_bad_row, 1000))
        return [t for p in parts for t in p.ts.tolist()], [r for p in parts for r in p.rejected]

    with pytest.raises(InputError) as err:
        read_all("error")
    assert str(err.value) == f"{path}:{line}: column 's': not UTF-8 text (the byte 0xff at character 13 of the row)"
    ts, rejected = read_all("skip")
    assert ts == [*map(float, range(rows_before)), 100.0]
    (bad,) = rejected
    assert (bad.line, bad.column, bad.value, bad.raw) == (line, "s", "caf\\xff", "99,2.5,7,caf\\xff,t")


def test_a_header_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    path.write_bytes(b"ts,x,n,s\xff,b\n1,1,1,a,t\n")
    with pytest.raises(InputError, match=r"s\.csv:1: not UTF-8 text \(the byte 0xff at character 9 of the header\)"):
        read_stream(InputSpec("S", str(path)), SCHEMA, "skip")


def test_record_splitter_agrees_with_the_csv_module_on_ordinary_files() -> None:
    import csv

    lines = ['a,b,"c,d"\r\n', '"x""y",,z\n', 'plain,"",""""\n', '"multi\n', 'line",2,3\n']
    ours = [fields for _, fields, _, _ in split_records(lines, "f")]
    assert ours == list(csv.reader(lines))


def test_cli_quoted_nan_is_the_same_text_with_or_without_a_bad_row_elsewhere(tmp_path: Path) -> None:
    ddl = write(tmp_path / "s.ddl", DDL)
    queries = write(tmp_path / "q.mqo", "SELECT S.s FROM S;\n")
    outs = []
    for extra in ("", BAD):
        data = write(tmp_path / "s.csv", HEADER + '1,1,1,"nan",t\n2,1,1,nan,t\n' + extra)
        proc = match("--on-bad-row", "skip", "-q", schema=ddl, queries=queries, inputs=[f"S={data}"])
        assert proc.returncode == 0, proc.stderr
        outs.append([r["values"]["S.s"] for r in strict_lines(proc.stdout)])
    assert outs == [["nan", None], ["nan", None]]


def test_cli_out_of_range_integer_names_file_line_and_column(tmp_path: Path) -> None:
    ddl = write(tmp_path / "s.ddl", DDL)
    queries = write(tmp_path / "q.mqo", "SELECT S.n FROM S;\n")
    data = write(tmp_path / "s.csv", HEADER + "1,1,99999999999999999999,a,t\n")
    proc = match(schema=ddl, queries=queries, inputs=[f"S={data}"])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"{data}:2: column 'n': '99999999999999999999' is out of range for INTEGER" in proc.stderr


def test_cli_integer_beyond_2_53_reaches_the_output_exactly(tmp_path: Path) -> None:
    ddl = write(tmp_path / "s.ddl", DDL)
    queries = write(tmp_path / "q.mqo", "SELECT S.n FROM S WHERE S.n > 9007199254740992;\n")
    data = write(tmp_path / "s.csv", HEADER + "1,1,9007199254740993,a,t\n2,1,9007199254740992,a,t\n")
    proc = match("-q", schema=ddl, queries=queries, inputs=[f"S={data}"])
    assert proc.returncode == 0, proc.stderr
    assert [r["values"]["S.n"] for r in strict_lines(proc.stdout)] == [9007199254740993]


# ------------------------------------------------------------------- Parquet


def parquet(tmp: Path, columns: dict[str, Any]) -> str:
    path = tmp / "s.parquet"
    pq.write_table(pa.table(columns), path)
    return str(path)


GOOD = {
    "ts": pa.array([1.0, 2.0]),
    "x": pa.array([1.5, 2.5]),
    "n": pa.array([1, 2], pa.int64()),
    "s": pa.array(["a", "b"]),
    "b": pa.array([True, False]),
}


@pytest.mark.parametrize(
    ("column", "values", "said"),
    [
        ("x", pa.array(["150", "2"]), ["column 'x'", "Parquet string column", "declares it FLOAT", "floating-point"]),
        ("n", pa.array([True, False]), ["column 'n'", "Parquet bool column", "declares it INTEGER", "integer column"]),
        ("n", pa.array([1.0, 2.0]), ["column 'n'", "Parquet double column", "INTEGER"]),
        ("s", pa.array([1, 2]), ["column 's'", "Parquet int64 column", "declares it STRING", "a string column"]),
        ("b", pa.array([1, 0]), ["column 'b'", "declares it BOOLEAN"]),
        ("ts", pa.array(["1", "2"]), ["column 'ts'", "the event time takes an integer or floating-point column"]),
    ],
)
@pytest.mark.parametrize("on_bad_row", ["error", "skip"])
def test_parquet_column_of_a_wrong_type_names_column_and_types(
    tmp_path: Path, column: str, values: pa.Array, said: list[str], on_bad_row: str
) -> None:
    path = parquet(tmp_path, {**GOOD, column: values})
    with pytest.raises(InputError) as err:
        read_stream(InputSpec("S", path), SCHEMA, on_bad_row)
    for fragment in [path, *said]:
        assert fragment in str(err.value)


def test_parquet_casts_that_are_allowed(tmp_path: Path) -> None:
    columns = {
        "ts": pa.array([1, 2], pa.int32()),
        "x": pa.array([3, 4], pa.int16()),
        "n": pa.array([5, 6], pa.uint8()),
        "s": pa.array(["k", "k"]).dictionary_encode(),
        "b": pa.array([None, None], pa.null()),
    }
    data = read_stream(InputSpec("S", parquet(tmp_path, columns)), SCHEMA, "error")
    assert rows(data) == [
        {"ts": 1.0, "x": 3.0, "n": 5, "s": "k", "b": None},
        {"ts": 2.0, "x": 4.0, "n": 6, "s": "k", "b": None},
    ]
    assert data.columns["n"].type == pa.int64() and data.columns["x"].type == pa.float64()
    assert isinstance(data.values(0)["n"], int) and isinstance(data.values(0)["x"], float)


def test_parquet_bad_rows_are_named_by_row_and_honour_skip(tmp_path: Path) -> None:
    columns = {
        "ts": pa.array([1.0, None, 3.0, 4.0, float("nan")]),
        "x": pa.array([1.0, 2.0, float("inf"), float("nan"), 5.0]),
        "n": pa.array([1, 2, 3, 2**64 - 1, 5], pa.uint64()),
        "s": pa.array(["a"] * 5),
        "b": pa.array([True] * 5),
    }
    path = parquet(tmp_path, columns)
    with pytest.raises(InputError, match=r"s\.parquet: row 2: column 'ts': the event time must not be NULL"):
        read_stream(InputSpec("S", path), SCHEMA, "error")
    data = read_stream(InputSpec("S", path), SCHEMA, "skip")
    assert rows(data) == [{"ts": 1.0, "x": 1.0, "n": 1, "s": "a", "b": True}]
    assert [(r.line, r.column) for r in data.rejected] == [(2, "ts"), (3, "x"), (4, "n"), (5, "ts")]
    assert all(r.as_dict()["row"] == r.line for r in data.rejected)
    assert "out of range for a 64-bit integer" in data.rejected[2].reason


def test_parquet_duplicate_ids_are_named_by_row(tmp_path: Path) -> None:
    path = parquet(tmp_path, {**GOOD, "id": pa.array([7, 7])})
    with pytest.raises(InputError, match=r"row 2: column 'id': id 7 of stream S is already used by the row at row 1$"):
        read_stream(InputSpec("S", path), SCHEMA, "error")
