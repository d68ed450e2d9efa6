"""The template cache's scan (predicates.template_scan): the compiled kernel gives what
the plain function gives, a constant's double is float()'s of its text, and pieces
whose skeletons only share a hash are not read as one template."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import predicates
import predicates.template_scan as template_scan
from indexes.template_kernels import scan_bytes
from predicates import Catalog
from predicates.template_scan import DIGITS, NOT_PLAIN, Scan
from predicates.token_cache import TokenCache
from tests.unit.test_compile_alike import DDL
from tests.unit.test_template_cache import NAMES, SHAPES, _front_end_many, outcome, text_of

HEADERS = [(b"Query ID: ", b"\n"), (b"-- id ", b" ")]

# decimals as users write them: leading zeros, a dot first or last, up to 20 digits
DECIMALS = st.builds(
    lambda whole, frac, dot: whole + ("." if dot else "") + frac,
    st.text("0123456789", max_size=12),
    st.text("0123456789", max_size=9),
    st.booleans(),
).filter(lambda d: any(c.isdigit() for c in d))
# what may stand around a constant: edges, letters that glue to it, comments, names
PARTS = st.one_of(
    DECIMALS,
    st.sampled_from(["Query ID: q1\n", "Query ID: _x9 ", "-- id n7 ", "-- a comment 12.5\n", "\n", " ", "\t"]),
    st.sampled_from(["(", ")", "<", ">=", "+", "-", "*", "/", ",", ":", ";", "e", "E", "a", "_", ".", "'", '"']),
    st.sampled_from(["SELECT * FROM B WHERE B.pressure > ", " AND B.temp <= ", "é", "\x00", "\x01", "\x02"]),
)
TEXTS = st.lists(st.lists(PARTS, max_size=12).map("".join), min_size=1, max_size=5)


def _arrays(texts: list[str], scanner: template_scan.ByteScanner) -> list[list[object]]:
    scan = Scan(texts, HEADERS, scanner)
    return [
        [a.tolist() for a in (scan.text_pieces, scan.piece_start, scan.piece_end, scan.flags, scan.group, scan.reps)],
        [a.tolist() for a in (scan.name_start, scan.name_end, scan.run_first, scan.run_start, scan.run_end)],
        [np.nan_to_num(scan.values, nan=-1.0).tolist(), scan.names, [scan.skeleton(g) for g in range(len(scan.reps))]],
    ]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TEXTS)
@example(["Query ID: q1\nSELECT * FROM B WHERE B.pressure > 1.5;Query ID: q2\nSELECT 7;  ;\n", "0.1 -- 2"])
def test_the_compiled_kernel_is_the_plain_function(texts: list[str]) -> None:
    """And following the skeleton before a piece changes nothing: the plain function
    scanning every byte of every piece gives what the kernel gives."""
    compiled = _arrays(texts, scan_bytes)
    assert compiled == _arrays(texts, template_scan.scan_bytes)
    template_scan.FOLLOW = False
    try:
        assert compiled == _arrays(texts, template_scan.scan_bytes)
    finally:
        template_scan.FOLLOW = True


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.sampled_from(SHAPES), st.lists(DECIMALS, min_size=3, max_size=3), NAMES), min_size=2, max_size=8
    )
)
def test_texts_of_a_few_shapes_scan_alike_followed_or_not(texts: list[tuple[str, list[str], str | None]]) -> None:
    """Texts of a few shapes, one after the other (as bulk registrations are): each
    piece followed along the skeleton before it, parting anywhere, gives what the
    plain scan of every byte gives."""
    written = [text_of(shape, [*constants, "1"], name) for shape, constants, name in texts]
    written.append(";\n".join(written))
    compiled = _arrays(written, scan_bytes)
    template_scan.FOLLOW = False
    try:
        assert compiled == _arrays(written, template_scan.scan_bytes)
    finally:
        template_scan.FOLLOW = True


@settings(max_examples=500, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([" ", "(", "<=", "-", ",", "\n", ";"]), DECIMALS), min_size=1, max_size=8))
@example([(" ", "0.1"), (" ", "0.3"), (" ", "999999999999999"), (" ", ".000000000000001"), (" ", "5.")])
@example([(" ", "123456789012345.6"), (" ", "9007199254740993"), (" ", "00000000000000012")])
def test_a_plain_decimals_double_is_floats(constants: list[tuple[str, str]]) -> None:
    """Every constant of at most 15 digits and one dot reads as float() of its text
    (m / 10**f: two exact doubles, one correctly rounded division); any other makes
    its piece not plain (the parser reads it)."""
    text = "".join(edge + decimal for edge, decimal in constants) + " "
    scan = Scan([text], [], scan_bytes)
    read = [
        (scan.piece(k)[start:end], value)
        for k in range(len(scan))
        for (start, end), value in zip(scan.runs(k), scan.piece_values(k).tolist(), strict=True)
    ]
    assert [decimal for decimal, _ in read] == [decimal for _, decimal in constants]
    for k in range(len(scan)):
        plain = all(
            d.count(".") <= 1 and sum(c.isdigit() for c in d) <= DIGITS
            for (start, end) in scan.runs(k)
            for d in [scan.piece(k)[start:end]]
        )
        assert bool(scan.flags[k] & NOT_PLAIN) is not plain
    for decimal, value in read:
        if decimal.count(".") <= 1 and sum(c.isdigit() for c in decimal) <= DIGITS:
            assert value == float(decimal) and str(value) == repr(float(decimal)), decimal


def test_pieces_whose_skeletons_only_share_a_hash_go_to_the_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every skeleton hashed alike (a hash of no bits): the first skeleton is a group,
    a piece of another is in none, and compiling gives the parser's queries."""
    monkeypatch.setattr(template_scan, "_HASH_MASK", 0)
    texts = [f"SELECT * FROM B WHERE B.pressure > {i}" for i in range(3)] + ["SELECT * FROM B WHERE B.temp > 4"]
    scan = Scan(texts, [], template_scan.scan_bytes)  # (the plain function reads the mask when it runs)
    assert scan.group.tolist() == [0, 0, 0, -1]
    catalog = Catalog.from_ddl(DDL)
    compiler = TokenCache(catalog)
    compiler.templates.scanner = template_scan.scan_bytes
    compiler.templates.fewest = 1
    many = [f"Query ID: s{i}\nSELECT * FROM B WHERE B.{c} > {i}.5" for i in range(40) for c in ("pressure", "temp")]
    got = outcome(lambda: predicates.compile_many(many, catalog, compiler=compiler))
    assert got == outcome(lambda: _front_end_many(many, catalog, 1))
    assert 0 < compiler.templates.hits < len(many)  # (one shape read, the other parsed)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.text(alphabet="ab; ", max_size=30), max_size=40),
    st.integers(1, 6),
    st.integers(1, 25),
)
def test_a_list_is_batched_as_any_sequence_is(texts: list[str], chunk: int, chars: int) -> None:
    """``scan_batches`` cuts a list of short texts into slices at once and walks any
    other sequence (or a list with a long text) text by text: the same batches either
    way, every part of every text in order, a batch at most ``CHUNK`` texts and ending
    at the first text that brings it to ``CHUNK_CHARS`` characters."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(template_scan, "CHUNK", chunk)
        patch.setattr(template_scan, "CHUNK_CHARS", chars)
        walked = list(template_scan.scan_batches(tuple(texts)))
        sliced = list(template_scan.scan_batches(list(texts)))
    if max(map(len, texts), default=0) <= chars:
        assert [(b, s or [True] * len(b)) for b, s in sliced] == [(b, s or [True] * len(b)) for b, s in walked]
    joined: dict[int, str] = {}
    text_number = -1
    for batch, starts in walked:
        assert 0 < len(batch) <= chunk
        assert sum(map(len, batch[:-1])) < chars
        for part, starts_text in zip(batch, starts or [True] * len(batch), strict=True):
            text_number += starts_text
            joined[text_number] = joined.get(text_number, "") + part
    assert [joined.get(k, "") for k in range(len(texts))] == texts
