"""Running mqo: the command line (:mod:`runtime.cli`), file inputs and outputs
(:mod:`runtime.io`), the local engine over files and directories
(:mod:`runtime.local`) and the Spark stages (:mod:`runtime.spark`)."""
