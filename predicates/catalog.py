"""The catalog of declared streams (README, "The query language").

Names of streams and columns are matched case-insensitively and reported in the
spelling they were declared with. Every stream has two implicit columns: ``ts``
(event time, a number) and ``id`` (an integer unique within the stream). A stream may
declare its own allowed lateness (``ALLOWED LATENESS 5 sec``; the matcher's clock
decides how it combines with the API's settings, :func:`mqo.clock.clock_for`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from fractions import Fraction

from predicates.ast import ColumnType, StreamDecl
from predicates.errors import QueryError, Source, Span, did_you_mean
from predicates.parser import parse_ddl

IMPLICIT_COLUMNS: dict[str, ColumnType] = {"ts": ColumnType.FLOAT, "id": ColumnType.INTEGER}


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    ctype: ColumnType
    length: int | None = None


@dataclass(frozen=True)
class StreamSchema:
    """A stream's declared columns (not counting the implicit ``ts`` and ``id``)."""

    name: str
    columns: tuple[Column, ...]
    lateness: float | None = None  # ALLOWED LATENESS in seconds, when declared
    view: bool = False  # a view's stream (CREATE VIEW): its rows come from its query
    # a table (CREATE TABLE, predicates.tables): its KEY columns; its rows are versions
    # joined as of a tuple's ts, never matched as a stream's tuples
    table_key: tuple[str, ...] = ()
    _by_lower: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_lower", {c.name.lower(): i for i, c in enumerate(self.columns)})

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def index_of(self, name: str) -> int | None:
        """Position of a declared column (case-insensitive), or None."""
        return self._by_lower.get(name.lower())

    def lookup(self, name: str) -> tuple[str, ColumnType] | None:
        """(declared name, type) of a column, implicit ``ts``/``id`` included."""
        lowered = name.lower()
        if lowered in IMPLICIT_COLUMNS and not (self.table_key and lowered in self._by_lower):
            return lowered, IMPLICIT_COLUMNS[lowered]  # (a table may declare its own id)
        i = self._by_lower.get(lowered)
        if i is None:
            return None
        col = self.columns[i]
        return col.name, col.ctype

    def all_names(self) -> list[str]:
        return [*self.column_names, *IMPLICIT_COLUMNS]

    def ddl(self) -> str:
        cols = ", ".join(
            f"{c.name} {c.ctype.value}" + (f"({c.length})" if c.length is not None else "") for c in self.columns
        )
        own = "" if self.lateness is None else f" ALLOWED LATENESS {self.lateness!r} sec"
        return f"REGISTER STREAM {self.name} ({cols}){own};"


class Catalog:
    """Streams by name. Adding is all-or-nothing per call."""

    def __init__(self, streams: Iterable[StreamSchema] = ()) -> None:
        self._streams: dict[str, StreamSchema] = {}
        for s in streams:
            self._add(s)

    @classmethod
    def from_ddl(cls, text: str, name: str = "<schema>") -> Catalog:
        catalog = cls()
        catalog.register_ddl(text, name)
        return catalog

    def _add(self, schema: StreamSchema) -> None:
        self._streams[schema.name.lower()] = schema

    def register_ddl(self, text: str, name: str = "<schema>") -> list[StreamSchema]:
        """Declare the streams of a DDL text. Raises QueryError and declares nothing on error."""
        decls = parse_ddl(text, name)
        schemas: list[StreamSchema] = []
        seen: dict[str, StreamDecl] = {}
        for decl in decls:
            lowered = decl.name.lower()
            if lowered in self._streams or lowered in seen:
                raise QueryError(f"stream {decl.name} is declared twice", decl.source, decl.span)
            seen[lowered] = decl
            schemas.append(_schema_of(decl))
        for schema in schemas:
            self._add(schema)
        return schemas

    def get(self, name: str) -> StreamSchema | None:
        return self._streams.get(name.lower())

    def with_view(self, schema: StreamSchema) -> Catalog:
        """A copy with a view's stream added after the others (what the queries after a
        ``CREATE VIEW`` of one text are bound against)."""
        return Catalog([*self, schema])

    def add_view(self, schema: StreamSchema) -> None:
        """Declare a view's stream (after every declared one: streams keep their order)."""
        if schema.name.lower() in self._streams:
            raise QueryError(f"{schema.name} is already declared as a stream or view")
        self._add(schema)

    def remove_view(self, name: str) -> None:
        """Take back a view's stream or a table (a registration that failed)."""
        schema = self._streams.get(name.lower())
        if schema is None or not (schema.view or schema.table_key):
            raise KeyError(name)
        del self._streams[name.lower()]

    def base_streams(self) -> list[StreamSchema]:
        """The declared streams, without views' streams and tables."""
        return [s for s in self if not s.view and not s.table_key]

    def require(self, name: str, source: Source | None = None, span: Span | None = None) -> StreamSchema:
        schema = self.get(name)
        if schema is None:
            known = [s.name for s in self]
            raise QueryError(
                f"unknown stream '{name}'" + did_you_mean(name, known),
                source,
                span,
                hint=f"declared streams: {', '.join(known)}" if known else "no stream is declared yet",
            )
        return schema

    def __iter__(self) -> Iterator[StreamSchema]:
        return iter(self._streams.values())

    def __len__(self) -> int:
        return len(self._streams)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._streams

    def names(self) -> list[str]:
        return [s.name for s in self]

    def index(self, name: str) -> int:
        """Declaration order of a stream: the canonical order of predicate sides."""
        for i, key in enumerate(self._streams):
            if key == name.lower():
                return i
        raise KeyError(name)

    def ddl(self) -> str:
        """The declared streams as DDL (views' streams come with their queries)."""
        return "\n".join(s.ddl() for s in self.base_streams())


