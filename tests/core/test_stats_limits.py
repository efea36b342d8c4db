"""Statistics at the edges: sizes whose products overflow, and rows that start with inf.

The compiled kernel (inspector/core/stats/_cstats.c) takes its sizes from Python; sizes whose
product wraps around a 64-bit integer used to pass its buffer checks and then divide by zero
(SIGFPE) or read past the buffer (SIGSEGV). Each call runs in a child process, so a crash
is a failed test rather than the end of the test run.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from inspector.core.stats import fused as fused_stats
from inspector.core.stats.tensor_stats import tensor_stats

ROOT = Path(__file__).resolve().parents[2]
BIG = 2**62

# (the call, on _cstats as k with numpy as np, the start of the ValueError it must raise)
OVERFLOWS = {
    "moments, batch x channels wraps to 0": (
        "k.moments(np.zeros(4, np.float32), 2**32, 2**32, np.empty(20, np.float32))",
        "moments: 4 values do not split into 4294967296 x 4294967296 rows"),
    "moments, batch x channels wraps to a divisor": (
        f"k.moments(np.zeros(4, np.float32), {BIG}, 4, np.empty(20, np.float32))",
        f"moments: 4 values do not split into {BIG} x 4 rows"),
    "area_pool, c x h x w wraps to the input's length": (
        f"k.area_pool(np.zeros(4, np.float32), {BIG + 1}, 2, 2, 1, np.zeros(4, np.float32))",
        f"area_pool: {BIG + 1} x 2 x 2 values are more than any buffer can hold"),
    "area_pool, c x h wraps": (
        "k.area_pool(np.zeros(4, np.float32), 2**32, 2**32, 4, 2, np.zeros(4, np.float32))",
        "area_pool: 4294967296 x 4294967296 x 4 values are more than any buffer can hold"),
    "area_pool, a zero size": (
        "k.area_pool(np.zeros(4, np.float32), 1, 2, 2, 0, np.zeros(4, np.float32))",
        "area_pool: sizes must be at least 1"),
}


def in_child(call: str) -> subprocess.CompletedProcess:
    script = (
        "import sys\n"
        "import numpy as np\n"
        "from inspector.core.stats import _cstats as k\n"
        f"assert k.__file__.startswith({str(ROOT)!r}), k.__file__\n"
        "try:\n"
        f"    print('returned', {call})\n"
        "except (ValueError, MemoryError) as e:\n"
        "    print(f'{type(e).__name__}: {e}')\n"
    )
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": path})


@pytest.mark.skipif(not fused_stats.available(), reason="the compiled kernel was not built")
@pytest.mark.parametrize("case", list(OVERFLOWS))
def test_sizes_whose_products_overflow_raise_instead_of_crashing(case):
    call, message = OVERFLOWS[case]
    done = in_child(call)
    assert done.returncode == 0, f"the kernel crashed (exit {done.returncode}): {done.stderr}"
    assert done.stdout.strip().startswith(f"ValueError: {message}"), done.stdout + done.stderr


@pytest.mark.skipif(not fused_stats.available(), reason="the compiled kernel was not built")
def test_sizes_that_fit_still_pool_and_reduce():
    x = np.arange(2 * 3 * 5, dtype=np.float32).reshape(2, 3, 5)
    pooled = fused_stats.area_pool(x, 2)
    expected = torch.nn.functional.avg_pool2d(torch.from_numpy(x), 2, ceil_mode=True,
                                              count_include_pad=False).numpy()
    np.testing.assert_allclose(pooled, expected, rtol=1e-6)
    mean, *_ = fused_stats.moments(x.reshape(1, 2, 15), 1, 2)
    assert mean == pytest.approx(float(x.mean()))


ROWS = {
    "+inf first": [math.inf, 1.0, 2.0, 3.0],
    "-inf first": [-math.inf, 1.0, 2.0, 3.0],
    "+inf later": [1.0, math.inf, 2.0, 3.0],
    "+inf and -inf": [math.inf, 1.0, -math.inf, 3.0],
}


@pytest.mark.parametrize("kernel", [True, False], ids=["with the kernel", "torch only"])
@pytest.mark.parametrize("row", list(ROWS))
def test_a_row_starting_with_inf_has_an_infinite_mean_not_nan(row, kernel, monkeypatch):
    if not kernel:
        monkeypatch.setattr(fused_stats, "available", lambda: False)
    # (batch 2, channels 3, 4 values): the row under test is channel 1 of the first item.
    x = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
    x[0, 1] = torch.tensor(ROWS[row])
    stats = tensor_stats(x)
    # The mean as a plain float64 reduction computes it: inf for a single sign, NaN for both.
    expected = x.double().mean().item()
    per_channel = x.double().mean((0, 2)).numpy()
    assert (math.isnan(stats.mean) and math.isnan(expected)) or stats.mean == expected
    np.testing.assert_array_equal(stats.channel_mean, per_channel.astype(np.float32))
    assert stats.nonfinite == int((~torch.isfinite(x)).sum())
    assert (stats.min, stats.max) == (x.min().item(), x.max().item())
