"""Fast compilation of one template's rows: each context and comparison pattern compiled once.

Since the compile entry reads texts through the caches keyed on the lexer's tokens
(:mod:`predicates.template_cache`, :mod:`predicates.token_cache`), this compiler serves
only ``register_table`` (:mod:`predicates.table`) and a snapshot's table rows: it cuts
a text with string methods, a second grammar that is to go (its contexts already are
the comparison cache's).

Standing queries come in families: thousands of alerts that share their SELECT and
FROM and differ in which columns they test and with which thresholds. Parsing,
binding and normalizing each query costs far more than matching needs, so a query
whose conditions are a flat AND of comparisons (the common case) is compiled from
parts that are each compiled once:

* its **context**: the SELECT list, the FROM clause and the unit of its MAXWINDOW,
  bound against the catalog once per distinct text;
* each **comparison**, by its pattern: the comparison's text with its numbers taken
  out, normalized once per context and pattern.

Which numbers of a comparison may vary within a pattern is decided on its syntax tree.
A number is a **parameter** when it only ever adds to the comparison: all its
ancestors are ``+``, ``-`` or a sign (``B.x >= 10``, ``lo <= B.x``, ``B.x + 3 < H.y``),
and the comparison normalizes to an indexed predicate. The predicate's constant is
then an exact linear formula of the parameters, ``c = beta + sum(alpha_i * p_i)``,
found by normalizing once with symbolic parameters. Every other number (a factor
``2 * H.vib``, a divisor, anything in a residual) is **structural**: its text is part
of the pattern's key, so ``2 * H.vib`` and ``3 * H.vib`` are different patterns.
Constants are ``float(beta + sum(alpha_i * Fraction(text_i)))``, exactly what
normalizing the query on its own gives; for one parameter times a power of two (the
usual case) that is a float multiplication, which is what makes it fast.

The clauses are found on the text's **skeleton**: the text with its numbers taken out
by one regular-expression split, which the whole-text recipe cache needs anyway. Every
comparison's pattern is then a run of skeleton pieces, found with string methods, so a
query costs a few dictionary lookups per comparison. Texts with parentheses or strings
are cut by a token scan instead.

Anything else (OR, NOT, nested parentheses around conditions) goes through the full
front end, and so does any query the fast path cannot compile, so errors are always
reported by the full front end, with their position in the text. The records it
makes are :mod:`predicates.records`.
"""

from __future__ import annotations

import re
from array import array
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from predicates.ast import Comparison
from predicates.catalog import Catalog
from predicates.clauses import (
    HOLE,
    NUMBER_SPLIT,
    Shape,
    lexer_blanks_only,
    split_header,
    split_numbers,
    split_query_texts,
    split_scanned,
    split_skeleton,
)
from predicates.comparison_parts import additive_numbers, token_start, with_symbols
from predicates.errors import QueryError
from predicates.frontend import column_order, compile_queries
from predicates.lexer import T, literal_problem, tokenize
from predicates.normalize import (
    DEFAULT_MAX_DISJUNCTS,
    ColumnOrder,
    ListKey,
    Predicate,
    Residual,
    canonicalize,
)
from predicates.parser import MAX_LITERAL, parse_query
from predicates.records import (
    CompiledQuery,
    Conjunction,
    Context,
    Disjunct,
    Formula,
    from_normalized,
    has_fraction,
    maxwindow_value,
    scaled_number,
)
from predicates.semantic import bind
from predicates.token_cache import TokenCache

_KEPT = 8192
# blank-separated plain number literals (digits, and a dot only between digits)
_PLAIN_NUMBERS = re.compile(r"(?:\d+(?:\.\d+)? )*\d+(?:\.\d+)?")
_RECIPE_TRIAL = 2048  # texts compiled before recipes must show they pay...
_RECIPE_PAYS = 64  # ...by one hit per this many misses
_INF = float("inf")
UNKNOWN = object()
_NO_SHORTCUTS: dict[str, Any] = {}


