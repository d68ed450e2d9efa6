"""experiments.bench_ready's cells, run as the benchmark runs them (a fresh interpreter
each): a list of texts, a query file's text and a table give the same matches, and ``--phases`` marks each phase once,
in order, with the process's peak the largest of the phases' own."""

from __future__ import annotations

from experiments.bench_ready import phases_markdown, run_ready

PHASES = ["inputs", "warm-up", "registry", "plan", "tables", "first event"]


def test_phases_of_a_bulk_registration_from_text_and_from_a_table() -> None:
    cells = [run_ready("INTEGER", form, 1500, 20, 3, phases=True) for form in ("text", "file", "table")]
    assert cells[0]["results"] == cells[1]["results"] == cells[2]["results"] > 0
    for cell in cells:
        # a bulk registration makes the plan and its tables itself: the first event is one batch
        assert [row["phase"] for row in cell["phases"]] == PHASES
        assert cell["peak_mib"] >= max(row["peak_mib"] for row in cell["phases"])
        assert cell["peak_mib"] >= cell["registering_peak_mib"] >= max(row["peak_mib"] for row in cell["phases"][2:])
        assert all(row["s"] >= 0 and row["rss_mib"] > 0 for row in cell["phases"])
    table = phases_markdown(cells)
    assert table.count("| 1,500 INTEGER table |") == len(PHASES) and "| first event |" in table
