"""Matchers through snapshot bytes (:mod:`mqo.snapshot_codec`): a matcher restored from
the bytes of its snapshot carries on exactly as one never snapshotted (results in the
same order, held results, late tuples, aggregate rows, the adaptive order's choices);
a restore ``like=`` a matcher with other queries is refused, naming the ids; loading
never unpickles."""

from __future__ import annotations

import pickle
import random
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mqo
from mqo.snapshot_codec import SnapshotError, decode_snapshot, encode_snapshot
from tests.cli import clirun

REPO = Path(__file__).resolve().parents[2]
ICU = REPO / "examples" / "icu"

DDL = (
    "REGISTER STREAM B (pressure FLOAT, temp FLOAT, alert INTEGER, tag STRING, ok BOOLEAN);"
    "REGISTER STREAM H (vib FLOAT, alert INTEGER);"
)
MATCH_QUERIES = [
    "Query ID: j1\nSELECT * FROM B, H WINDOW B.ts <= H.ts MAXWINDOW 5 WHERE B.alert = H.alert AND B.pressure < 80",
    "Query ID: j2\nSELECT B.temp, H.vib FROM B, H MAXWINDOW 3 WHERE B.temp <= 2 * H.vib + 1",
    "Query ID: s1\nSELECT B.tag, B.pressure FROM B WHERE B.pressure > 50 AND B.tag = 'x'",
    "Query ID: self\nSELECT * FROM B b1, B b2 MAXWINDOW 2 WHERE b1.alert = b2.alert AND b1.pressure < b2.pressure",
]
AGGREGATE_QUERIES = [
    "Query ID: avg\nSELECT H.alert, AVG(H.vib), COUNT(*) FROM H [RANGE 4 SLIDE 2] GROUP BY H.alert",
    "Query ID: rows\nSELECT MAX(B.pressure) FROM B [ROWS 3 SLIDE 2]",
]

pytestmark = pytest.mark.filterwarnings("ignore:late tuple:UserWarning")


def events(seed: int, n: int = 160) -> list[tuple[str, float, dict[str, Any]]]:
    """Tuples of B and H with NULLs, integers past 2^53, ties and tuples behind time
    (late under a lateness of 1)."""
    rnd = random.Random(seed)
    out = []
    ts = 0.0
    for _ in range(n):
        ts += rnd.choice((0.0, 0.25, 0.5, 1.0))
        at = ts - rnd.choice((0.0,) * 8 + (1.5, 3.0))  # now and then behind
        if rnd.random() < 0.6:
            values = {
                "pressure": rnd.choice((None, *(float(rnd.randint(0, 120)) for _ in range(5)))),
                "temp": rnd.uniform(0, 20),
                "alert": rnd.choice((1, 2, 2**62 + 1, None)),
                "tag": rnd.choice(("x", "y", None)),
                "ok": rnd.choice((True, False, None)),
            }
            out.append(("B", at, values))
        else:
            out.append(("H", at, {"vib": rnd.uniform(0, 10), "alert": rnd.choice((1, 2, 2**62 + 1))}))
    return out


def new_matcher(emit: str, aggregates: bool) -> mqo.Matcher:
    m = mqo.Matcher(DDL, allowed_lateness=1.0, emit=emit, order="adaptive", missing="null")
    m.register_queries(MATCH_QUERIES + (AGGREGATE_QUERIES if aggregates else []))
    return m


def through_bytes(m: mqo.Matcher) -> mqo.Matcher:
    return mqo.Matcher.restore(decode_snapshot(encode_snapshot(m.snapshot())))


