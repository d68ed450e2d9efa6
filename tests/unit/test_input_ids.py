"""The id rule (an id appears once per stream across the inputs) has one implementation,
:class:`runtime.io.input_chunks.FileIds`, run by reading files whole (``read_stream``,
``check_ids_across_inputs``: ``mqo serve``, ``profile``, Spark, HTTP bodies) and by
reading them a chunk at a time (``mqo match``). Here it is checked against a plain
set-based check, both ways, with ids past 2**53 where a float would merge them."""

from __future__ import annotations

import json
from pathlib import Path

import hypothesis.strategies as st
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings

from predicates import Catalog
from runtime.io.input_chunks import FileIds, IdRuns, first_error
from runtime.io.inputs import InputSpec, StreamData, check_ids_across_inputs, read_inputs
from runtime.io.stream_rows import INT64_MAX, INT64_MIN, InputError

Reject = tuple[str, int, str]  # (file, line, reason)


def naive(files: list[list[int]]) -> tuple[list[Reject], list[list[int]]]:
    """The rule as sets, row by row in the order the files are given: a row whose id its
    file used before names that row (line = row + 2, after the header); else one whose id
    an earlier file used names the earlier file's first use. The bad rows, and the ids kept."""
    owner: dict[int, tuple[str, int]] = {}
    bad: list[Reject] = []
    kept: list[list[int]] = []
    for k, ids in enumerate(files):
        path, mine, keep = f"f{k}.csv", {}, []
        for row, ident in enumerate(ids):
            line = row + 2
            if ident in mine:
                bad.append((path, line, f"id {ident} of stream A is already used by the row at line {mine[ident]}"))
                continue
            mine[ident] = line
            if ident in owner:
                at, first = owner[ident]
                bad.append((path, line, f"id {ident} of stream A is already used by the row at line {first} of {at}"))
                continue
            owner[ident] = (path, line)
            keep.append(ident)
        kept.append(keep)
    return bad, kept


def piece(k: int, ids: list[int], start: int = 0) -> StreamData:
    """Rows ``start`` on of file k (a CSV file: lines from ``start + 2``)."""
    return StreamData("A", f"f{k}.csv", np.zeros(len(ids)), np.array(ids, np.int64), {}, first_row=start)


def in_chunks(files: list[list[int]], sizes: list[int], on_bad_row: str) -> tuple[list[Reject], list[list[int]]]:
    """As ``mqo match`` runs the rule: each file a piece at a time, in the order given,
    against the ids of the stream's files before it."""
    bad: list[Reject] = []
    kept: list[list[int]] = []
    before = []
    for k, ids in enumerate(files):
        rule = FileIds("A", f"f{k}.csv", list(before))
        keep: list[int] = []
        start = 0
        while start < len(ids):
            end = start + sizes[(k + start) % len(sizes)]
            data = rule.check(piece(k, ids[start:end], start), on_bad_row)
            bad += [(r.path, r.line, r.reason) for r in data.rejected]
            keep += [] if data.ids is None else data.ids.tolist()
            start = end
        kept.append(keep)
        before.append(rule.used())
    return bad, kept


def whole(files: list[list[int]], on_bad_row: str) -> tuple[list[Reject], list[list[int]]]:
    """As ``read_inputs`` runs it: each file whole as it is read, then across the files."""
    data = [piece(k, ids) for k, ids in enumerate(files)]
    for d in data:
        FileIds(d.stream, d.path).check(d, on_bad_row)
    check_ids_across_inputs(data, on_bad_row)
    return [(r.path, r.line, r.reason) for d in data for r in d.rejected], [
        [] if d.ids is None else d.ids.tolist() for d in data
    ]


HUGE = [2**53, 2**53 + 1, 2**53 - 1, -(2**53) - 1, INT64_MAX, INT64_MAX - 1, INT64_MIN, 0, 7]
ids_of = st.lists(st.one_of(st.sampled_from(HUGE), st.integers(INT64_MIN, INT64_MAX)), max_size=25)


@settings(max_examples=300, deadline=None)
@given(files=st.lists(ids_of, min_size=1, max_size=3), sizes=st.lists(st.integers(1, 6), min_size=1, max_size=4))
def test_the_rule_is_the_set_based_check_whole_and_in_chunks(files: list[list[int]], sizes: list[int]) -> None:
    expected_bad, expected_kept = naive(files)
    for bad, kept in (in_chunks(files, sizes, "skip"), whole(files, "skip")):
        assert sorted(bad) == sorted(expected_bad)
        assert kept == expected_kept
    # without skip, the first bad row stops it: in the order of files and rows in chunks;
    # reading whole, a file's own repeats come first (each file is checked as it is read)
    if expected_bad:
        own = [b for b in expected_bad if " of f" not in b[2]]
        for run, first in (
            (lambda: in_chunks(files, sizes, "error"), expected_bad[0]),
            (lambda: whole(files, "error"), (own or expected_bad)[0]),
        ):
            with pytest.raises(InputError) as err:
                run()
            assert str(err.value) == f"{first[0]}:{first[1]}: column 'id': {first[2]}"
    else:
        assert in_chunks(files, sizes, "error") == whole(files, "error") == ([], files)


