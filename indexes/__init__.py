"""Index structures of the matcher: covering-order predicate lists, kill tables (the
QED test over whole lists), stored tuples, join value indexes and time buckets."""

from indexes.covering import CoveringList, compare, is_null
from indexes.kill_table import KillTable
from indexes.stored import StoredTuple
from indexes.time_buckets import TimeBuckets
from indexes.value_index import ValueIndex

__all__ = ["CoveringList", "KillTable", "StoredTuple", "TimeBuckets", "ValueIndex", "compare", "is_null"]