@dataclass(frozen=True)
class ComparisonTemplate:
    """One comparison pattern: an indexed predicate with a formula, a residual, or a
    constant truth value."""

    params: tuple[int, ...]
    key: ListKey | None = None
    formula: Formula | None = None
    constant: Any = None
    residual: Residual | None = None
    truth: bool | None = None

    def instance(self, numbers: Sequence[str]) -> Any:
        formula = self.formula
        if formula is not None:
            if formula.fast and formula.terms:
                return (self.key, scaled_number(numbers[self.params[formula._index]], formula._alpha))
            return (self.key, formula.value([numbers[i] for i in self.params]))
        if self.truth is not None:
            return self.truth
        if self.residual is not None:
            return self.residual
        return (self.key, self.constant)


@dataclass(frozen=True)
class _Recipe:
    """How a query text whose numbers are taken out maps onto compiled parts: its
    context, where its MAXWINDOW number is, and each comparison's pattern and numbers."""

    context: Context
    window_index: int | None
    conditions: list[tuple[int, list[str]]]  # as in Shape
    # a text cut by the token scan: its recipe serves texts whose numbers are all plain
    # (digits, one inner dot), which end where the same tokens end (see _fast)
    plain_numbers: bool = False


class FastCompiler:
    """Compiles query texts to :class:`CompiledQuery` objects, reusing compiled
    contexts and comparison patterns, and for texts that differ only in their numbers,
    the whole recipe (bounded LRU caches)."""

    def __init__(self, catalog: Catalog, max_disjuncts: int = DEFAULT_MAX_DISJUNCTS) -> None:
        self.catalog = catalog
        self.max_disjuncts = max_disjuncts
        self.full_compiles = 0
        self.pattern_compiles = 0
        self._streams_seen = -1
        self._reset()
        # the compile entry's caches (predicates.entry), whose contexts this shares
        self.tokens = TokenCache(catalog, max_disjuncts)
        self.templates = self.tokens.templates

    def _reset(self) -> None:
        """Forget compiled parts (they depend on the catalog, which may have grown)."""
        self._streams_seen = len(self.catalog)
        self._order = column_order(self.catalog)
        self._structure: OrderedDict[tuple[Any, ...], tuple[int, ...] | None] = OrderedDict()
        self._templates: OrderedDict[tuple[Any, ...], ComparisonTemplate] = OrderedDict()
        # per context, pattern -> (list key, which number, factor, numbers in the pattern)
        self._shortcuts: dict[Context, dict[str, tuple[ListKey, int, float, int]]] = {}
        self._shortcut_count = 0
        self._recipes: OrderedDict[tuple[str, ...], _Recipe] = OrderedDict()
        self._full_contexts: OrderedDict[tuple[Any, ...], Context] = OrderedDict()
        self.recipe_hits = 0
        self.recipe_misses = 0

    def compile(self, text: str, position: int, source_name: str = "<query>") -> CompiledQuery:
        """One query text; ``position`` names it when it has no header."""
        if len(self.catalog) != self._streams_seen:
            self._reset()
        name, body = split_header(text)
        name = name if name is not None else str(position)
        if not lexer_blanks_only(text):
            return self._full(text, name, position, source_name)
        parts = NUMBER_SPLIT.split(body)
        skeleton, numbers = tuple(parts[0::2]), parts[1::2]
        recipe = self._recipes.get(skeleton)
        compiled = None
        if recipe is not None and (not recipe.plain_numbers or _PLAIN_NUMBERS.fullmatch(" ".join(numbers))):
            compiled = self._from_recipe(recipe, name, numbers)
        if compiled is None:
            shape = split_skeleton(skeleton, numbers)
            if shape is not None:
                compiled = self._from_shape(shape, skeleton, name, numbers)
            elif "(" in body or "'" in body or '"' in body:
                compiled = self._fast(body, name, skeleton, numbers)
        if compiled is None:
            return self._full(text, name, position, source_name)
        if not all(type(preds.values) is array for preds, _ in compiled.disjuncts) and has_fraction(compiled):
            # a constant past the doubles (2e308, 1/3): written back, it could read
            # differently; keep the text as given
            compiled.source_text = text
        return compiled

    def _from_recipe(self, recipe: _Recipe, name: str, numbers: list[str]) -> CompiledQuery | None:
        compiled = self._with_numbers(recipe.context, name, recipe.window_index, recipe.conditions, numbers)
        if compiled is not None:
            self.recipe_hits += 1
        return compiled

    def _with_numbers(
        self,
        context: Context,
        name: str,
        window_index: int | None,
        conditions: list[tuple[int, list[str]]],
        numbers: list[str],
    ) -> CompiledQuery | None:
        """The query of a known context with its numbers filled in (None: the slow path
        must decide, e.g. an infinite window or a condition the shortcuts do not know)."""
        maxwindow = None
        if window_index is not None:
            maxwindow = maxwindow_value(numbers[window_index], context.window_scale)  # type: ignore[arg-type]
            if maxwindow == _INF:
                return None
        disjuncts = self._conditions(context, conditions, numbers)
        if disjuncts is None:
            return None
        return CompiledQuery(name, context, maxwindow, disjuncts)

    def _conditions(
        self, context: Context, conditions: list[tuple[int, list[str]]], numbers: list[str]
    ) -> tuple[Disjunct, ...] | None:
        """The one disjunct of a flat AND of comparison patterns, or None when one of
        them is not for the fast path."""
        preds: dict[tuple[ListKey, Any], None] = {}
        residuals: dict[str, Residual] = {}
        possible = True
        numeric = True
        shortcuts = self._shortcuts.get(context, _NO_SHORTCUTS)
        for k, patterns in conditions:
            for pattern in patterns:
                shortcut = shortcuts.get(pattern)
                if shortcut is not None:
                    key, index, alpha, count = shortcut
                    value = scaled_number(numbers[k + index], alpha)
                    if value == _INF or value == -_INF:
                        return None  # a literal out of range: the full front end reports it
                    numeric = numeric and type(value) is float
                    preds[(key, value)] = None
                    k += count
                    continue
                count = pattern.count(HOLE)
                got = self._comparison(context, None, (pattern, numbers[k : k + count]))
                k += count
                if got is UNKNOWN:
                    return None
                if got is True:
                    continue
                if got is False:
                    possible = False
                elif isinstance(got, Residual):
                    residuals.setdefault(got.text, got)
                else:
                    preds[got] = None
                    numeric = numeric and type(got[1]) is float
        return ((Conjunction.of(preds, numeric), tuple(residuals.values())),) if possible else ()

    # ----------------------------------------------------------------- fast

    def _from_shape(
        self,
        shape: Shape,
        skeleton: tuple[str, ...] | None,
        name: str,
        numbers: list[str],
        plain_numbers: bool = False,
    ) -> CompiledQuery | None:
        """``skeleton``: the text's, to remember it as a recipe (None: do not);
        ``plain_numbers``: the recipe serves only texts whose numbers are plain."""
        context = self.context_for(shape.select, shape.from_, shape.unit)
        if context is None:
            return None
        compiled = self._with_numbers(context, name, shape.window_index, shape.conditions, numbers)
        if compiled is None or skeleton is None:
            return compiled
        self.recipe_misses += 1
        # texts that differ only in their numbers recur in most workloads; where they do
        # not (every query tests other columns), remembering them is wasted work
        if not shape.select_has_numbers and (
            self.recipe_misses < _RECIPE_TRIAL or self.recipe_hits * _RECIPE_PAYS >= self.recipe_misses
        ):
            self._recipes[skeleton] = _Recipe(context, shape.window_index, shape.conditions, plain_numbers)
            if len(self._recipes) > _KEPT:
                self._recipes.popitem(last=False)
        return compiled

    def _fast(self, body: str, name: str, skeleton: tuple[str, ...], body_numbers: list[str]) -> CompiledQuery | None:
        """A text with parentheses or strings whose conditions are still a flat AND:
        its clauses are found by a token scan, then compiled as a skeleton's are.

        It is remembered as a recipe for its skeleton (``skeleton``, ``body_numbers``:
        the text's, as the number split cuts it) when the scan's numbers are the text's,
        in order, all plain, and none is followed by a word character or a dot. A text
        with that skeleton and plain numbers then has its tokens where this one has
        them (no token holds a digit outside a string, and a plain number next to the
        same characters ends where it ends), so it is cut into the same comparisons
        with its own numbers: what the scan would give it."""
        clauses = split_scanned(body)
        if clauses is None:
            return None
        numbers: list[str] = []
        unit = window_index = None
        if clauses.maxwindow is not None:
            _, window_pieces, window_numbers = split_numbers(clauses.maxwindow)
            if len(window_numbers) != 1 or window_pieces[0].strip():
                return None
            unit = window_pieces[1].strip()
            window_index = 0
            numbers.append(window_numbers[0])
        first = len(numbers)
        patterns = []
        for comparison in clauses.comparisons:
            parts = NUMBER_SPLIT.split(comparison)
            patterns.append(HOLE.join(parts[0::2]))
            numbers += parts[1::2]
        shape = Shape(clauses.select, clauses.from_, unit, window_index, [(first, patterns)], False)
        remember = (
            numbers == body_numbers
            and _PLAIN_NUMBERS.fullmatch(" ".join(numbers)) is not None
            and not any(piece and (piece[0].isalnum() or piece[0] in "_.") for piece in skeleton[1:])
        )
        return self._from_shape(shape, skeleton if remember else None, name, numbers, plain_numbers=True)

    def column_order(self) -> ColumnOrder:
        return self._order

    def context_for(self, select: str, from_: str, unit: str | None) -> Context | None:
        """The context of a SELECT list, FROM clause and MAXWINDOW unit (None: they
        do not bind), one object per distinct text: the compile entry's
        (:meth:`predicates.token_cache.TokenCache.context_for`), shared."""
        return self.tokens.context_for(select, from_, unit)

    def _comparison(self, context: Context, text: str | None, split: tuple[str, list[str]] | None = None) -> Any:
        """A comparison's compiled form, from its text or its (pattern, numbers)."""
        if split is None:
            assert text is not None
            parts = NUMBER_SPLIT.split(text)
            pattern, numbers = HOLE.join(parts[0::2]), parts[1::2]
        else:
            pattern, numbers = split
        # a literal with an exponent goes to the parser: short, it can still be out of
        # range (1e999999) or below the doubles (1e-400 is not 0.0)
        if any("e" in n or "E" in n or (len(n) > 15 and _not_a_value(n)) for n in numbers):
            return UNKNOWN  # a literal the parser refuses (too large, too many digits): it says where
        # the context object itself (not its id) is in the key: an evicted context's id
        # could be reused by a new one
        struct_key = (context, pattern)
        structural = self._structure.get(struct_key)  # None: not seen, or seen with no template
        if structural is not None:
            key = (struct_key, tuple([numbers[i] for i in structural])) if structural else (struct_key, ())
            template = self._templates.get(key)
            if template is not None:
                got = template.instance(numbers)
                if type(got) is tuple and type(got[1]) is float and abs(got[1]) == _INF:
                    return UNKNOWN  # a literal out of range: the exact path reports it
                return got
        if text is None:
            pieces = pattern.split(HOLE)
            text = pieces[0] + "".join(n + p for n, p in zip(numbers, pieces[1:], strict=True))
        template = self._build(context, text, numbers)
        if template is None:
            return UNKNOWN
        structural_ix = tuple(i for i in range(len(numbers)) if i not in set(template.params))
        self._structure[struct_key] = structural_ix
        self._templates[(struct_key, tuple(numbers[i] for i in structural_ix))] = template
        formula = template.formula
        if not structural_ix and formula is not None and formula.fast and formula.terms and template.key is not None:
            # the usual comparison, ``column OP number``: one lookup and a multiplication
            shortcut = (template.key, template.params[formula._index], formula._alpha, len(numbers))
            of_context = self._shortcuts.setdefault(context, {})
            of_context[pattern] = shortcut
            self._shortcut_count += 1
            if self._shortcut_count > _KEPT:  # rare: forget them all and learn again
                self._shortcuts.clear()
                self._shortcut_count = 0
        for cache in (self._structure, self._templates):
            if len(cache) > _KEPT:
                cache.popitem(last=False)
        return template.instance(numbers)

    def _build(self, context: Context, text: str, numbers: Sequence[str]) -> ComparisonTemplate | None:
        self.pattern_compiles += 1
        prefix = f"SELECT {context.select_text} FROM {context.from_text}"
        if context.window_scale is not None:
            prefix += " MAXWINDOW 1"
        prefix += " WHERE "
        full = prefix + text
        try:
            query = parse_query(full, "<pattern>")
            bound = bind(query, self.catalog, "pattern")
        except QueryError:
            return None
        cmp = bound.condition
        if not isinstance(cmp, Comparison):
            return None
        offsets = _number_offsets(full, len(prefix), text, numbers)
        if offsets is None:
            return None
        concrete = canonicalize(cmp, self._order)
        if isinstance(concrete, bool):
            return ComparisonTemplate(params=(), truth=concrete)
        if isinstance(concrete, Residual):
            return ComparisonTemplate(params=(), residual=concrete)
        assert isinstance(concrete, Predicate)
        index_of = {off: i for i, off in enumerate(offsets)}
        params = sorted(
            index_of[token_start(n)]
            for side in (cmp.left, cmp.right)
            for n in additive_numbers(side)
            if token_start(n) in index_of
        )
        if concrete.key.family != "number" or not params:
            return ComparisonTemplate(params=(), key=concrete.key, constant=concrete.value)
        param_of = {offsets[p]: i for i, p in enumerate(params)}
        symbolic = canonicalize(with_symbols(cmp, param_of), self._order)
        if not isinstance(symbolic, Predicate) or symbolic.key != concrete.key:
            return ComparisonTemplate(params=(), key=concrete.key, constant=concrete.value)
        return ComparisonTemplate(params=tuple(params), key=concrete.key, formula=Formula.of(symbolic.constant))

    # ----------------------------------------------------------------- full

    def _full(self, text: str, name: str, position: int, source_name: str) -> CompiledQuery:
        self.full_compiles += 1
        queries = compile_queries(
            text, self.catalog, source_name=source_name, first_position=position, max_disjuncts=self.max_disjuncts
        )
        if len(queries) != 1:
            raise QueryError(f"expected one query, found {len(queries)}", None, None)
        compiled = from_normalized(queries[0], name, text)
        # queries with the same aliases and SELECT share one context, as on the fast path
        # (results are built once per context)
        bound = compiled.context.bound
        source = bound.source.text
        key = (
            bound.aliases,
            tuple((out.name, source[out.expr.span.start : out.expr.span.end]) for out in bound.outputs),
            compiled.context.window_scale is not None,
        )
        shared = self._full_contexts.get(key)
        if shared is None:
            self._full_contexts[key] = compiled.context
            if len(self._full_contexts) > _KEPT:
                self._full_contexts.popitem(last=False)
            return compiled
        self._full_contexts.move_to_end(key)
        return CompiledQuery(compiled.name, shared, compiled.maxwindow, compiled.disjuncts, compiled.source_text)


def _number_offsets(full: str, start: int, text: str, numbers: Sequence[str]) -> tuple[int, ...] | None:
    """Offsets (in ``full``) of the comparison's NUMBER tokens, if the fast split
    finds exactly the lexer's numbers (else the pattern cannot be parameterized)."""
    from predicates.errors import Source

    tokens = [t for t in tokenize(Source(full)) if t.kind is T.NUMBER and t.start >= start]
    _, pieces, found_numbers = split_numbers(text)
    found = []
    pos = start
    for i, piece in enumerate(pieces):
        pos += len(piece)
        if i < len(found_numbers):
            found.append(pos)
            pos += len(found_numbers[i])
    if [t.start for t in tokens] != found or [t.text for t in tokens] != list(numbers):
        return None
    return tuple(found)


def _not_a_value(text: str) -> bool:
    """Whether the parser refuses the literal ``text`` (its problem, or past the doubles)."""
    return literal_problem(text) is not None or Fraction(text) > MAX_LITERAL


__all__ = ["CompiledQuery", "Conjunction", "Context", "FastCompiler", "Formula", "from_normalized", "split_query_texts"]
