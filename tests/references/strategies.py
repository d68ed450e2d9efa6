"""Hypothesis strategies for random workloads: a schema, queries and a stream of operations.

Every number is chosen so that float arithmetic stays exact under any rewriting the engine
does (dividing through by a factor, moving offsets across): data and constants are
integers or halves in [-8, 8], factors are powers of two (or their negatives), offsets
are integers or halves. Then the engine's normalized predicates and the reference's
original expressions agree exactly, and any difference is a real bug.

A :class:`Workload` prints as a runnable reproduction (see :meth:`Workload.script`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from hypothesis import strategies as st

from predicates import Catalog, bind, parse_queries
from predicates.ast import And, Arith, ColumnRef, Comparison, Negate, Not, Number, Or

STREAM_NAMES = ("B", "H", "K", "T")
NUMERIC_COLUMNS = ("x", "y", "z")
STRING_COLUMN = "tag"
NUMERIC_TYPES = ("FLOAT", "DOUBLE", "REAL", "INTEGER", "INT")
STRINGS = ("", "a", "ab", "b", "ba", "B")
FACTORS = (1, 2, 4, 0.5, 0.25, -1, -2, -0.5)
DIVISORS = (1, 2, 4, 0.5, -1, -2)
OPS = ("<", "<=", ">", ">=", "=", "!=")
SPELLINGS = {"<": ("lt",), "<=": ("le", "lt="), ">": ("gt",), ">=": ("ge", "gt="), "=": ("==",), "!=": ("<>",)}
ORDERS = ("AJW", "AWJ", "JAW", "JWA", "WAJ", "WJA")

# Worst-case number of disjuncts after DNF expansion that a generated query may reach; the
# engine's bound (DEFAULT_MAX_DISJUNCTS) is larger.
MAX_DISJUNCTS = 32

halves = st.integers(-16, 16).map(lambda k: k / 2)
small_halves = st.one_of(st.integers(-8, 8).map(lambda k: k / 2), halves)
small_ints = st.one_of(st.integers(-4, 4), st.integers(-8, 8))


def fmt(value: float) -> str:
    """A number as query text: ``3``, ``-0.5``, ``0.25``."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


# ---------------------------------------------------------------------- schemas


@dataclass(frozen=True)
class StreamSpec:
    name: str
    numeric: tuple[tuple[str, str], ...]  # (column, type)
    string: str | None = None  # name of the STRING column, if any

    def ddl(self) -> str:
        cols = [f"{c} {t}" for c, t in self.numeric]
        if self.string is not None:
            cols.append(f"{self.string} STRING")
        return f"REGISTER STREAM {self.name} ({', '.join(cols)});"

    def is_integer(self, column: str) -> bool:
        return dict(self.numeric).get(column) in ("INTEGER", "INT")


@dataclass(frozen=True)
class Schema:
    streams: tuple[StreamSpec, ...]

    def ddl(self) -> str:
        return "\n".join(s.ddl() for s in self.streams)

    def stream(self, name: str) -> StreamSpec:
        return next(s for s in self.streams if s.name == name)


@st.composite
def stream_specs(draw, name: str) -> StreamSpec:
    n = draw(st.integers(1, 3))
    numeric = tuple((c, draw(st.sampled_from(NUMERIC_TYPES))) for c in NUMERIC_COLUMNS[:n])
    string = STRING_COLUMN if draw(st.integers(0, 2)) == 0 else None
    return StreamSpec(name, numeric, string)


@st.composite
def schemas(draw) -> Schema:
    n = draw(st.integers(2, 4))
    return Schema(tuple(draw(stream_specs(name)) for name in STREAM_NAMES[:n]))


# ---------------------------------------------------------------------- queries


@dataclass(frozen=True)
class Alias:
    alias: str
    spec: StreamSpec

    def ref(self, column: str) -> str:
        return f"{self.alias}.{column}"


