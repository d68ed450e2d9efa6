"""How fast query texts are read, side by side in one run: the measure behind the reader.

    python -m experiments.bench_reader [--n 20000] [--seed 7]

Rows (texts per second; the best of ``--repeat`` runs, each in a fresh matcher):

* ``one shape, list``: texts that differ only in their constants (the template cache's
  case), registered as a list with ``register_queries``;
* ``one shape, file``: the same texts as one query file, each query ending with ``;``;
* ``own shapes, list`` / ``own shapes, file``: pub/sub subscriptions, ten intervals over
  twenty attributes each (:func:`experiments.bench_pubsub.pubsub_texts`): nearly every
  text has a shape of its own;
* ``own shapes, predicates.compile_many``: the same texts through the compile entry
  alone, with a matcher's caches (and their kernels);
* ``parser alone`` (``predicates.parse_queries``: lexer and parser) and ``front end
  alone`` (the compile entry with its caches turned away) on a sample of them.

Then where the time of registering the own-shape list goes: a profile's share of the
time spent in each module of the language and the engine (the lexer, the parser, the
caches, the registry). Results are printed as Markdown tables; nothing is written.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import mqo
import predicates
from experiments.bench_pubsub import DDL, pubsub_intervals, pubsub_texts


def one_shape_texts(n: int, rng: np.random.Generator) -> list[str]:
    """Texts of one shape (the same comparisons, other constants)."""
    lo = rng.uniform(0, 500_000, (n, 3)).round(1)
    return [
        f"Query ID: t{q}\nSELECT * FROM E WHERE E.a1 >= {a} AND E.a1 <= {a + 500000} AND E.a5 >= {b} AND E.a9 <= {c}"
        for q, (a, b, c) in enumerate(lo.tolist())
    ]


def as_file(texts: list[str]) -> list[str]:
    """The texts as one query file, each query ending with ``;``."""
    return ["\n".join(text + ";" for text in texts)]


def best_rate(count: int, run: Callable[[], object], repeat: int) -> float:
    """Texts per second of the fastest of ``repeat`` runs."""
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return count / best


def caches(cold: bool = False) -> Any:
    """A matcher's compile caches, with their numba kernels, empty (``cold``: turned
    away, every text goes to the front end)."""
    tokens = mqo.Matcher(DDL).registry.compiler
    if cold:
        tokens.read = lambda texts: [None] * len(texts)
        tokens.templates.scanner = None
    return tokens


def compile_with(compiler: Any, texts: list[str]) -> object:
    return predicates.compile_many(texts, compiler.catalog, compiler=compiler)


def register(texts: list[str]) -> Callable[[], object]:
    def run() -> object:
        return mqo.Matcher(DDL).register_queries(texts)

    return run


def shares(texts: list[str]) -> list[tuple[str, float]]:
    """The share of the time of registering ``texts`` spent in each module (its own
    time: the functions defined there), largest first."""
    profile = cProfile.Profile()
    matcher = mqo.Matcher(DDL)
    profile.enable()
    matcher.register_queries(texts)
    profile.disable()
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    by_module: dict[str, float] = {}
    for (filename, _, _), (_, _, own, _, _) in stats.items():
        path = Path(filename)
        parent = path.parent.name
        name = (
            f"{parent}/{path.name}" if parent in ("predicates", "mqo", "indexes") else "other (numpy, numba, builtins)"
        )
        by_module[name] = by_module.get(name, 0.0) + own
    total = sum(by_module.values())
    return sorted(((name, own / total) for name, own in by_module.items()), key=lambda item: -item[1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=20_000, help="texts per row")
    parser.add_argument("--sample", type=int, default=500, help="texts for the front-end rows")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profiled", type=int, default=5000, help="texts registered under the profiler")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    one = one_shape_texts(args.n, rng)
    own = pubsub_texts(*pubsub_intervals(args.n, rng))
    sample = own[: args.sample]
    rows: list[tuple[str, int, float]] = [
        ("one shape, list", len(one), best_rate(len(one), register(one), args.repeat)),
        ("one shape, file", len(one), best_rate(len(one), register(as_file(one)), args.repeat)),
        ("own shapes, list", len(own), best_rate(len(own), register(own), args.repeat)),
        ("own shapes, file", len(own), best_rate(len(own), register(as_file(own)), args.repeat)),
        (
            "own shapes, predicates.compile_many",
            len(own),
            best_rate(len(own), lambda: compile_with(caches(), own), args.repeat),
        ),
        (
            "parser alone (lexer + parser)",
            len(sample),
            best_rate(len(sample), lambda: [predicates.parse_queries(t) for t in sample], 1),
        ),
    ]
    if hasattr(caches(), "read"):  # (the tree before the comparison cache cannot turn its caches away)
        cold = caches(cold=True)
        rows.append(
            (
                "front end alone (parse, bind, normalize)",
                len(sample),
                best_rate(len(sample), lambda: compile_with(cold, sample), 1),
            )
        )
    print("| texts | n | texts/s | µs per text |")
    print("| --- | ---: | ---: | ---: |")
    for name, count, rate in rows:
        print(f"| {name} | {count} | {rate:,.0f} | {1e6 / rate:,.1f} |")
    print(f"\nRegistering {args.profiled} own-shape texts, profiled: share of the time by module\n")
    print("| module | share |")
    print("| --- | ---: |")
    for name, share in shares(own[: args.profiled]):
        if share >= 0.01:
            print(f"| {name} | {share:.0%} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
