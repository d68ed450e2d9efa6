"""The comparison cache: texts assembled from comparisons the parser compiled once.

Subscriptions and standing joins registered by the thousand share their SELECT, FROM
and window and differ in their comparisons, joined by AND::

    Query ID: s17
    SELECT * FROM B, H WINDOW B.ts <= H.ts MAXWINDOW 20 sec
    WHERE B.pressure < 0.4 AND H.beatrate > 199.2 AND B.pressure <= 3 * H.vib

The template cache (:mod:`predicates.template_cache`) reads texts whose whole skeleton
recurs; this cache reads texts whose **prefix and comparisons** recur. The lexer's
tokens (:func:`predicates.token_scan.lex_bytes`) are cut at ``;``, at the header, at
WHERE and at the AND tokens (:func:`predicates.token_scan.cut_tokens`). A **prefix**
(SELECT to WHERE, its tokens as they are) keys a :class:`Prefix`: the shared context
of its SELECT, FROM and MAXWINDOW unit, its MAXWINDOW and its WINDOW's predicates. A
comparison's token skeleton (its numbers cut out) keys a **comparison template**
(:class:`Shortcut`), made by the parser, binder and normalizer the first time it is
seen, the comparison compiled as the only condition of its context: its list key and
its constant as a formula of its additive numbers (found by normalizing once with
symbolic parameters, as the template cache does). A number that is no parameter (a
factor, ``3 * H.vib``) is part of the template: the template holds for its value, and
the same skeleton with another value is another template. A text is then its prefix's
context, window and predicates and, per comparison, the template's list key and
constant, in text order (as the normalizer lists them).

Numbers are taken only as plain decimals of at most 15 digits (their double is the
decimal); a predicate written twice, or any piece the cut or a template cannot vouch
for, sends its text to the parser, which reports every error with its position: the
cut only decides where a text is split, never what a token means.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Callable, Sequence
from operator import attrgetter
from typing import Any, cast

import numpy as np

import predicates.token_scan as scan
from predicates.ast import Comparison
from predicates.catalog import Catalog
from predicates.comparison_parts import additive_numbers, flat_comparisons, token_start, with_symbols
from predicates.errors import QueryError, Source
from predicates.frontend import column_order
from predicates.lexer import BLANK_CHARS, T, token_runs, tokenize
from predicates.normalize import DEFAULT_MAX_DISJUNCTS, ColumnOrder, ListKey, Predicate, canonicalize
from predicates.numbers import faithful
from predicates.parser import parse_duration, parse_query
from predicates.records import CompiledQuery, Conjunction, Context, Formula
from predicates.semantic import bind
from predicates.template_cache import FEWEST, TemplateCache
from predicates.token_cut import CutTokens, Piece, Tokens, cut_text, header_name, shape_of
from predicates.token_scan import BLANK_TABLE, NUMBER, WORDS, cut_tokens, lex_bytes
from predicates.token_shapes import Plan, Prefix, Shapes, Shortcut

_KEPT = 8192  # contexts and comparison templates kept (then forgotten and learned again)
_FEW_CHARS = 4096  # characters of a few texts cut on the lexer's matches (before numba is loaded)
_SHAPE_RUNS = 12  # runs of a text whose shape is looked up and kept
_ONE_CHARS = 1 << 14  # characters of a text read alone by the one-text kernel (longer: the batch kernels')
_BATCH = 1 << 15  # texts read by one call of the batch kernels (a million at once: gigabytes of token arrays)

Kernel = Callable[..., tuple[Any, ...]]  # lex_bytes, cut_tokens or read_one, compiled


class TokenCache:
    """Contexts by prefix and comparison templates by token skeleton, for one catalog.

    ``lexer``, ``cutter``, ``one``: :func:`~predicates.token_scan.lex_bytes`, ``cut_tokens``
    and ``read_one`` compiled (None: the first two run as plain Python, texts alone are cut
    on the lexer's matches)."""

    def __init__(self, catalog: Catalog, max_disjuncts: int = DEFAULT_MAX_DISJUNCTS) -> None:
        self.catalog = catalog
        self.max_disjuncts = max_disjuncts
        self.lexer: Kernel | None = None
        self.cutter: Kernel | None = None
        self.one: Kernel | None = None
        self._room = 0  # the characters of a text the one-text kernel's arrays hold
        self.learned = 0  # comparison templates made by the parser
        self._streams_seen = -1
        self._reset()
        # the cache of whole skeletons, read first (its contexts are this cache's)
        self.templates = TemplateCache(self)

    def _reset(self) -> None:
        """Forget what was learned (it depends on the catalog, which may have grown)."""
        self._streams_seen = len(self.catalog)
        self._order = column_order(self.catalog)
        self._contexts: dict[tuple[str, str, str | None], Context | None] = {}
        # the front end's contexts, shared by its queries written alike (predicates.entry)
        self.parsed_contexts: dict[tuple[Any, ...], Context] = {}
        self._prefixes: dict[bytes, Prefix | None] = {}
        self._comparisons: dict[tuple[Context, bytes], Shortcut | None] = {}
        # per context, by skeleton: those of one number times 1 or -1
        self._plain: dict[Context, dict[bytes, Shortcut]] = {}
        # a comparison's templates for other values of its fixed numbers
        self._variants: dict[tuple[Context, bytes, tuple[float, ...]], Shortcut | None] = {}
        self._key_numbers: dict[ListKey, int] = {}
        # what a one-query text of a shape (predicates.token_cut.shape_of) was read as
        self._shapes = Shapes()

    def column_order(self) -> ColumnOrder:
        return self._order

    def context_for(self, select: str, from_: str, unit: str | None) -> Context | None:
        """The context of a SELECT list, FROM clause and MAXWINDOW unit (None: they do
        not bind), one object per distinct text: queries with the same SELECT and FROM
        share it (their results are built once), whichever cache read them."""
        if len(self.catalog) != self._streams_seen:
            self._reset()
        key = (select, from_, unit)
        if key in self._contexts:
            return self._contexts[key]
        text = f"SELECT {select} FROM {from_}" + (f" MAXWINDOW 1 {unit}" if unit is not None else "")
        context: Context | None
        try:
            bound = bind(parse_query(text, "<context>"), self.catalog, "context")
            scale = parse_duration(f"1 {unit}") if unit is not None else None
            context = Context(select, from_, bound, scale)
        except QueryError:
            context = None
        if len(self._contexts) >= _KEPT:
            self._contexts.clear()
        self._contexts[key] = context
        return context

    # ------------------------------------------------------------------ reading

    def read(self, texts: Sequence[str]) -> list[tuple[list[str | None], list[CompiledQuery]] | None]:
        """Per text, its queries' header names (None: the caller numbers the query by
        its position) and its queries (named by the caller), or None: the parser reads
        that text."""
        if len(self.catalog) != self._streams_seen:
            self._reset()
        if len(texts) == 1 and self.one is not None and len(texts[0]) <= _ONE_CHARS and "numba" in sys.modules:
            return [self._read_one(texts[0])]  # (register_query: the kernel call over kept arrays)
        if len(texts) > _BATCH:
            return [out for first in range(0, len(texts), _BATCH) for out in self.read(texts[first : first + _BATCH])]
        if len(texts) < FEWEST:
            if self.one is not None and "numba" in sys.modules and max(map(len, texts), default=0) <= _ONE_CHARS:
                return [self._read_one(text) for text in texts]  # (a kernel call a text, over kept arrays)
            if sum(map(len, texts)) < _FEW_CHARS and (self.one is None or "numba" not in sys.modules):
                # before the first tuple: cut on the lexer's matches (numba's import would cost more)
                return [self._read_text(text) for text in texts]
        out: list[tuple[list[str | None], list[CompiledQuery]] | None] = [None] * len(texts)
        ascii_texts = [text if text.isascii() else "" for text in texts]  # (the others: the parser's)
        joined = "".join(ascii_texts)
        if not joined:
            return out
        data = np.frombuffer(joined.encode("ascii"), np.uint8)
        text_ends = np.cumsum(np.fromiter(map(len, ascii_texts), np.int64, len(ascii_texts)))
        lex, cut = self.lexer or lex_bytes, self.cutter or cut_tokens
        text_tokens, kind, start, end = lex(data, text_ends, BLANK_TABLE)
        (
            doubt,
            text_pieces,
            name_token,
            select_token,
            where_token,
            prefix_group,
            piece_comparisons,
            first_token,
            last_token,
            comparison_group,
            comparison_numbers,
            values,
            prefix_piece,
            prefix_bytes,
            prefix_bounds,
            comparison_bytes,
            comparison_bounds,
        ) = cut(data, text_tokens, kind, start, end, WORDS)
        n_pieces = len(name_token)
        if n_pieces == 0:
            return out
        tokens = Tokens(joined, kind, start, end)
        # each prefix group's context (learned from its first piece)
        prefix_skeletons = prefix_bytes.tobytes()
        prefix_at = prefix_bounds.tolist()
        contexts: list[Prefix | None] = []
        for g, k in enumerate(prefix_piece.tolist()):
            skeleton = prefix_skeletons[prefix_at[g] : prefix_at[g + 1]]
            found = self._prefixes.get(skeleton, _MISSING)
            if found is _MISSING and k >= 0:
                found = self.prefix(skeleton, tokens, int(select_token[k]), int(where_token[k]))
            contexts.append(None if found is _MISSING else found)
        names: list[str | None] = [None] * n_pieces  # (each piece's header name, as the parser reads it)
        named = np.flatnonzero(name_token >= 0)
        at = name_token[named]
        for k, a, b, of_kind in zip(named.tolist(), start[at].tolist(), end[at].tolist(), kind[at].tolist()):  # noqa: B905
            names[k] = header_name(of_kind, joined[a:b])
        # the texts read here: no doubt, every piece of a known prefix and of plain numbers
        piece_of = np.repeat(np.arange(n_pieces), np.diff(piece_comparisons))
        text_of = np.repeat(np.arange(len(texts)), np.diff(text_pieces))
        nans = np.concatenate(([0], np.cumsum(np.isnan(values))))
        number_bounds = comparison_numbers[piece_comparisons]
        known = np.array([prefix is not None for prefix in contexts] + [False], np.bool_)
        bad_text = doubt | (np.diff(text_pieces) == 0)
        bad_text[text_of[~known[prefix_group] | (nans[number_bounds[1:]] > nans[number_bounds[:-1]])]] = True
        wanted = ~bad_text[text_of][piece_of]  # (their comparisons)
        # each (prefix, comparison skeleton) pair's template, looked up once (learned
        # from its first comparison, in text order)
        skeletons, skeleton_at = comparison_bytes.tobytes(), comparison_bounds.tolist()
        pair = (prefix_group[piece_of] * (len(skeleton_at) - 1) + comparison_group)[wanted]
        if len(contexts) * (len(skeleton_at) - 1) > 4 * len(pair) + 4096:  # (many: numbered by their order)
            pair = np.unique(pair, return_inverse=True)[1].reshape(-1)
        first_at = np.full(int(pair.max(initial=-1)) + 1, len(pair))
        np.minimum.at(first_at, pair, np.arange(len(pair)))
        pairs = np.flatnonzero(first_at < len(pair))
        number_of = np.zeros(len(first_at), np.int64)
        number_of[pairs] = np.arange(len(pairs))
        inverse = number_of[pair]
        at = np.flatnonzero(wanted)
        first_of = at[first_at[pairs]]
        shortcuts: list[Shortcut | None] = [None] * len(pairs)

        def own(c: int) -> tuple[Prefix, bytes, Tokens, int, int, list[float]]:
            """What learning comparison ``c`` takes: its prefix, skeleton, tokens and numbers."""
            g = int(comparison_group[c])
            numbers = values[comparison_numbers[c] : comparison_numbers[c + 1]].tolist()
            prefix = cast(Prefix, contexts[prefix_group[piece_of[c]]])
            return (
                prefix,
                skeletons[skeleton_at[g] : skeleton_at[g + 1]],
                tokens,
                int(first_token[c]),
                int(last_token[c]),
                numbers,
            )

        for i in np.argsort(first_of, kind="stable").tolist():
            shortcuts[i] = self._shortcut(*own(int(first_of[i])))
        # per comparison its template's key, key number and constant: one number times
        # 1 or -1 in bulk, the others (a factor's variant, a formula) one by one
        of_pair = np.zeros((3, len(pairs) + 1))  # number, alpha, key number (last: none)
        plain = np.zeros(len(pairs) + 1, np.bool_)
        keys_of = np.empty(len(pairs) + 1, object)
        for i, shortcut in enumerate(shortcuts):
            if shortcut is not None:
                of_pair[:, i] = shortcut.number, shortcut.alpha, shortcut.key_number
                plain[i], keys_of[i] = not shortcut.fixed and shortcut.formula is None, shortcut.key
        p = np.full(len(first_token), len(pairs))
        p[at] = inverse
        number = (comparison_numbers[:-1] + of_pair[0, p].astype(np.int64)).clip(0, max(len(values) - 1, 0))
        constants = (values[number] * of_pair[1, p] + 0.0).tolist() if len(values) else [0.0] * len(p)
        numbered, keys = of_pair[2, p].astype(np.int64).tolist(), keys_of[p].tolist()
        general = np.flatnonzero(wanted & ~plain[p])
        for c in general.tolist():  # (no template, a factor or a formula)
            found = shortcuts[p[c]]
            parts = own(c)  # (prefix, skeleton, tokens, first, last, numbers): made once
            if found is not None and found.fixed:
                found = self._variant(parts[0], found, *parts[1:])
            if found is None:
                bad_text[text_of[piece_of[c]]] = True
            else:
                constants[c] = found.constant(parts[-1], 0)
                numbered[c], keys[c] = found.key_number, found.key
        odd = np.zeros(n_pieces, np.bool_)
        odd[piece_of[general]] = True  # (pieces whose constants may not all be doubles)
        bounds, prefixes, of_text, odd_piece = (
            piece_comparisons.tolist(), prefix_group.tolist(), text_pieces.tolist(), odd.tolist()
        )  # fmt: skip
        for t in np.flatnonzero(~bad_text).tolist():
            queries = []
            for k in range(of_text[t], of_text[t + 1]):
                a, b = bounds[k], bounds[k + 1]
                query = self._built(contexts[prefixes[k]], keys[a:b], numbered[a:b], constants[a:b], odd_piece[k])
                if query is None:
                    break
                queries.append(query)
            else:
                out[t] = (names[of_text[t] : of_text[t + 1]], queries)
        return out

    @staticmethod
    def _assemble(
        prefix: Prefix, shortcuts: list[Shortcut], numbers: list[float], firsts: Sequence[int], general: bool
    ) -> CompiledQuery | None:
        """A piece's query (named by the caller): its prefix's context, window and
        predicates, then per comparison its template's key and constant (its numbers
        start at ``numbers[firsts[i]]``; ``general``: some template may have a formula);
        None for a predicate written twice."""
        values: list[Any]
        if general:
            values = [s.constant(numbers, n) for n, s in zip(firsts, shortcuts, strict=True)]
        else:  # (per comparison one number times 1 or -1: its double)
            values = [numbers[n + s.number] * s.alpha + 0.0 for n, s in zip(firsts, shortcuts)]  # noqa: B905
        return TokenCache._built(prefix, list(map(_KEY, shortcuts)), list(map(_KEY_NUMBER, shortcuts)), values, general)

    @staticmethod
    def _built(
        prefix: Prefix, keys: list[ListKey], numbered: list[int], values: list[Any], general: bool
    ) -> CompiledQuery | None:
        """A piece's query from its comparisons' keys, key numbers and constants, after
        its prefix's (``general``: a constant may be a Fraction); None for a predicate
        written twice."""
        if prefix.keys:
            values = [*prefix.values, *values]
            numbered = [*prefix.key_numbers, *numbered]
            keys = [*prefix.keys, *keys]
        # a predicate written twice is kept once by the front end: the parser's
        if len(set(numbered)) != len(numbered) and len(set(zip(numbered, values, strict=True))) != len(numbered):
            return None
        plain = not general or all(type(v) is float for v in values)
        conjunction = Conjunction(tuple(keys), array("d", values) if plain else tuple(values))
        return CompiledQuery("", prefix.context, prefix.maxwindow, ((conjunction, ()),))

    def _read_one(self, text: str) -> tuple[list[str | None], list[CompiledQuery]] | None:
        """:meth:`read` of one text by :func:`~predicates.token_scan.read_one` (the batch
        kernels' cut), then per comparison its template by its skeleton, and its constant.
        (One ``register_query`` call: each step here is counted in microseconds.)"""
        if not text.isascii():
            return None
        if len(text) > self._room or not self._room:  # (made at the first text, empty or not)
            self._workspace(len(text))
        rows = self._rows
        doubt, _, n_pieces, n_comparisons, n_numbers, n_prefixes, n_groups = self.one(  # type: ignore[misc]
            np.frombuffer(text.encode("ascii"), np.uint8), BLANK_TABLE, WORDS, rows, self._values, self._skeletons,
            self._kinds,
        )  # fmt: skip
        if doubt or not n_pieces:
            return None
        numbers: list[float] = self._value_row[:n_numbers].tolist()  # type: ignore[assignment]
        total = sum(numbers)  # (NaN if a number is not plain: the others are finite, under 1e15)
        if total != total:
            return None
        bounds, prefix_groups, name_tokens, firsts, prefix_at, starts, ends = rows[
            scan.READ_ROWS, : max(n_pieces, n_comparisons, n_prefixes) + 1
        ].tolist()
        prefix_skeletons = self._skeleton_rows[0][: prefix_at[n_prefixes]].tobytes()
        comparison_skeletons = self._skeleton_rows[1][: int(rows[scan.COMPARISON_BOUNDS, n_groups])].tobytes()
        tokens = self._tokens
        tokens.source = text
        names: list[str | None] = []
        queries = []
        for k in range(n_pieces):
            g = prefix_groups[k]
            skeleton = prefix_skeletons[prefix_at[g] : prefix_at[g + 1]]
            prefix = self._prefixes.get(skeleton, _MISSING)  # (read's caller checked the catalog)
            if prefix is _MISSING:
                prefix = self.prefix(skeleton, tokens, int(rows[scan.SELECT_TOKEN, k]), int(rows[scan.WHERE_TOKEN, k]))
            if prefix is None:
                return None
            a, b = bounds[k], bounds[k + 1]
            # the usual text: every template known, each its number times 1 or -1
            skeletons_of = list(map(comparison_skeletons.__getitem__, map(slice, starts[a:b], ends[a:b])))
            found = list(map(self._plain.get(prefix.context, _NONE).get, skeletons_of))
            general = False
            if None in found:
                found = []
                for c, skeleton in enumerate(skeletons_of, a):
                    first, last = int(rows[scan.FIRST_TOKEN, c]), int(rows[scan.LAST_TOKEN, c])
                    own = numbers[firsts[c] : firsts[c + 1]]
                    shortcut = self._template_of(prefix, skeleton, tokens, first, last, own)
                    if shortcut is None:
                        return None
                    found.append(shortcut)
                general = any(s.fixed or s.formula is not None for s in found)  # type: ignore[union-attr]
            query = self._assemble(prefix, cast(list[Shortcut], found), numbers, firsts[a:b], general)
            if query is None:
                return None
            name = name_tokens[k]
            names.append(None if name < 0 else tokens.name(name))
            queries.append(query)
        return names, queries

    def _workspace(self, chars: int) -> None:
        """The one-text kernel's arrays, for texts of ``chars`` characters (at least 1,024),
        and memoryviews of them (a slice of one costs less than a slice of an array)."""
        room = max(1024, 1 << (chars - 1).bit_length())
        self._rows = np.empty((scan.ONE_ROWS, room + 3), np.int64)
        self._values = np.empty(room + 2, np.float64)
        self._skeletons = np.empty((2, 3 * room + 16), np.uint8)
        self._kinds = np.empty(room + 1, np.uint8)
        self._value_row, self._skeleton_rows = self._values.data, (self._skeletons[0].data, self._skeletons[1].data)
        self._tokens = Tokens("", self._kinds, self._rows[scan.TOKEN_START], self._rows[scan.TOKEN_END])
        self._room = room

    def _read_text(self, text: str) -> tuple[list[str | None], list[CompiledQuery]] | None:
        """:meth:`read` of one text, cut on the lexer's matches (:mod:`predicates.token_cut`:
        a call of a few texts costs no arrays); a text of a shape read before (the same
        runs but for its numbers and its header's name) is read as that one was."""
        if not text.isascii():
            return None
        runs = token_runs(text)
        if runs is None:
            return None
        # a text of many runs is seldom of a shape seen before (subscriptions pick their
        # columns), and its comparisons are joined run by run: its shape is not kept
        key, name, header = shape_of(runs) if len(runs) <= _SHAPE_RUNS else ((), None, None)
        numbers = [number for _, number in runs if number]
        known_shape = self._shapes.plan(key, numbers) if key else None
        if known_shape is not None:
            plan, values = known_shape
            query = self._assemble(plan.prefix, plan.shortcuts, values, plan.firsts, plan.general)
            if query is not None:
                return [None if name is None else header_name(*name)], [query]
        cut = cut_text(text, runs=runs, unkept=header)
        if cut is None or not cut.pieces:
            return None
        tokens = CutTokens(text, cut)
        names: list[str | None] = []
        queries = []
        for piece in cut.pieces:
            prefix = self.prefix(piece.prefix, tokens, piece.select_token, piece.where_token)
            total = sum(piece.numbers)  # (NaN if a number is not plain: the others are finite, under 1e15)
            if prefix is None or total != total:
                return None
            firsts = [first for _, _, _, first in piece.comparisons]
            # the usual text: every template known, each its number times 1 or -1
            plain = self._plain.get(prefix.context, {})
            found = [plain.get(skeleton) for skeleton, _, _, _ in piece.comparisons]
            got = self.comparison_templates(prefix, piece, tokens, firsts) if None in found else found
            if None in got:
                return None
            shortcuts = cast(list[Shortcut], got)
            general = any(s.fixed or s.formula is not None for s in shortcuts)
            query = self._assemble(prefix, shortcuts, piece.numbers, firsts, general)
            if query is None:
                return None
            names.append(None if piece.name_token < 0 else cut.name(text, piece.name_token))
            queries.append(query)
        if key and len(cut.pieces) == 1 and cut.pieces[0].name_token == (len(key[0]) - 1 if name else -1):  # type: ignore[arg-type]
            self._shapes.keep(key, numbers, cut.pieces[0].numbers, Plan(prefix, shortcuts, firsts, general))  # type: ignore[arg-type]
        return names, queries

    def comparison_templates(
        self, prefix: Prefix, piece: Piece, tokens: Tokens, firsts: list[int]
    ) -> list[Shortcut | None]:
        """The templates of ``piece``'s comparisons (learned where not known; the
        variant of its fixed numbers' values where it has any; None: a comparison that
        makes no indexed numeric predicate); ``firsts``: where each comparison's
        numbers start in ``piece.numbers``."""
        shortcuts: list[Shortcut | None] = []
        for c, (skeleton, first, last, n0) in enumerate(piece.comparisons):
            own = piece.numbers[n0 : firsts[c + 1] if c + 1 < len(firsts) else len(piece.numbers)]
            shortcuts.append(self._template_of(prefix, skeleton, tokens, first, last, own))
        return shortcuts

    def _template_of(
        self, prefix: Prefix, skeleton: bytes, tokens: Tokens, first: int, last: int, numbers: list[float]
    ) -> Shortcut | None:
        """The template of one comparison (tokens ``first:last``, numbers ``numbers``):
        its skeleton's, or where it has fixed numbers, the variant of their values."""
        shortcut = self._shortcut(prefix, skeleton, tokens, first, last, numbers)
        if shortcut is not None and shortcut.fixed:
            shortcut = self._variant(prefix, shortcut, skeleton, tokens, first, last, numbers)
        return shortcut

    # ----------------------------------------------------------------- learning

    def _shortcut(
        self, prefix: Prefix, skeleton: bytes, tokens: Tokens, first: int, last: int, numbers: list[float]
    ) -> Shortcut | None:
        """The template of a comparison of ``prefix`` with token skeleton ``skeleton``
        (learned from the tokens ``first:last``, whose numbers are ``numbers``, if not
        known)."""
        key = (prefix.context, skeleton)
        shortcut = self._comparisons.get(key, _MISSING)
        if shortcut is _MISSING:
            shortcut = self._learn_comparison(prefix, tokens, first, last, numbers)
            if len(self._comparisons) >= _KEPT:
                self._comparisons.clear()  # (key numbers stay: a call may hold older shortcuts)
                self._plain.clear()
            self._comparisons[key] = shortcut
            if shortcut is not None and not shortcut.fixed and shortcut.formula is None:
                self._plain.setdefault(prefix.context, {})[skeleton] = shortcut
        return shortcut  # type: ignore[no-any-return]

    def _variant(
        self,
        prefix: Prefix,
        shortcut: Shortcut,
        skeleton: bytes,
        tokens: Tokens,
        first: int,
        last: int,
        numbers: list[float],
    ) -> Shortcut | None:
        """The template of a comparison with fixed numbers (``shortcut`` is the one
        its skeleton was first learned with): ``shortcut`` where they have its values,
        else the template learned for theirs."""
        values = tuple([numbers[i] for i in shortcut.fixed])
        if values == shortcut.fixed_values:
            return shortcut
        key = (prefix.context, skeleton, values)
        variant = self._variants.get(key, _MISSING)
        if variant is _MISSING:
            variant = self._learn_comparison(prefix, tokens, first, last, numbers)
            if variant is not None and variant.fixed != shortcut.fixed:
                variant = None  # (another value made another number a parameter)
            if len(self._variants) >= _KEPT:
                self._variants.clear()
            self._variants[key] = variant
        return variant  # type: ignore[no-any-return]

    def prefix(self, skeleton: bytes, tokens: Tokens, select: int, where: int) -> Prefix | None:
        """The prefix of skeleton ``skeleton`` (learned from the tokens ``select:where``
        if not known; None: not one the cache reads)."""
        if len(self.catalog) != self._streams_seen:
            self._reset()
        prefix = self._prefixes.get(skeleton, _MISSING)
        if prefix is _MISSING:
            prefix = self._learn_prefix(tokens, select, where)
            if len(self._prefixes) >= _KEPT:
                self._prefixes.clear()
            self._prefixes[skeleton] = prefix
        return prefix  # type: ignore[no-any-return]

    def _learn_prefix(self, tokens: Tokens, select: int, where: int) -> Prefix | None:
        """What the prefix ``select:where`` (tokens) gives its queries, as the parser,
        binder and normalizer read it as a query of no WHERE clause."""
        text = tokens.joined(select, where)
        try:
            query = parse_query(text, "<prefix>")
            if query.is_aggregate or query.view_span is not None or query.stream_op is not None:
                return None
            bound = bind(query, self.catalog, "prefix")
        except QueryError:
            return None
        select_text = "*" if query.select is None else text[query.select[0].span.start : query.select[-1].span.end]
        from_text = text[query.from_[0].span.start : query.from_[-1].span.end]
        unit = None
        if query.maxwindow is not None:
            number = next(t for t in tokenize(Source(text)) if t.start == query.maxwindow.span.start)
            unit = text[number.end : query.maxwindow.span.end].strip(BLANK_CHARS)
        context = self.context_for(select_text, from_text, unit)
        window = flat_comparisons(bound.condition) if bound.condition is not None else []
        if context is None or window is None:
            return None
        keys, values = [], []
        for cmp in window:
            concrete = canonicalize(cmp, self._order)
            if not isinstance(concrete, Predicate) or type(concrete.value) is not float:
                return None  # (a window that always or never holds: the parser's)
            keys.append(concrete.key)
            values.append(concrete.value)
        head = f"SELECT {select_text} FROM {from_text}" + (f" MAXWINDOW 1 {unit}" if unit is not None else "")
        maxwindow = None if bound.maxwindow is None else faithful(bound.maxwindow)
        numbered = tuple(self._key_numbers.setdefault(key, len(self._key_numbers)) for key in keys)
        return Prefix(context, head + " WHERE ", maxwindow, tuple(keys), tuple(values), numbered)

    def _learn_comparison(
        self, prefix: Prefix, tokens: Tokens, first: int, last: int, numbers: list[float]
    ) -> Shortcut | None:
        """The template of the comparison ``first:last`` (tokens, whose numbers are
        ``numbers``) as the parser reads it as its context's only condition."""
        self.learned += 1
        head = prefix.head
        full = head + tokens.joined(first, last)
        try:
            cmp = bind(parse_query(full, "<comparison>"), self.catalog, "comparison").condition
        except QueryError:
            return None
        if not isinstance(cmp, Comparison):
            return None
        offsets = [t.start for t in tokenize(Source(full)) if t.kind is T.NUMBER and t.start >= len(head)]
        if len(offsets) != len(numbers):
            return None
        concrete = canonicalize(cmp, self._order)
        if not isinstance(concrete, Predicate) or concrete.key.family != "number":
            return None
        index_of = {offset: i for i, offset in enumerate(offsets)}
        params = sorted(
            index_of[token_start(n)]
            for side in (cmp.left, cmp.right)
            for n in additive_numbers(side)
            if token_start(n) in index_of
        )
        symbolic = canonicalize(with_symbols(cmp, {offsets[p]: i for i, p in enumerate(params)}), self._order)
        if not isinstance(symbolic, Predicate) or symbolic.key != concrete.key:
            return None
        formula = Formula.of(symbolic.constant)
        if formula.value([repr(numbers[p]) for p in params]) != concrete.value:
            return None  # (a check: the formula gives the parser's constant here)
        fixed = tuple(i for i in range(len(numbers)) if i not in params)
        fixed_values = tuple(numbers[i] for i in fixed)
        key_number = self._key_numbers.setdefault(concrete.key, len(self._key_numbers))
        if len(formula.terms) == 1 and formula.beta == 0 and formula._alpha in (1.0, -1.0):
            number = params[formula._index]
            return Shortcut(concrete.key, key_number, number, formula._alpha, None, (), fixed, fixed_values)
        return Shortcut(concrete.key, key_number, -1, 0.0, formula, tuple(params), fixed, fixed_values)


_MISSING: Any = object()
_NONE: dict[bytes, Shortcut] = {}  # (no template known)
_KEY, _KEY_NUMBER = attrgetter("key"), attrgetter("key_number")


__all__ = ["NUMBER", "Prefix", "Shortcut", "TokenCache"]
