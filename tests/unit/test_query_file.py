"""A query file registered from its path (``Matcher.register_query_file``, what
``mqo match --queries`` does): a large file of subscriptions is read in parts, never
whole, and registers exactly what its text registers; any other file (an error, a
view, a name already taken, not UTF-8) is read whole and fails or registers as its
text does, the error naming its line in the file."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mqo
from predicates import QueryError
from predicates.query_file import QueryFileParts
from tests.unit.test_compile_alike import DDL

PART = 600  # bytes a part (monkeypatched: the product's parts are megabytes)


@pytest.fixture
def small_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    import mqo.matcher

    monkeypatch.setattr(mqo.matcher, "CHUNK_CHARS", 2 * PART)


def subscriptions(n: int, first: int = 0, named: bool = True) -> str:
    return "".join(
        (f"Query ID: s{i}\n" if named else "")
        + f"SELECT * FROM B WHERE B.pressure >= {i % 97}.25 AND B.temp < {(i * 7) % 101};\n"
        for i in range(first, first + n)
    )


EVENTS = [("B", float(t), {"pressure": float(t % 100) + 0.5, "temp": float(t % 50), "alert": t}) for t in range(60)]


def outcome(register, text_or_path) -> tuple:  # type: ignore[no-untyped-def]
    """The ids a registration returns and the matches of the events after it, or its error."""
    m = mqo.Matcher(DDL)
    m.register_queries("Query ID: old\nSELECT * FROM B WHERE B.temp > 3")
    try:
        ids = register(m, text_or_path)
    except QueryError as err:
        return ("error", str(err))
    found = sorted((r.query, r.ts, sorted(r.ids.items())) for e in EVENTS for r in m.push(*e))
    return ("ids", ids, found)


def by_path(m: mqo.Matcher, path: Path) -> list[str]:
    return m.register_query_file(path)


def by_text(m: mqo.Matcher, path: Path) -> list[str]:
    return m.register_queries(path.read_text(encoding="utf-8"), str(path))


@pytest.mark.parametrize("named", [True, False])  # (ids given, or positions numbered on from the query before)
def test_a_large_file_of_subscriptions_is_read_in_parts(small_parts, tmp_path, monkeypatch, named) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "subs.mqo"
    path.write_text(subscriptions(400, named=named))
    read_whole: list[Path] = []
    original = Path.read_text

    def spied(self: Path, *args, **kwargs):  # type: ignore[no-untyped-def]
        read_whole.append(self)
        return original(self, *args, **kwargs)

    parts = QueryFileParts.of(path, PART)
    assert parts is not None and len(parts) > 30
    with parts:
        assert "".join(parts) == path.read_text()
    want = outcome(by_text, path)
    monkeypatch.setattr(Path, "read_text", spied)
    got = outcome(by_path, path)
    assert got == want and len(got[1]) == 400 and got[2]
    assert path not in read_whole  # (never read whole)


@pytest.mark.parametrize(
    "late",
    [
        "SELECT * FROM B WHERE B.pressure >> 3;\n",  # an error in a late part: its line in the file
        "Query ID: s3\nSELECT * FROM B WHERE B.temp > 1;\n",  # a name given twice
        "Query ID: old\nSELECT * FROM B WHERE B.temp > 1;\n",  # a name already registered
        "CREATE VIEW hot AS SELECT B.pressure AS p FROM B WHERE B.temp > 40;\n"
        "SELECT * FROM hot WHERE hot.p > 20;\n",  # a view and a query reading it
        "SELECT AVG(B.pressure) FROM B [RANGE 10 SLIDE 10];\n",  # an aggregate query
        "SELECT * FROM B WHERE B.temp > 'x;y';\n",  # a ';' in a string
    ],
)
def test_any_other_file_is_read_whole_and_registers_as_its_text(small_parts, tmp_path, late) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "subs.mqo"
    path.write_text(subscriptions(150) + late + subscriptions(100, 150))
    want = outcome(by_text, path)
    assert outcome(by_path, path) == want
    if want[0] == "error":
        assert str(path) in want[1]


def test_a_file_not_utf8_or_missing_fails_as_its_read(small_parts, tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "subs.mqo"
    path.write_bytes(subscriptions(150).encode() + b"-- caf\xe9\n" + subscriptions(50, 150).encode())
    with pytest.raises(UnicodeDecodeError) as whole:
        path.read_text(encoding="utf-8")
    with pytest.raises(UnicodeDecodeError) as by_parts:
        mqo.Matcher(DDL).register_query_file(path)
    assert by_parts.value.start == whole.value.start
    with pytest.raises(FileNotFoundError):
        mqo.Matcher(DDL).register_query_file(tmp_path / "none.mqo")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(st.sampled_from(["a", ";", "\n", "\r\n", "\r", "é", "€", " ", "x;\r\n"]), max_size=300),
    st.integers(1, 40),
)
def test_the_parts_are_the_files_text_as_read_whole(tmp_path_factory, pieces, part) -> None:  # type: ignore[no-untyped-def]
    """Cut only after a ';' (never inside a UTF-8 character or a CR LF), each part
    decoded with universal newlines: the parts joined are the file's ``read_text``."""
    path = tmp_path_factory.mktemp("parts") / "q.mqo"
    path.write_bytes("".join(pieces).encode())
    parts = QueryFileParts.of(path, part)
    if parts is None:
        data = path.read_bytes()  # (one part: short, or no ';' past ``part`` but before a blank rest)
        cut = data.find(b";", part)
        assert len(data) <= part or cut < 0 or not data[cut + 1 :].strip()
        return
    with parts:
        assert "".join(parts) == path.read_text(encoding="utf-8")
        assert all(p.endswith(";") for p in list(parts)[:-1]) and len(parts) >= 2 and parts[-1].strip()


