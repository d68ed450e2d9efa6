"""One command stream read by the match stage and the aggregate stage
(``shared_control``): each takes the queries of its kind, an id is taken once across
both, and every refused command is reported by exactly one stage. The rule itself
(:func:`runtime.spark.control.apply_shared`), without Spark."""

from __future__ import annotations

from typing import Any

import mqo
from runtime.spark.control import apply_shared

DDL = "REGISTER STREAM B (pressure FLOAT, pid INTEGER);\nREGISTER STREAM H (vib FLOAT, pid INTEGER);"
MAX_WINDOW = 10.0
COMMANDS: list[tuple[str, str, str | None]] = [
    # (command, text, who reports it: None when accepted)
    ("register", "Query ID: m1\nSELECT * FROM B WHERE B.pressure > 5;", None),
    ("register", "Query ID: a1\nSELECT COUNT(*) FROM H [RANGE 5 sec];", None),
    ("register", "Query ID: a1\nSELECT * FROM B WHERE B.pressure > 9;", "match"),  # the id is taken
    ("register", "Query ID: m1\nSELECT MAX(H.vib) FROM H [RANGE 5 sec];", "match"),  # so is this one
    ("register", "Query ID: x\nSELECT * FROM B WHERE;", "match"),  # does not compile
    (
        "register",
        "Query ID: m2\nSELECT * FROM H WHERE H.vib > 1;\nQuery ID: a2\nSELECT COUNT(*) FROM H [RANGE 5 sec];",
        "match",
    ),
    ("register", "Query ID: wide\nSELECT * FROM B, H MAXWINDOW 60 sec WHERE B.pid = H.pid;", "match"),  # too wide
    ("register", "Query ID: wide\nSELECT COUNT(*) FROM B [ROWS 3];", None),  # so the id is free
    ("register", "Query ID: h\nSELECT COUNT(*) FROM H [RANGE 2 sec];", "aggregate"),  # the stage's own check
    ("unregister", "a1", None),
    ("unregister", "m1", None),
    ("unregister", "nope", "match"),
    ("launch", "m1", "match"),
]


def test_both_stages_agree_and_report_each_refusal_once() -> None:
    stages: dict[str, Any] = {kind: (mqo.Matcher(DDL), set()) for kind in ("match", "aggregate")}

    def refuse_h(ids: list[str]) -> tuple[str, str] | None:  # as a stage without H's input would
        return ("h", "query h reads stream H, which the stage has no input for") if "h" in ids else None

    for ts, (command, text, reporter) in enumerate(COMMANDS):
        reports = {}
        for kind, (matcher, foreign) in stages.items():
            check = refuse_h if kind == "aggregate" else None
            error = apply_shared(
                matcher, kind, foreign, float(ts), command, text, shared=True, max_window=MAX_WINDOW, check=check
            )
            if error is not None:
                reports[kind] = error
        assert list(reports) == ([reporter] if reporter else []), (command, text, reports)
    match, match_foreign = stages["match"]
    aggregate, aggregate_foreign = stages["aggregate"]
    assert match.query_ids == [] and sorted(aggregate.query_ids) == ["wide"]
    assert match_foreign == {"wide", "h"}  # h: refused by the aggregate stage alone (documented)
    assert aggregate_foreign == set()
    assert "<register at ts 4.0>:2:" in str(
        apply_shared(mqo.Matcher(DDL), "match", set(), 4.0, "register", COMMANDS[4][1], shared=True)
    )


def test_without_a_shared_stream_the_other_kind_is_an_error() -> None:
    error = apply_shared(mqo.Matcher(DDL), "aggregate", set(), 1.0, "register", COMMANDS[0][1])
    assert error is not None and error[0] == "m1" and "match_stream" in error[1]
    error = apply_shared(mqo.Matcher(DDL), "match", set(), 1.0, "register", COMMANDS[1][1])
    assert error is not None and error[0] == "a1" and "aggregate_stream" in error[1]
    assert apply_shared(mqo.Matcher(DDL), "aggregate", set(), 1.0, "unregister", "a9") is not None
