"""`make bench`: every benchmark in turn, each printing its own table (nothing asserted).

Each runs in its own process: thread settings and OMP_WAIT_POLICY are read once, when torch
is imported, and the UI benchmark needs a fresh QApplication.
"""

from __future__ import annotations

import subprocess
import sys

BENCHMARKS = [
    ("capture overhead", ["tests.benchmarks.bench_capture", "--load"]),
    ("CAM time", ["tests.benchmarks.bench_cam"]),
    ("attention maps", ["tests.benchmarks.bench_attention"]),
    ("activation mosaic", ["tests.benchmarks.bench_mosaic"]),
    ("desktop app", ["tests.benchmarks.bench_ui"]),
    ("atlas throughput", ["tests.benchmarks.bench_atlas"]),
    ("comparing models (CKA, patch sweep)", ["tests.benchmarks.bench_compare"]),
    ("edit to prediction", ["tests.benchmarks.bench_edits"]),
    ("video throughput", ["tests.benchmarks.bench_video", "--window"]),
    ("memory over model switches", ["tests.benchmarks.bench_model_switch"]),
    ("feature visualisation", ["tests.benchmarks.bench_featurevis"]),
    ("folder concepts", ["tests.benchmarks.bench_concepts"]),
    ("faithfulness metrics", ["tests.benchmarks.bench_metrics"]),
    ("Ctrl+C to exit", ["tests.benchmarks.bench_interrupt"]),
]


def main() -> int:
    failed = []
    for title, args in BENCHMARKS:
        print(f"\n=== {title}: python -m {' '.join(args)}", flush=True)
        if subprocess.call([sys.executable, "-m", *args]) != 0:
            failed.append(title)
    if failed:
        print(f"\nbenchmarks that failed to run: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