def test_a_blank_rest_after_the_last_cut_is_the_last_parts(small_parts, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A file whose last ';' is past the last cut's place ends in a blank rest: no part
    of its own (a part of no query would send the file to the whole read)."""
    path = tmp_path / "subs.mqo"
    text = subscriptions(30)
    while len(text.encode()) <= PART * 3:
        text += subscriptions(1, len(text))
    path.write_text(text[: text.rindex(";") + 1] + "\n  \n")
    parts = QueryFileParts.of(path, PART)
    assert parts is not None
    with parts:
        assert parts[-1].strip()
    monkeypatch.setattr(Path, "read_text", lambda *a, **k: pytest.fail("read whole"))
    assert len(mqo.Matcher(DDL).register_query_file(path)) == text.count(";")


@pytest.mark.parametrize("how", ["replaced", "written over"])
def test_a_file_changed_while_registered_is_one_version_of_it(small_parts, tmp_path, monkeypatch, how) -> None:  # type: ignore[no-untyped-def]
    """An editor's save (a new file renamed over it) while the parts are read: the
    parts are the file as opened. Written over in place: the change is seen and the
    file is read whole, as it is then. Never a mix of the two."""
    path = tmp_path / "subs.mqo"
    old = subscriptions(300)
    new = old.replace("B.temp <", "B.temp >")  # (the same size and cuts)
    path.write_text(old)
    for_old, for_new = (tmp_path / "old.mqo"), (tmp_path / "new.mqo")
    for_old.write_text(old)
    for_new.write_text(new)
    read = QueryFileParts.__getitem__
    changed: list[int] = []

    def changing(self, k):  # type: ignore[no-untyped-def]
        if k == 3 and not changed:
            changed.append(k)
            if how == "replaced":
                (tmp_path / "tmp.mqo").write_text(new)
                (tmp_path / "tmp.mqo").replace(path)
            else:
                with open(path, "r+") as f:
                    f.write(new)
                os.utime(path, ns=(0, 0))  # (a write within the clock's tick: the time differs)
        return read(self, k)

    monkeypatch.setattr(QueryFileParts, "__getitem__", changing)
    got = outcome(by_path, path)
    assert changed and got == outcome(by_text, for_old if how == "replaced" else for_new)
    assert outcome(by_text, for_old) != outcome(by_text, for_new)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes")
def test_a_named_pipe_is_read_once_whole(small_parts, tmp_path) -> None:  # type: ignore[no-untyped-def]
    pipe = tmp_path / "q.fifo"
    os.mkfifo(pipe)
    writer = threading.Thread(target=lambda: pipe.write_text(subscriptions(40)))
    writer.start()
    ids = mqo.Matcher(DDL).register_query_file(pipe)
    writer.join(5)
    assert ids == [f"s{i}" for i in range(40)]


def test_an_open_file_is_its_text_not_its_lines(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``register_queries(open(path))`` registers the file's queries (iterating a file
    gives its lines, each no query on its own), errors named by the file's name; a file
    opened as bytes is a clear error."""
    path = tmp_path / "subs.mqo"
    path.write_text(subscriptions(20))
    with open(path, encoding="utf-8") as f:
        assert outcome(lambda m, _: m.register_queries(f), path) == outcome(by_text, path)
    path.write_text(subscriptions(3) + "SELECT * FROM B WHERE B.pressure >> 3;\n")
    with open(path, encoding="utf-8") as f, pytest.raises(QueryError, match=f"{path}:7"):
        mqo.Matcher(DDL).register_queries(f)
    with open(path, "rb") as f, pytest.raises(TypeError, match="text mode"):
        mqo.Matcher(DDL).register_queries(f)  # type: ignore[arg-type]
