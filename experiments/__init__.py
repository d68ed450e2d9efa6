"""Reproducible experiments and benchmarks, run with ``mqo experiment <name>`` or
``python -m experiments.<name>``. Each module has a ``DESCRIPTION`` and a ``main(argv)``."""

EXPERIMENTS: tuple[str, ...] = ()
