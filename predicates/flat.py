"""The quickest compile path: texts that are a known prefix and ``column OP number`` terms.

Subscriptions registered by the thousand are mostly one stream, no window, and a WHERE
clause of comparisons of one column with one number, joined by ``AND``::

    SELECT * FROM E WHERE E.a3 >= 10.5 AND E.a3 <= 20 AND E.a7 >= 3

Such a text is cut with string methods only (no regular expression over its numbers):
its text before `` WHERE `` is a **prefix** whose context was compiled once, and each
`` AND ``-separated term is ``head number`` where ``head`` (``E.a3 >=``) is a comparison
pattern the fast compiler already compiled to a list key (its shortcut). A term is taken
only when its number is a plain decimal literal of at most 15 characters, which is
exactly the double that the literal prints as (see :func:`predicates.templates.scaled_number`),
and only when the head is a known pattern: any other text (a new pattern, a comment, a
string, OR, a second query, an exponent, a sign) is not taken, and the caller compiles it
the usual way, which reports errors with their positions. Taking a text never changes
what it means, only how fast it compiles: each term is the very text the pattern was
compiled from, with another number.
"""

from __future__ import annotations

from array import array
from typing import TYPE_CHECKING, cast

from predicates.clauses import HOLE, NUMBER_SPLIT, lexer_blanks_only, split_header, split_skeleton
from predicates.lexer import BLANK_CHARS
from predicates.normalize import ListKey
from predicates.records import CompiledQuery, Conjunction, Context

if TYPE_CHECKING:
    from predicates.templates import FastCompiler

_TAIL = " " + HOLE  # a pattern whose one number ends it, after a blank
_DIGITS = "0123456789."
_MAX_PLAIN = 15  # characters of a literal that is always the shortest text of its double
_KEPT = 8192
_MISSING = object()


