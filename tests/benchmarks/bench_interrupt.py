"""Ctrl+C on a running batch command: seconds from SIGINT to the process's exit, median of
--repeats, against the same process leaving through the interpreter's own teardown
(--teardown: what every run paid before it left through os._exit), in one table.

    python -m tests.benchmarks.bench_interrupt [--repeats 3]

The command is `visualise` of the demo model, interrupted once its first batch is written.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The same entry as the console script, less the fast exit: sys.exit(main([...])) leaves
# through the interpreter's teardown, as `network-inspector` did.
TEARDOWN = "import sys; from inspector.cli import main; sys.exit(main(sys.argv[1:]))"


def _once(out: Path, teardown: bool) -> float:
    shutil.rmtree(out, ignore_errors=True)
    args = ["visualise", "--model", "demo_shapes", "--device", "cpu", "--layer", "stage3",
            "--channels", "0-5", "--batch-size", "1", "--steps", "400", "--out", str(out),
            "--quiet"]
    entry = ["-c", TEARDOWN] if teardown else ["-m", "inspector.cli"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, *entry, *args], env=env, stderr=subprocess.PIPE,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    while not list((out / "shards").glob("shard-*")):
        if child.poll() is not None:
            raise SystemExit(f"visualise ended before its first batch: {child.stderr.read()}")
        time.sleep(0.02)
    began = time.monotonic()
    child.send_signal(signal.SIGINT)
    child.wait()
    if child.returncode != 130:
        raise SystemExit(f"exit status {child.returncode}, not 130")
    return time.monotonic() - began


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    repeats = parser.parse_args().repeats
    with tempfile.TemporaryDirectory() as tmp:
        fast = [_once(Path(tmp) / "out", False) for _ in range(repeats)]
        slow = [_once(Path(tmp) / "out", True) for _ in range(repeats)]
    print(f"{'exit after SIGINT':<34}{'median s':>10}{'runs':>30}")
    for name, times in (("network-inspector (os._exit)", fast),
                        ("interpreter teardown", slow)):
        runs = ", ".join(f"{t:.2f}" for t in times)
        print(f"{name:<34}{statistics.median(times):>10.2f}{runs:>30}")
    print(f"ratio (teardown / os._exit): {statistics.median(slow) / statistics.median(fast):.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
