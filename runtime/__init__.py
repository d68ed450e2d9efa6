"""Running mqo: the command line (:mod:`runtime.cli`), file inputs and outputs
(:mod:`runtime.io`), the local engine over files and directories
(:mod:`runtime.local.match`) and the Spark stages (:mod:`runtime.spark.batch`)."""
