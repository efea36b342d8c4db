"""A competing busy process for benchmarks: a desktop is often training a model meanwhile.

A plain Python busy loop does not reproduce the slowdown that matters (OpenMP threads
spinning for a core they cannot get); another torch process doing matrix products does.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys

_BUSY = r"""
import os, torch
os.sched_setaffinity(0, {int(os.environ["BUSY_CORE"])})
torch.set_num_threads(1)
a = torch.randn(512, 512)
while True:
    a = (a @ a).tanh_()
"""


@contextlib.contextmanager
def busy_core(core: int | None = None):
    """Run a one-thread torch matmul loop pinned to one core while the block runs."""
    cores = sorted(os.sched_getaffinity(0))
    core = cores[-1] if core is None else core
    env = {**os.environ, "BUSY_CORE": str(core)}
    proc = subprocess.Popen([sys.executable, "-c", _BUSY], env=env)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()
