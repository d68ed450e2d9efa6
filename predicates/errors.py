"""Source text with positions, and the one error type of the language layer.

Every parse or semantic error is a :class:`QueryError`. It knows the source text it
points into, so it can render itself the way compilers do::

    queries.mqo:7:12: unknown column 'presure' of stream B (did you mean 'pressure'?)
        Where B.presure < 90
                ^

Positions are stored as character offsets; lines and columns (1-based) are derived
on demand, so the lexer and the AST stay cheap.
"""

from __future__ import annotations

import bisect
import difflib
from collections.abc import Iterable
from dataclasses import dataclass


class MqoError(Exception):
    """Base class of every error mqo raises on purpose."""


@dataclass(frozen=True, slots=True)
class Span:
    """Half-open character range ``[start, end)`` in a :class:`Source`."""

    start: int
    end: int

    def cover(self, other: Span) -> Span:
        return Span(min(self.start, other.start), max(self.end, other.end))


class Source:
    """A named piece of text (a file, or a string given in Python)."""

    __slots__ = ("_line_starts", "name", "text")

    def __init__(self, text: str, name: str = "<string>") -> None:
        self.name = name
        self.text = text
        self._line_starts: list[int] | None = None

    def line_col(self, offset: int) -> tuple[int, int]:
        """1-based (line, column) of a character offset."""
        if self._line_starts is None:
            starts = [0]
            starts.extend(i + 1 for i, ch in enumerate(self.text) if ch == "\n")
            self._line_starts = starts
        offset = max(0, min(offset, len(self.text)))
        line = bisect.bisect_right(self._line_starts, offset) - 1
        return line + 1, offset - self._line_starts[line] + 1

    def line_text(self, line: int) -> str:
        lines = self.text.split("\n")
        return lines[line - 1] if 0 < line <= len(lines) else ""

    def __repr__(self) -> str:
        return f"Source({self.name!r}, {len(self.text)} chars)"


class QueryError(MqoError):
    """A malformed query, DDL statement or duration, with where it is.

    Attributes: ``message`` (one line, no position), ``source`` and ``span`` (where),
    ``query`` (the query's name when the error is inside one), ``hint`` (an extra line).
    ``str(error)`` is the full ``file:line:col: message`` report with a caret.
    """

    def __init__(
        self,
        message: str,
        source: Source | None = None,
        span: Span | None = None,
        *,
        query: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.message = message
        self.source = source
        self.span = span
        self.query = query
        self.hint = hint
        super().__init__(self.render())

    @property
    def line(self) -> int | None:
        if self.source is None or self.span is None:
            return None
        return self.source.line_col(self.span.start)[0]

    @property
    def column(self) -> int | None:
        if self.source is None or self.span is None:
            return None
        return self.source.line_col(self.span.start)[1]

    def in_query(self, name: str) -> QueryError:
        """The same error, attributed to query ``name`` (kept if already set)."""
        if self.query is not None:
            return self
        return QueryError(self.message, self.source, self.span, query=name, hint=self.hint)

    def render(self) -> str:
        where = self.source.name if self.source is not None else "<input>"
        text = self.message
        if self.query is not None:
            text = f"{text} (in query {self.query})"
        if self.source is None or self.span is None:
            head = f"{where}: {text}"
            return head if self.hint is None else f"{head}\n  {self.hint}"
        line, col = self.source.line_col(self.span.start)
        src_line = self.source.line_text(line)
        end_line, end_col = self.source.line_col(max(self.span.start, self.span.end - 1))
        width = end_col - col + 1 if end_line == line else len(src_line) - col + 1
        caret = " " * (col - 1) + "^" + "~" * max(0, min(width, 60) - 1)
        # Tabs keep their width in the caret line so the caret lines up in terminals.
        caret = "".join("\t" if ch == "\t" else " " for ch in src_line[: col - 1]) + caret[col - 1 :]
        parts = [f"{where}:{line}:{col}: {text}", f"    {src_line}", f"    {caret}"]
        if self.hint is not None:
            parts.append(f"  {self.hint}")
        return "\n".join(parts)


def closest(name: str, candidates: Iterable[str]) -> str | None:
    """The candidate closest to ``name`` (case-insensitive), if any is close enough."""
    pool = list(candidates)
    by_lower = {c.lower(): c for c in pool}
    lowered = name.lower()
    match = difflib.get_close_matches(lowered, list(by_lower), n=1, cutoff=0.6)
    if match:
        return by_lower[match[0]]
    # Short names (stream 'B' for 'Blood') are too short for a similarity ratio;
    # a shared prefix is the next best sign.
    prefixed = [c for c in by_lower if c and (lowered.startswith(c) or c.startswith(lowered))]
    return by_lower[max(prefixed, key=len)] if prefixed else None


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` or the empty string."""
    best = closest(name, candidates)
    return f" (did you mean '{best}'?)" if best is not None else ""
