"""compile_many's look for views and tables over many texts at once says what each
text's own test says (a text that may declare a view or read a table skips the
caches): no text is missed, whatever its case, letters or neighbours."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

import predicates.entry as entry
from predicates import Catalog
from predicates.tables import mentions_table, split_tables
from predicates.views import mentions_view
from tests.unit.test_compile_alike import DDL


def _catalog() -> Catalog:
    _, (table,) = split_tables("CREATE TABLE Wards (id INTEGER, name STRING) KEY (id);", "t")
    return Catalog.from_ddl(DDL).with_view(table.schema)


CATALOG = _catalog()
WORDS = st.sampled_from(
    ["SELECT * FROM B WHERE B.pressure > 1", "CREATE ", "VIEW", "View v AS ", "view", "TaBlE", "table",
     "wards", "WARDS", "Ward", "s", "\u212a", "\u0130", "\u017f", "\n", " ", "v", "b", "x"]
)  # fmt: skip
TEXTS = st.lists(st.lists(WORDS, max_size=6).map("".join), max_size=8)


@settings(max_examples=400, deadline=None)
@given(TEXTS, st.integers(1, 3), st.sampled_from([0, entry._LOWER_AT_ONCE]))
@example(["SELECT * FROM B WHERE B.pressure > 1", "CREATE VIEW v AS SELECT * FROM B"], 1, 0)
@example(["SELECT * FROM B", "SELECT * FROM WARDS"], 3, 0)
@example(["SELECT * FROM B", "creaTE Table"], 1, 0)
@example(["SELECT * FROM B", "creaTE Table"], 1, entry._LOWER_AT_ONCE)
def test_many_texts_at_once_say_what_each_text_says(texts: list[str], chunk: int, lower_at_once: int) -> None:
    each = any(mentions_view(t) or mentions_table(t, CATALOG) for t in texts)
    saved = entry._PREFILTER_CHUNK, entry._LOWER_AT_ONCE
    entry._PREFILTER_CHUNK = chunk  # (texts joined a few at a time, as a million are)
    entry._LOWER_AT_ONCE = lower_at_once  # (0: letters looked for first, as in long texts)
    try:
        assert entry.may_mention_views_or_tables(texts, CATALOG) == each
    finally:
        entry._PREFILTER_CHUNK, entry._LOWER_AT_ONCE = saved


def test_plain_subscriptions_do_not_mention_views_or_tables() -> None:
    texts = [f"Query ID: s{i}\nSELECT * FROM B WHERE B.pressure > {i} AND B.temp < 2" for i in range(1000)]
    assert not entry.may_mention_views_or_tables(texts, CATALOG)
    assert entry.may_mention_views_or_tables([*texts, "SELECT * FROM B, Wards W WHERE B.alert = W.id"], CATALOG)
