"""The numba kernel of the template cache's scan: query texts' skeletons, constants
and names in one pass over their bytes (what it computes, and why the doubles are
exact: :mod:`predicates.template_scan`, which calls it; this module only compiles it).

The kernel takes arrays and scalars only, so it caches (``cache=True``). It is the
plain function :func:`predicates.template_scan.scan_bytes` compiled by numba: the
language package stays pure Python (it runs the same function uncompiled where no
kernel is handed to it) and this package, which may import numba, compiles it.
"""

from __future__ import annotations

from indexes.numba_config import kernel
from predicates.template_scan import scan_bytes as _plain_scan_bytes

scan_bytes = kernel(_plain_scan_bytes)

__all__ = ["scan_bytes"]