def run(m: mqo.Matcher, evs: list, restore_at: set[int], batches: bool) -> tuple[list, mqo.Matcher]:
    """Feed ``evs`` (batches of 8 tuples of one stream, or one by one), restoring the
    matcher from its snapshot's bytes before the steps in ``restore_at``; every
    output in order."""
    out: list[Any] = []

    def results(found: Any) -> None:
        matches = found.matches() if hasattr(found, "matches") else found
        out.extend(("match", r.query, r.ts, dict(r.ids), dict(r.values)) for r in matches)
        out.extend(("agg", row.as_dict()) for row in m.poll_aggregates().rows)

    steps = [evs[i : i + 8] for i in range(0, len(evs), 8)] if batches else [[e] for e in evs]
    for k, step in enumerate(steps):
        if k in restore_at:
            restored = through_bytes(m)
            # the adaptive order's statistics and orders travel exactly
            assert restored.policy.state() == m.policy.state()
            assert restored.counters.as_dict() == m.counters.as_dict()
            m = restored
        if batches:
            for stream in ("B", "H"):
                rows = [(ts, v) for s, ts, v in step if s == stream]
                if rows:
                    names = ["vib", "alert"] if stream == "H" else ["pressure", "temp", "alert", "tag", "ok"]
                    batch = {"ts": np.array([ts for ts, _ in rows])}
                    for name in names:
                        column = [v[name] for _, v in rows]
                        if name in ("tag", "ok"):
                            batch[name] = np.array(column, object)
                        else:
                            batch[name] = np.array([np.nan if x is None else x for x in column], np.float64)
                    results(m.push_batch(stream, batch))
        else:
            stream, ts, values = step[0]
            results(m.push(stream, ts, values))
    results(m.flush_results())
    out.extend(("agg", row.as_dict()) for row in m.flush().rows)
    out.extend(("late", t.stream, t.ts, t.id) for t in m.late_tuples)
    return out, m


@pytest.mark.parametrize("emit", ["arrival", "ordered"])
@pytest.mark.parametrize("batches", [False, True], ids=["push", "batches"])
@pytest.mark.parametrize("seed", [1, 2])
def test_a_matcher_restored_from_bytes_carries_on_as_the_original(emit: str, batches: bool, seed: int) -> None:
    evs = events(seed)
    want, original = run(new_matcher(emit, aggregates=True), evs, set(), batches)
    got, _ = run(new_matcher(emit, aggregates=True), evs, {3, 7, 11} if batches else {20, 55, 111}, batches)
    assert any(o[0] == "match" and o[1] in ("j1", "self") for o in want), "joins found results"
    assert any(o[0] == "late" for o in want) and any(o[0] == "agg" for o in want)
    assert got == want
    assert original.policy is not None and original.policy.seen[0] > 32  # past its warm-up


def test_held_results_and_late_tuples_travel_in_the_bytes() -> None:
    m = new_matcher("ordered", aggregates=False)
    for stream, ts, values in events(3, 60):
        m.push(stream, ts, values)
    assert m.held_results and m.late_tuples
    restored = through_bytes(m)
    assert restored.held_results == m.held_results
    assert list(restored.late_tuples) == list(m.late_tuples)
    assert [(r.query, r.ts, dict(r.ids)) for r in restored.flush_results().matches()] == [
        (r.query, r.ts, dict(r.ids)) for r in m.flush_results().matches()
    ]


