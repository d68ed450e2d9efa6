"""``mqo match`` reads its inputs a chunk at a time: whatever the chunk size, a run
writes what reading every file whole writes (the way it was done before: read every
input, merge, number, match), with the same results in the same order, the same late
tuples, the same rejected rows (the reject file lists them as they are found: compared
as sets) and the same error for a file that stops the run."""

from __future__ import annotations

import heapq
import json
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings

from mqo import Matcher
from runtime.io.input_chunks import arrival_order, merged_rows, number_in_arrival_order
from runtime.io.inputs import InputError, InputSpec, read_inputs
from runtime.io.writers import LinesFile, open_writer
from runtime.local.match import Progress, Summary, match_all, run_match
from runtime.stopping import deferred_stop

pytestmark = pytest.mark.filterwarnings("ignore:late tuple:UserWarning")

DDL = "REGISTER STREAM A (x INTEGER, tag STRING);\nREGISTER STREAM B (y INTEGER);\n"
QUERIES = (
    "Query ID: pair\nSELECT * FROM A, B MAXWINDOW 3 sec WHERE A.x = B.y;\n"
    "Query ID: big\nSELECT A.x, A.tag FROM A WHERE A.x > 5;\n"
    "Query ID: per_tag\nSELECT A.tag, COUNT(*), SUM(A.x) FROM A [RANGE 2 sec SLIDE 1 sec] GROUP BY A.tag;\n"
    "Query ID: last3\nSELECT B.y, COUNT(*) FROM B [ROWS 3] GROUP BY B.y;\n"
)
SIZES = [1, 2, 7]


def matcher(emit: str = "arrival", lateness: float = 1.0) -> Matcher:
    m = Matcher(DDL, emit=emit, allowed_lateness=lateness)
    m.register_queries(QUERIES)
    return m


def outputs(out: Path) -> tuple[list[str], list[str], list[str]]:
    """The results in order, the late tuples in order, the rejected rows as a set."""

    def lines(path: Path) -> list[str]:
        return path.read_text().splitlines() if path.exists() else []

    return lines(out), lines(Path(f"{out}.late.jsonl")), sorted(lines(Path(f"{out}.rejects.jsonl")))


def whole(specs: list[InputSpec], out: Path, on_bad_row: str, **settings: Any) -> tuple[Any, ...]:
    """The run as it was made before inputs were read in chunks: every file whole."""
    m = matcher(**settings)
    data = read_inputs(specs, m.ensure_plan().catalog, on_bad_row)
    which, rows = arrival_order(data)
    number_in_arrival_order(data, which, rows)
    summary = Summary(output=str(out))
    with (
        open_writer(str(out), "jsonl", m.value_types()) as writer,
        LinesFile(f"{out}.late.jsonl", "late") as late,
        LinesFile(f"{out}.rejects.jsonl", "rejects") as rejects,
        deferred_stop() as stop,
    ):
        rejects.write(row.as_dict() for d in data for row in d.rejected)
        done = match_all(m, data, which, rows, writer, late, stop, Progress(0, False), summary, writer)
    per_stream: dict[str, int] = {}
    for d in data:
        per_stream[d.stream] = per_stream.get(d.stream, 0) + len(d)
    return (done, per_stream, summary.results, *outputs(out))


def chunked(specs: list[InputSpec], out: Path, on_bad_row: str, chunk_rows: int, **settings: Any) -> tuple[Any, ...]:
    s = run_match(matcher(**settings), specs, str(out), "jsonl", on_bad_row=on_bad_row, chunk_rows=chunk_rows)
    assert s.total == s.tuples and s.interrupted is None
    assert s.late == len(outputs(out)[1]) and s.rejected == len(outputs(out)[2])
    return (s.tuples, s.per_stream, s.results, *outputs(out))