class FlatCompiler:
    """Compiles flat single-stream texts in bulk from a :class:`FastCompiler`'s parts
    (prefix contexts and comparison shortcuts); texts it cannot take come back as None."""

    def __init__(self, compiler: FastCompiler) -> None:
        self.compiler = compiler
        self._streams_seen = -1
        self._prefixes: dict[str, Context | None] = {}
        # per context, head -> number of its list key in ``_keys``
        self._heads: dict[Context, dict[str, int]] = {}
        self._key_numbers: dict[ListKey, int] = {}
        self._keys: list[ListKey] = []

    def _check_catalog(self) -> None:
        """New streams: the fast compiler forgets its parts, and so does this."""
        compiler = self.compiler
        if len(compiler.catalog) != compiler._streams_seen:
            compiler._reset()
        self._streams_seen = compiler._streams_seen
        self._prefixes.clear()
        self._heads.clear()
        self._key_numbers.clear()
        self._keys.clear()

    def compile(self, text: str, position: int) -> CompiledQuery | None:
        """The one query of ``text`` (named by its header, else by ``position``), or
        None (not taken). A text taken is one match query: its prefix was read as one
        query's SELECT and FROM, without an aggregate, and each term's head is a pattern
        the parser read as one comparison, so no term can hide a ``;``, a SELECT, a
        header or a clause."""
        if len(self.compiler.catalog) != self._streams_seen or self.compiler._streams_seen != self._streams_seen:
            self._check_catalog()
        if text[:1] in BLANK_CHARS:  # a piece of a query file starts after the last ';'
            text = text.lstrip(BLANK_CHARS)
        if text.startswith("Query ID: "):  # the usual header, cut without the regex
            j = text.find("\n", 10)
            head = text[10:j]
            name: str | None = head
            if j > 0 and head.isascii() and head.isidentifier():  # (ASCII: as the lexer's words)
                body = text[j:]
            else:
                name, body = split_header(text)
        else:
            name, body = split_header(text)
        i = body.find(" WHERE ")
        if i < 0:
            return None
        prefix = body[:i]
        context = self._prefixes.get(prefix, _MISSING)
        if context is _MISSING:
            context = self._learn_prefix(prefix)
        if context is None:
            return None
        # the lexer's blanks, not rstrip()'s wider whitespace (a trailing no-break space
        # stays in the last number, which is then not taken); the prefix and the heads
        # were read by the lexer, so no other character the lexer rejects gets through
        terms = body[i + 7 :].rstrip(BLANK_CHARS)
        if terms[-1:] == ";":  # the query's own end, as a query file writes it
            terms = terms[:-1].rstrip(BLANK_CHARS)
        if ";" in terms or "\n" in terms:
            return None  # a query file given as one text (or a term over two lines): not cut
        conjunction = self._terms(context, terms.split(" AND "))  # type: ignore[arg-type]
        if conjunction is None:
            return None
        return CompiledQuery(name if name is not None else str(position), context, None, ((conjunction, ()),))  # type: ignore[arg-type]

    def _terms(self, context: Context, terms: list[str]) -> Conjunction | None:
        heads = self._heads.get(context)
        if heads is None:
            heads = self._heads[context] = {}
        cut = [t.rpartition(" ") for t in terms]
        numbers = [n for _, _, n in cut]
        # every number is ASCII digits and dots (a few scans of C code): then float()
        # takes it exactly when it is a plain decimal literal (one dot at most, a digit)
        digits = "".join(numbers).replace(".", "")
        if not (digits.isascii() and digits.isdigit()) or max(map(len, numbers)) > _MAX_PLAIN:
            return None
        try:
            values = array("d", map(float, numbers))  # the factor is 1: the literal's double
        except ValueError:
            return None  # "." or "1.2.3": the usual path says what is wrong
        found = list(map(heads.get, [h for h, _, _ in cut]))
        if None in found:
            for k, got in enumerate(found):
                if got is None:
                    got = self._learn_head(context, heads, cut[k][0])
                    if got is None:
                        return None
                    found[k] = got
        if len(set(found)) != len(found) and len(set(zip(found, values, strict=True))) != len(values):
            return None  # a predicate written twice: the usual path keeps it once
        numbers_of_keys = cast(list[int], found)  # every head is known now
        return Conjunction(tuple(map(self._keys.__getitem__, numbers_of_keys)), values)

    def _learn_head(self, context: Context, heads: dict[str, int], head: str) -> int | None:
        """The shortcut of ``head NUMBER`` if the fast compiler made one (it does when
        it compiles the pattern through the usual path)."""
        shortcut = self.compiler._shortcuts.get(context, {}).get(head + _TAIL)
        if shortcut is None:
            return None
        key, index, factor, count = shortcut
        if index != 0 or count != 1 or factor != 1.0:
            return None  # (-E.x < 5: the usual path negates the constant)
        if len(heads) >= _KEPT:
            heads.clear()
        # heads give the key's number: ints hash in C (a ListKey's hash is Python code)
        number = self._key_numbers.get(key)
        if number is None:
            number = self._key_numbers[key] = len(self._keys)
            self._keys.append(key)
        heads[head] = number
        return number

    def _learn_prefix(self, prefix: str) -> Context | None:
        """The context of ``prefix WHERE ...`` when the prefix is SELECT and FROM only,
        without numbers, parentheses, strings or aggregate words (else None)."""
        if len(self._prefixes) >= _KEPT:
            self._prefixes.clear()
        context: Context | None = None
        lower = prefix.lower()
        plain = not any(c in prefix for c in "([;'\"") and "group" not in lower and "having" not in lower
        if plain and lexer_blanks_only(prefix) and len(NUMBER_SPLIT.split(prefix)) == 1:
            shape = split_skeleton((prefix + " WHERE x",), ())
            if (
                shape is not None
                and shape.window_index is None
                and shape.unit is None
                and shape.conditions == [(0, ["x"])]
            ):
                context = self.compiler.context_for(shape.select, shape.from_, None)
        self._prefixes[prefix] = context
        return context


__all__ = ["FlatCompiler"]
