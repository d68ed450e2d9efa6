"""The local engine over files: ``mqo match`` (:mod:`~runtime.local.match`), the
directory service ``mqo serve`` (:mod:`~runtime.local.serve`) and ``mqo profile``
(:mod:`~runtime.local.profile`)."""