def same_as_whole(tmp: Path, specs: list[InputSpec], on_bad_row: str = "skip", **settings: Any) -> tuple[Any, ...]:
    expected = whole(specs, tmp / "whole.jsonl", on_bad_row, **settings)
    for size in SIZES:
        got = chunked(specs, tmp / f"chunks{size}.jsonl", on_bad_row, size, **settings)
        assert got == expected, f"chunks of {size} rows"
    assert chunked(specs, tmp / "big.jsonl", on_bad_row, 100_000, **settings) == expected
    return expected


def write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def csv_of(header: str, rows: list[tuple[Any, ...]]) -> str:
    return header + "\n" + "".join(",".join(str(v) for v in row) + "\n" for row in rows)


@pytest.mark.parametrize("emit", ["arrival", "ordered"])
def test_files_of_a_stream_late_tuples_and_ties_as_read_whole(tmp_path: Path, emit: str) -> None:
    # two files of A (automatic ids across both), ties of ts across the inputs, rows out
    # of ts order (late beyond the allowed second), a bad row in each of A's files
    a1 = [(0, 1, "p"), (1, 6, "q"), (1, 2, "p"), (4, 7, "q"), (2, 3, "p"), (5, "oops", "q"), (6, 8, "p"), (9, 9, "q")]
    a2 = [(1, 2, "r"), (3, 6, "p"), (3, 7, "r"), (0.5, 1, "r"), (7, "", "p"), (8, 3, "r")]
    b = [(1, 2), (1, 6), (3, 7), (3, 3), (2.5, 8), (6, 9), (9, 1), (12, 3)]
    specs = [
        InputSpec("A", write(tmp_path / "a1.csv", csv_of("ts,x,tag", a1))),
        InputSpec("B", write(tmp_path / "b.csv", csv_of("ts,y", b))),
        InputSpec("a", write(tmp_path / "a2.csv", csv_of("ts,x,tag", a2) + "x,1,p\n")),
    ]
    tuples, per_stream, results, found, late, rejected = same_as_whole(tmp_path, specs, emit=emit)
    assert len(found) == results and any(json.loads(r)["query"] == "pair" for r in found)
    assert tuples == 21 and per_stream == {"A": 13, "B": 8}
    assert results and late and len(rejected) == 2


def test_given_ids_repeated_across_chunks_and_files(tmp_path: Path) -> None:
    """A repeated id is a bad row of the row after its first use in the file; an id of
    an earlier file is a bad row of the later file even where that row arrives first."""
    a1 = [(0, 1, 1, "p"), (1, 2, 6, "q"), (2, 1, 2, "p"), (5, 9, 7, "q"), (6, 3, 8, "p"), (7, 2, 1, "q")]
    a2 = [(0.5, 9, 4, "r"), (1, 10, 6, "p"), (3, 10, 7, "r"), (4, 11, 8, "p"), (8, 1, 2, "r")]
    b = [(0, 5, 1), (2, 5, 6), (3, 6, 7)]
    specs = [
        InputSpec("A", write(tmp_path / "a1.csv", csv_of("ts,id,x,tag", a1))),
        InputSpec("A", write(tmp_path / "a2.csv", csv_of("ts,id,x,tag", a2))),
        InputSpec("B", write(tmp_path / "b.csv", csv_of("ts,id,y", b))),
    ]
    *_, rejected = same_as_whole(tmp_path, specs)
    reasons = sorted((Path(r["file"]).name, r["line"], r["reason"]) for r in map(json.loads, rejected))
    assert reasons == [
        ("a1.csv", 4, "id 1 of stream A is already used by the row at line 2"),
        ("a1.csv", 7, "id 2 of stream A is already used by the row at line 3"),
        ("a2.csv", 2, f"id 9 of stream A is already used by the row at line 5 of {tmp_path / 'a1.csv'}"),
        ("a2.csv", 4, "id 10 of stream A is already used by the row at line 3"),
        ("a2.csv", 6, f"id 1 of stream A is already used by the row at line 2 of {tmp_path / 'a1.csv'}"),
        ("b.csv", 3, "id 5 of stream B is already used by the row at line 2"),
    ]