def test_the_ids_seen_are_a_few_sorted_runs_found_by_value() -> None:
    seen = IdRuns()
    for start in range(0, 40, 5):  # runs merged as they come
        keys = np.arange(start * 3, start * 3 + 15, 3, dtype=np.int64) + 2**53
        seen.add(keys, keys - 2**53 + 2)
    assert len(seen.runs) <= 4 and all(np.all(np.diff(keys) > 0) for keys, _ in seen.runs)
    found = seen.find(np.array([2**53, 2**53 + 1, 2**53 + 3, 2**53 + 117, 2**53 + 120, INT64_MAX], np.int64))
    assert found.tolist() == [2, -1, 5, 119, -1, -1]


DDL = "REGISTER STREAM A (x INTEGER);"


def test_error_names_both_places_of_an_id_whole_and_in_chunks(tmp_path: Path) -> None:
    """A Parquet file (rows) then a CSV file (lines) of one stream: the CSV file's row
    with an id of the Parquet file names the Parquet row; a repeat within a file, its line."""
    catalog = Catalog.from_ddl(DDL)
    first = tmp_path / "a1.parquet"
    pq.write_table(
        pa.table({"ts": [1.0, 2.0, 3.0], "id": pa.array([5, 2**53 + 1, 9], pa.int64()), "x": [1, 2, 3]}), first
    )
    second = tmp_path / "a2.csv"
    second.write_text(f"ts,id,x\n0,{2**53},1\n1,{2**53 + 1},2\n2,{2**53},3\n")
    specs = [("A", str(first)), ("A", str(second))]
    across = f"{second}:3: column 'id': id {2**53 + 1} of stream A is already used by the row at row 2 of {first}"
    with pytest.raises(InputError) as err:
        read_inputs([InputSpec(*s) for s in specs], catalog, "error")
    assert str(err.value) == f"{second}:4: column 'id': id {2**53} of stream A is already used by the row at line 2"
    with pytest.raises(InputError) as err:
        first_error(specs, catalog, "error", chunk_rows=1)
    assert str(err.value) == f"{second}:4: column 'id': id {2**53} of stream A is already used by the row at line 2"
    data = read_inputs([InputSpec(*s) for s in specs], catalog, "skip")
    assert [d.ids.tolist() for d in data if d.ids is not None] == [[5, 2**53 + 1, 9], [2**53]]
    assert [r.message() for r in data[1].rejected] == [
        f"{second}:4: column 'id': id {2**53} of stream A is already used by the row at line 2",
        across,
    ]
    second.write_text(f"ts,id,x\n0,{2**53},1\n1,{2**53 + 1},2\n")
    for check in (
        lambda: read_inputs([InputSpec(*s) for s in specs], catalog, "error"),
        lambda: first_error(specs, catalog, "error", chunk_rows=1),
    ):
        with pytest.raises(InputError) as err:
            check()
        assert str(err.value) == across


def test_a_null_id_is_a_bad_row_not_an_automatic_one(tmp_path: Path) -> None:
    """Automatic ids are for files without an id column; in one, an empty id is a bad row."""
    catalog = Catalog.from_ddl(DDL)
    path = tmp_path / "a.csv"
    path.write_text(f"ts,id,x\n1,,3\n2,{INT64_MAX},4\n3,{2**53 + 1},5\n4,{2**53},6\n")
    (data,) = read_inputs([InputSpec("A", str(path))], catalog, "skip")
    assert data.ids is not None and data.ids.tolist() == [INT64_MAX, 2**53 + 1, 2**53]
    assert [r.message() for r in data.rejected] == [f"{path}:2: column 'id': '(empty)' is not an integer id"]


def test_a_posted_body_repeats_no_id_by_the_same_rule() -> None:
    """``POST /streams/S/rows`` as JSON lines: rows named by their number in the post."""
    from runtime.http.bodies import read_body

    schema = Catalog.from_ddl(DDL).require("A")
    lines = [{"ts": 1, "id": 2**53, "x": 1}, {"ts": 2, "id": 2**53 + 1, "x": 2}, {"ts": 3, "x": 3}]
    lines += [{"ts": 4, "id": 2**53, "x": 4}, {"ts": 5, "id": INT64_MAX, "x": 5}]
    body = "\n".join(json.dumps(line) for line in lines).encode()
    posted = read_body(body, "ndjson", schema, 100)
    assert posted.batch["id"] == [2**53, 2**53 + 1, INT64_MAX]
    assert [r.as_dict() for r in posted.rejected] == [
        {"row": 2, "error": "no 'id', while other rows of this post give one", "column": "id"},
        {"row": 3, "error": f"id {2**53} of stream A is already used by the row at row 0", "column": "id"},
    ]
