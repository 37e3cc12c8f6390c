#!/usr/bin/env python3
"""Makes a run directory whose raw scrapes are only a large
server_metrics_export.parquet, for timing the parquet reader (the `parquet`
feature): copies of the parquet fixture's rows (fixtures/parquet, written by
AIPerf 0.13.0) laid end to end in time.

Copy k is k spans later (the fixture's scrape span plus one second), and
every counter and histogram row (value, sum, count, bucket count: deltas from
the profiling baseline) has grown by k times its value at the fixture's last
scrape, so the series keep growing as one long run's do; gauges are copied as
they are. The other artifacts are copied, the JSONL raw scrapes left out (so
the parquet file is what is read).

    python3 benches/make_parquet.py OUT_DIR COPIES

Needs polars (`pip install polars`; made with polars 2.2.0, whose joins take
`nulls_equal`). Prints the rows and scrapes written.
"""

import os
import shutil
import sys

import polars as pl

here = os.path.dirname(os.path.abspath(__file__))
fixture = os.path.join(here, "..", "fixtures", "parquet", "late-warmup")
out, copies = sys.argv[1], int(sys.argv[2])

os.makedirs(out, exist_ok=True)
for name in os.listdir(fixture):
    if name not in ("server_metrics_export.jsonl", "server_metrics_export.parquet"):
        shutil.copy(os.path.join(fixture, name), os.path.join(out, name))

df = pl.read_parquet(os.path.join(fixture, "server_metrics_export.parquet"))
numbers = ["value", "sum", "count", "bucket_count"]
key = [c for c in df.columns if c not in numbers + ["timestamp_ns", "unit", "description"]]
last_t = df["timestamp_ns"].max()
last = (
    df.filter(pl.col("timestamp_ns") == pl.col("timestamp_ns").max().over("endpoint_url"))
    .filter(pl.col("metric_type") != "gauge")
    .select(key + [pl.col(c).alias(c + "_last") for c in numbers])
    .unique(subset=key, keep="last")
)
df = df.with_row_index("row").join(last, on=key, how="left", nulls_equal=True).sort("row")
span = last_t - df["timestamp_ns"].min() + 1_000_000_000
parts = []
for k in range(copies):
    grown = [
        (pl.col(c) + k * pl.col(c + "_last").fill_null(0.0)).alias(c) for c in numbers
    ]
    parts.append(
        df.with_columns([pl.col("timestamp_ns") + k * span] + grown).select(
            [c for c in df.columns if c != "row" and not c.endswith("_last")]
        )
    )
big = pl.concat(parts)
big.write_parquet(os.path.join(out, "server_metrics_export.parquet"))
print(f"{big.height} rows, {big['timestamp_ns'].n_unique()} scrapes")