def _schema_of(decl: StreamDecl) -> StreamSchema:
    seen: dict[str, int] = {}
    columns: list[Column] = []
    for col in decl.columns:
        lowered = col.name.lower()
        if lowered in IMPLICIT_COLUMNS:
            raise QueryError(
                f"column {col.name} of stream {decl.name} is implicit and must not be declared",
                decl.source,
                col.span,
                hint="every stream has 'ts' (event time) and 'id'",
            )
        if lowered in seen:
            raise QueryError(f"column {col.name} is declared twice in stream {decl.name}", decl.source, col.span)
        seen[lowered] = len(columns)
        columns.append(Column(col.name, col.ctype, col.length))
    lateness = None
    if decl.lateness is not None:
        seconds = decl.lateness.seconds
        lateness = float(seconds)
        # lateness is kept as a double meaning its shortest decimal (as a ts is): a
        # duration no double means exactly would be moved silently
        if Fraction(repr(lateness)) != seconds:
            raise QueryError(
                f"ALLOWED LATENESS {decl.lateness.text} of stream {decl.name} is not a number of seconds a double "
                f"holds exactly (it would be {lateness!r})",
                decl.source,
                decl.lateness.span,
            )
    return StreamSchema(decl.name, tuple(columns), lateness)


# ------------------------------------------------------------------ alias roles
#
# A stream read under several aliases of one query (a self-join, ``FROM B b1, B b2``)
# is read in several **roles**: the k-th occurrence of B in FROM (k = 1, 2, ...) reads
# role ``B`` for k = 1 and ``B#k`` after. Predicates name roles, not aliases, so
# ``b2.pressure > b1.pressure + 20`` is ``B#2.pressure > B.pressure + 20`` in every query
# that lists B twice, whatever its aliases: such predicates share lists across queries
# as any join predicate does. ``#`` is not a character of a name, so a role never
# collides with a declared stream. The engine keeps each role as a stream of its own
# and feeds every tuple of B to the roles one after another (docs/ARCHITECTURE.md).

ROLE_MARK = "#"


def role_name(stream: str, k: int) -> str:
    """The name of the ``k``-th role (1-based) of ``stream``."""
    return stream if k == 1 else f"{stream}{ROLE_MARK}{k}"


def split_role(name: str) -> tuple[str, int]:
    """``(stream, k)`` of a role name (``('B', 1)`` for a plain stream name)."""
    base, mark, k = name.partition(ROLE_MARK)
    return (base, int(k)) if mark else (name, 1)


def role_schema(schema: StreamSchema, k: int) -> StreamSchema:
    """The schema of role ``k`` of a stream: its columns under the role's name."""
    return schema if k == 1 else StreamSchema(role_name(schema.name, k), schema.columns, schema.lateness, schema.view)
