"""``mqo match --engine spark --table T=FILE`` writes what ``--engine local`` writes:
the same matches (table rows joined as of each tuple's ts, with versions from the
start, at a tuple's ts, several of one key at one ts, a delete, an input out of ts
order), the same aggregate rows of the same file and the same summary counts. The real
command: the local engine's run in a subprocess, Spark's in this process on the test
run's session (``tests.cli.clirun.in_session``)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.cli.clirun import match, strict_lines, write
from tests.cli.test_tables_cli import files, reference
from tests.references.reference import exact_result

AGGREGATE = "\nQuery ID: per_patient\nSELECT H.patient, COUNT(*) FROM H [RANGE 10 SLIDE 5] GROUP BY H.patient;\n"


@pytest.mark.spark
def test_spark_engine_joins_table_files_as_the_local_engine(tmp_path: Path, spark_session: Any) -> None:
    schema, queries, h, table, rows = files(tmp_path, "shuffled")
    write(Path(queries), Path(queries).read_text() + AGGREGATE)  # (the match stage runs apart from it)
    outputs = {}
    for engine in ("local", "spark"):
        out = tmp_path / engine / "out.jsonl"
        out.parent.mkdir()
        run = match(
            "--engine", engine, "--table", f"patients={table}", "--allowed-lateness", "3", "--output", str(out),
            schema=schema, queries=queries, inputs=[f"H={h}"], spark=spark_session if engine == "spark" else None,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        assert "late:     0" in run.stderr
        outputs[engine] = out.read_text().splitlines()
    local, spark = outputs["local"], outputs["spark"]
    matches = [line for line in local if "window_end" not in line]
    assert Counter(line for line in spark if "window_end" not in line) == Counter(matches)
    assert [line for line in spark if "window_end" in line] == [line for line in local if "window_end" in line]
    got = Counter(
        str(exact_result(r["query"], r["ts"], r["ids"], r["values"])) for r in strict_lines("\n".join(matches) + "\n")
    )
    assert got == reference(rows, 3.0) and sum(got.values()) > 5