@dataclass(frozen=True)
class Atom:
    """One comparison: its text and its operator (for the DNF size bound)."""

    text: str
    op: str


@dataclass(frozen=True)
class Node:
    kind: str  # "and" | "or" | "not"
    items: tuple


def dnf_size(node) -> tuple[int, int]:
    """(disjuncts of node, disjuncts of NOT node), counting != as two (< or >)."""
    if isinstance(node, Atom):
        return (2 if node.op == "!=" else 1, 2 if node.op == "=" else 1)
    sizes = [dnf_size(item) for item in node.items]
    if node.kind == "not":
        return sizes[0][1], sizes[0][0]
    prod_pos = math.prod(p for p, _ in sizes)
    prod_neg = math.prod(n for _, n in sizes)
    if node.kind == "and":
        return prod_pos, sum(n for _, n in sizes)
    return sum(p for p, _ in sizes), prod_neg


def render(node) -> str:
    if isinstance(node, Atom):
        return node.text
    if node.kind == "not":
        return f"NOT ({render(node.items[0])})"
    joiner = " AND " if node.kind == "and" else " OR "
    return joiner.join(f"({render(i)})" if isinstance(i, Node) and i.kind != "not" else render(i) for i in node.items)


@st.composite
def op_text(draw) -> tuple[str, str]:
    """(canonical op, spelling in the text)."""
    op = draw(st.sampled_from(OPS))
    if draw(st.integers(0, 9)) == 0:
        return op, draw(st.sampled_from(SPELLINGS[op]))
    return op, op


@st.composite
def linear(draw, ref: str) -> str:
    """``ref`` with an exact factor and/or offset, in one of many spellings."""
    f = fmt(draw(st.sampled_from(FACTORS)))
    d = fmt(draw(st.sampled_from(DIVISORS)))
    c = fmt(draw(small_halves))
    forms = [
        "{r}",
        "{r}",
        "{r}",
        "{f} * {r}",
        "{r} * {f}",
        "{r} / {d}",
        "-{r}",
        "{r} + {c}",
        "{r} - {c}",
        "{c} + {r}",
        "{f} * {r} + {c}",
        "{f} * ({r} + {c})",
        "({r} - {c}) / {d}",
        "{c} - {r}",
    ]
    return draw(st.sampled_from(forms)).format(r=ref, f=f, d=d, c=c)


def numeric_refs(a: Alias) -> list[str]:
    return [a.ref(c) for c, _ in a.spec.numeric]


@st.composite
def attribute_atom(draw, aliases: list[Alias]) -> Atom:
    a = draw(st.sampled_from(aliases))
    ref = draw(st.sampled_from(numeric_refs(a)))
    op, spelled = draw(op_text())
    lin = draw(linear(ref))
    const = fmt(draw(small_halves))
    text = f"{lin} {spelled} {const}" if draw(st.booleans()) else f"{const} {spelled} {lin}"
    return Atom(text, op)


@st.composite
def ts_attribute_atom(draw, aliases: list[Alias]) -> Atom:
    """``S.ts`` (or ``S.id``) against a constant."""
    a = draw(st.sampled_from(aliases))
    column = draw(st.sampled_from(("ts", "ts", "id")))
    op, spelled = draw(op_text())
    return Atom(f"{a.ref(column)} {spelled} {draw(st.integers(0, 12))}", op)


@st.composite
def same_stream_atom(draw, aliases: list[Alias]) -> Atom:
    candidates = [a for a in aliases if len(a.spec.numeric) >= 2]
    if not candidates:
        return draw(attribute_atom(aliases))
    a = draw(st.sampled_from(candidates))
    left, right = draw(st.permutations(numeric_refs(a)))[:2]
    op, spelled = draw(op_text())
    return Atom(f"{draw(linear(left))} {spelled} {draw(linear(right))}", op)


