"""Capture overhead: plain forward vs forward with statistics on every leaf module plus
previews of 5 modules; plain forward+backward vs the same with every leaf's output and
output gradient captured (what the app captures by default), and with gradients only.

A floor is measured alongside: bare hooks that only compute the statistics of each leaf
output (and gradient) on the hook's thread, with no frames, previews or hand-over. It is
what any design that computes statistics in the hooks pays on this machine; the capture
can beat it only by moving the work to an idle core (deferred_stats). A last floor only
sums each leaf output in the hook: the price of reading every activation once.

Variants are interleaved in one process (a, b, a, b, ...) so that machine noise hits both;
figures are medians, ratios are of medians, and a last table gives the median of
per-repeat ratios (plain and captured run back to back). Prints tables; asserts nothing.

    python -m tests.benchmarks.bench_capture [--models resnet18,resnet50,vit_b_16]
        [--repeats 30] [--load] [--threads N]
"""

from __future__ import annotations

import argparse
import statistics
import time

import inspector.core  # noqa: F401  (sets OMP_WAIT_POLICY before torch is imported)

# isort: split
import torch
import torchvision

from inspector.core.records.kinds import GRAD_OUTPUT, OUTPUT
from inspector.core.run.capture import Capture
from inspector.core.run.capture_spec import CaptureSpec, leaf_names
from inspector.core.stats import deferred as deferred_stats
from inspector.core.stats import fused as fused_stats
from inspector.core.stats import tensor_stats as _stats
from tests.benchmarks.load import busy_core
from tests.benchmarks.threads import configure_threads


