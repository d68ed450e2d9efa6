"""The template cache in front of the parser: query texts that differ only in their constants.

Subscriptions are registered by the thousand from one shape: the same SELECT, FROM and
comparisons, other numbers (and other ``Query ID`` names). The parser reads the first
text of a shape (lexer, parser, binder, normalizer, as for any text); the cache keeps
what it read as a **template**: the text's skeleton (:mod:`predicates.template_scan`:
its bytes with each constant and the header's name as a hole) and what the compiled
query makes of each hole. A hole is a **parameter** when it is a comparison's one
additive number (``E.a3 >= 10.5``, ``b1.x <= b2.x + 3``, ``E.x >= -2``): the list
key's constant is that number times a sign; a number inside a comment is ignored; any
other number (a window length, a factor) is **fixed**: a piece is read from the
template only when it has the template's value there.

A template is learned only when each hole of its skeleton is one of the lexer's number
tokens (or in a comment), touching only characters that end tokens: a piece with the
same skeleton is then the same token sequence with other numbers (and another name),
which the parser reads as the same tree, so its compiled query follows from the holes.
Only plain decimals of at most 15 digits are taken (their double is the decimal); any
other text, and any piece not read from a template, goes to the parser, which reports
every error with its position: a text compiles or fails alike whether the cache holds
its template or not.

A text of several queries (a query file) is read one piece at a time, cut after each
``;``; a template is learned from a piece that is one query whose last token is that
``;`` (the parser reads a file's queries one after another, each up to its ``;``, so
the queries of the pieces are the file's). A text with any piece not read goes to the
parser whole.

Texts are scanned in batches (:func:`~predicates.template_scan.scan_batches`: at most
:data:`~predicates.template_scan.CHUNK` texts, a long text in parts); per batch, each
distinct skeleton is looked up (or learned) once and its pieces' constants are gathered
with numpy into their group's rows. The queries of one group come out as rows of one :class:`RowBlock`
(their constants one array of doubles, filled chunk by chunk and not copied after),
which the registry keeps as a table's rows.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Container, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from itertools import accumulate
from typing import Any, Protocol

import numpy as np

from predicates.ast import Comparison
from predicates.catalog import Catalog
from predicates.comparison_parts import additive_numbers, flat_comparisons, token_start, with_symbols
from predicates.errors import QueryError, Source
from predicates.lexer import BLANK_CHARS, T, Token, tokenize
from predicates.normalize import ColumnOrder, ListKey, Predicate, canonicalize, normalize
from predicates.numbers import faithful
from predicates.parser import parse_queries
from predicates.records import CompiledQuery, Context, LinearConst, RowBlock, RowQueries, RowQuery
from predicates.semantic import bind
from predicates.template_scan import CHUNK_CHARS, EDGES, NAME, ByteScanner, Scan, scan_batches

_KEPT = 256  # templates kept
BLOCK_ROWS = 64  # queries read at once that are kept as one block's rows
FEWEST = 16  # pieces read at once: fewer go to the parser (its comparison caches)
_SAMPLE = 256  # pieces read first: the rest are read only when half of these were
_LEARN_TRIAL = 16  # pieces learned before learning must show it pays...
_LEARN_PAYS = 4  # ...by one hit per this many learned
_VARIANTS = 64  # templates of one skeleton for other fixed numbers, learned in one scan
_UNLEARNED: Any = object()
_NONE_READ = np.zeros(0, np.bool_)
# what a hole of a template is: a list key's constant (times its sign), a number of
# the query's text that must stay as it is, or a number inside a comment
PARAMETER, FIXED, COMMENT = 0, 1, 2


class ContextSource(Protocol):
    """Where contexts come from (:class:`predicates.token_cache.TokenCache`), so that
    queries written alike share one context whichever way they were compiled."""

    catalog: Catalog
    max_disjuncts: int

    def context_for(self, select: str, from_: str, unit: str | None) -> Context | None: ...

    def column_order(self) -> ColumnOrder: ...


@dataclass(eq=False)
class Template:
    """One query's skeleton with holes, and what its queries share."""

    header: tuple[bytes, bytes] | None  # (the skeleton before the name, the byte after it)
    roles: np.ndarray  # per hole: PARAMETER, FIXED or COMMENT
    fixed: np.ndarray  # per hole: the value it must have (FIXED), else NaN
    parameters: np.ndarray  # the holes that are keys' constants, in key order
    signs: np.ndarray  # their signs
    key_parameters: tuple[int | None, ...]  # per list key: its index in parameters, or None
    constants: tuple[float, ...]  # per list key without a parameter: its constant
    context: Context
    maxwindow: float | Fraction | None
    keys: tuple[ListKey, ...]
    has_fixed: bool = field(init=False)

    def __post_init__(self) -> None:
        self.has_fixed = bool((self.roles == FIXED).any())