@st.composite
def join_atom(draw, aliases: list[Alias]) -> Atom:
    a, b = draw(st.permutations(aliases))[:2]
    left = draw(st.sampled_from([*numeric_refs(a), a.ref("ts")] if draw(st.integers(0, 9)) == 0 else numeric_refs(a)))
    right = draw(st.sampled_from(numeric_refs(b)))
    op, spelled = draw(op_text())
    return Atom(f"{draw(linear(left))} {spelled} {draw(linear(right))}", op)


@st.composite
def window_atom(draw, aliases: list[Alias]) -> Atom:
    a, b = draw(st.permutations(aliases))[:2]
    op, spelled = draw(op_text())
    off = fmt(draw(st.sampled_from((1, 1, 2, 0.5, -1, 3))))
    forms = [
        "{a} {op} {b}",
        "{a} {op} {b}",
        "{a} {op} {b} + {off}",
        "{a} {op} {b} - {off}",
        "{a} + {off} {op} {b}",
        "{a} {op} {off} + {b}",
    ]
    if draw(st.integers(0, 9)) == 0:
        return Atom(f"{draw(linear(a.ref('ts')))} {spelled} {draw(linear(b.ref('ts')))}", op)
    text = draw(st.sampled_from(forms)).format(a=a.ref("ts"), b=b.ref("ts"), op=spelled, off=off)
    return Atom(text, op)


@st.composite
def residual_atom(draw, aliases: list[Alias]) -> Atom:
    """Predicates that are not linear in one column per side."""
    op, spelled = draw(op_text())
    c = fmt(draw(small_halves))
    a = draw(st.sampled_from(aliases))
    ra = draw(st.sampled_from(numeric_refs(a)))
    ra2 = draw(st.sampled_from(numeric_refs(a)))
    forms = [f"{ra} * {ra2} {spelled} {c}", f"{ra} / {ra2} {spelled} {c}", f"{ra} * {ra} {spelled} {ra2}"]
    if len(aliases) >= 2:
        x, y = draw(st.permutations(aliases))[:2]
        rx = draw(st.sampled_from(numeric_refs(x)))
        ry = draw(st.sampled_from(numeric_refs(y)))
        forms += [
            f"{rx} * {ry} {spelled} {c}",
            f"{rx} + {ry} {spelled} {c}",
            f"{rx} - {ry} {spelled} {c}",
            f"{x.ref('ts')} - {y.ref('ts')} {spelled} {c}",
            f"{rx} {spelled} {ry} * {ry}",
        ]
    if len(aliases) >= 3:
        x, y, z = draw(st.permutations(aliases))[:3]
        rx = draw(st.sampled_from(numeric_refs(x)))
        ry = draw(st.sampled_from(numeric_refs(y)))
        rz = draw(st.sampled_from(numeric_refs(z)))
        forms += [f"{rx} + {ry} {spelled} {rz}", f"{rx} {spelled} {ry} - 2 * {rz} + 1"]
    return Atom(draw(st.sampled_from(forms)), op)


@st.composite
def string_atom(draw, aliases: list[Alias]) -> Atom:
    with_string = [a for a in aliases if a.spec.string is not None]
    if not with_string:
        return draw(attribute_atom(aliases))
    op, spelled = draw(op_text())
    a = draw(st.sampled_from(with_string))
    lit = "'" + draw(st.sampled_from(STRINGS)) + "'"
    forms = [f"{a.ref(STRING_COLUMN)} {spelled} {lit}", f"{lit} {spelled} {a.ref(STRING_COLUMN)}"]
    others = [b for b in with_string if b != a]
    if others:
        b = draw(st.sampled_from(others))
        forms.append(f"{a.ref(STRING_COLUMN)} {spelled} {b.ref(STRING_COLUMN)}")
    return Atom(draw(st.sampled_from(forms)), op)


