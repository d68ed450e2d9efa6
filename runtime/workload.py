"""What every command starts from: the streams and queries of two files, and the
warnings that a run would otherwise answer with silence.

Only the standard library is imported here (see :mod:`runtime.cli`); the matcher is
imported when a workload is loaded.
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mqo import Matcher


class CliError(Exception):
    """A failure the user can fix; printed without a traceback. (Not an MqoError only
    because that class sits behind the heavy imports; :func:`main` treats both alike.)"""


# The optional dependencies by extra (pyproject.toml): the local engine needs none of them.
EXTRAS = {"pyspark": "spark", "pandas": "spark", "matplotlib": "plots", "duckdb": "bench"}


def require(modules: Sequence[str], what: str) -> None:
    """Stop with the install command when a module ``what`` needs is not installed,
    instead of a ModuleNotFoundError from deep inside the run."""
    import importlib.util

    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    if missing:
        extras = ",".join(sorted({EXTRAS.get(name, name) for name in missing}))
        raise CliError(
            f"{what} needs {', '.join(missing)}, which {'is' if len(missing) == 1 else 'are'} not installed: "
            f"pip install 'mqo[{extras}]' "
            f"(or, in a clone, pip install -e '.[{extras}]')"
        )


def read_text(path: str, what: str) -> str:
    with reading(path, what):
        text = Path(path).read_text(encoding="utf-8")
    return text


@contextlib.contextmanager
def reading(path: str, what: str) -> Iterator[None]:
    """A file's read, its errors the command's: not found, a directory, not UTF-8 (with
    its line), unreadable."""
    try:
        yield
    except FileNotFoundError:
        raise CliError(f"{what} file not found: {path}") from None
    except IsADirectoryError:
        raise CliError(f"{what} path is a directory, not a file: {path}") from None
    except UnicodeDecodeError as err:
        line = err.object.count(b"\n", 0, err.start) + 1
        raise CliError(f"{what} file {path}:{line}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    except OSError as err:
        raise CliError(f"cannot read {what} file {path}: {err.strerror}") from None


def load_matcher(schema_path: str, queries_path: str, **options: object) -> Matcher:
    """A matcher with the streams and queries of two files."""
    from mqo import Matcher

    matcher = Matcher(**options)  # type: ignore[arg-type]
    matcher.register_streams(read_text(schema_path, "schema"), schema_path)
    with reading(queries_path, "query"):  # (a large file of subscriptions is read in parts, never whole)
        matcher.register_query_file(queries_path, queries_path)
    return matcher


def warn(command: str, message: str) -> None:
    print(f"mqo {command}: warning: {message}", file=sys.stderr)


@contextlib.contextmanager
def warnings_as_messages(command: str) -> Iterator[None]:
    """The library's warnings (a sum past 64 bits, a query that never matches) as the
    command's own warning lines, not Python's ``file:line: UserWarning:`` form, which
    names a source line of mqo that means nothing to the user."""

    def show(message: Warning | str, category: type[Warning], *_: Any, **__: Any) -> None:
        kind = "" if category is UserWarning or category.__module__.startswith("mqo") else f" ({category.__name__})"
        warn(command, f"{message}{kind}")

    shown = warnings.showwarning
    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = shown


def workload_warnings(matcher: Matcher, queries_path: str, input_streams: Sequence[str] | None) -> list[str]:
    """What would make a run silently produce nothing: no queries at all, or queries
    reading a stream that gets no input (``input_streams`` None: not checked)."""
    from mqo import named_contexts

    if not matcher.query_ids:  # match and aggregate queries
        return [f"{queries_path} holds no queries; nothing can match"]
    if input_streams is None:
        return []
    given = {s.lower() for s in input_streams} | {view.lower() for view in matcher.views}  # views: from queries
    starved: dict[str, list[str]] = {}
    for context, names in named_contexts(matcher.registry.records()):  # (a table block's rows at once)
        for stream in dict.fromkeys(context.streams):
            if stream.lower() not in given:
                starved.setdefault(stream, []).extend(names)
    out = []
    for stream, names in starved.items():
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5:,} more" if len(names) > 5 else "")
        which = f"query {shown} reads" if len(names) == 1 else f"queries {shown} read"
        out.append(f"{which} stream {stream}, which has no --input; {'it' if len(names) == 1 else 'they'} cannot match")
    return out