def test_a_snapshot_is_plain_data(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every value in a match matcher's snapshot is of the contract's types (numpy
    scalars of a batch's columns are written as Python values), and restoring its bytes
    never calls pickle."""
    m = new_matcher("ordered", aggregates=False)
    run(m, events(4, 80), set(), batches=True)
    assert not_plain(m.snapshot()) == []
    blob = encode_snapshot(m.snapshot())
    for name in ("loads", "load", "Unpickler"):
        monkeypatch.setattr(pickle, name, refuse_pickle)
    restored = mqo.Matcher.restore(decode_snapshot(blob))
    assert restored.held_results == m.held_results


def test_a_snapshot_with_aggregates_holds_no_bytes() -> None:
    m = new_matcher("arrival", aggregates=True)
    run(m, events(5, 60), set(), batches=False)
    assert not_plain(m.snapshot(), allow_numpy_scalars=False) == []


def refuse_pickle(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("pickle was called")


def not_plain(x: Any, where: str = "snapshot", allow_numpy_scalars: bool = True) -> list[str]:
    """The places in ``x`` holding something besides the plain-data contract."""
    scalars = (np.bool_, np.integer, np.floating, np.str_) if allow_numpy_scalars else ()
    if x is None or type(x) in (str, int, float, bool) or isinstance(x, scalars):
        return []
    if isinstance(x, np.ndarray):
        return [] if x.dtype.kind in "biuf" else [where]
    if type(x) in (list, tuple):
        return [w for i, v in enumerate(x) for w in not_plain(v, f"{where}[{i}]", allow_numpy_scalars)]
    if type(x) is dict:
        bad = [f"{where} key {k!r}" for k in x if type(k) is not str]
        return bad + [w for k, v in x.items() for w in not_plain(v, f"{where}[{k!r}]", allow_numpy_scalars)]
    return [f"{where}: {type(x).__name__}"]


# ------------------------------------------------------------------ case 14


def test_restore_like_a_matcher_with_other_queries_names_the_ids() -> None:
    first = mqo.Matcher(DDL, missing="null")
    first.register_queries(MATCH_QUERIES)
    first.push("B", 1.0, {"pressure": 10.0, "alert": 1})
    snap = first.snapshot(queries=False)
    other = mqo.Matcher(DDL, missing="null")
    other.register_queries(
        [MATCH_QUERIES[0], MATCH_QUERIES[1].replace("+ 1", "+ 2"), MATCH_QUERIES[3], "Query ID: new\nSELECT * FROM H"]
    )
    with pytest.raises(SnapshotError) as caught:
        mqo.Matcher.restore(snap, like=other)
    message = str(caught.value)
    assert "missing (in the snapshot, not in like=): s1" in message
    assert "extra (in like=, not in the snapshot): new" in message
    assert "changed (another text): j2" in message
    assert "j1" not in message and "self" not in message
    # through bytes too, and with the queries in the snapshot as well
    with pytest.raises(SnapshotError, match=r"missing .*: s1"):
        mqo.Matcher.restore(decode_snapshot(encode_snapshot(first.snapshot())), like=other)
    assert not other.registrations.frozen, "a refused restore leaves like= as it was"
    other.register_query("SELECT * FROM B WHERE B.temp > 1")


def test_restore_like_a_matcher_with_the_same_queries_in_another_order() -> None:
    first = mqo.Matcher(DDL, missing="null")
    first.register_queries(MATCH_QUERIES)
    second = mqo.Matcher(DDL, missing="null")
    second.register_queries(list(reversed(MATCH_QUERIES)))
    for m in (first,):
        m.push("B", 1.0, {"pressure": 10.0, "temp": 3.0, "alert": 1})
    restored = mqo.Matcher.restore(decode_snapshot(encode_snapshot(first.snapshot(queries=False))), like=second)
    got = [(r.query, dict(r.ids)) for r in restored.push("H", 2.0, {"vib": 5.0, "alert": 1})]
    want = [(r.query, dict(r.ids)) for r in first.push("H", 2.0, {"vib": 5.0, "alert": 1})]
    assert sorted(got, key=str) == sorted(want, key=str) and want


# ------------------------------------------------------------- formats


def test_a_snapshot_of_another_format_says_which_version_made_it() -> None:
    m = mqo.Matcher(DDL)
    m.register_query("SELECT * FROM B")
    snap = m.snapshot()
    with pytest.raises(SnapshotError, match="made by an older version of mqo"):
        mqo.Matcher.restore({**snap, "format": 7})
    with pytest.raises(SnapshotError, match="made by a newer version of mqo"):
        mqo.Matcher.restore({**snap, "format": 9})
    with pytest.raises(SnapshotError, match="not a matcher snapshot"):
        mqo.Matcher.restore({"ddl": ""})


# ------------------------------------------------------- mqo serve's checkpoint


def serve_once(root: Path) -> subprocess.CompletedProcess[str]:
    return clirun.mqo(
        "serve",
        "--schema",
        str(ICU / "streams.ddl"),
        "--queries",
        str(root / "q"),
        "--input",
        f"B={root / 'B'}",
        "--input",
        f"H={root / 'H'}",
        "--output",
        str(root / "out"),
        "--checkpoint",
        str(root / "ck"),
        "--once",
        cwd=REPO,
    )


def serve_dirs(root: Path) -> None:
    for name in ("q", "B", "H"):
        (root / name).mkdir()
    (root / "q" / "j.mqo").write_text(
        "Query ID: j\nSELECT * FROM B, H WINDOW B.ts <= H.ts MAXWINDOW 20 WHERE B.pressure < 2 * H.beatrate;\n"
        "Query ID: n\nSELECT COUNT(*) FROM H [RANGE 10 SLIDE 5];\n"
    )
    (root / "B" / "1.csv").write_text("ts,pressure,temp,alert\n1,90,37,0\n2,100,38,1\n")


def test_serve_checkpoints_are_snapshot_files_that_restart_the_service(tmp_path: Path) -> None:
    serve_dirs(tmp_path)
    first = serve_once(tmp_path)
    assert first.returncode == 0, first.stderr
    # the checkpoint, beside the lock file that keeps a second service off it
    [checkpoint] = [f for f in (tmp_path / "ck").iterdir() if f.name != "serve.lock"]
    blob = checkpoint.read_bytes()
    assert checkpoint.name == "checkpoint.mqosnap" and blob.startswith(b"MQOSNAP\x00")
    assert decode_snapshot(blob)["state"]["taken"]["B"] == ["1.csv"]
    (tmp_path / "H" / "1.csv").write_text("ts,beatrate,vib,alert\n3,60,1.0,0\n30,61,1.0,0\n")
    second = serve_once(tmp_path)
    assert second.returncode == 0, second.stderr
    assert "step 2: 1 data file(s), 2 tuples, 2 results" in second.stderr  # B's stored tuples came back


@pytest.mark.parametrize("kind", ["old pickle", "corrupt", "foreign", "another snapshot"])
def test_serve_refuses_a_checkpoint_it_cannot_trust_in_one_line(tmp_path: Path, kind: str) -> None:
    serve_dirs(tmp_path)
    (tmp_path / "ck").mkdir()
    if kind == "old pickle":
        (tmp_path / "ck" / "state.pickle").write_bytes(pickle.dumps({"format": 1}))
        expected = "state.pickle: a checkpoint made by an older version of mqo"
    elif kind == "corrupt":
        assert serve_once(tmp_path).returncode == 0
        path = tmp_path / "ck" / "checkpoint.mqosnap"
        blob = bytearray(path.read_bytes())
        blob[-3] ^= 0xFF
        path.write_bytes(bytes(blob))
        expected = "checkpoint.mqosnap: corrupt (its checksum does not match its contents)"
    elif kind == "foreign":
        (tmp_path / "ck" / "checkpoint.mqosnap").write_text('{"format": 2}')
        expected = "checkpoint.mqosnap: not an mqo snapshot"
    else:  # a snapshot file, but not of a checkpoint
        (tmp_path / "ck" / "checkpoint.mqosnap").write_bytes(encode_snapshot([2, {"format": 2}]))
        expected = "checkpoint.mqosnap: written by another version of mqo serve"
    done = serve_once(tmp_path)
    assert done.returncode == 2
    assert expected in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_tables_rows_are_fingerprinted_by_template_and_constants() -> None:
    """A matcher restored from a snapshot (its table rows registered again as a block)
    takes the first's snapshot like=; a row with another constant is named as changed."""
    template = "SELECT * FROM B, H MAXWINDOW 4 WHERE B.pressure < :c AND B.alert = H.alert"
    first = mqo.Matcher(DDL, missing="null")
    first.register_table(template, {"c": np.array([10.0, 20.0, 30.0]), "id": ["a", "b", "c"]}, id_column="id")
    first.register_query("Query ID: t\nSELECT * FROM H WHERE H.vib > 1")
    first.push("B", 1.0, {"pressure": 15.0, "alert": 1})
    again = mqo.Matcher.restore(decode_snapshot(encode_snapshot(first.snapshot())))
    restored = mqo.Matcher.restore(first.snapshot(queries=False), like=again)
    assert sorted(r.query for r in restored.push("H", 2.0, {"vib": 5.0, "alert": 1})) == ["b", "c", "t"]
    other = mqo.Matcher(DDL, missing="null")
    other.register_table(template, {"c": np.array([10.0, 25.0, 30.0]), "id": ["a", "b", "c"]}, id_column="id")
    other.register_query("Query ID: t\nSELECT * FROM H WHERE H.vib > 1")
    with pytest.raises(SnapshotError, match=r"other match queries .*; changed \(another text\): b$"):
        mqo.Matcher.restore(first.snapshot(queries=False), like=other)


# ------------------------------------------------- the Spark streaming state


class GroupStateLike:
    """What :func:`runtime.spark.spec.saved_state` and ``save_state`` use of Spark's
    ``GroupState``: ``exists``, ``get`` and ``update``."""

    def __init__(self, blob: bytes | None = None) -> None:
        self.get = None if blob is None else (blob,)

    @property
    def exists(self) -> bool:
        return self.get is not None

    def update(self, row: tuple[bytes]) -> None:
        self.get = row


def test_spark_state_is_a_snapshot_file_and_an_old_pickle_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from runtime.spark.spec import SparkStageError, save_state, saved_state

    m = new_matcher("ordered", aggregates=False)
    run(m, events(6, 40), set(), batches=False)
    state = GroupStateLike()
    save_state(state, 3, "abc", matcher=m.snapshot(), queries=(("j1", "text"),))
    assert state.get is not None and state.get[0].startswith(b"MQOSNAP\x00")
    for name in ("loads", "load", "Unpickler"):
        monkeypatch.setattr(pickle, name, refuse_pickle)
    saved = saved_state(state, 3, "abc")
    assert saved is not None and saved["queries"] == [["j1", "text"]]
    assert mqo.Matcher.restore(saved["matcher"]).held_results == m.held_results
    monkeypatch.undo()
    old = GroupStateLike(pickle.dumps({"format": 3, "fingerprint": "abc"}))
    with pytest.raises(
        SparkStageError, match=r"made by an older version of mqo .*start from a new checkpoint location"
    ):
        saved_state(old, 3, "abc")


def test_stored_rows_of_numpy_columns_travel_as_python_values() -> None:
    """A batch's STRING column given as a list of numpy strings (np.str_, a str to
    ``isinstance``) stores them in its rows: they are written as the str they equal,
    and match alike after restore. (np.bool_ values, and numpy arrays of either, come
    in as Python values.)"""
    m = mqo.Matcher(DDL)
    m.register_query("Query ID: q\nSELECT * FROM B, H MAXWINDOW 10 WHERE B.alert = H.alert AND B.tag = 'x'")
    batch = {
        "ts": np.array([1.0, 2.0]),
        "pressure": np.array([1.0, 2.0]),
        "temp": np.array([0.5, -0.0]),
        "alert": np.array([2**62 + 1, 7]),
        "tag": list(np.array(["x", "y"])),
        "ok": list(np.array([True, False])),
    }
    m.push_batch("B", batch)
    rows = [t.row for t in m.state]
    assert np.str_ in {type(v) for row in rows for v in row}
    arrays = mqo.Matcher(DDL)
    arrays.push_batch("B", {**batch, "tag": np.array(["x", "y"]), "ok": np.array([True, False])})
    assert {type(v) for t in arrays.state for v in t.row[2:]} <= {float, int, str, bool}
    restored = through_bytes(m)
    assert sorted(t.row for t in restored.state) == sorted(rows)
    assert {type(v) for t in restored.state for v in t.row} <= {float, int, str, bool}
    push = ("H", 3.0, {"vib": 1.0, "alert": 2**62 + 1})
    want = [(r.query, dict(r.ids), dict(r.values)) for r in m.push(*push)]
    assert want and [(r.query, dict(r.ids), dict(r.values)) for r in restored.push(*push)] == want
