"""Golden errors of CREATE VIEW: each case of ``tests/fixtures/golden/view_errors.cases``
is registered on a fresh matcher (schema.ddl) and must fail with the error, position
and caret of ``view_errors.errors``; nothing is registered after an error.
Regenerate with ``MQO_UPDATE_GOLDEN=1`` and review the diff."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import mqo
from predicates import QueryError

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "golden"
UPDATE = os.environ.get("MQO_UPDATE_GOLDEN") == "1"


def cases() -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for line in (GOLDEN / "view_errors.cases").read_text().splitlines(keepends=True):
        if line.startswith("-- case: "):
            out.append((line[len("-- case: ") :].strip(), ""))
        elif out:
            out[-1] = (out[-1][0], out[-1][1] + line)
    return out


def errors() -> str:
    parts = []
    for name, text in cases():
        m = mqo.Matcher((GOLDEN / "schema.ddl").read_text())
        with pytest.raises(QueryError) as caught:
            m.register_queries(text, source_name="view_errors.cases")
        assert m.query_ids == [] and "v" not in m.catalog, name  # all or nothing
        parts.append(f"== {name}\n{caught.value}\n")
    return "\n".join(parts)


def test_view_errors_name_the_place() -> None:
    expected = GOLDEN / "view_errors.errors"
    got = errors()
    if UPDATE:
        expected.write_text(got)
    assert got == expected.read_text()
