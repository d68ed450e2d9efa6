"""``mqo serve --http``: the local engine as an HTTP service (docs/ARCHITECTURE.md)."""
