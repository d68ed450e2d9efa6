"""The snapshot file format (:mod:`mqo.snapshot_codec`, docs/SNAPSHOTS.md): every value
of the plain-data contract comes back exactly; a file that is not a snapshot of this
version is refused with a clear error; nothing in a file is ever run."""

from __future__ import annotations

import json
import math
import os
import pickle
import struct
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from mqo import MqoError
from mqo.snapshot_codec import FILE_VERSION, HEADER_SIZE, MAGIC, SnapshotError, decode_snapshot, encode_snapshot

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint64", "float16", "float32", "float64", ">f8", "<i2"]


def arrays() -> st.SearchStrategy[np.ndarray]:
    return st.sampled_from(DTYPES).flatmap(
        lambda dtype: hnp.arrays(np.dtype(dtype), hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4))
    )


leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from([2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64]),
    # past 64 bits, up to 30,000 digits (past Python's 4,300-digit limit on int <-> decimal text)
    st.tuples(st.integers(0, 60_000), st.booleans()).map(lambda t: (-1) ** t[1] * (3 ** t[0] + t[0])),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([-0.0, math.nan, math.inf, -math.inf, 5e-324, 1.7976931348623157e308]),
    st.text(),
    arrays(),
    st.binary(max_size=40),
)
keys = st.one_of(st.text(max_size=6), st.sampled_from(["$array", "$int", "$float", "$bytes", "$$x", "$", "tuple"]))
plain = st.recursive(
    leaves, lambda inner: st.lists(inner, max_size=5) | st.dictionaries(keys, inner, max_size=5), max_leaves=25
)


