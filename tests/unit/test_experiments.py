"""The experiments workbench: data and query generators, and every experiment at its
quick size (each asserts its own claims inside, e.g. identical results across plans)."""

from __future__ import annotations

import csv
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from experiments import _common as C
from experiments._data import ICU, Constant, Phase, Uniform, by_stream, columns_of, ddl, generate, write_csv
from experiments._queries import QueryShape, diff_constant, make_queries
from mqo import Matcher
from runtime.cli import main as cli_main
from runtime.io.inputs import InputSpec, read_stream

REPO = Path(__file__).resolve().parents[2]
EXPERIMENTS = ("costmodel", "multijoin", "overlap", "sweeps")
PNG = b"\x89PNG\r\n\x1a\n"


# ---------------------------------------------------------------- data generator


def test_generate_is_seeded_and_in_arrival_order() -> None:
    a = generate(["B", "H"], 50, 2.0, seed=3)
    b = generate(["B", "H"], 50, 2.0, seed=3)
    assert a == b
    assert a != generate(["B", "H"], 50, 2.0, seed=4)
    assert len(a) == 100
    assert [e.ts for e in a] == sorted(e.ts for e in a)
    for name, events in by_stream(a).items():
        assert [e.id for e in events] == list(range(50)), name


def test_streams_and_columns_are_independent() -> None:
    """Adding a stream, or shifting one column, leaves everything else as it was."""
    two = generate(["B", "H"], 40, 2.0, seed=1)
    three = generate(["B", "H", "K"], 40, 2.0, seed=1)
    assert [e for e in three if e.stream != "K"] == two
    shifted = generate(["B", "H"], 40, 2.0, seed=1, phases=[Phase(5.0, {"B.pressure": Constant(7)})])
    for e, f in zip(two, shifted, strict=True):
        assert (e.stream, e.ts, e.id) == (f.stream, f.ts, f.id)
        assert e.values["temp" if e.stream == "B" else "vib"] == f.values["temp" if f.stream == "B" else "vib"]


def test_phases_shift_distributions_mid_stream() -> None:
    events = generate(["B"], 400, 4.0, seed=2, phases=[Phase(50.0, {"B.pressure": Uniform(0, 10)})])
    before = [e.values["pressure"] for e in events if e.ts < 50.0]
    after = [e.values["pressure"] for e in events if e.ts >= 50.0]
    assert before and after
    assert max(after) <= 10 and max(before) > 100
    assert all(float(v).is_integer() for v in before + after)
    assert {e.values["alert"] for e in events} <= {0, 1}


def test_default_distribution_is_about_uniform_on_0_200() -> None:
    values = np.array([e.values["vib"] for e in generate(["H"], 4000, 2.0, seed=5)])
    assert values.min() >= 0 and values.max() <= 200
    assert 90 < values.mean() < 110


def test_rates_and_regular_arrival() -> None:
    events = generate(["B", "K"], 10, {"B": 1.0, "K": 4.0}, seed=0, arrival="regular")
    b = [e.ts for e in events if e.stream == "B"]
    k = [e.ts for e in events if e.stream == "K"]
    assert b == [float(i) for i in range(1, 11)]
    assert k == [i / 4 for i in range(1, 11)]


def test_generator_errors_are_clear() -> None:
    with pytest.raises(KeyError, match="unknown stream 'X'"):
        generate(["X"], 5)
    with pytest.raises(KeyError, match=r"not STREAM\.column"):
        generate(["B"], 5, phases=[Phase(1.0, {"pressure": Constant(1)})])
    with pytest.raises(KeyError, match="no column"):
        generate(["B"], 5, phases=[Phase(1.0, {"B.presure": Constant(1)})])
    with pytest.raises(ValueError, match="rate"):
        generate(["B"], 5, rate=0)


def test_csv_files_read_back_with_the_runtime(tmp_path: Path) -> None:
    events = generate(["B", "H"], 30, 2.0, seed=1)
    paths = write_csv(events, tmp_path)
    catalog = Matcher(ddl(["B", "H"])).catalog
    data = read_stream(InputSpec("B", str(paths["B"])), catalog.get("B"))
    mine = [e for e in events if e.stream == "B"]
    assert data.ts.tolist() == [e.ts for e in mine]
    assert data.column_values("pressure") == [e.values["pressure"] for e in mine]
    cols = columns_of(events, "B")
    assert list(cols["ts"]) == data.ts.tolist()


# ---------------------------------------------------------------- query generator


def test_diff_constant_gives_the_selectivity() -> None:
    rng = np.random.default_rng(0)
    x, y = rng.uniform(0, 200, 200_000), rng.uniform(0, 200, 200_000)
    for s in (0.05, 0.1, 0.5, 0.9):
        assert abs(np.mean(x - y <= diff_constant(s)) - s) < 0.01