def test_ids_past_2_53_are_told_apart_and_kept_exactly(tmp_path: Path) -> None:
    """Ids where doubles stop being exact: 2**53 and 2**53 + 1 are two ids, and an id of
    an earlier file is a bad row of the later one that names its first use."""
    big = 2**53
    a1 = [(0, big, 6, "p"), (1, big + 1, 7, "q"), (2, 2**63 - 1, 8, "p")]
    a2 = [(0.5, big + 1, 9, "r"), (3, -(2**63), 10, "p"), (4, big - 1, 11, "r")]
    specs = [
        InputSpec("A", write(tmp_path / "a1.csv", csv_of("ts,id,x,tag", a1))),
        InputSpec("A", write(tmp_path / "a2.csv", csv_of("ts,id,x,tag", a2))),
    ]
    _, _, _, found, _, rejected = same_as_whole(tmp_path, specs)
    chosen = [json.loads(r)["ids"]["A"] for r in found if json.loads(r)["query"] == "big"]
    assert chosen == [big, big + 1, 2**63 - 1, -(2**63), big - 1]
    assert [(json.loads(r)["line"], json.loads(r)["reason"]) for r in rejected] == [
        (2, f"id {big + 1} of stream A is already used by the row at line 3 of {specs[0].path}")
    ]


def test_parquet_row_groups_and_bad_rows(tmp_path: Path) -> None:
    path = tmp_path / "a.parquet"
    table = pa.table(
        {
            "ts": pa.array([0.0, 1.0, None, 3.0, 2.0, 4.0, float("inf"), 6.0, 5.5, 9.0]),
            "x": pa.array([1, 6, 2, 7, 3, 8, 9, 6, 1, 2], pa.int64()),
            "tag": ["p", "q", "p", "q", "p", "q", "p", "q", "r", "r"],
        }
    )
    pq.write_table(table, path, row_group_size=3)
    b = [(0, 6), (2, 7), (2, 3), (5, 6), (10, 2)]
    specs = [InputSpec("A", str(path)), InputSpec("B", write(tmp_path / "b.csv", csv_of("ts,y", b)))]
    *_, rejected = same_as_whole(tmp_path, specs)
    assert sorted(json.loads(r)["row"] for r in rejected) == [3, 7]


def errors(tmp: Path, specs: list[InputSpec], on_bad_row: str) -> set[str]:
    """The error a run stops with, reading whole and in chunks of each size (less what a
    chunked run adds when it matched tuples before the error: that its output is partial)."""
    found = set()
    with pytest.raises(InputError) as whole_error:
        whole(specs, tmp / "whole.jsonl", on_bad_row)
    found.add(str(whole_error.value))
    for size in SIZES:
        with pytest.raises(InputError) as err:
            run_match(matcher(), specs, str(tmp / f"c{size}.jsonl"), "jsonl", on_bad_row=on_bad_row, chunk_rows=size)
        found.add(str(err.value).split("; the run stopped there, and ")[0])
    return found


def test_the_error_a_run_stops_with_is_the_one_reading_whole_meets_first(tmp_path: Path) -> None:
    # A's file has a bad value near its end; B's file, read after it, one at its start
    a = [(i, i % 5, "p") for i in range(12)] + [(12, "oops", "p")]
    b = [(0, "zz")] + [(i, i) for i in range(1, 5)]
    specs = [
        InputSpec("A", write(tmp_path / "a.csv", csv_of("ts,x,tag", a))),
        InputSpec("B", write(tmp_path / "b.csv", csv_of("ts,y", b))),
    ]
    assert errors(tmp_path, specs, "error") == {f"{specs[0].path}:14: column 'x': 'oops' is not an integer"}
    # a repeated id in A (early) and a bad value (late): the bad value, as the whole file is read first
    a_ids = [(i, i if i != 3 else 1, i % 5, "p") for i in range(12)] + [(12, 40, "oops", "p")]
    specs[0] = InputSpec("A", write(tmp_path / "a_ids.csv", csv_of("ts,id,x,tag", a_ids)))
    assert errors(tmp_path, specs, "error") == {f"{specs[0].path}:14: column 'x': 'oops' is not an integer"}
    # ids repeated across the files of a stream, the later file's row first in time
    a2 = [(0.5, 7, 1, "q"), (1.5, 41, 2, "q")]
    a_ok = [(i, i, i % 5, "p") for i in range(12)]
    specs = [
        InputSpec("A", write(tmp_path / "a_ok.csv", csv_of("ts,id,x,tag", a_ok))),
        InputSpec("A", write(tmp_path / "a2.csv", csv_of("ts,id,x,tag", a2))),
    ]
    assert errors(tmp_path, specs, "error") == {
        f"{specs[1].path}:2: column 'id': id 7 of stream A is already used by the row at line 9 of {specs[0].path}"
    }
    # an unclosed quote stops a run even with skip
    specs = [
        InputSpec("A", write(tmp_path / "a_ok2.csv", csv_of("ts,x,tag", [(i, i, "p") for i in range(9)]))),
        InputSpec("B", write(tmp_path / "b_open.csv", 'ts,y\n0,1\n1,"2\n')),
    ]
    assert errors(tmp_path, specs, "skip") == {
        f"{specs[1].path}:3: a quoted field that starts on this line is never closed"
    }


