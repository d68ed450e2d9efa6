"""mqo: a multi-query optimizer and shared-predicate matcher for data streams.

>>> import mqo
>>> m = mqo.Matcher("REGISTER STREAM B (pressure FLOAT, temp FLOAT);")
>>> m.register_query("SELECT * FROM B WHERE B.pressure < 90")
'1'
"""

from mqo.batch import MatchBatch
from mqo.config import MatcherConfig
from mqo.matcher import Matcher, NeverMatchesWarning
from mqo.results import LateTuple, Match, TupleError
from predicates import Catalog, MqoError, QueryError

__all__ = [
    "Catalog",
    "LateTuple",
    "Match",
    "MatchBatch",
    "Matcher",
    "MatcherConfig",
    "MqoError",
    "NeverMatchesWarning",
    "QueryError",
    "TupleError",
]
__version__ = "0.1.0"
