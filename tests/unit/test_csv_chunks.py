"""A stream file read a chunk at a time gives the rows, bad rows and source lines of
reading it whole: from Arrow's streaming reader, and from the exact path where it
takes over part-way (the first block that breaks a rule)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from predicates import Catalog
from runtime.io.csv_reader import CsvChunks, read_csv
from runtime.io.input_chunks import line_numbers
from runtime.io.parquet_reader import ParquetChunks, read_parquet
from runtime.io.stream_rows import InputError, StreamData

SCHEMA = Catalog.from_ddl("REGISTER STREAM S (x INTEGER, f FLOAT, tag STRING);").require("S")


def joined(chunks: list[StreamData]) -> dict[str, Any]:
    return {
        "ts": [t for c in chunks for t in c.ts.tolist()],
        "ids": [i for c in chunks for i in ([] if c.ids is None else c.ids.tolist())],
        "x": [v for c in chunks for v in c.column_values("x")],
        "f": [v for c in chunks for v in c.column_values("f")],
        "tag": [v for c in chunks for v in c.column_values("tag")],
        "lines": [n for c in chunks for n in line_numbers(c).tolist()],
        "rejected": [r.as_dict() for c in chunks for r in c.rejected],
    }


def csv_file(tmp: Path, bad_at: list[int], n: int = 300) -> str:
    lines = ["ts,id,x,f,tag"]
    for i in range(n):
        x = "oops" if i in bad_at else str(i * 3 - 7)
        lines.append(f"{i / 4},{i},{x},{i * 0.25},{'' if i % 5 == 0 else 't' + str(i % 3)}")
    path = tmp / "s.csv"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.mark.parametrize("bad_at", [[], [0], [150], [151, 290], [299]])
@pytest.mark.parametrize("chunk_rows", [1, 7, 64, 100_000])
def test_csv_in_chunks_is_the_file_read_whole(tmp_path: Path, bad_at: list[int], chunk_rows: int) -> None:
    path = csv_file(tmp_path, bad_at)
    whole = read_csv("S", path, SCHEMA, "skip")
    chunks = list(CsvChunks("S", path, SCHEMA, "skip", chunk_rows))
    assert all(len(c) <= chunk_rows for c in chunks)
    assert joined(chunks) == joined([whole])
    if bad_at:
        with pytest.raises(InputError) as err:
            list(CsvChunks("S", path, SCHEMA, "error", chunk_rows))
        assert str(err.value) == f"{path}:{bad_at[0] + 2}: column 'x': 'oops' is not an integer"


@pytest.mark.parametrize("chunk_rows", [1, 4, 100])
def test_parquet_in_batches_is_the_file_read_whole(tmp_path: Path, chunk_rows: int) -> None:
    path = tmp_path / "s.parquet"
    n = 40
    table = pa.table(
        {
            "ts": pa.array([None if i == 9 else i / 2 for i in range(n)], pa.float64()),
            "id": pa.array(range(n), pa.int64()),
            "x": pa.array([i - 3 for i in range(n)], pa.int32()),
            "f": pa.array([float("inf") if i == 30 else i * 0.5 for i in range(n)]),
            "tag": [f"t{i % 4}" for i in range(n)],
        }
    )
    pq.write_table(table, path, row_group_size=6)
    whole = read_parquet("S", str(path), SCHEMA, "skip")
    chunks = list(ParquetChunks("S", str(path), SCHEMA, "skip", chunk_rows))
    assert joined(chunks) == joined([whole])
    assert [r["row"] for r in joined(chunks)["rejected"]] == [10, 31]


def test_a_file_read_value_by_value_is_the_same_in_pieces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The exact path makes a column's values arrays of ``PIECE`` values (a whole file's
    text may pass one string array's 2 GiB): the same values, the same bad rows."""
    from runtime.io import stream_rows

    path = csv_file(tmp_path, [3, 151])  # (a bad row: the exact path reads the file)
    whole = joined([read_csv("S", path, SCHEMA, "skip")])
    monkeypatch.setattr(stream_rows, "PIECE", 7)
    pieces = read_csv("S", path, SCHEMA, "skip")
    assert pieces.columns["tag"].num_chunks > 1
    assert joined([pieces]) == whole
    assert len(whole["ts"]) == 298 and whole["tag"][:2] == [None, "t1"]
