"""Options that pair a name with a path: ``mqo match --input B=blood.csv``, ``--table
patients=patients.csv``, ``--output-view pairs=pairs.jsonl``, ``mqo profile --input``
and ``mqo serve --input B=incoming/B``.

One reader and one set of rules for all of them, so that every one says what is wrong
in the same words: the option and the value as given, then the fault. The name is what
comes before the first ``=`` and the path all after it, each without the spaces around
it; neither may be empty. Where one path per name is the rule (a view's file, a
service's input directory) a name given twice is refused (names compare in any case, as
the schema's do); where several are fine (a stream's files, a table's), they are kept
in the order given. Whether the name is declared is checked where the schema or the
queries are known, by :meth:`PathOption.declared`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NoReturn

from predicates import did_you_mean
from runtime.workload import CliError


@dataclass(frozen=True)
class NamedPath:
    """One value of such an option: the name, the path and the text as given."""

    name: str
    path: str
    text: str


@dataclass(frozen=True)
class PathOption:
    """What one such option takes."""

    flag: str  # the option: --input
    kind: str  # what its name names: stream, table, view
    form: str  # how it is written: STREAM=FILE
    example: str  # B=blood.csv
    source: str  # what declares the names: the schema, the query file
    repeat: bool = True  # a name may come more than once (several files of one stream)

    def parse(self, texts: Sequence[str]) -> list[NamedPath]:
        """Every value, in the order given; a :class:`CliError` for the first bad one."""
        given: dict[str, NamedPath] = {}
        out: list[NamedPath] = []
        for text in texts:
            name, sep, path = text.partition("=")
            name, path = name.strip(), path.strip()
            if not sep:
                self._refuse(text, "no '='")
            if not name:
                self._refuse(text, f"no {self.kind} before '='")
            if not path:
                self._refuse(text, f"no {_PATH_WORDS[self.form.partition('=')[2]]} after '='")
            before = given.get(name.lower())
            if before is not None and not self.repeat:
                raise CliError(
                    f"{self.flag} {text!r}: {self.kind} {name} is given twice (first as {before.text!r}); "
                    f"give one {self.flag} per {self.kind}"
                )
            given.setdefault(name.lower(), NamedPath(name, path, text))
            out.append(NamedPath(name, path, text))
        return out

    def declared(self, name: str, path: str, known: Sequence[str]) -> str:
        """The declared spelling of ``name`` among ``known`` (names compare in any case),
        or a :class:`CliError` naming the option, the value and what is declared."""
        for candidate in known:
            if candidate.lower() == name.lower():
                return candidate
        listed = f" ({self.kind}s: {', '.join(known)})" if known else ""
        raise CliError(
            f"{self.flag} {name + '=' + path!r}: {self.source} declares no {self.kind} {name!r}"
            + did_you_mean(name, known)
            + listed
        )

    def _refuse(self, text: str, fault: str) -> NoReturn:
        raise CliError(f"{self.flag} {text!r}: {fault}; give {self.form} (for example {self.example})")


_PATH_WORDS = {"FILE": "file", "DIR": "directory"}

INPUT = PathOption("--input", "stream", "STREAM=FILE", "B=blood.csv", "the schema")
SERVE_INPUT = PathOption("--input", "stream", "STREAM=DIR", "B=incoming/B", "the schema", repeat=False)
TABLE = PathOption("--table", "table", "TABLE=FILE", "patients=patients.csv", "the query file")
OUTPUT_VIEW = PathOption("--output-view", "view", "VIEW=FILE", "pairs=pairs.jsonl", "the query file", repeat=False)