@st.composite
def atoms(draw, aliases: list[Alias]) -> Atom:
    kinds = [attribute_atom, attribute_atom, ts_attribute_atom, same_stream_atom, residual_atom, string_atom]
    if len(aliases) >= 2:
        kinds += [join_atom, join_atom, join_atom, window_atom, window_atom]
    return draw(draw(st.sampled_from(kinds))(aliases))


@st.composite
def conditions(draw, aliases: list[Alias], depth: int = 2):
    """An atom or a small AND/OR/NOT tree of atoms."""
    if depth == 0 or draw(st.integers(0, 2)) > 0:
        return draw(atoms(aliases))
    kind = draw(st.sampled_from(("and", "or", "or", "not")))
    if kind == "not":
        return Node("not", (draw(conditions(aliases, depth - 1)),))
    n = draw(st.integers(2, 3))
    return Node(kind, tuple(draw(conditions(aliases, depth - 1)) for _ in range(n)))


@dataclass(frozen=True)
class QuerySpec:
    text: str
    aliases: tuple[tuple[str, str], ...]  # (alias, stream)
    maxwindow: float | None


def _maxwindow_text(draw, seconds: float) -> str:
    keyword = draw(st.sampled_from(("MAXWINDOW", "MAXWINDOW", "MAX WINDOW", "MaxWindow")))
    options = [fmt(seconds), f"{fmt(seconds)} sec", f"{fmt(seconds)}sec", f"{int(seconds * 1000)} ms"]
    if seconds == 60:
        options = ["1 min", "1 minute", "60 seconds"]
    return f"{keyword} {draw(st.sampled_from(options))}"


@st.composite
def select_list(draw, aliases: list[Alias]) -> str:
    if draw(st.integers(0, 2)) == 0:
        return "*"
    items: list[str] = []
    names: set[str] = set()
    starred: set[str] = set()
    for i in range(draw(st.integers(1, 4))):
        a = draw(st.sampled_from(aliases))
        kind = draw(st.sampled_from(("ref", "ref", "expr", "expr", "star", "const")))
        columns = [c for c, _ in a.spec.numeric] + ["ts", "id"] + ([a.spec.string] if a.spec.string else [])
        if kind == "star":
            if a.alias in starred or any(n.startswith(a.alias + ".") for n in names):
                continue
            starred.add(a.alias)
            items.append(f"{a.alias}.*")
            names.update(f"{a.alias}.{c}" for c in columns)
        elif kind == "ref":
            column = draw(st.sampled_from(columns))
            name = a.ref(column)
            if name in names or a.alias in starred:
                items.append(f"{name} AS o{i}")
            else:
                items.append(name)
                names.add(name)
        elif kind == "const":
            items.append(f"{fmt(draw(small_halves))} AS o{i}")
        else:
            b = draw(st.sampled_from(aliases))
            x = draw(st.sampled_from(numeric_refs(a)))
            y = draw(st.sampled_from(numeric_refs(b)))
            form = draw(st.sampled_from(("{x} + {y}", "{x} * {y}", "{x} / {y}", "-{x}", "{x} - 1.5", "2 * {x}")))
            items.append(form.format(x=x, y=y) + draw(st.sampled_from((" AS ", " "))) + f"o{i}")
    return ", ".join(items) if items else "*"


