"""Reading stream files (CSV, Parquet) into columns and writing results (JSON lines,
CSV, Parquet): what every engine's files go through."""
