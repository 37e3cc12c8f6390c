#!/usr/bin/env python3
"""A long-timeslice server_metrics_export.json: a real run's export with
every series given N timeslices (AIPerf's --slice-duration over a long run),
each slice carrying the statistics AIPerf writes for its family's type.

    python3 benches/make_timeslices.py SAMPLE_RUN OUT_DIR SLICES

SAMPLE_RUN's other files are copied as they are; the slices tile the
profiling window from its start, so the run's verdict does not change.
"""
import json
import os
import shutil
import sys

src, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
shutil.rmtree(out, ignore_errors=True)
shutil.copytree(src, out)
path = os.path.join(out, "server_metrics_export.json")
export = json.load(open(path))
w = export["summary"]["phase_time_ranges"]["profiling"]
step = max(1, (w["end_ns"] - w["start_ns"]) // n)
for section in ("metrics", "warmup_metrics"):
    for name, fam in export.get(section, {}).items():
        for s in fam["series"]:
            slices = []
            for i in range(n):
                a = w["start_ns"] + i * step
                sl = {"start_ns": a, "end_ns": a + step, "is_complete": True}
                if fam["type"] == "counter":
                    sl.update(total=float(i % 7), rate=float(i % 7) / step * 1e9)
                elif fam["type"] == "histogram":
                    sl.update(count=i % 5, sum=0.1 * (i % 5), avg=0.1, count_rate=1.0, sum_rate=0.1,
                              p50_estimate=0.1, p90_estimate=0.2, p99_estimate=0.3)
                else:
                    sl.update(avg=1.0, min=0.0, max=2.0, std=0.5)
                slices.append(sl)
            s["timeslices"] = slices
json.dump(export, open(path, "w"))
print(f"{path}: {os.path.getsize(path) / 1e6:.1f} MB")