@st.composite
def query_specs(draw, schema: Schema, bare: bool = False) -> QuerySpec:
    """A random valid query over ``schema``; ``bare``: no WINDOW or WHERE (every combination
    within MAXWINDOW is a result), to exercise registration and the retention horizon."""
    k = draw(st.integers(1, min(3, len(schema.streams))))
    specs = draw(st.permutations(schema.streams))[:k]
    if k > 1 and draw(st.integers(0, 4)) == 0:
        specs[1] = specs[0]  # a self-join: one stream under two aliases
    use_aliases = draw(st.integers(0, 3)) == 0
    aliases = [
        Alias(f"{s.name.lower()}{i}" if use_aliases or specs.index(s) != i else s.name, s) for i, s in enumerate(specs)
    ]
    from_items = []
    for a in aliases:
        if a.alias == a.spec.name:
            from_items.append(a.alias)
        else:
            from_items.append(f"{a.spec.name}{draw(st.sampled_from((' AS ', ' ')))}{a.alias}")
    parts = [f"SELECT {draw(select_list(aliases))}", "FROM " + ", ".join(from_items)]

    n_where = draw(st.sampled_from((0, 1, 1, 1, 2, 2, 3, 4) if k == 1 else (0, 1, 1, 1, 2, 2, 3)))
    if bare:
        n_where = 0 if draw(st.integers(0, 3)) else 1
    where_items = [draw(conditions(aliases)) for _ in range(n_where)]
    window_items = []
    maxwindow = None
    if k >= 2:
        n_window = 0 if bare else draw(st.sampled_from((0, 0, 1, 1, 2)))
        window_items = [draw(window_atom(aliases)) for _ in range(n_window)]
        maxwindow = draw(st.sampled_from((0, 1, 2, 2, 3, 3, 5, 1.5, 60)))
    elif draw(st.integers(0, 3)) == 0:
        maxwindow = draw(st.sampled_from((0, 2, 5, 60)))  # allowed, and without effect, on one stream
    # Keep the DNF expansion well inside the engine's bound.
    while where_items or window_items:
        total = Node("and", (*where_items, *window_items))
        if dnf_size(total)[0] <= MAX_DISJUNCTS:
            break
        (where_items if where_items else window_items).pop()
    if window_items:
        parts.append("WINDOW " + render(Node("and", tuple(window_items))))
    if maxwindow is not None:
        parts.append(_maxwindow_text(draw, maxwindow))
    if where_items:
        parts.append("WHERE " + render(Node("and", tuple(where_items))))
    text = draw(st.sampled_from(("\n", " "))).join(parts)
    return QuerySpec(text, tuple((a.alias, a.spec.name) for a in aliases), maxwindow)


# ------------------------------------------------------------------- operations


@dataclass(frozen=True)
class Push:
    stream: str
    ts: float
    values: dict
    id: int | None = None


@dataclass(frozen=True)
class Heartbeat:
    ts: float


@dataclass(frozen=True)
class Register:
    query_id: str
    text: str
    header: bool = False  # the id is given by a "Query ID:" header instead of the argument

    def call_args(self) -> tuple[str, str | None]:
        if self.header:
            return f"Query ID: {self.query_id}\n{self.text}", None
        return self.text, self.query_id


@dataclass(frozen=True)
class Unregister:
    query_id: str


Op = Push | Heartbeat | Register | Unregister


@dataclass
class Workload:
    ddl: str
    lateness: float
    ops: list[Op] = field(default_factory=list)

    def script(self, order: str = "AJW") -> str:
        """Python code replaying the workload on the engine and the reference."""
        lines = [
            "import mqo",
            "from tests.references.naive import ReferenceMatcher",
            f"DDL = {self.ddl!r}",
            f"eng = mqo.Matcher(DDL, allowed_lateness={self.lateness!r}, order={order!r})",
            f"ref = ReferenceMatcher(DDL, allowed_lateness={self.lateness!r})",
        ]
        for op in self.ops:
            if isinstance(op, Push):
                call = f"push({op.stream!r}, {op.ts!r}, {op.values!r}, id={op.id!r})"
                lines.append(f"print('{op.stream}@{op.ts}', [m.as_dict() for m in eng.{call}], ref.{call})")
            elif isinstance(op, Heartbeat):
                lines += [f"eng.heartbeat({op.ts!r})", f"ref.heartbeat({op.ts!r})"]
            elif isinstance(op, Register):
                text, qid = op.call_args()
                lines += [f"eng.register_query({text!r}, {qid!r})", f"ref.register_query({text!r}, {qid!r})"]
            else:
                lines += [f"eng.unregister_query({op.query_id!r})", f"ref.unregister_query({op.query_id!r})"]
        lines.append("print('late', eng.late_count, len(ref.late))")
        return "\n".join(lines)

    def __repr__(self) -> str:
        ops = "".join(f"\n        {op!r}," for op in self.ops)
        return f"Workload(\n    ddl={self.ddl!r},\n    lateness={self.lateness!r},\n    ops=[{ops}\n    ],\n)"