rows_of = st.lists(
    st.tuples(st.integers(0, 12), st.integers(-1, 9), st.sampled_from(["p", "q", ""]), st.booleans()),
    max_size=14,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    files=st.lists(st.tuples(st.sampled_from(["A", "B"]), rows_of), min_size=1, max_size=3),
    ids=st.booleans(),
    emit=st.sampled_from(["arrival", "ordered"]),
    size=st.sampled_from([1, 2, 3, 7]),
)
def test_any_inputs_match_as_read_whole(
    tmp_path_factory: pytest.TempPathFactory, files: list[tuple[str, list[Any]]], ids: bool, emit: str, size: int
) -> None:
    """Random files (ts out of order and tied, a few bad values, ids given and repeated
    or automatic) give what reading them whole gives, whatever the chunk size."""
    tmp = tmp_path_factory.mktemp("chunks")
    specs = []
    for n, (stream, rows) in enumerate(files):
        lines = ["ts" + (",id" if ids else "") + (",x,tag" if stream == "A" else ",y")]
        for ts, value, tag, bad in rows:
            field = "oops" if bad and value < 0 else str(value)
            ident = [str((ts * 7 + value) % 11)] if ids else []
            lines.append(",".join([str(ts / 2), *ident, field, *([tag] if stream == "A" else [])]))
        specs.append(InputSpec(stream, write(tmp / f"{n}.csv", "\n".join(lines) + "\n")))
    expected = whole(specs, tmp / "whole.jsonl", "skip", emit=emit)
    assert chunked(specs, tmp / "chunks.jsonl", "skip", size, emit=emit) == expected


@pytest.mark.parametrize("order", ["sorted", "shuffled"])
def test_table_versions_among_the_rounds_as_read_whole(tmp_path: Path, order: str) -> None:
    """Table rows with a ts are put before the first tuple whose time reaches them,
    whichever round that tuple is in."""
    from runtime.io.table_rows import TableSpec
    from runtime.local.tables import TableFeed
    from tests.cli.test_tables_cli import PATIENTS, QUERIES, SCHEMA, files

    _, _, h, table, _ = files(tmp_path, order)

    def table_matcher() -> Matcher:
        m = Matcher(SCHEMA.ddl(), allowed_lateness=3)
        m.register_queries(PATIENTS.to_text() + "\n" + "\n".join(q.to_text() for q in QUERIES))
        return m

    specs = [InputSpec("H", h)]
    m = table_matcher()
    data = read_inputs(specs, m.ensure_plan().catalog)
    which, rows = arrival_order(data)
    number_in_arrival_order(data, which, rows)
    with (
        open_writer(str(tmp_path / "whole.jsonl"), "jsonl", m.value_types()) as writer,
        LinesFile(str(tmp_path / "whole.late.jsonl"), "late") as late,
        deferred_stop() as stop,
    ):
        feed = TableFeed(m, [TableSpec("patients", table)])
        match_all(m, data, which, rows, writer, late, stop, Progress(0, False), Summary(), writer, tables=feed)
    expected = (tmp_path / "whole.jsonl").read_text()
    assert expected
    for size in [1, 2, 5, 7]:
        out = tmp_path / f"c{size}.jsonl"
        m = table_matcher()
        run_match(m, specs, str(out), "jsonl", tables=TableFeed(m, [TableSpec("patients", table)]), chunk_rows=size)
        assert out.read_text() == expected, f"chunks of {size} rows"


