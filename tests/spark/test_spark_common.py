"""What the Spark stages share (:mod:`runtime.spark.common`, :func:`runtime.spark.spec.stage_matcher`):
every stage checks its inputs and options alike, a late tuple comes out in each output's
own columns, and a state group reads its rows back exactly."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqo import Matcher
from predicates import ColumnType
from runtime.spark import aggregate_batch, aggregate_stream, match_batch, match_stream
from runtime.spark.aggregate import AGGREGATE_COLUMNS, aggregate_frame, aggregate_schema
from runtime.spark.aggregate_control import aggregate_control_schema
from runtime.spark.common import column_values, late_row, result_schema, runs
from runtime.spark.control import CONTROL_COLUMNS, control_frame, control_schema
from runtime.spark.spec import SparkStageError, build_spec
from runtime.spark.streaming import results_frame

DDL = "REGISTER STREAM H (beatrate FLOAT, pid INTEGER, tag STRING);"
MATCH = "SELECT H.beatrate, H.tag FROM H WHERE H.beatrate > 80"
AGGREGATE = "SELECT COUNT(*) AS n FROM H [RANGE 10 SLIDE 5]"


def test_every_stage_refuses_no_stream_dataframes() -> None:
    # match_stream ran into StopIteration here; the others failed later, each its own way
    stages = [
        lambda: match_batch({}, MATCH, schema=DDL),
        lambda: match_stream({}, MATCH, schema=DDL),
        lambda: aggregate_batch({}, AGGREGATE, schema=DDL),
        lambda: aggregate_stream({}, AGGREGATE, schema=DDL),
    ]
    for stage in stages:
        with pytest.raises(SparkStageError, match="no stream DataFrames given"):
            stage()


@pytest.mark.parametrize("partitions", [0, -1, 2.5, True])
def test_batch_stages_refuse_a_partition_count_that_is_not_a_whole_number(spark_session: Any, partitions: Any) -> None:
    # 0 used to fall back to Spark's default silently, 2.5 to be cut to 2
    frame = spark_session.createDataFrame(
        [(1.0, 0, 90.0, 1, "a")], "ts double, id bigint, beatrate double, pid bigint, tag string"
    )
    with pytest.raises(SparkStageError, match=f"partitions must be a whole number >= 1, got {partitions!r}"):
        match_batch({"H": frame}, MATCH, schema=DDL, partitions=partitions)
    with pytest.raises(SparkStageError, match=f"partitions must be a whole number >= 1, got {partitions!r}"):
        aggregate_batch({"H": frame}, AGGREGATE, schema=DDL, partitions=partitions)


@pytest.mark.parametrize("lateness", [-1, float("nan"), float("inf"), "5", True])
def test_streaming_stages_refuse_bad_lateness_alike(spark_session: Any, tmp_path: Path, lateness: Any) -> None:
    (tmp_path / "H").mkdir()
    frame = spark_session.readStream.schema("ts double, id bigint, beatrate double, pid bigint, tag string").csv(
        str(tmp_path / "H")
    )
    message = "allowed_lateness must be a finite number of seconds >= 0"
    with pytest.raises(SparkStageError, match=message):
        match_stream({"H": frame}, MATCH, schema=DDL, allowed_lateness=lateness)
    with pytest.raises(SparkStageError, match=message):
        aggregate_stream({"H": frame}, AGGREGATE, schema=DDL, allowed_lateness=lateness)
    commands = spark_session.readStream.schema("ts double, command string, query string").json(str(tmp_path / "H"))
    with pytest.raises(SparkStageError, match=message):
        aggregate_stream({"H": frame}, "", schema=DDL, control=commands, allowed_lateness=lateness)


def test_a_late_tuple_comes_out_in_each_outputs_own_columns() -> None:
    matcher = Matcher(DDL)
    matcher.register_query(MATCH)
    spec = build_spec(matcher)
    results, _ = results_frame([late_row("H", 2.5, 7, len(result_schema(spec).fields))], spec.value_types)
    assert list(results.columns) == result_schema(spec).fieldNames()
    assert results.iloc[0].tolist()[:3] == [None, 2.5, {"H": 7}]
    assert results.iloc[0].tolist()[3:] == [None, None]

    control = control_frame([late_row("H", 2.5, 7, len(CONTROL_COLUMNS))])
    assert list(control.columns) == control_schema().fieldNames()
    assert control.iloc[0].tolist() == [None, 2.5, {"H": 7}, None, None]

    aggregates = aggregate_frame([late_row("H", 2.5, 7, len(AGGREGATE_COLUMNS), aggregate=True)])
    assert list(aggregates.columns) == aggregate_schema().fieldNames()
    row = aggregates.iloc[0].tolist()
    assert row[0] is None and np.isnan(row[1]) and row[2:] == [2.5, {"H": "7"}, None]

    with_error = aggregate_frame([late_row("H", 2.5, 7, len(AGGREGATE_COLUMNS) + 1, aggregate=True)])
    assert list(with_error.columns) == aggregate_control_schema().fieldNames()
    assert with_error.iloc[0].tolist()[2:] == [2.5, {"H": "7"}, None, None]


def test_column_values_read_integers_and_nulls_back_exactly() -> None:
    big = 2**53 + 1  # a double would round it
    as_text = pd.Series([str(big), None, "-3"], dtype=object)
    assert column_values(as_text, ColumnType.INTEGER) == [big, None, -3]
    floats_as_text = pd.Series(["0.1", None, "nan"], dtype=object)
    read = column_values(floats_as_text, ColumnType.FLOAT)
    assert read[:2] == [0.1, None] and np.isnan(read[2])  # a NULL float is not a NaN one
    doubles = pd.Series([0.1, 2.0], dtype="float64")
    assert column_values(doubles, ColumnType.FLOAT) == [0.1, 2.0]
    texts = pd.Series(["a", None, float("nan")], dtype=object)
    assert column_values(texts, ColumnType.STRING) == ["a", None, None]


@given(st.lists(st.integers(0, 3), max_size=40))
def test_runs_cut_where_the_key_changes(keys: list[int]) -> None:
    array = np.array(keys, dtype=np.int64)
    found = runs(array)
    assert [k for start, end in found for k in keys[start:end]] == keys  # every row once, in order
    for start, end in found:
        assert end > start and len(set(keys[start:end])) == 1
    for (_, end), (start, _) in itertools.pairwise(found):
        assert end == start and keys[end - 1] != keys[start]