@st.composite
def row_values(draw, spec: StreamSpec) -> dict:
    """Values of one tuple: ~10% NULLs, given as a missing key, None or NaN."""
    values: dict = {}
    for column, _ in spec.numeric:
        null = draw(st.integers(0, 9)) == 0
        if null:
            how = draw(st.sampled_from(("missing", "none", "nan")))
            if how == "none":
                values[column] = None
            elif how == "nan" and not spec.is_integer(column):
                values[column] = math.nan
        elif spec.is_integer(column):
            values[column] = draw(small_ints)
        else:
            values[column] = draw(small_halves)
    if spec.string is not None:
        if draw(st.integers(0, 9)) == 0:
            if draw(st.booleans()):
                values[spec.string] = None
        else:
            values[spec.string] = draw(st.sampled_from(STRINGS))
    return values


@st.composite
def workloads(
    draw,
    max_tuples: int = 40,
    max_queries: int = 6,
    lateness: st.SearchStrategy[float] | None = None,
    churn: bool = False,
) -> Workload:
    """A schema and a sequence of operations. ``churn``: bare queries (see
    :func:`query_specs`) registered, unregistered and overtaken by heartbeats often."""
    schema = draw(schemas())
    if lateness is None:
        lateness = st.sampled_from((0.0, 0.0, 0.0, 1.0, 2.0, 2.5))
    allowed = draw(lateness)
    id_mode = draw(st.sampled_from(("auto", "auto", "explicit", "mixed")))
    workload = Workload(schema.ddl(), allowed)

    registered: list[str] = []
    created = 0

    def register() -> None:
        nonlocal created
        created += 1
        spec = draw(query_specs(schema, bare=churn))
        qid = f"q{created}"
        header = draw(st.integers(0, 4)) == 0
        workload.ops.append(Register(qid, spec.text, header))
        registered.append(qid)

    for _ in range(min(max_queries, draw(st.sampled_from((0, 1, 1, 2, 2, 3, 4))))):
        register()

    n_tuples = draw(st.integers(1, max_tuples))
    pushed = dict.fromkeys((s.name for s in schema.streams), 0)
    max_ts = 0.0
    tuples = 0
    if churn:
        kinds = ("push",) * 6 + ("heartbeat",) * 2 + ("register",) * 3 + ("unregister",) * 2
    else:
        kinds = ("push",) * 12 + ("heartbeat", "register", "register", "unregister")
    while tuples < n_tuples:
        kind = draw(st.sampled_from(kinds))
        if kind == "register" and created < max_queries:
            register()
        elif kind == "unregister" and registered:
            qid = draw(st.sampled_from(registered))
            registered.remove(qid)
            workload.ops.append(Unregister(qid))
        elif kind == "heartbeat":
            ts = max_ts + draw(st.sampled_from((0, 1, 1, 2, 3, 5, -1)))
            max_ts = max(max_ts, ts)
            workload.ops.append(Heartbeat(float(ts)))
        else:
            spec = draw(st.sampled_from(schema.streams))
            if allowed > 0:
                step = draw(st.integers(-math.ceil(allowed) - 1, 2))
            else:
                step = draw(st.sampled_from((0, 0, 0, 1, 1, 1, 2, -1)))  # -1: a late tuple
            ts = max(0.0, max_ts + step)
            max_ts = max(max_ts, ts)
            given = None
            if id_mode == "explicit" or (id_mode == "mixed" and draw(st.booleans())):
                given = 1000 - 7 * pushed[spec.name]  # unique per stream, never an auto id
            pushed[spec.name] += 1
            workload.ops.append(Push(spec.name, float(ts), draw(row_values(spec)), given))
            tuples += 1
    return workload