class Group:
    """The pieces read from the templates that make the same queries but for their
    constants (the same context, window and list keys), as rows: ``pieces`` (arrays of
    piece numbers, in order) and their constants, row after row, in ``values``."""

    def __init__(self, template: Template) -> None:
        self.template = template
        self.pieces: list[np.ndarray] = []
        self.values = array("d")

    def add(self, template: Template, scan: Scan, rows: np.ndarray, first_piece: int) -> None:
        """Pieces ``rows`` of ``scan`` (numbered from ``first_piece`` in the reading),
        read from ``template``: each parameter's double times its sign, beside the
        template's constants."""
        at = scan.run_first[rows][:, None] + template.parameters
        values = scan.values[at] * template.signs
        table = np.empty((len(rows), len(template.keys)), np.float64)
        for j, (p, constant) in enumerate(zip(template.key_parameters, template.constants, strict=True)):
            table[:, j] = values[:, p] if p is not None else constant
        table += 0.0  # -0.0 prints as a zero and is one
        self.values.frombytes(table.data.cast("B"))
        self.pieces.append(rows + first_piece)


class Reading:
    """What the cache read of some texts: per text its pieces (``pieces_of_text``),
    per piece whether it was read and its header name (None: named by position), and
    the groups of read pieces with their constants."""

    def __init__(
        self, pieces_of_text: np.ndarray, read: np.ndarray, names: list[str | None], groups: list[Group]
    ) -> None:
        self.pieces_of_text = pieces_of_text.tolist()
        self.read_piece = read
        self.names = names
        self.groups = groups
        if len(read):  # per text: every piece read (and one at least)
            unread = np.concatenate(([0], np.cumsum(~read)))
            self._text_read: list[bool] = (
                (unread[pieces_of_text[1:]] == unread[pieces_of_text[:-1]]) & (pieces_of_text[1:] > pieces_of_text[:-1])
            ).tolist()
        else:
            self._text_read = [False] * (len(pieces_of_text) - 1)

    @classmethod
    def nothing(cls, texts: int) -> Reading:
        """No text read (none scanned; made without arrays: one ``register_query``)."""
        reading = cls.__new__(cls)
        reading.pieces_of_text = [0] * (texts + 1)
        reading.read_piece = _NONE_READ
        reading.names = []
        reading.groups = []
        reading._text_read = [False] * texts
        return reading

    def all_read(self) -> bool:
        """Whether every text's pieces were read (and every text has one)."""
        return False not in self._text_read

    def read(self, k: int) -> range | None:
        """The pieces of text ``k`` when all were read from templates, else None."""
        if not self._text_read[k]:
            return None
        return range(self.pieces_of_text[k], self.pieces_of_text[k + 1])

    def unread(self, k: int) -> None:
        """Leave text ``k`` to the parser."""
        self._text_read[k] = False
        self.read_piece[self.pieces_of_text[k] : self.pieces_of_text[k + 1]] = False


