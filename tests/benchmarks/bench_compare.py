"""Comparing two models: CKA against the two plain batched forwards, and the patch sweep
against N plain forwards.

    python -m tests.benchmarks.bench_compare [--model resnet18] [--images 256]
        [--batch-size 256] [--minibatch 64] [--rounds 2] [--sweep-rounds 5] [--side 224]

In one process on the CPU, interleaved round by round, model A and model B of the same
architecture with random weights (seeds 0 and 1), every layer `compare-models --layers auto`
takes (the leaves but pass-through ones), the same preprocessed random images:
  forward     A and B over the images in batches of --batch-size, torch.no_grad(): the floor
  read        the same with a hook on each layer that reads its output once (a sum): what
              touching every captured output costs before any CKA work
  exact       the exact estimator as compare-models runs it: Gram hooks (core.compare.grams)
              and ExactCKA, one forward per model per batch (--batch-size >= --images: one
              forward of all images, which is what "exact" needs without blocks)
  minibatch   the minibatch estimator: Gram hooks and MinibatchCKA in minibatches of
              --minibatch
and the patch sweep over the model's N leaf modules (core.compare.patch_sweep: one batched
forward of N + 2 rows, and B alone to check the rows do not mix) against one batched forward
of N copies of image B (the floor), and N forwards of batch 1.

Prints medians and ratios; targets (issue 27): CKA <= 1.5x the two forwards, the sweep <=
1.3x N plain forwards. Asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import time

import inspector.core  # noqa: F401  (sets OMP_WAIT_POLICY before torch is imported)

# isort: split
import torch

from inspector.batch.compare_models.pair import auto_layers
from inspector.batch.probe import plan_layers
from inspector.core.compare.cka import ExactCKA, MinibatchCKA
from inspector.core.compare.grams import GramRecorder
from inspector.core.compare.patch_sweep import patch_sweep, sweep_modules
from inspector.core.hookset import HookSet
from inspector.core.models.tree import build_tree


def build(name: str, seed: int):
    import torchvision

    torch.manual_seed(seed)
    return torchvision.models.get_model(name, weights=None).eval()


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def _read(module, args, output) -> None:
    float(output.sum())  # one read of the whole output (and a sync); the output stays


def batches(x: torch.Tensor, size: int):
    return [x[i:i + size] for i in range(0, x.shape[0], size)]


def bench_cka(a, b, layers, calls, x, batch_size: int, minibatch: int, rounds: int) -> None:
    n = x.shape[0]
    found_a, found_b = dict(a.named_modules()), dict(b.named_modules())

    def forward():
        with torch.no_grad():
            for part in batches(x, batch_size):
                a(part)
                b(part)

    def read():
        with HookSet() as hooks, torch.no_grad():
            for found in (found_a, found_b):
                for name in layers:
                    hooks.forward(found[name], _read)
            for part in batches(x, batch_size):
                a(part)
                b(part)

    def exact():
        acc = ExactCKA(len(layers), len(layers), n)
        with GramRecorder(a, calls) as rec_a, GramRecorder(b, calls) as rec_b:
            for start, part in zip(range(0, n, batch_size), batches(x, batch_size)):
                ga, _ = rec_a.run(part)
                gb, _ = rec_b.run(part)
                if start == 0 and part.shape[0] == n:
                    acc.add(torch.arange(n), torch.ones(n, dtype=torch.bool),
                            [ga[k] for k in layers], [gb[k] for k in layers])
        return acc

    def mini():
        acc = MinibatchCKA(len(layers), len(layers))
        with GramRecorder(a, calls) as rec_a, GramRecorder(b, calls) as rec_b:
            for part in batches(x, minibatch):
                ga, _ = rec_a.run(part)
                gb, _ = rec_b.run(part)
                acc.add([ga[k] for k in layers], [gb[k] for k in layers])
        return acc

    times = {"forward": [], "read": [], "exact": [], "minibatch": []}
    runs = {"forward": forward, "read": read, "exact": exact, "minibatch": mini}
    for r in range(rounds):
        for key, fn in runs.items():
            times[key].append(timed(fn))
            print(f"  round {r + 1} {key:10s} {times[key][-1]:7.2f} s", flush=True)
    base = statistics.median(times["forward"])
    print(f"\nCKA of {len(layers)} x {len(layers)} layers over {n} images (medians of {rounds} "
          f"rounds):")
    print(f"  {'run':36s} {'s':>8s} {'x forwards':>11s}")
    labels = {"forward": f"two plain forwards, batch {batch_size}",
              "read": "forwards + hooks reading each output",
              "exact": f"exact (Gram hooks, batch {batch_size})",
              "minibatch": f"minibatch (Gram hooks, n = {minibatch})"}
    for key, label in labels.items():
        m = statistics.median(times[key])
        print(f"  {label:36s} {m:8.2f} {m / base:11.2f}")
    print("  target: <= 1.5x the two plain batched forwards")


def bench_sweep(model, tree, side: int, rounds: int) -> None:
    modules, _ = sweep_modules(tree)
    n = len(modules)
    g = torch.Generator().manual_seed(5)
    a = torch.randn(1, 3, side, side, generator=g)
    b = torch.randn(1, 3, side, side, generator=g)

    def plain_batched():
        with torch.no_grad():
            model(b.expand(n, -1, -1, -1).contiguous())

    def plain_single():
        with torch.no_grad():
            for _ in range(n):
                model(b)

    times = {"batched": [], "single": [], "sweep": []}
    runs = {"batched": plain_batched, "single": plain_single,
            "sweep": lambda: patch_sweep(model, a, b, modules)}
    for r in range(rounds):
        for key, fn in runs.items():
            times[key].append(timed(fn))
        print(f"  round {r + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in times.items()),
              flush=True)
    base = statistics.median(times["batched"])
    print(f"\nPatch sweep over the {n} leaf modules (medians of {rounds} rounds):")
    print(f"  {'run':44s} {'s':>8s} {'x floor':>8s}")
    for key, label in (("batched", f"{n} plain forwards in one batch (the floor)"),
                       ("single", f"{n} plain forwards of batch 1"),
                       ("sweep", f"the sweep ({n} + 2 rows, and B alone)")):
        m = statistics.median(times[key])
        print(f"  {label:44s} {m:8.2f} {m / base:8.2f}")
    print("  target: <= 1.3x N plain forwards")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="resnet18")
    p.add_argument("--images", type=int, default=256)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--minibatch", type=int, default=64)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--sweep-rounds", type=int, default=5)
    p.add_argument("--side", type=int, default=224)
    p.add_argument("--skip-cka", action="store_true")
    args = p.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} intra-op threads, CPU")
    a, b = build(args.model, 0), build(args.model, 1)
    x0 = torch.zeros(1, 3, args.side, args.side)
    tree = build_tree(a, x0)
    if not args.skip_cka:
        layers = auto_layers(tree)
        calls = {n: p.calls for n, p in plan_layers(tree, layers, (args.side,) * 2).items()}
        x = torch.randn(args.images, 3, args.side, args.side,
                        generator=torch.Generator().manual_seed(0))
        bench_cka(a, b, layers, calls, x, args.batch_size, args.minibatch, args.rounds)
        del x
    bench_sweep(a, tree, args.side, args.sweep_rounds)


if __name__ == "__main__":
    main()