@pytest.mark.parametrize("overlap", [0.0, 1.0])
def test_generated_queries_register_and_overlap_as_asked(overlap: float) -> None:
    specs = [ICU["B"], ICU["H"]]
    shape = QueryShape(arity=2, attributes=2, joins=2, overlap=overlap, window_predicate=False)
    m = Matcher(ddl(specs))
    m.register_queries(make_queries(30, specs, shape, seed=1))
    measured = C.overlap_stats(m)["overlap_measured"]
    assert measured == 0.0 if overlap == 0.0 else measured > 0.9


def test_generated_multiway_queries_are_connected() -> None:
    from experiments._data import generic_streams

    specs = generic_streams(5)
    texts = make_queries(5, specs, QueryShape(arity=5, joins=4), seed=2)
    m = Matcher(ddl(specs))
    m.register_queries(texts)
    assert all(len(rq.streams) == 5 for rq in m.registry)
    with pytest.raises(ValueError, match="join predicates"):
        QueryShape(arity=4, joins=2)


# -------------------------------------------------------------------- experiments


def run(name: str, out: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    import importlib

    module = importlib.import_module(f"experiments.{name}")
    assert module.main(["--quick", "--out", str(out), "--no-progress", *extra]) == 0
    return capsys.readouterr().out


def check_outputs(out: Path, stdout: str) -> None:
    assert stdout.strip().splitlines()[-1] == str(out)
    summary = (out / "summary.md").read_text()
    assert summary.startswith("# ")
    pngs = list(out.glob("*.png"))
    assert pngs and all(p.read_bytes()[:8] == PNG for p in pngs)
    for link in re.findall(r"!\[[^]]*\]\(([^)]+)\)", summary):
        assert (out / link).exists(), f"summary.md shows a missing figure {link}"
    csvs = list(out.glob("*.csv"))
    assert csvs
    for path in csvs:
        with path.open() as f:
            rows = list(csv.reader(f))
        assert len(rows) >= 2, f"{path.name} has no data rows"


def test_list_describes_every_experiment(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["experiment", "--list"]) == 0
    listing = capsys.readouterr().out
    for name in EXPERIMENTS:
        assert re.search(rf"^{name}\s+\S", listing, re.M), name


def test_costmodel(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "costmodel"
    check_outputs(out, run("costmodel", out, capsys))
    with (out / "phases.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert {r["order"] for r in rows} == {"AJW", "AWJ", "JAW", "JWA", "WAJ", "WJA"}
    for r in rows:  # the engine forms exactly the pairs its pairing rule says
        assert r["engine_exact"] == r["engine_measured"]
    with (out / "fig51.csv").open() as f:
        (fig51,) = list(csv.DictReader(f))
    assert fig51["nonoverlap_model"] == fig51["nonoverlap_measured"]
    assert int(fig51["overlap_measured"]) < int(fig51["nonoverlap_measured"])


def test_costmodel_is_reproducible(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run("costmodel", tmp_path / "a", capsys, "--seed", "9")
    run("costmodel", tmp_path / "b", capsys, "--seed", "9")
    assert (tmp_path / "a" / "phases.csv").read_bytes() == (tmp_path / "b" / "phases.csv").read_bytes()


def test_multijoin(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "multijoin"
    check_outputs(out, run("multijoin", out, capsys))
    with (out / "summary.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [r["plan"] for r in rows] == ["BH_TK", "BK_TH", "TB_HK", "BHT_K", "BKT_H", "BHK_T", "BHTK"]
    assert len({r["results"] for r in rows}) == 1  # the same results in every plan (asserted inside too)
    assert float(rows[0]["results"]) > 0


def test_multijoin_plans_agree_with_the_single_operator() -> None:
    from experiments import multijoin

    events = generate(multijoin.STREAMS, 30, multijoin.RATE, seed=4)
    found = {}
    with C.Progress(0, enabled=False) as bar:
        for name in ("BH_TK", "BHT_K", "BHTK"):
            plan = multijoin.build_plan(name, "AJW")
            multijoin.run_plan(plan, events, bar)
            found[name] = sorted(plan.found)
    assert found["BH_TK"] == found["BHT_K"] == found["BHTK"]


def test_overlap(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "overlap"
    check_outputs(out, run("overlap", out, capsys))
    with (out / "summary.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [r["level"] for r in rows] == ["25", "50", "75"]
    assert all(float(r["unshared_comparisons"]) > 0 for r in rows)
    with (out / "by_order.csv").open() as f:
        assert len(list(csv.DictReader(f))) == 18


@pytest.mark.slow
def test_overlap_shared_does_fewer_comparisons_at_every_level(tmp_path: Path, capsys) -> None:
    """The thesis' claim as it stands, at a size where it is not noise (the quick size is
    too small): the saving grows with the overlap, and the 75% set saves under every
    order. Under AJW the 25% and 50% sets are at parity (docs/RESULTS.md: a fetched
    tuple's attribute outcome comes before its time check, on both sides), so only the
    other orders are held to fewer comparisons there."""
    from experiments import overlap

    events = generate(["B", "H"], 600, overlap.RATE, seed=1)
    ddl_text = ddl(["B", "T", "H", "K"])
    savings = []
    with C.Progress(0, enabled=False) as bar:
        for _, file in overlap.LEVELS:
            row = overlap.run_level(ddl_text, C.workload(file), events, bar, "AJW")
            savings.append(1 - row["shared_comparisons"] / row["unshared_comparisons"])
        for _, file in overlap.LEVELS:
            row = overlap.run_level(ddl_text, C.workload(file), events, bar, "WAJ")
            assert row["shared_comparisons"] < row["unshared_comparisons"], file
    assert savings[2] > 0.05 and savings[2] > savings[0]  # the 75% set saves, and more than the 25% set


def test_sweeps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sweeps"
    check_outputs(out, run("sweeps", out, capsys, "--sweep", "queries", "--sweep", "overlap"))
    assert (out / "sweep_queries.png").exists() and (out / "sweep_overlap.png").exists()
    with (out / "sweeps.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert {r["sweep"] for r in rows} == {"queries", "overlap"}
    assert all(float(r["throughput"]) > 0 and float(r["comparisons"]) > 0 for r in rows)
    overlap = [r for r in rows if r["sweep"] == "overlap"]
    assert all(r["unshared_comparisons"] for r in overlap)


@pytest.mark.slow
def test_all_sweeps_quick(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sweeps"
    check_outputs(out, run("sweeps", out, capsys))
    assert len(list(out.glob("sweep_*.png"))) == 5


def test_sweep_points_stop_at_the_budget() -> None:
    from experiments import sweeps

    status, payload, _ = sweeps.run_isolated(sweeps.Config(queries=50, n_per_stream=500), seed=1, budget=0.0)
    assert status == "timeout" and payload is None
    assert sweeps.predict([(10, 1.0)], 100) is None
    assert sweeps.predict([(10, 1.0), (100, 10.0)], 1000) == pytest.approx(100.0)


def test_experiment_via_the_cli_and_as_a_module(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "via-cli"
    assert cli_main(["experiment", "multijoin", "--out", str(out), "--quick", "--no-progress"]) == 0
    check_outputs(out, capsys.readouterr().out)
    done = subprocess.run(
        [sys.executable, "-m", "experiments.costmodel", "--help"], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert "--seed" in done.stdout and "--quick" in done.stdout


def test_unknown_experiment_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["experiment", "multjoin"]) == 2
    assert "did you mean 'multijoin'" in capsys.readouterr().err


def test_every_experiment_is_an_installed_entry_point() -> None:
    """``mqo experiment`` finds experiments by their entry points (runtime does not
    import experiments): every experiment module must be declared in pyproject.toml."""
    import importlib.metadata

    import experiments

    declared = {e.name: e.value for e in importlib.metadata.entry_points(group="mqo.experiments")}
    assert declared == {name: f"experiments.{name}" for name in experiments.EXPERIMENTS}


def test_pubsub_benchmarks_check_their_match_sets_against_brute_force() -> None:
    # the benchmarks raise when a match set differs from brute force: with
    # subscriptions replaced while events flow (c') and pushed one at a time or batched (c)
    from experiments.bench_pubsub import bench_churn_push, bench_pubsub

    rows = bench_churn_push(300, 400, seed=1, churn=0.5, width=0.9, check_every=1)
    assert [r["metric"].split(":")[0] for r in rows][:2] == ["300 subscriptions, events one at a time"] * 2
    assert any("register + unregister" in r["metric"] for r in rows)
    assert any("push, one at a time" in r["metric"] for r in bench_pubsub([300], 120, seed=2))


def test_the_shape_matrix_registers_the_same_queries_in_every_form() -> None:
    """(h) holds the text forms of one column type to the same matches: a list, a
    query file and a table of the same subscriptions find the same results."""
    from experiments.bench_shapes import FORMS, KINDS, TYPES, measure_cell

    for kind in KINDS:
        for ctype in TYPES:
            counts = {form: measure_cell(kind, ctype, form, 400, 12, 3)["results"] for form in FORMS}
            assert len(set(counts.values())) == 1, (kind, ctype, counts)
            assert counts["list"] > 0, (kind, ctype)
