"""Views through the real ``mqo`` command: ``mqo match`` with a query file holding
``CREATE VIEW`` (results of the queries reading the view, none of the view's own),
``--output-view VIEW=FILE`` (the view's rows as made), ``mqo explain`` (the view
graph), and the errors of a bad ``--output-view`` and of ``--engine spark``."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import mqo
from tests.cli.clirun import match, strict_lines, write
from tests.cli.clirun import mqo as run_mqo

DDL = "REGISTER STREAM B (pressure FLOAT); REGISTER STREAM H (beatrate INTEGER, vib FLOAT);\n"
QUERIES = """CREATE VIEW pairs AS
SELECT B.pressure AS pressure, H.beatrate AS rate
FROM B, H MAXWINDOW 5 sec WHERE B.pressure > H.vib;

CREATE VIEW fast AS SELECT p.pressure AS pressure, p.rate AS rate FROM pairs p WHERE p.rate > 115;

Query ID: alarm
SELECT f.pressure, H.vib FROM fast f, H MAXWINDOW 10 sec WHERE f.pressure > H.vib + 10;

Query ID: avg_pairs
SELECT AVG(pairs.pressure), COUNT(*) FROM pairs [RANGE 1 min];
"""
B_ROWS = [(3.0 * i, 80.0 + (7 * i) % 30) for i in range(20)]
H_ROWS = [(3.0 * i + 1, 105 + (5 * i) % 20, 70.0 + (3 * i) % 25) for i in range(20)]


def files(tmp_path: Path) -> tuple[str, str, list[str]]:
    schema = write(tmp_path / "s.ddl", DDL)
    queries = write(tmp_path / "q.mqo", QUERIES)
    b = write(tmp_path / "b.csv", "ts,pressure\n" + "".join(f"{t},{p}\n" for t, p in B_ROWS))
    h = write(tmp_path / "h.csv", "ts,beatrate,vib\n" + "".join(f"{t},{r},{v}\n" for t, r, v in H_ROWS))
    return schema, queries, [f"B={b}", f"H={h}"]


def expected() -> tuple[Counter[Any], list[dict[str, Any]]]:
    """What the library gives for the same tuples pushed in ts order."""
    m = mqo.Matcher(DDL)
    rows: list[dict[str, Any]] = []
    m.view_sink = lambda view, ts, id, values: rows.append({"view": view, "ts": ts, "id": id, "values": values})
    m.register_queries(QUERIES)
    got: Counter[Any] = Counter()
    events = sorted(
        [(t, 0, "B", {"pressure": p}) for t, p in B_ROWS]
        + [(t, 1, "H", {"beatrate": r, "vib": v}) for t, r, v in H_ROWS]
    )
    for ts, _, stream, values in events:
        for r in m.push(stream, ts, values):
            got[(r.query, r.ts, tuple(sorted(r.values.items())))] += 1
    for row in m.flush():
        got[(row.query, row.window_end, tuple(sorted(row.values.items())))] += 1
    return got, rows


def test_match_runs_views_and_writes_a_view_for_inspection(tmp_path: Path) -> None:
    schema, queries, inputs = files(tmp_path)
    out, rows = tmp_path / "out.jsonl", tmp_path / "pairs.jsonl"
    done = match("--output", str(out), "--output-view", f"pairs={rows}", schema=schema, queries=queries, inputs=inputs)
    assert done.returncode == 0, done.stderr
    lines = strict_lines(out.read_text())
    assert not any(line.get("query") in ("pairs", "fast") for line in lines)  # a view writes no output of its own
    got: Counter[Any] = Counter()
    for line in lines:
        end = line.get("window_end", line.get("ts"))
        got[(line["query"], end, tuple(sorted(line["values"].items())))] += 1
    want, view_rows = expected()
    assert got == want and any(k[0] == "alarm" for k in got) and any(k[0] == "avg_pairs" for k in got)
    written = strict_lines(rows.read_text())
    assert [r["id"] for r in written] == list(range(len(written))) and written
    assert Counter((r["ts"], tuple(sorted(r["values"].items()))) for r in written) == Counter(
        (r["ts"], tuple(sorted(r["values"].items()))) for r in view_rows if r["view"] == "pairs"
    )


def test_explain_shows_the_view_graph(tmp_path: Path) -> None:
    schema, queries, _ = files(tmp_path)
    done = run_mqo("explain", "--schema", schema, "--queries", queries)
    assert done.returncode == 0, done.stderr
    assert "pairs (level 1; ts, id, pressure FLOAT, rate INTEGER) <- B, H; read by fast, avg_pairs" in done.stdout
    assert "fast (level 2; ts, id, pressure FLOAT, rate INTEGER) <- pairs; read by alarm" in done.stdout


def test_bad_output_view_is_refused(tmp_path: Path) -> None:
    schema, queries, inputs = files(tmp_path)
    done = match("--output-view", "nope=x.jsonl", schema=schema, queries=queries, inputs=inputs)
    assert (
        done.returncode != 0
        and "--output-view 'nope=x.jsonl': the query file declares no view 'nope' (views: pairs, fast)" in done.stderr
    )
    done = match("--output-view", "pairs", schema=schema, queries=queries, inputs=inputs)
    assert done.returncode != 0 and "--output-view 'pairs': no '='; give VIEW=FILE" in done.stderr
    # (--engine spark runs aggregates over views and --output-view: test_view_aggregates_spark_cli)


def test_serve_runs_views_across_a_restart(tmp_path: Path) -> None:
    """``mqo serve --once`` twice (the second from the checkpoint): the views' stored
    rows and ids carry over, and the results are the library's."""
    schema = write(tmp_path / "s.ddl", DDL)
    (tmp_path / "q").mkdir()
    write(tmp_path / "q" / "views.mqo", QUERIES)
    command = ["serve", "--schema", schema, "--queries", str(tmp_path / "q"), "--output", str(tmp_path / "out")]
    command += ["--checkpoint", str(tmp_path / "ck"), "--once"]
    for s in "BH":
        (tmp_path / s).mkdir()
        command += ["--input", f"{s}={tmp_path / s}"]
    half = len(B_ROWS) // 2
    for part, (b_rows, h_rows) in enumerate([(B_ROWS[:half], H_ROWS[:half]), (B_ROWS[half:], H_ROWS[half:])]):
        write(tmp_path / "B" / f"{part}.csv", "ts,pressure\n" + "".join(f"{t},{p}\n" for t, p in b_rows))
        write(tmp_path / "H" / f"{part}.csv", "ts,beatrate,vib\n" + "".join(f"{t},{r},{v}\n" for t, r, v in h_rows))
        done = run_mqo(*command)
        assert done.returncode == 0, done.stderr
    got: Counter[Any] = Counter()
    for path in sorted((tmp_path / "out").glob("results-*.jsonl")):
        for line in strict_lines(path.read_text()):
            if "window_end" not in line:  # serve never flushes: windows still open are not written
                got[(line["query"], line["ts"], tuple(sorted(line["values"].items())))] += 1
    want, _ = expected()
    matches = Counter({k: n for k, n in want.items() if k[0] == "alarm"})
    assert got == matches and got