class TemplateCache:
    """Templates learned from the texts compiled so far (bounded), for one catalog.

    ``scanner``: the compiled :func:`predicates.template_scan.scan_bytes` (the
    matcher hands over :mod:`indexes.template_kernels`); while it is None, no text is
    read from a template (the parser and its comparison caches read them all)."""

    def __init__(self, contexts: ContextSource) -> None:
        self.contexts = contexts
        self.scanner: ByteScanner | None = None
        self.fewest = FEWEST  # (a test lowers it to read a few texts)
        self.templates: OrderedDict[bytes, Template] = OrderedDict()
        # a skeleton's templates for other fixed numbers, by the skeleton and those numbers
        self.variants: OrderedDict[tuple[bytes, bytes], Template | None] = OrderedDict()
        self.headers: dict[tuple[bytes, bytes], None] = {}  # the templates' headers
        self._streams_seen = len(contexts.catalog)
        self.learned = 0
        self.hits = 0

    def read(self, texts: Sequence[str]) -> Reading:
        """The texts' pieces, each read from a template where one holds it."""
        if len(self.contexts.catalog) != self._streams_seen:  # new streams: bind anew
            self.templates.clear()
            self.variants.clear()
            self.headers.clear()
            self._streams_seen = len(self.contexts.catalog)
        if self.scanner is None or (
            len(texts) < self.fewest and all(n < self.fewest for n in accumulate(t.count(";") + 1 for t in texts))
        ):  # (a scan's fixed cost is the parser's for a few texts)
            return Reading.nothing(len(texts))
        groups: dict[tuple[Any, ...], Group] = {}
        of_template: dict[Template, Group] = {}
        firsts: list[np.ndarray] = []  # each text's first piece (of its first part)
        read: list[np.ndarray] = []
        names: list[str | None] = []
        if texts[0]:  # the first piece's template first: its header is then cut from all
            self._scanned([texts[0][: texts[0].find(";") + 1 or None]], sample=False)
        first = texts[: _SAMPLE + 1] if isinstance(texts, list) and len(texts) > 2 * _SAMPLE else []
        if first and sum(map(len, first)) <= CHUNK_CHARS:
            # (many texts of many shapes are found out on their first ones, not a batch;
            # a file's parts are not read ahead, nor long texts scanned twice)
            scan, found = self._scanned(first, sample=True)
            if found is None:
                return Reading.nothing(len(texts))
        for number, (parts, starts) in enumerate(scan_batches(texts)):
            scan, found = self._scanned(parts, sample=number == 0)
            if number == 0 and (len(scan) < self.fewest or found is None):
                return Reading.nothing(len(texts))  # (too few, or of many shapes: each its own template)
            assert found is not None
            taken = self._taken(scan, found)
            for g in np.flatnonzero(np.bincount(taken[taken >= 0], minlength=len(found))).tolist():
                template = found[g]
                assert template is not None
                group = of_template.get(template)
                if group is None:
                    key = (id(template.context), template.maxwindow, template.keys)
                    group = of_template[template] = groups.setdefault(key, Group(template))
                group.add(template, scan, np.flatnonzero(taken == g), len(names))
            first_pieces = scan.text_pieces[:-1] + len(names)
            firsts.append(first_pieces if starts is None else first_pieces[np.array(starts, np.bool_)])
            read.append(taken >= 0)
            names += scan.names
        read_pieces = np.concatenate(read)
        self.hits += int(read_pieces.sum())
        pieces_of_text = np.concatenate([*firsts, [len(names)]]).astype(np.int64)
        return Reading(pieces_of_text, read_pieces, names, list(groups.values()))

    def _scanned(self, texts: Sequence[str], sample: bool) -> tuple[Scan, list[Template | None] | None]:
        """The scan of ``texts`` and each skeleton's template (learned where none is
        yet; scanned again when a template brings a header not cut yet). ``sample``:
        None for the templates when fewer than half the first pieces have one."""
        assert self.scanner is not None
        for _ in range(4):
            headers = len(self.headers)
            scan = Scan(texts, list(self.headers), self.scanner)
            found: list[Template | None] = [None] * len(scan.reps)
            checked = not (sample and len(scan) > _SAMPLE)
            if not checked and not self._may_pay(scan):
                return scan, None  # (texts of many shapes: none learned to find it out)
            for g, rep in enumerate(scan.reps.tolist()):
                if not checked and rep >= _SAMPLE:
                    checked = True
                    if not self._most_found(scan, found):
                        return scan, None
                found[g] = self.templates.get(scan.skeleton(g)) or self._learned(scan, g)
                if len(self.headers) != headers:
                    break
            if len(self.headers) == headers:
                if not checked and not self._most_found(scan, found):
                    return scan, None
                break
        return scan, found

    def _may_pay(self, scan: Scan) -> bool:
        """Whether half the first pieces could have a template: those of skeletons known,
        and of the others those of the skeletons learning may still try, most pieces first."""
        first = scan.group[:_SAMPLE]
        counts = np.bincount(first[first >= 0], minlength=1)
        known = np.array([self.templates.get(scan.skeleton(g)) is not None for g in range(len(counts))], np.bool_)
        budget = max(0, max(_LEARN_TRIAL, self.hits // _LEARN_PAYS + 1) - self.learned)
        reachable = int(counts[known].sum()) + int(np.sort(counts[~known])[::-1][:budget].sum())
        return 2 * reachable >= len(first)

    @staticmethod
    def _most_found(scan: Scan, found: list[Template | None]) -> bool:
        """Whether at least half of the first pieces have a template."""
        first = scan.group[:_SAMPLE]
        have = np.array([t is not None for t in found] + [False], np.bool_)
        return 2 * int(have[first].sum()) >= len(first)  # (-1, no group: the False at the end)

    def _taken(self, scan: Scan, found: list[Template | None]) -> np.ndarray:
        """Per piece the group whose template reads it, else -1: a piece of a template
        with a header needs its name cut, and its fixed numbers (a window length, a
        factor) must be the template's."""
        taken = scan.group.copy()
        have = np.array([t is not None for t in found] + [False], np.bool_)
        taken[~have[taken]] = -1
        for g, template in enumerate(found[: len(scan.reps)]):  # (variants are appended)
            if template is None or (template.header is None and not template.has_fixed):
                continue
            pieces = np.flatnonzero(taken == g)
            wrong = np.zeros(len(pieces), np.bool_)
            if template.header is not None:
                wrong |= scan.name_start[pieces] < 0
            if template.has_fixed:
                fixed = np.flatnonzero(template.roles == FIXED)
                row = scan.values[scan.run_first[pieces][:, None] + fixed]
                other = (row != template.fixed[fixed]).any(axis=1)
                wrong |= other
                taken[pieces[wrong]] = -1
                self._variants(scan, found, g, pieces[other & ~np.isnan(row).any(axis=1)], taken)
            else:
                taken[pieces[wrong]] = -1
        return taken

    def _variants(
        self, scan: Scan, found: list[Template | None], g: int, pieces: np.ndarray, taken: np.ndarray
    ) -> None:
        """Pieces of skeleton ``g`` whose fixed numbers are not its template's (another
        factor, another window length): read from the template of their own fixed
        numbers (a group appended to ``found``), learned from the first such piece."""
        template = found[g]
        assert template is not None
        fixed = np.flatnonzero(template.roles == FIXED)
        rows = scan.values[scan.run_first[pieces][:, None] + fixed]
        distinct, first, inverse = np.unique(rows, axis=0, return_index=True, return_inverse=True)
        skeleton = scan.skeleton(g)
        for v in range(min(len(distinct), _VARIANTS)):
            key = (skeleton, distinct[v].tobytes())
            variant = self.variants.get(key, _UNLEARNED)
            if variant is _UNLEARNED:
                if self.learned >= _LEARN_TRIAL and self.hits < self.learned * _LEARN_PAYS:
                    return
                self.learned += 1
                k = int(pieces[first[v]])
                variant = self._learn(scan.piece(k), skeleton, scan.runs(k), scan.piece_values(k))
                if variant is not None and variant.header != template.header:
                    variant = None  # (a name cut otherwise)
                self.variants[key] = variant
                if len(self.variants) > _KEPT:
                    self.variants.popitem(last=False)
            if variant is None:
                continue
            mine = pieces[inverse.reshape(-1) == v]
            own = np.flatnonzero(variant.roles == FIXED)  # (its own fixed holes: checked again)
            right = (scan.values[scan.run_first[mine][:, None] + own] == variant.fixed[own]).all(axis=1)
            if template.header is not None:
                right &= scan.name_start[mine] >= 0
            taken[mine[right]] = len(found)
            found.append(variant)

    def _learned(self, scan: Scan, g: int) -> Template | None:
        """The template learned from the first piece of skeleton ``g`` (kept under its
        skeleton), or None."""
        if self.learned >= _LEARN_TRIAL and self.hits < self.learned * _LEARN_PAYS:
            return None  # texts of many shapes: the parser's own caches serve them
        self.learned += 1
        k = int(scan.reps[g])
        skeleton = scan.skeleton(g)
        template = self._learn(scan.piece(k), skeleton, scan.runs(k), scan.piece_values(k))
        if template is None:
            return None
        if template.header is not None and NAME not in skeleton:
            before, after = template.header
            skeleton = before + NAME + skeleton[skeleton.find(after, len(before)) :]
        if template.header is not None:
            self.headers[template.header] = None
        self.templates[skeleton] = template
        if len(self.templates) > _KEPT:
            self.templates.popitem(last=False)
        return template

    def _learn(self, piece: str, skeleton: bytes, runs: list[tuple[int, int]], values: np.ndarray) -> Template | None:
        """The template of one query's text, as the parser reads it, or None (not one
        match query of indexed numeric comparisons, or a text the parser rejects)."""
        tokens = tokenize(Source(piece))
        if any(t.kind is T.ERROR for t in tokens):
            return None  # a character no token starts with: the parser says where
        if piece.endswith(";") and (len(tokens) < 2 or tokens[-2].kind is not T.PUNCT or tokens[-2].end != len(piece)):
            return None  # the ';' it was cut at is in a comment
        try:
            (query,) = parse_queries(piece, "<template>")
        except (QueryError, ValueError):
            return None
        if query.is_aggregate or query.view_span is not None or query.stream_op is not None:
            return None
        order = self.contexts.column_order()
        try:
            bound = bind(query, self.contexts.catalog, query.name or "template")
            normalized = normalize(bound, order, self.contexts.max_disjuncts)
        except QueryError:
            return None
        context = self._context(query, tokens, piece)
        comparisons = flat_comparisons(bound.condition)
        if context is None or not comparisons or len(normalized.disjuncts) != 1:
            return None
        # each constant of the skeleton: a number token of the lexer's, or in a comment
        token_at = {t.start: i for i, t in enumerate(tokens)}
        starts = [t.start for t in tokens]
        run_of: dict[int, int] = {}  # number token -> its constant
        roles = np.full(len(runs), FIXED, np.int8)
        for r, (start, end) in enumerate(runs):
            i = token_at.get(start)
            if i is not None and tokens[i].kind is T.NUMBER and tokens[i].end == end:
                run_of[i] = r
                continue
            before = bisect_right(starts, start) - 1
            if before >= 0 and tokens[before].end > start:
                return None  # in a string or a quoted name: its text is not a number's
            roles[r] = COMMENT
        (conjunct,) = normalized.disjuncts
        parts: list[tuple[ListKey, Any, int | None, float]] = []  # key, value, constant, sign
        for cmp in comparisons:
            concrete = canonicalize(cmp, order)
            if not isinstance(concrete, Predicate) or concrete.key.family != "number":
                return None
            token, sign = _parameter(cmp, order, token_at, concrete)
            run = run_of.get(token) if token is not None else None
            if run is None and type(concrete.value) is not float:
                return None
            parts.append((concrete.key, concrete.value, run, sign))
            if run is not None:
                roles[run] = PARAMETER
        keys = tuple(key for key, _, _, _ in parts)
        if conjunct.residuals or [(p.key, p.value) for p in conjunct.predicates] != [(k, v) for k, v, _, _ in parts]:
            return None  # normalizing kept them otherwise (one predicate written twice)
        hole_parts = [p for p in parts if p[2] is not None]
        if len(set(keys)) != len(keys) or not hole_parts:
            return None
        header = None
        if query.name_span is not None:
            name = tokens[token_at[query.name_span.start]]
            if name.kind is not T.IDENT or piece[name.start] == '"' or not _touches_edges(piece, name):
                return None  # a name in quotes or a number: not a hole of a template
            at = name.start - sum(end - start - 1 for start, end in runs if end <= name.start)
            header = (skeleton[:at], piece[name.end].encode("ascii"))
        key_parameters, count = [], 0
        for _, _, run, _ in parts:
            key_parameters.append(None if run is None else count)
            count += run is not None
        return Template(
            header,
            roles,
            np.where(roles == FIXED, values, np.nan),
            np.array([run for _, _, run, _ in hole_parts], np.int64),
            np.array([sign for _, _, _, sign in hole_parts], np.float64),
            tuple(key_parameters),
            tuple(float(v) if run is None else 0.0 for _, v, run, _ in parts),
            context,
            None if bound.maxwindow is None else faithful(bound.maxwindow),
            keys,
        )

    def _context(self, query: Any, tokens: list[Token], piece: str) -> Context | None:
        """The shared context of the query's SELECT, FROM and MAXWINDOW unit."""
        select = "*" if query.select is None else piece[query.select[0].span.start : query.select[-1].span.end]
        from_ = piece[query.from_[0].span.start : query.from_[-1].span.end]
        unit = None
        if query.maxwindow is not None:
            number = next(t for t in tokens if t.start == query.maxwindow.span.start)
            unit = piece[number.end : query.maxwindow.span.end].strip(BLANK_CHARS)
        return self.contexts.context_for(select, from_, unit)


def _touches_edges(piece: str, token: Token) -> bool:
    """Whether the characters around ``token`` end tokens (no token runs into it)."""
    before = piece[token.start - 1] if token.start else " "
    after = piece[token.end] if token.end < len(piece) else " "
    return before in EDGES and after in EDGES


def _parameter(
    cmp: Comparison, order: ColumnOrder, token_at: dict[int, int], concrete: Predicate
) -> tuple[int | None, float]:
    """(the token whose number, times ``sign``, is the comparison's constant, sign), or
    (None, 1.0) when its constant is not one number's (its numbers then stay as written)."""
    found = [n for side in (cmp.left, cmp.right) for n in additive_numbers(side)]
    if len(found) != 1 or token_start(found[0]) not in token_at:
        return None, 1.0
    start = token_start(found[0])
    symbolic = canonicalize(with_symbols(cmp, {start: 0}), order)
    if not isinstance(symbolic, Predicate) or symbolic.key != concrete.key:
        return None, 1.0
    constant: Any = symbolic.constant  # (a formula of the symbol)
    if not isinstance(constant, LinearConst) or constant.beta != 0 or list(constant.terms) != [0]:
        return None, 1.0
    alpha = constant.terms[0]
    if abs(alpha) != 1:
        return None, 1.0
    return token_at[start], float(alpha)


# ------------------------------------------------------------------- records


def instantiate(
    reading: Reading, names: list[str | None], whole: bool
) -> list[list[CompiledQuery] | None] | RowQueries:
    """The records of the texts read from templates (``names``: each piece's query
    name; only the read pieces' entries are looked at): one block of rows per group
    of templates that make the same queries but for their constants (a query file's
    first query and the next ones, a constant written with and without its sign),
    made at once; ``whole``: every text was read, and when one block holds them all,
    one :class:`RowQueries` is returned. Fewer than :data:`BLOCK_ROWS` queries are
    records of their own (a registry of many one-row blocks, one per
    ``register_query``, would cost a block's work per query)."""
    blocks: list[RowBlock] = []
    of_block: list[np.ndarray] = []
    for group in reading.groups:
        pieces = np.concatenate(group.pieces)
        values = group.values
        kept = reading.read_piece[pieces]  # (a text given back to the parser: its rows go)
        if not kept.all():
            width = len(group.template.keys)
            values = array("d", np.frombuffer(values, np.float64).reshape(-1, width)[kept].tobytes())
            pieces = pieces[kept]
        if len(pieces):
            template = group.template
            block = RowBlock(template.context, template.maxwindow, template.keys, (), [])
            block.values = values  # (the rows as they were read: no copy)
            blocks.append(block)
            of_block.append(pieces)
    rows = sum(map(len, of_block))
    if whole and len(blocks) == 1 and rows >= BLOCK_ROWS:
        every: Any = names if len(names) == rows else [names[k] for k in of_block[0].tolist()]
        return RowQueries(every, blocks[0])  # (every piece is read: each has its name)
    block_of = np.full(len(reading.read_piece), -1, np.int64)
    row_of = np.zeros(len(reading.read_piece), np.int64)
    for b, pieces in enumerate(of_block):
        block_of[pieces] = b
        row_of[pieces] = np.arange(len(pieces))
    block_list, row_list = block_of.tolist(), row_of.tolist()
    out: list[list[CompiledQuery] | None] = []
    for k in range(len(reading.pieces_of_text) - 1):
        pieces_read = reading.read(k)
        if pieces_read is None:
            out.append(None)
            continue
        records = []
        for p in pieces_read:
            query = RowQuery(names[p], blocks[block_list[p]], row_list[p])  # type: ignore[arg-type]
            records.append(query if rows >= BLOCK_ROWS else query.renamed(names[p]))  # type: ignore[arg-type]
        out.append(records)
    return out


def clashes(names: list[str], taken: Container[str]) -> bool:
    """Whether a name repeats or one is taken (the parser then says which, where).
    ``taken`` may offer ``isdisjoint`` (a set, a dict's keys, the registry's names)."""
    if len(set(names)) != len(names):
        return True
    isdisjoint = getattr(taken, "isdisjoint", None)
    if isdisjoint is not None:
        return not isdisjoint(names)
    return any(name in taken for name in names)


__all__ = [
    "BLOCK_ROWS",
    "ContextSource",
    "Reading",
    "Template",
    "TemplateCache",
    "additive_numbers",
    "clashes",
    "instantiate",
    "token_start",
    "with_symbols",
]