def same(a: Any, b: Any) -> bool:
    """Exactly equal: floats by their bits (nan is nan, -0.0 is not 0.0), arrays by
    dtype, shape and bytes, types alike."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return struct.pack("<d", a) == struct.pack("<d", b) or (a != a and b != b)
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return a == b


@settings(max_examples=300, deadline=None)
@given(data=plain)
def test_plain_data_round_trips_exactly(data: Any) -> None:
    assert same(decode_snapshot(encode_snapshot(data)), data)


def test_tuples_come_back_as_lists_and_numpy_scalars_as_python_values() -> None:
    data = {"row": (1.5, np.int64(7), np.bool_(True), np.str_("x"), np.float64(-0.0), np.float32(np.inf))}
    back = decode_snapshot(encode_snapshot(data))
    assert same(back, {"row": [1.5, 7, True, "x", -0.0, math.inf]})


def test_arrays_come_back_writable_and_of_their_own() -> None:
    back = decode_snapshot(encode_snapshot({"a": np.arange(4)}))["a"]
    back[0] = 9
    assert back.tolist() == [9, 1, 2, 3]


@pytest.mark.parametrize(
    ("data", "where", "what"),
    [
        ({"a": [1, {"b": {1, 2}}]}, "snapshot['a'][1]['b']", "set"),
        ({"a": Fraction(1, 3)}, "snapshot['a']", "Fraction"),
        ({"a": {1: "x"}}, "snapshot['a'][1] (a key)", "int"),
        ({"a": np.array(["x"], object)}, "snapshot['a']", "ndarray"),
        ({"a": np.array([1j])}, "snapshot['a']", "ndarray"),
        ([object()], "snapshot[0]", "object"),
    ],
)
def test_what_is_not_plain_data_is_refused_with_its_place(data: Any, where: str, what: str) -> None:
    with pytest.raises(SnapshotError) as caught:
        encode_snapshot(data)
    assert str(caught.value).startswith(f"{where}: a value of type {what} cannot be written into a snapshot")


# ------------------------------------------------------------- bad files


def good() -> bytes:
    return encode_snapshot({"x": [1, 2.5, "s"], "a": np.arange(10, dtype=np.int64), "b": b"raw"})


def test_a_foreign_file_is_refused() -> None:
    for blob in (b"", b"MQO", b'{"format": 8}', b"PAR1" + bytes(100), os.urandom(200)):
        with pytest.raises(SnapshotError, match=r"^data\.bin: not an mqo snapshot"):
            decode_snapshot(blob, "data.bin")


def test_a_truncated_file_is_refused_wherever_it_is_cut() -> None:
    blob = good()
    for cut in (len(MAGIC) + 1, HEADER_SIZE - 1, HEADER_SIZE, HEADER_SIZE + 5, len(blob) - 1):
        with pytest.raises(SnapshotError, match=r"^ck: truncated"):
            decode_snapshot(blob[:cut], "ck")


def test_a_corrupt_file_is_refused() -> None:
    blob = good()
    for at in (HEADER_SIZE, HEADER_SIZE + 3, len(blob) // 2, len(blob) - 1, 30):  # JSON, columns, the digest
        bad = bytearray(blob)
        bad[at] ^= 0x41
        with pytest.raises(SnapshotError, match=r"^ck: corrupt"):
            decode_snapshot(bytes(bad), "ck")
    with pytest.raises(SnapshotError, match=r"^ck: corrupt"):
        decode_snapshot(blob + b"\x00", "ck")


def with_body(body: bytes, columns: bytes = b"", version: int = FILE_VERSION) -> bytes:
    """A file with a correct header around a crafted body."""
    import hashlib

    digest = hashlib.sha256(body + columns).digest()
    return struct.pack("<8sIQQ32s", MAGIC, version, len(body), len(columns), digest) + body + columns


@pytest.mark.parametrize(
    "body",
    [b"{", b"NaN", b'{"$float": "nan2"}', b'{"$array": 0}', b'{"$bytes": 3}', b'{"$x": 1}', b"[" * 100000, b"\xff"],
)
def test_a_crafted_body_with_a_good_checksum_is_refused_as_corrupt(body: bytes) -> None:
    with pytest.raises(SnapshotError, match=r"^ck: corrupt"):
        decode_snapshot(with_body(body), "ck")


def test_an_array_whose_shape_does_not_fit_its_column_is_corrupt() -> None:
    blob = encode_snapshot({"a": np.arange(6)})
    start = blob.index(b'"shape":[6]')
    for shape in (b"[-1]", b"[7]", b"[2,2]"):
        tree = blob[HEADER_SIZE:start] + b'"shape":' + shape + b"}}}"
        columns = blob[HEADER_SIZE + struct.unpack("<Q", blob[12:20])[0] :]
        with pytest.raises(SnapshotError, match=r"^ck: corrupt"):
            decode_snapshot(with_body(tree, columns), "ck")


def test_a_newer_version_is_refused() -> None:
    blob = bytearray(good())
    blob[8:12] = struct.pack("<I", FILE_VERSION + 1)
    with pytest.raises(SnapshotError, match=r"^ck: made by a newer version of mqo \(snapshot file version 2"):
        decode_snapshot(bytes(blob), "ck")


def test_an_old_pickle_is_refused_as_an_older_versions() -> None:
    for protocol in (2, 3, 4, 5):
        with pytest.raises(SnapshotError, match=r"^state.pickle: made by an older version of mqo"):
            decode_snapshot(pickle.dumps({"format": 1}, protocol=protocol), "state.pickle")
    assert issubclass(SnapshotError, MqoError)


class _Payload:
    """Unpickled, it makes a directory: proof that it ran."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.mkdir, (str(self.path),))


def test_loading_a_crafted_file_runs_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marker = tmp_path / "ran"
    payload = pickle.dumps(_Payload(marker))
    pickle.loads(payload)  # the payload does run when unpickled
    assert marker.exists()
    marker.rmdir()

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("pickle was called")

    for name in ("loads", "load", "Unpickler"):
        monkeypatch.setattr(pickle, name, refuse)
    with pytest.raises(SnapshotError, match="older version"):
        decode_snapshot(payload, "ck")
    # a pickle inside a well-formed file is bytes, not an object
    inside = with_body(json.dumps({"state": {"$bytes": 0}}).encode(), _one_bytes_column(payload))
    assert decode_snapshot(inside) == {"state": payload}
    assert not marker.exists()


def _one_bytes_column(value: bytes) -> bytes:
    import pyarrow as pa

    batch = pa.RecordBatch.from_arrays([pa.array([value], pa.large_binary())], names=["0"])
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes()