def test_a_bad_row_past_the_first_chunk_stops_the_run_and_says_the_output_is_partial(tmp_path: Path) -> None:
    """The inputs are read as they are matched: a bad row found after some tuples were
    matched stops the run with its own message, and the message says the output holds
    only what the tuples before it found (which it then holds, every result of them)."""
    a = tmp_path / "a.csv"
    a.write_text("ts,x,tag\n" + "".join(f"{i},{i},t\n" for i in range(10)) + "10,oops,t\n11,9,t\n")
    out = tmp_path / "out.jsonl"
    with pytest.raises(InputError) as err:
        run_match(matcher(), [InputSpec("A", str(a))], str(out), "jsonl", chunk_rows=3)
    message = str(err.value)
    assert message.startswith(f"{a}:12: column 'x': 'oops' is not an integer")
    assert "holds results of the tuples matched before it, not every result of the input" in message
    # rows 0-8 were matched (the chunk holding the bad row never was): 'big' found x = 6, 7, 8
    found = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["query"], r["ids"]["A"]) for r in found if r["query"] == "big"] == [("big", 6), ("big", 7), ("big", 8)]


def test_a_bad_row_in_the_first_chunk_stops_the_run_before_anything_is_matched(tmp_path: Path) -> None:
    a = tmp_path / "a.csv"
    a.write_text("ts,x,tag\n1,oops,t\n2,9,t\n")
    out = tmp_path / "out.jsonl"
    with pytest.raises(InputError) as err:
        run_match(matcher(), [InputSpec("A", str(a))], str(out), "jsonl", chunk_rows=3)
    assert str(err.value) == f"{a}:2: column 'x': 'oops' is not an integer"
    assert out.read_text() == ""


def heap_merge(ts_lists: list[list[float]], starts: list[int], ended: list[bool]) -> list[tuple[int, int]]:
    """The arrival order by its definition: repeatedly take the input whose next row has
    the smallest ts (ties: the input given first), stopping after the last buffered row
    of an input that has more to read."""
    heap = [(ts[starts[k]], k, starts[k]) for k, ts in enumerate(ts_lists) if starts[k] < len(ts)]
    heapq.heapify(heap)
    out = []
    while heap:
        _, k, i = heapq.heappop(heap)
        out.append((k, i))
        if i + 1 < len(ts_lists[k]):
            heapq.heappush(heap, (ts_lists[k][i + 1], k, i + 1))
        elif not ended[k]:
            break
    return out


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 6).map(float), max_size=12), min_size=1, max_size=4).flatmap(
        lambda inputs: st.tuples(
            st.just(inputs),
            st.tuples(*[st.integers(0, len(ts)) for ts in inputs]),
            st.tuples(*[st.booleans() for _ in inputs]),
        )
    )
)
def test_the_merge_takes_rows_as_a_heap_of_the_inputs_next_rows_would(case: Any) -> None:
    """Out-of-order inputs (descents, ties within and across inputs), read from any row
    on, some still being read: the one sort gives the heap merge's order and stop."""
    inputs, starts, ended = case
    times = [np.asarray(ts, np.float64) for ts in inputs]
    which, rows, ts = merged_rows(times, list(starts), list(ended))
    assert list(zip(which.tolist(), rows.tolist(), strict=True)) == heap_merge(inputs, list(starts), list(ended))
    assert ts.tolist() == [inputs[k][i] for k, i in zip(which.tolist(), rows.tolist(), strict=True)]