def _time(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def bench_model(name: str, repeats: int) -> dict[str, float]:
    torch.manual_seed(0)
    model = torchvision.models.get_model(name, weights=None).eval()
    size = 224
    x = torch.randn(1, 3, size, size)
    leaves = leaf_names(model)
    preview = frozenset(leaves[:: max(1, len(leaves) // 5)][:5])
    fwd_spec = CaptureSpec.for_modules(leaves, (OUTPUT,), preview=preview)
    bwd_spec = CaptureSpec.for_modules(leaves, (OUTPUT, GRAD_OUTPUT), preview=preview)
    grad_spec = CaptureSpec.for_modules(leaves, (GRAD_OUTPUT,), preview=preview)
    frames: list = []
    sink = frames.append

    def plain_forward():
        with torch.no_grad():
            model(x)

    def captured_forward():
        with Capture(model, fwd_spec, sink), torch.no_grad():
            model(x)
        frames.clear()

    def plain_backward():
        xi = x.clone().requires_grad_(True)
        with torch.enable_grad():
            out = model(xi)
            torch.autograd.grad(out[0, 0], xi)

    def captured_backward(spec=bwd_spec):
        xi = x.clone().requires_grad_(True)
        with Capture(model, spec, sink), torch.enable_grad():
            out = model(xi)
            torch.autograd.grad(out[0, 0], xi)
        frames.clear()

    def gradients_only():
        captured_backward(grad_spec)

    def in_hook(fn):
        # Deferral off: every statistic is computed in its hook, as if the idle-core thread
        # were always behind. Shows what deferred_stats buys on this machine.
        def run():
            saved, deferred_stats.BACKLOG = deferred_stats.BACKLOG, 0
            try:
                fn()
            finally:
                deferred_stats.BACKLOG = saved

        return run

    # Statistics alone over every leaf output, on both paths (the copies are made once).
    leaf_modules = [m for m in model.modules() if next(m.children(), None) is None]
    outputs: list[torch.Tensor] = []
    grab = [
        m.register_forward_hook(
            lambda m, a, o: (
                outputs.append(o.detach().clone()) if isinstance(o, torch.Tensor) else None
            )
        )
        for m in leaf_modules
    ]
    plain_forward()
    for h in grab:
        h.remove()

    def fused_only():
        for o in outputs:
            _stats.tensor_stats(o, abs_mean=False)

    def torch_only():
        for o in outputs:
            _stats._torch_stats(o, _stats._bcr_view(o), False)

    # The floor: bare hooks that compute statistics and nothing else.
    def stat_hook(m, a, o):
        if isinstance(o, torch.Tensor):
            _stats.tensor_stats(o, abs_mean=False)
            if o.requires_grad:
                o.register_hook(grad_stat_hook)

    def read_hook(m, a, o):  # one read of the output, nothing computed but its sum
        if isinstance(o, torch.Tensor):
            o.sum()

    def grad_hook_only(m, a, o):
        if isinstance(o, torch.Tensor) and o.requires_grad:
            o.register_hook(grad_stat_hook)

    def grad_stat_hook(g):
        _stats.tensor_stats(g, abs_mean=True)

    def with_bare_hooks(hook, fn):
        def run():
            handles = [m.register_forward_hook(hook) for m in leaf_modules]
            try:
                fn()
            finally:
                for h in handles:
                    h.remove()

        return run

    variants = {
        "stats fused": fused_only,
        "stats torch": torch_only,
        "forward": plain_forward,
        "forward+capture": captured_forward,
        "fwd+bwd": plain_backward,
        "fwd+bwd+capture": captured_backward,
        "fwd+bwd+grads": gradients_only,
        "forward+capture in hook": in_hook(captured_forward),
        "fwd+bwd+capture in hook": in_hook(captured_backward),
        "floor forward": with_bare_hooks(stat_hook, plain_forward),
        "read forward": with_bare_hooks(read_hook, plain_forward),
        "floor fwd+bwd": with_bare_hooks(stat_hook, plain_backward),
        "floor grads": with_bare_hooks(grad_hook_only, plain_backward),
    }
    for fn in variants.values():  # warm-up: allocator, oneDNN primitives
        fn()
        fn()
    times: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(repeats):
        for k, fn in variants.items():
            times[k].append(_time(fn))
    out = {k: statistics.median(v) for k, v in times.items()}
    # Also the median of per-repeat ratios: each repeat runs a plain and a captured variant
    # back to back, so slow drifts of a shared machine hit both sides of each ratio.
    for key, plain, captured in PAIRS:
        out[key] = statistics.median(c / p for p, c in zip(times[plain], times[captured]))
    return out


PAIRS = (
    ("paired forward", "forward", "forward+capture"),
    ("paired fwd+bwd", "fwd+bwd", "fwd+bwd+capture"),
    ("paired grads", "fwd+bwd", "fwd+bwd+grads"),
    ("paired forward in hook", "forward", "forward+capture in hook"),
    ("paired fwd+bwd in hook", "fwd+bwd", "fwd+bwd+capture in hook"),
    ("paired capture/floor forward", "floor forward", "forward+capture"),
    ("paired capture/floor fwd+bwd", "floor fwd+bwd", "fwd+bwd+capture"),
    ("paired floor forward", "forward", "floor forward"),
    ("paired read forward", "forward", "read forward"),
    ("paired floor fwd+bwd", "fwd+bwd", "floor fwd+bwd"),
    ("paired floor grads", "fwd+bwd", "floor grads"),
)


def report(results: dict[str, dict[str, float]], title: str) -> None:
    print(f"\n{title}")
    print(f"{'model':<12} {'stats of every leaf output, ms: torch':>38} {'fused':>7} {'ratio':>6}")
    for name, r in results.items():
        print(
            f"{name:<12} {r['stats torch'] * 1e3:>38.1f} {r['stats fused'] * 1e3:>7.1f} "
            f"{r['stats torch'] / r['stats fused']:>6.2f}"
        )
    print(
        f"{'model':<12} {'forward ms':>10} {'+capture':>9} {'ratio':>6} "
        f"{'fwd+bwd ms':>10} {'+capture':>9} {'ratio':>6} {'+grads only':>11} {'ratio':>6}"
    )
    for name, r in results.items():
        print(
            f"{name:<12} {r['forward'] * 1e3:>10.1f} {r['forward+capture'] * 1e3:>9.1f} "
            f"{r['forward+capture'] / r['forward']:>6.3f} {r['fwd+bwd'] * 1e3:>10.1f} "
            f"{r['fwd+bwd+capture'] * 1e3:>9.1f} {r['fwd+bwd+capture'] / r['fwd+bwd']:>6.3f} "
            f"{r['fwd+bwd+grads'] * 1e3:>11.1f} {r['fwd+bwd+grads'] / r['fwd+bwd']:>6.3f}"
        )
    print(f"{'median of per-repeat ratios':<28} {'forward':>8} {'fwd+bwd':>8} {'grads only':>11}")
    for name, r in results.items():
        print(
            f"{name:<28} {r['paired forward']:>8.3f} {r['paired fwd+bwd']:>8.3f} "
            f"{r['paired grads']:>11.3f}"
        )
    print(
        "floor: bare hooks computing only the statistics on the hook's thread "
        "(ratio of medians, median of per-repeat ratios)"
    )
    print(
        f"{'model':<12} {'forward':>15} {'fwd+bwd':>15} {'grads only':>15} "
        f"{'forward, sum only':>18}"
    )
    for name, r in results.items():
        cells = [
            f"{r[k] / r[base]:.3f} {r['paired ' + k]:.3f}"
            for k, base in (
                ("floor forward", "forward"),
                ("floor fwd+bwd", "fwd+bwd"),
                ("floor grads", "fwd+bwd"),
                ("read forward", "forward"),
            )
        ]
        print(f"{name:<12} " + " ".join(f"{c:>15}" for c in cells[:3]) + f" {cells[3]:>18}")
    print(
        "capture with statistics in the hooks (deferral off), and capture over the floor "
        "(ratio of medians, median of per-repeat ratios)"
    )
    print(
        f"{'model':<12} {'in hook fwd':>15} {'in hook fwd+bwd':>16} "
        f"{'capture/floor fwd':>18} {'capture/floor f+b':>18}"
    )
    for name, r in results.items():
        print(
            f"{name:<12} "
            f"{r['forward+capture in hook'] / r['forward']:>7.3f} "
            f"{r['paired forward in hook']:.3f} "
            f"{r['fwd+bwd+capture in hook'] / r['fwd+bwd']:>8.3f} "
            f"{r['paired fwd+bwd in hook']:.3f} "
            f"{r['forward+capture'] / r['floor forward']:>12.3f} "
            f"{r['paired capture/floor forward']:.3f} "
            f"{r['fwd+bwd+capture'] / r['floor fwd+bwd']:>12.3f} "
            f"{r['paired capture/floor fwd+bwd']:.3f}"
        )


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet18,resnet50,vit_b_16")
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--load", action="store_true", help="also run with a busy process on one core")
    ap.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    args = ap.parse_args(argv)
    threads = configure_threads(args.threads)
    models = args.models.split(",")
    print(f"fused statistics kernel: {fused_stats.available() or fused_stats.fallback_note()}")
    print(
        f"torch {torch.__version__}, {threads} intra-op threads, "
        f"OMP_WAIT_POLICY={__import__('os').environ.get('OMP_WAIT_POLICY')}, "
        f"batch 1, 224x224, CPU, medians of {args.repeats} interleaved repeats"
    )
    report({m: bench_model(m, args.repeats) for m in models}, "idle machine")
    if args.load:
        with busy_core():
            time.sleep(1.0)
            report(
                {m: bench_model(m, args.repeats) for m in models},
                "with a busy torch process pinned to one core",
            )


if __name__ == "__main__":
    main()
