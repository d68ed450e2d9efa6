"""Window exploitation structure: one stream's stored tuples in time buckets.

Bucket ``b`` holds the tuples with ``b * width <= ts < (b + 1) * width``, sorted by
``ts`` (ties in arrival order). Buckets exist only while they hold tuples, in a dict
by bucket number beside the sorted list of those numbers (buckets are made mostly in
time order, at the end, and purged from the front: a plain list does both in O(1)
amortized, where a sorted map costs microseconds a tuple), so:

* ``add`` is O(1) to find the bucket (O(B) to make one out of order) plus O(1) for a
  tuple in timestamp order (appended) or O(m) for a late one (inserted into a bucket
  of m tuples);
* ``range(lo, hi)`` visits only the buckets that overlap ``[lo, hi]``: whole buckets
  inside the range are returned without comparisons, the two end buckets are cut by
  binary search on ``ts``; ``count(lo, hi)`` is the same walk without the tuples
  (O(buckets overlapped)), and ``gather`` puts them into a dict by seq, or only counts
  them past a caller's budget;
* ``purge_before(h)`` drops whole buckets that end at or before ``h`` in O(1) per
  bucket and returns the dropped tuples (so value indexes can forget them).

Unlike the thesis' structure this accepts tuples out of timestamp order (within the
allowed lateness), and the bucket width is a parameter rather than a bucket count.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Iterator

from indexes.stored import StoredTuple


class _Bucket:
    __slots__ = ("times", "tuples")

    def __init__(self) -> None:
        self.times: list[float] = []
        self.tuples: list[StoredTuple] = []


class TimeBuckets:
    __slots__ = ("_buckets", "_keys", "_size", "width")

    def __init__(self, width: float) -> None:
        if not (width > 0 and math.isfinite(width)):
            raise ValueError(f"bucket width must be a positive number, not {width!r}")
        self.width = float(width)
        self._buckets: dict[int, _Bucket] = {}
        self._keys: list[int] = []  # the bucket numbers, ascending
        self._size = 0

    def _key(self, ts: float) -> int:
        return math.floor(ts / self.width)

    def add(self, t: StoredTuple) -> None:
        self.add_run((t,))

    def add_run(self, tuples: Iterable[StoredTuple]) -> None:
        """Store each of ``tuples`` in turn, as :meth:`add` one at a time would (a
        bucket's tuples in ts order, equal ts in arrival order); a run in ts order
        appends to one bucket after another."""
        buckets, key_of = self._buckets, self._key
        key: int | None = None
        times: list[float] = []
        members: list[StoredTuple] = []
        added = 0
        for t in tuples:
            ts = t.row[0]
            k = key_of(ts)
            if k != key:
                key = k
                bucket = buckets.get(k)
                if bucket is None:
                    bucket = buckets[k] = _Bucket()
                    keys = self._keys
                    if not keys or keys[-1] < k:
                        keys.append(k)
                    else:
                        bisect.insort(keys, k)
                times, members = bucket.times, bucket.tuples
            if not times or times[-1] <= ts:
                times.append(ts)
                members.append(t)
            else:
                i = bisect.bisect_right(times, ts)
                times.insert(i, ts)
                members.insert(i, t)
            added += 1
        self._size += added

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[StoredTuple]:
        buckets = self._buckets
        for key in self._keys:
            yield from buckets[key].tuples

    @property
    def bucket_count(self) -> int:
        return len(self._keys)

    def range(
        self, lo: float | None = None, hi: float | None = None, lo_inclusive: bool = True, hi_inclusive: bool = True
    ) -> Iterator[StoredTuple]:
        """Tuples with ``lo <(=) ts <(=) hi`` in timestamp order; None is unbounded."""
        for bucket, start, end in self._spans(lo, hi, lo_inclusive, hi_inclusive):
            if start == 0 and end == len(bucket.times):
                yield from bucket.tuples
            else:
                yield from bucket.tuples[start:end]

    def count(self, lo: float | None = None, hi: float | None = None) -> int:
        """How many tuples :meth:`range` (inclusive) would give: O(buckets overlapped)."""
        return sum(end - start for _, start, end in self._spans(lo, hi, True, True))

    def gather(self, lo: float, hi: float, into: dict[int, StoredTuple], room: int | None = None) -> int:
        """Put the tuples at ``lo <= ts <= hi`` into ``into`` by seq; how many there are.
        More than ``room`` of them (a caller's work budget, which they would pass) are
        only counted, none put in."""
        if room is not None:
            count = self.count(lo, hi)
            if count > room:
                return count
        count = 0
        for bucket, start, end in self._spans(lo, hi, True, True):
            into.update((t.seq, t) for t in bucket.tuples[start:end])
            count += end - start
        return count

    def _spans(
        self, lo: float | None, hi: float | None, lo_inclusive: bool, hi_inclusive: bool
    ) -> Iterator[tuple[_Bucket, int, int]]:
        """Per bucket overlapping the range, its tuples in it: ``tuples[start:end]`` (not empty)."""
        buckets, keys = self._buckets, self._keys
        if not keys:
            return
        first = 0 if lo is None else bisect.bisect_left(keys, self._key(lo))
        last = len(keys) if hi is None else bisect.bisect_right(keys, self._key(hi))
        for key in keys[first:last]:
            bucket = buckets[key]
            times = bucket.times
            start = 0
            end = len(times)
            if lo is not None and times[0] <= lo:
                start = bisect.bisect_left(times, lo) if lo_inclusive else bisect.bisect_right(times, lo)
            if hi is not None and times[-1] >= hi:
                end = bisect.bisect_right(times, hi) if hi_inclusive else bisect.bisect_left(times, hi)
            if start < end:
                yield bucket, start, end

    def purge_before(self, horizon: float) -> list[StoredTuple]:
        """Drop every bucket that lies wholly before ``horizon``.

        Bucket ``k`` goes when ``k < floor(horizon / width)``: because ``floor(ts /
        width)`` never decreases as ``ts`` grows (rounding included), every tuple in
        such a bucket has ``ts < horizon``. (Comparing with ``(k + 1) * width`` instead
        can round the wrong way.)"""
        keys = self._keys
        count = bisect.bisect_left(keys, self._key(horizon))
        if not count:
            return []
        dropped: list[StoredTuple] = []
        buckets = self._buckets
        for key in keys[:count]:
            dropped.extend(buckets.pop(key).tuples)
        del keys[:count]
        self._size -= len(dropped)
        return dropped

    def remove(self, t: StoredTuple) -> None:
        """Remove one tuple (by identity); O(m) in its bucket."""
        key = self._key(t.row[0])
        bucket = self._buckets[key]
        for i, other in enumerate(bucket.tuples):
            if other is t:
                del bucket.tuples[i]
                del bucket.times[i]
                break
        else:
            raise KeyError(t)
        if not bucket.tuples:
            del self._buckets[key]
            del self._keys[bisect.bisect_left(self._keys, key)]
        self._size -= 1

    def oldest_ts(self) -> float | None:
        if not self._keys:
            return None
        return self._buckets[self._keys[0]].times[0]

    def newest_ts(self) -> float | None:
        if not self._keys:
            return None
        return self._buckets[self._keys[-1]].times[-1]

    def _check(self) -> None:
        total = 0
        prev_key = None
        assert sorted(self._buckets) == self._keys, "bucket numbers out of step"
        for key in self._keys:
            bucket = self._buckets[key]
            assert bucket.tuples, "empty bucket kept"
            assert len(bucket.times) == len(bucket.tuples)
            assert prev_key is None or key > prev_key
            prev_key = key
            for ts, t in zip(bucket.times, bucket.tuples, strict=True):
                assert t.row[0] == ts, "bucket time out of step with its tuple"
                assert self._key(ts) == key, f"tuple at ts={ts} in bucket {key}"
            assert bucket.times == sorted(bucket.times), "bucket not sorted by ts"
            seqs = [t.seq for t in bucket.tuples]
            for i in range(len(seqs) - 1):
                if bucket.times[i] == bucket.times[i + 1]:
                    assert seqs[i] < seqs[i + 1], "ties not in arrival order"
            total += len(bucket.tuples)
        assert total == self._size, "size out of step"
