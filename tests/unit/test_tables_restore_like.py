"""A matcher restored ``like=`` another that declares tables (what every Spark task
does with its worker's cached plan): it reads the snapshot's versions as of each
tuple's ts, and no version is shared between the two matchers."""

from __future__ import annotations

import mqo

DDL = "REGISTER STREAM H (patient INTEGER, beatrate FLOAT);"
TEXT = (
    "CREATE TABLE patients (id INTEGER, ward STRING) KEY (id);\n"
    "Query ID: icu\nSELECT * FROM H, patients P WHERE H.patient = P.id AND P.ward = 'ICU';"
)


def wards(matcher: mqo.Matcher, ts: float) -> list[str]:
    return [r.values["P.ward"] for r in matcher.push("H", ts, {"patient": 7, "beatrate": 1.0})]


def test_a_matcher_restored_like_another_has_the_snapshots_versions_and_its_own() -> None:
    base = mqo.Matcher(DDL, allowed_lateness=100)
    base.register_queries(TEXT)
    holder = mqo.Matcher(DDL, allowed_lateness=100)
    holder.register_queries(TEXT)
    holder.upsert_rows("patients", [{"id": 7, "ward": "ICU"}], None)
    holder.upsert_rows("patients", [{"id": 7, "ward": "GEN"}], 50)
    versions = holder.snapshot(queries=False)["reference_tables"]
    snapshot = {**base.snapshot(queries=False), "reference_tables": versions}
    first = mqo.Matcher.restore(snapshot, like=base)
    second = mqo.Matcher.restore(snapshot, like=base)
    assert wards(first, 40) == ["ICU"] and wards(first, 60) == []  # as of each tuple's ts
    first.delete_rows("patients", [7], 10)
    assert wards(first, 45) == []
    assert wards(second, 45) == ["ICU"]  # the other matcher's versions are its own
    assert wards(base, 45) == []  # the plan's matcher has none
    alone = mqo.Matcher.restore(base.snapshot(queries=False), like=base)
    assert wards(alone, 45) == [] and alone.tables == ["patients"]