def test_serve_keeps_a_view_other_files_read(tmp_path: Path) -> None:
    """Deleting the file of a view that another file's queries read reports an error
    naming them and keeps the view; once they are gone, the view goes too."""
    import io

    from runtime.local.serve import LocalService

    (tmp_path / "q").mkdir()
    (tmp_path / "in").mkdir()
    service = LocalService(
        DDL,
        {"B": str(tmp_path / "in")},
        str(tmp_path / "q"),
        str(tmp_path / "out"),
        str(tmp_path / "ck"),
        log=io.StringIO(),
    )
    write(tmp_path / "q" / "a_view.mqo", QUERIES.split("Query ID: alarm")[0])
    write(tmp_path / "q" / "b_reader.mqo", "Query ID: r\nSELECT f.rate FROM fast f;\n")
    assert service.step().registered == 3
    (tmp_path / "q" / "a_view.mqo").unlink()
    report = service.step()
    assert report.query_errors == 1 and service.matcher.views == ["pairs", "fast"]
    [error] = strict_lines((tmp_path / "out" / "query-errors-000002.jsonl").read_text())
    assert "view fast is read by r" in error["error"]
    (tmp_path / "q" / "b_reader.mqo").unlink()
    service.step()
    assert service.matcher.views == [] and service.matcher.query_ids == []


# ------------------------------------------------------------------- aggregate views

AGG_QUERIES = """CREATE VIEW busy AS
SELECT H.beatrate AS rate, COUNT(*) AS n FROM H [RANGE 6 sec SLIDE 3 sec] GROUP BY H.beatrate;

CREATE VIEW peak AS SELECT MAX(u.n) AS most FROM busy u [RANGE 3 sec];

Query ID: busiest
SELECT u.rate, u.n FROM busy u, peak p WINDOW u.ts = p.ts MAXWINDOW 0 sec WHERE u.n = p.most;

Query ID: near
SELECT u.rate, B.pressure FROM busy u, B MAXWINDOW 2 sec WHERE B.pressure > 90;

Query ID: per_window
SELECT COUNT(*) AS groups FROM busy [RANGE 3 sec];
"""


def test_match_runs_aggregate_views(tmp_path: Path) -> None:
    """An aggregate view read by match queries (a join with another aggregate view
    over it, a join with a stream) and by an aggregate query: ``mqo match`` writes
    what the library gives for the tuples pushed in ts order, and ``--output-view``
    the view's rows (ts the window end, ids in order)."""
    schema, _, inputs = files(tmp_path)
    queries = write(tmp_path / "agg.mqo", AGG_QUERIES)
    out, rows = tmp_path / "out.jsonl", tmp_path / "busy.jsonl"
    done = match("--output", str(out), "--output-view", f"busy={rows}", schema=schema, queries=queries, inputs=inputs)
    assert done.returncode == 0, done.stderr
    got: Counter[Any] = Counter()
    for line in strict_lines(out.read_text()):
        got[(line["query"], line.get("window_end", line.get("ts")), tuple(sorted(line["values"].items())))] += 1
    m = mqo.Matcher(DDL)
    made: list[tuple[str, float, int, dict[str, Any]]] = []
    m.view_sink = lambda view, ts, id, values: made.append((view, ts, id, values))
    m.register_queries(AGG_QUERIES)
    want: Counter[Any] = Counter()
    events = sorted(
        [(t, 0, "B", {"pressure": p}) for t, p in B_ROWS]
        + [(t, 1, "H", {"beatrate": r, "vib": v}) for t, r, v in H_ROWS]
    )
    for ts, _, stream, values in events:
        for r in m.push(stream, ts, values):
            want[(r.query, r.ts, tuple(sorted(r.values.items())))] += 1
    for row in m.flush():
        want[(row.query, row.window_end, tuple(sorted(row.values.items())))] += 1
    for r in m.take_results().matches():
        want[(r.query, r.ts, tuple(sorted(r.values.items())))] += 1
    assert got == want
    assert {k[0] for k in got} == {"busiest", "near", "per_window"}
    written = strict_lines(rows.read_text())
    assert [(r["ts"], r["id"], r["values"]) for r in written] == [
        (ts, i, v) for view, ts, i, v in made if view == "busy"
    ]
    assert all(r["ts"] % 3 == 0 for r in written) and [r["id"] for r in written] == list(range(len(written)))
