"""Counters of the work the matcher does: what chapter 5 of the thesis
reports, and what the adaptive reorderer reads.

The engine counts into plain local integers while it processes a tuple and adds them
here once per tuple, so counting costs a few additions per tuple, not per comparison.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from predicates import Kind

PHASES = (Kind.ATTRIBUTE, Kind.JOIN, Kind.WINDOW)


@dataclass
class Counters:
    """Cumulative counts since the matcher was made (or :meth:`reset`).

    * ``comparisons``: predicate evaluations (a binary search over a list of n counts
      ``bit_length(n)``; a window or time check counts one);
    * ``bitset_ops``: AND/OR/AND-NOT operations on candidate and predicate bitsets;
    * ``index_probes``: range lookups in the join and window exploitation structures;
    * ``retrieved``: stored tuples those lookups fetched;
    * ``intermediate``: partial results (joined tuples) created;
    * ``quiet``: tuples a replay stored without matching them, as they could end no
      result when they arrived (:mod:`mqo.replay_chunks`);
    * ``phase_in`` / ``phase_out``: partial results entering and leaving each
      predicate type's phase, whose ratio is that type's observed selectivity.
    """

    tuples: int = 0
    late: int = 0
    results: int = 0
    comparisons: int = 0
    bitset_ops: int = 0
    index_probes: int = 0
    retrieved: int = 0
    intermediate: int = 0
    quiet: int = 0
    phase_in: dict[str, int] = field(default_factory=lambda: {k.value: 0 for k in PHASES})
    phase_out: dict[str, int] = field(default_factory=lambda: {k.value: 0 for k in PHASES})

    def selectivity(self, kind: Kind) -> float | None:
        """Partial results out per partial result in for a predicate type (None: not seen).

        Below 1 the type filters; above 1 (join and window phases) it multiplies.
        """
        seen = self.phase_in[kind.value]
        return self.phase_out[kind.value] / seen if seen else None

    def reset(self) -> None:
        fresh = Counters()
        for f in fields(self):
            setattr(self, f.name, getattr(fresh, f.name))

    def load(self, data: dict[str, object]) -> None:
        """Set the counts from :meth:`as_dict` output (counts it lacks start at zero)."""
        fresh = Counters()
        for f in fields(self):
            value = data.get(f.name, getattr(fresh, f.name))
            setattr(self, f.name, dict(value) if isinstance(value, dict) else value)  # type: ignore[arg-type]

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {f.name: getattr(self, f.name) for f in fields(self)}
        out["phase_in"] = dict(self.phase_in)
        out["phase_out"] = dict(self.phase_out)
        out["selectivity"] = {k.value: self.selectivity(k) for k in PHASES}
        return out
