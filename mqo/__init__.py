"""mqo: a multi-query optimizer and shared-predicate matcher for data streams.

>>> import mqo
>>> m = mqo.Matcher("REGISTER STREAM B (pressure FLOAT, temp FLOAT);")
>>> m.register_query("SELECT * FROM B WHERE B.pressure < 90")
'1'
"""

from mqo.aggregation import AggregateBatch
from mqo.aggregation.results import AggregateChunk, AggregateValues

# Arrow arrays to and from numpy by their buffers (pyarrow's own conversions import pandas)
from mqo.arrow_build import array_of, numpy_array, numpy_of, numpy_with_nulls
from mqo.arrow_build import scalar as arrow_scalar
from mqo.batch import MatchBatch, text_of
from mqo.clock import clock_for
from mqo.config import ORDERS, MatcherConfig
from mqo.matcher import Matcher
from mqo.memory import no_cyclic_gc
from mqo.partitioning import shared_equality_key
from mqo.registrations import NeverMatchesWarning

# the one result encoder (result columns as JSON lines and CSV), which the writers share
from mqo.result_encoding import (
    ARROW_TYPES,
    Layout,
    buffer_of,
    csv_header,
    csv_lines,
    finite_columns,
    float_texts,
    json_lines,
    matches_columns,
    named_contexts,
    query_layouts,
    result_schema,
    value_texts,
    within_64_bits,
)
from mqo.results import LateTuple, Match, TupleError
from mqo.snapshot_codec import SnapshotError, decode_snapshot, encode_snapshot
from predicates import Catalog, MqoError, QueryError

__all__ = [
    "ARROW_TYPES",
    "ORDERS",
    "AggregateBatch",
    "AggregateChunk",
    "AggregateValues",
    "Catalog",
    "LateTuple",
    "Layout",
    "Match",
    "MatchBatch",
    "Matcher",
    "MatcherConfig",
    "MqoError",
    "NeverMatchesWarning",
    "QueryError",
    "SnapshotError",
    "TupleError",
    "array_of",
    "arrow_scalar",
    "buffer_of",
    "clock_for",
    "csv_header",
    "csv_lines",
    "decode_snapshot",
    "encode_snapshot",
    "finite_columns",
    "float_texts",
    "json_lines",
    "matches_columns",
    "named_contexts",
    "no_cyclic_gc",
    "numpy_array",
    "numpy_of",
    "numpy_with_nulls",
    "query_layouts",
    "result_schema",
    "shared_equality_key",
    "text_of",
    "value_texts",
    "within_64_bits",
]
__version__ = "0.1.0"