def _comparisons(node) -> list:
    if isinstance(node, Comparison):
        return [node]
    if isinstance(node, Not):
        return _comparisons(node.operand)
    if isinstance(node, (And, Or)):
        return [c for item in node.items for c in _comparisons(item)]
    return []


def _leaves(expr) -> list:
    if isinstance(expr, Arith):
        return _leaves(expr.left) + _leaves(expr.right)
    if isinstance(expr, Negate):
        return _leaves(expr.operand)
    return [expr]


def column_domains(catalog: Catalog, queries: list[str]) -> dict[tuple[str, str], list[float]]:
    """Values worth drawing for each (stream, column): the numbers its comparisons mention,
    one more, one less, half and double, shared among the columns a comparison joins."""
    groups: list[tuple[set, set]] = []  # (columns, numbers) of each comparison
    for text in queries:
        query = parse_queries(text, "<workload>")[0]
        bound = bind(query, catalog, "q")
        for comparison in _comparisons(bound.condition):
            leaves = _leaves(comparison.left) + _leaves(comparison.right)
            cols = {(x.stream, x.name) for x in leaves if isinstance(x, ColumnRef) and x.name not in ("ts", "id")}
            nums = {float(x.value) for x in leaves if isinstance(x, Number)}
            groups.append((cols, nums))
    domains: dict[tuple[str, str], set[float]] = {}
    for cols, nums in groups:
        for col in cols:
            domains.setdefault(col, set()).update(v for c in nums for v in (c, c + 1, c - 1, c / 2, c * 2))
    for _ in range(2):
        for cols, _ in groups:
            shared = set().union(*(domains.get(c, set()) for c in cols))
            for col in cols:
                domains[col] = domains.get(col, set()) | shared
    return {col: sorted(values) for col, values in domains.items() if values}


@st.composite
def fixed_query_workloads(draw, ddl: str, queries: list[str], max_tuples: int = 60) -> Workload:
    """Random data for given queries (the thesis workloads), values drawn from
    :func:`column_domains` so that equalities and boundaries hit. Queries are registered
    at the start or mid-stream, in their order."""
    catalog = Catalog.from_ddl(ddl)
    domains = column_domains(catalog, queries)
    fallback = sorted({v for values in domains.values() for v in values}) or [0.0]
    workload = Workload(ddl, draw(st.sampled_from((0.0, 0.0, 2.0))))
    pending = list(enumerate(queries, start=1))
    for _ in range(draw(st.integers(1, len(pending)))):
        i, text = pending.pop(0)
        workload.ops.append(Register(str(i), text))
    max_ts = 0.0
    for _ in range(draw(st.integers(1, max_tuples))):
        if pending and draw(st.integers(0, 9)) == 0:
            i, text = pending.pop(0)
            workload.ops.append(Register(str(i), text))
        schema = draw(st.sampled_from(list(catalog)))
        values: dict = {}
        for col in schema.columns:
            if draw(st.integers(0, 14)) == 0:
                continue  # NULL
            value = draw(st.sampled_from(domains.get((schema.name, col.name), fallback)))
            if col.ctype.name in ("INTEGER", "BYTE"):
                value = math.floor(value)
            values[col.name] = value
        max_ts += draw(st.sampled_from((0, 0, 1, 1, 2, 3)))
        ts = max_ts - draw(st.sampled_from((0, 0, 0, 0, 1, 2, 3)))
        workload.ops.append(Push(schema.name, max(0.0, ts), values))
    return workload


__all__ = [
    "ORDERS",
    "Heartbeat",
    "Push",
    "Register",
    "Schema",
    "Unregister",
    "Workload",
    "fixed_query_workloads",
    "query_specs",
    "schemas",
    "workloads",
]
