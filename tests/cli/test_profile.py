"""``mqo profile``: selectivities, sharing ratio and the best static order, with clear
errors for bad input."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from experiments._data import generate, write_csv
from runtime.cli import main as cli_main
from runtime.local.profile import window_pairs
from tests.conftest import EXAMPLES, WORKLOADS

ICU = EXAMPLES / "icu"


def icu_args(out: Path, *extra: str) -> list[str]:
    args = ["profile", "--schema", str(ICU / "streams.ddl"), "--queries", str(ICU / "running_example.mqo")]
    for s in "BHKT":
        args += ["--input", f"{s}={ICU / (s + '.csv')}"]
    return [*args, "--out", str(out), *extra]


def read(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


def test_profile_of_the_running_example(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "prof"
    assert cli_main(icu_args(out, "--allowed-lateness", "10")) == 0
    text = capsys.readouterr().out
    assert "Sharing ratio 1.00" in text
    assert "Best static order:" in text and "<- best" in text
    for name in ("predicates.csv", "lists.csv", "types.csv", "orders.csv", "profile.png"):
        assert (out / name).stat().st_size > 0, name
    preds = {r["predicate"]: r for r in read(out / "predicates.csv")}
    assert len(preds) == 11
    # One T tuple, fluct 103: T.fluct * 2 = 103 normalises to T.fluct = 51.5.
    assert preds["T.fluct = 103"]["selectivity"] == "1"
    assert preds["T.fluct = 51.5"]["selectivity"] == "0"
    assert preds["H.beatrate = 52"]["evaluated"] == "5"
    orders = read(out / "orders.csv")
    assert [r["order"] for r in orders] == ["AJW", "AWJ", "JAW", "JWA", "WAJ", "WJA"]
    assert {r["results"] for r in orders} == {"1"}  # chapter 4's one result, in every order
    best = [r for r in orders if r["best"] == "True"]
    assert len(best) == 1
    assert int(best[0]["comparisons"]) == min(int(r["comparisons"]) for r in orders)
    assert (out / "profile.png").read_bytes()[:4] == b"\x89PNG"


def test_late_tuples_are_noted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    b = tmp_path / "b.csv"
    b.write_text("ts,pressure,temp,alert\n5,150,101,0\n1,97,101,0\n")  # out of order: the second is late
    args = icu_args(tmp_path / "p", "--time", "global")  # one clock: the silent streams do not hold time back
    args[args.index("--input") + 1] = f"B={b}"
    assert cli_main(args) == 0
    assert "1 late tuple(s) were not matched" in capsys.readouterr().err


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("gen")
    write_csv(generate(["B", "H"], 150, 2.0, seed=11), folder)
    return folder


def test_profile_on_generated_data(generated: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "prof"
    args = [
        "profile",
        "--schema",
        str(WORKLOADS / "streams.ddl"),
        "--queries",
        str(WORKLOADS / "fig5_15_overlap75.mqo"),
    ]
    args += ["--input", f"B={generated / 'B.csv'}", "--input", f"H={generated / 'H.csv'}", "--out", str(out)]
    assert cli_main(args) == 0
    text = capsys.readouterr().out
    assert "Profile of 5 queries over 300 tuples" in text
    assert "Sharing ratio 1.18" in text
    preds = {r["predicate"]: r for r in read(out / "predicates.csv")}
    b = read(generated / "B.csv")
    h = read(generated / "H.csv")
    # An attribute predicate: the share of B tuples with pressure < 110.
    expected = sum(float(r["pressure"]) < 110 for r in b)
    assert int(preds["B.pressure < 110"]["satisfied"]) == expected
    assert int(preds["B.pressure < 110"]["evaluated"]) == len(b)
    # A join predicate: pairs within the 20 s MAXWINDOW with B.pressure <= 2 * H.vib.
    pairs = [(x, y) for x in b for y in h if abs(float(x["ts"]) - float(y["ts"])) <= 20]
    assert int(preds["B.pressure <= 2*H.vib"]["evaluated"]) == len(pairs)
    assert int(preds["B.pressure <= 2*H.vib"]["satisfied"]) == sum(
        float(x["pressure"]) <= 2 * float(y["vib"]) for x, y in pairs
    )
    lists = read(out / "lists.csv")
    pressure = next(r for r in lists if r["pattern"] == "B.pressure < c")
    assert pressure["predicates"] == "5"
    assert float(pressure["any"]) == pytest.approx(sum(float(r["pressure"]) < 120 for r in b) / len(b))
    orders = read(out / "orders.csv")
    assert len({r["results"] for r in orders}) == 1
    best = next(r for r in orders if r["best"] == "True")
    assert f"Best static order: {best['order']}" in text


def test_negated_and_equality_lists(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "s.ddl").write_text("REGISTER STREAM A (x INTEGER);")
    (tmp_path / "q.mqo").write_text(
        "SELECT * FROM A WHERE A.x != 1;\nSELECT * FROM A WHERE A.x != 2;\nSELECT * FROM A WHERE A.x = 2;\n"
    )
    (tmp_path / "a.csv").write_text("ts,x\n1,1\n2,2\n3,2\n4,3\n5,\n")
    out = tmp_path / "p"
    args = ["profile", "--schema", str(tmp_path / "s.ddl"), "--queries", str(tmp_path / "q.mqo")]
    assert cli_main([*args, "--input", f"A={tmp_path / 'a.csv'}", "--out", str(out)]) == 0
    preds = {r["predicate"]: r for r in read(out / "predicates.csv")}
    # NULL satisfies nothing, != included.
    assert preds["A.x != 1"]["satisfied"] == "3"
    assert preds["A.x != 2"]["satisfied"] == "2"
    assert preds["A.x = 2"]["satisfied"] == "2"
    assert {r["results"] for r in read(out / "orders.csv")} == {"7"}


def test_window_pairs() -> None:
    left = [(0.0,), (5.0,), (10.0,)]
    right = [(4.0,), (6.0,), (20.0,)]
    assert sorted(window_pairs(left, right, 1.0)) == [(1, 0), (1, 1)]
    assert len(window_pairs(left, right, 100.0)) == 9


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda a: a.__setitem__(a.index("--input") + 1, "B=/nonexistent/b.csv"), "input file not found"),
        (lambda a: a.__setitem__(a.index("--input") + 1, "X=" + str(ICU / "B.csv")), "no stream 'X'"),
        (lambda a: a.__setitem__(a.index("--input") + 1, "Bx=" + str(ICU / "B.csv")), "did you mean 'B'"),
        (lambda a: a.__setitem__(a.index("--input") + 1, "nonsense"), "STREAM=FILE"),
        (lambda a: a.__setitem__(a.index("--queries") + 1, "/nonexistent.mqo"), "query file not found"),
    ],
)
def test_bad_input_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str], change, message) -> None:
    args = icu_args(tmp_path / "p")
    change(args)
    assert cli_main(args) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err


def test_bad_rows_and_empty_inputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "b.csv"
    bad.write_text("ts,pressure,temp,alert\n1,80,99,0\n2,eighty,99,0\n")
    args = ["profile", "--schema", str(ICU / "streams.ddl"), "--queries", str(ICU / "running_example.mqo")]
    assert cli_main([*args, "--input", f"B={bad}", "--out", str(tmp_path / "p")]) == 2
    assert f"{bad}:3: column 'pressure'" in capsys.readouterr().err
    empty = tmp_path / "e.csv"
    empty.write_text("ts,pressure,temp,alert\n")
    assert cli_main([*args, "--input", f"B={empty}", "--out", str(tmp_path / "p")]) == 2
    assert "no tuples" in capsys.readouterr().err
    afile = tmp_path / "taken"
    afile.write_text("x")
    assert cli_main([*args, "--input", f"B={ICU / 'B.csv'}", "--out", str(afile)]) == 2
    assert "not a folder" in capsys.readouterr().err
