"""tensor_stats on both of its paths (the compiled fused kernel and torch reductions) against
a float64 numpy reference, including the cases where a naive formula fails; and the
kernel's guarantees: no run-time compilation, no cache, no crash on bad arguments."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from inspector.core.stats import fused as fused_stats
from inspector.core.stats import tensor_stats as S


def fused(x, abs_mean=True):
    assert fused_stats.available(), fused_stats.fallback_note()
    out = S.array_stats(x.detach().numpy())  # abs_mean: always computed here
    assert out is not None, "the fused path declined a finite float32 CPU tensor"
    return out


def torch_path(x, abs_mean=True):
    x = x.detach()
    return S._torch_stats(x, S._bcr_view(x), abs_mean)


PATHS = {"fused": fused, "torch": torch_path}


def reference(x: torch.Tensor) -> dict:
    a = x.detach().double().numpy()
    if a.ndim >= 2:
        per = np.moveaxis(a, 1, 0).reshape(a.shape[1], -1)
    else:
        per = a.reshape(1, -1)
    return dict(
        mean=a.mean(),
        std=a.std(),
        min=a.min(),
        max=a.max(),
        zero_fraction=(a == 0).mean(),
        abs_mean=np.abs(a).mean(),
        channel_mean=per.mean(1),
        channel_std=per.std(1),
        channel_min=per.min(1),
        channel_max=per.max(1),
        channel_zero_fraction=(per == 0).mean(1),
    )


def check(st, x, rel=1e-5):
    ref = reference(x)
    scale = max(float(np.abs(ref["std"])), 1e-12)
    assert st.numel == x.numel()
    assert st.mean == pytest.approx(ref["mean"], abs=rel * scale + 1e-7)
    assert st.std == pytest.approx(ref["std"], rel=1e-4, abs=1e-7)
    assert st.min == ref["min"] and st.max == ref["max"]  # exact: no arithmetic involved
    assert st.zero_fraction == pytest.approx(ref["zero_fraction"], abs=1e-12)
    assert st.abs_mean == pytest.approx(ref["abs_mean"], rel=1e-5)
    ch_scale = np.maximum(ref["channel_std"], 1e-6)
    assert np.all(np.abs(st.channel_mean - ref["channel_mean"]) <= 1e-4 * ch_scale + 1e-6)
    np.testing.assert_allclose(st.channel_std, ref["channel_std"], rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(st.channel_min, ref["channel_min"].astype(np.float32))
    np.testing.assert_array_equal(st.channel_max, ref["channel_max"].astype(np.float32))
    np.testing.assert_allclose(st.channel_zero_fraction, ref["channel_zero_fraction"], atol=1e-7)


def test_the_fused_kernel_is_available_in_this_environment():
    # Built by the install (setup.py): if this fails, every CPU run pays for the slow path.
    assert fused_stats.available(), fused_stats.fallback_note()
    assert fused_stats.fallback_note() is None


def _run(code: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code],
        env=dict(os.environ, **env),
        capture_output=True,
        text=True,
        timeout=120,
    )


STATS_SCRIPT = (
    "import sys, torch; from inspector.core.stats import tensor_stats as s, fused as f\n"
    "torch.manual_seed(0); x = torch.randn(2, 8, 30, 30) * 2 + 1\n"
    "for i in range(int(sys.argv[1]) if len(sys.argv) > 1 else 1):\n"
    "    st = s.tensor_stats(x)\n"
    "d = x.double()\n"
    "ok = (st.min == d.min().item() and st.max == d.max().item()"
    " and abs(st.mean - d.mean().item()) < 1e-5 * d.std().item()"
    " and abs(st.std - d.std(unbiased=False).item()) < 1e-5 * d.std().item())\n"
    "print(f.available(), ok, 'numba' in sys.modules)\n"
)


def test_nothing_is_compiled_or_cached_at_run_time(tmp_path):
    # The old numba kernel crashed every later process once its on-disk cache was left
    # half-written. The compiled kernel keeps no state anywhere: statistics in a process
    # with an empty home and cache directory write nothing there, and a process killed
    # mid-run leaves nothing that a later one could trip on.
    home = tmp_path / "home"
    cache = tmp_path / "cache"
    home.mkdir()
    cache.mkdir()
    env = dict(HOME=str(home), XDG_CACHE_HOME=str(cache), NUMBA_CACHE_DIR=str(cache / "numba"))
    for kill_after in (0.5, 2.0):
        proc = subprocess.Popen(
            [sys.executable, "-c", STATS_SCRIPT, "100000"],
            env=dict(os.environ, **env),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            proc.wait(timeout=kill_after)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for _ in range(2):
        out = _run(STATS_SCRIPT, **env)
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == ["True", "True", "False"], out.stdout + out.stderr
    assert list(home.rglob("*")) == [] and list(cache.rglob("*")) == []


def test_without_the_compiled_kernel_statistics_fall_back_and_say_why():
    # A source tree used without installing has no compiled kernel: torch computes the
    # same statistics and the note names the reason.
    code = "import sys; sys.modules['inspector.core.stats._cstats'] = None\n" + STATS_SCRIPT
    code += "print(f.fallback_note())\n"
    out = _run(code)
    assert out.returncode == 0, out.stderr
    first, note = out.stdout.splitlines()
    assert first.split() == ["False", "True", "False"]
    assert note.startswith("Statistics use torch reductions") and "missing" in note


@pytest.mark.parametrize(
    "args, error",
    [
        ((np.zeros((2, 3), np.float64), 1, 2), TypeError),  # not float32
        ((np.zeros((2, 3), np.float32), 1, 4), ValueError),  # rows do not split
        ((np.zeros((2, 3), np.float32), 0, 2), ValueError),  # no batch
        ((np.zeros(0, np.float32), 1, 1), ValueError),  # empty
        ((b"abcd", 1, 1), TypeError),  # bytes: not float32
        ((np.zeros((2, 3), np.float32)[:, ::2], 1, 2), ValueError),  # not C-contiguous
    ],
)
def test_the_kernel_refuses_bad_arguments_with_an_exception(args, error):
    with pytest.raises(error):
        fused_stats.moments(*args)


def test_the_kernel_refuses_a_short_output_buffer():
    from inspector.core.stats import _cstats

    with pytest.raises(ValueError, match="fewer than 5"):
        _cstats.moments(np.zeros((1, 4, 3), np.float32), 1, 4, np.empty(19, np.float32))
    with pytest.raises(ValueError, match="output"):
        _cstats.area_pool(np.zeros((1, 4, 4), np.float32), 1, 4, 4, 2, np.empty(3, np.float32))


def _relu_like(shape):
    g = torch.Generator().manual_seed(1)
    return torch.randn(shape, generator=g).clamp_min(0)


CASES = {
    "conv activation": lambda: torch.randn(1, 64, 56, 56) * 3 + 0.5,
    "relu output (many zeros)": lambda: _relu_like((2, 16, 9, 11)),
    "batch of 3": lambda: torch.randn(3, 5, 7, 9),
    "features (B, F)": lambda: torch.randn(4, 1000),
    "tokens (B, N, D)": lambda: torch.randn(2, 197, 48),
    "1-D": lambda: torch.randn(17),
    "0-D": lambda: torch.tensor(2.5),
    "one value per channel": lambda: torch.randn(1, 8, 1, 1),
    "long rows (blocks of 1024)": lambda: torch.randn(1, 2, 70_001) + 3,
    "non-contiguous": lambda: torch.randn(2, 9, 6, 5).transpose(1, 3),
    "channels_last": lambda: torch.randn(2, 6, 8, 8).to(memory_format=torch.channels_last),
    "all zero (dead layer)": lambda: torch.zeros(1, 4, 5, 5),
}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("case", CASES)
def test_statistics_match_a_float64_reference(path, case):
    torch.manual_seed(0)
    x = CASES[case]()
    check(PATHS[path](x), x)


@pytest.mark.parametrize("path", PATHS)
def test_a_large_offset_keeps_its_spread(path):
    # mean 1e4, std 1e-2: sum(x^2)/n - mean^2 in float32 returns noise (about 2 here)
    torch.manual_seed(0)
    x = torch.randn(3, 5, 400) * 0.01 + 1e4
    st = PATHS[path](x)
    ref = reference(x)
    assert st.std == pytest.approx(ref["std"], rel=1e-3)
    np.testing.assert_allclose(st.channel_std, ref["channel_std"], rtol=1e-3)


def test_both_paths_agree_on_a_real_activation():
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 32, 3)
    with torch.no_grad():
        x = torch.relu(conv(torch.randn(2, 3, 40, 40)))
    a, b = fused(x), torch_path(x)
    for name in ("mean", "std", "min", "max", "zero_fraction", "abs_mean"):
        assert getattr(a, name) == pytest.approx(getattr(b, name), rel=1e-5, abs=1e-7), name
    np.testing.assert_allclose(a.channel_std, b.channel_std, rtol=1e-4, atol=1e-7)
    np.testing.assert_array_equal(a.channel_zero_fraction, b.channel_zero_fraction)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_values_are_counted_exactly(bad):
    x = torch.randn(2, 3, 10)
    x[1, 2, 4] = bad
    x[0, 0, 0] = bad
    x[0, 1, 3] = 0.0
    st = S.tensor_stats(x)  # the fused path declines; torch recounts
    assert st.nonfinite == 2
    assert st.zero_fraction == pytest.approx(1 / 60)
    assert not np.isfinite(st.mean)


def test_overflowing_sums_are_reported_as_non_finite():
    x = torch.full((1, 2, 8), 3e38)  # finite values whose sum of squares overflows float32
    st = S.tensor_stats(x)
    assert st.min == pytest.approx(3e38) and st.max == pytest.approx(3e38)
    assert st.nonfinite == 0


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64, torch.int32])
def test_other_dtypes_use_torch_and_are_right(dtype):
    torch.manual_seed(0)
    x = (torch.randn(2, 4, 6, 6) * 4).to(dtype)
    check(S.tensor_stats(x), x.double(), rel=1e-3)


def test_without_abs_mean_the_fused_path_still_gives_it():
    x = torch.randn(1, 3, 5, 5)
    st = S.tensor_stats(x, abs_mean=False)
    assert st.abs_mean == pytest.approx(x.abs().mean().item(), rel=1e-5)


def test_the_kernel_can_be_turned_off():
    out = _run(STATS_SCRIPT + "print(f.fallback_note())", INSPECTOR_FUSED_STATS="0")
    assert out.returncode == 0, out.stderr
    first, why = out.stdout.splitlines()
    assert first.split() == ["False", "True", "False"]
    assert why == ("Statistics use torch reductions (slower on the CPU): "
                   "turned off by INSPECTOR_FUSED_STATS=0.")


def test_two_threads_at_once_get_their_own_right_answers():
    # Two sessions in one process compute statistics at the same time, the kernel running
    # without the GIL on both threads.
    import threading

    assert fused_stats.available(), fused_stats.fallback_note()
    torch.manual_seed(0)
    tensors = [torch.randn(1, 64, 56, 56) * (i + 1) + i for i in range(2)]
    expected = [torch_path(t) for t in tensors]
    errors = []

    def work(i):
        for _ in range(20):
            st = fused(tensors[i])
            if abs(st.std - expected[i].std) > 1e-4 * expected[i].std or st.max != expected[i].max:
                errors.append((i, st.std, expected[i].std))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


@pytest.mark.parametrize(
    "shape, size, out",
    [((1, 80, 40, 40), 16, (64, 14, 14)), ((2, 3, 75, 77), 64, (3, 38, 39)),
     ((1, 5, 130, 40), 64, (5, 44, 14)), ((1, 4, 20, 20), 64, (4, 20, 20))],
)
def test_previews_average_whole_cells_on_both_paths(monkeypatch, shape, size, out):
    # The compiled pool and torch's avg_pool2d (without the kernel, and off the CPU) must
    # give the same picture: same cells, edge cells clipped, aspect kept.
    assert fused_stats.available(), fused_stats.fallback_note()
    torch.manual_seed(0)
    x = torch.randn(shape) * 3 + 1
    fast = S.preview(x, 64, size)
    monkeypatch.setattr(fused_stats, "available", lambda: False)
    slow = S.preview(x, 64, size)
    assert fast.shape == slow.shape == out
    np.testing.assert_allclose(fast, slow, rtol=1e-5, atol=1e-6)
    f = -(-max(shape[2:]) // size) if max(shape[2:]) > size else 1
    cell = x[0, 0, :f, :f].double().mean().item()
    assert fast[0, 0, 0] == pytest.approx(cell, rel=1e-5)
    x.fill_(0)  # the preview is a copy on both paths
    assert fast.any() and slow.any()
