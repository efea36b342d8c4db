"""Folder concepts (`network-inspector concepts`) against a plain batched forward.

    python -m tests.benchmarks.bench_concepts [--models demo_shapes,resnet18] [--images 256]
        [--k 8] [--rounds 3] [--batch-size 32]

Per model, in one process on the CPU, over the same drawn images and the same DataLoader
(workers 0):
  forward  model(x) under torch.no_grad(): the floor
  codes    the codes pass: the forward with the layer's output kept, and every position
           coded with the fitted concepts (scikit-learn, W fixed) and the error summed
  fit      the fit on a sample (--sample images, a quarter of their positions), once
Prints images/s medians, codes / forward (the issue's target: >= 0.8 x), and the whole
job's (fit + codes) images/s. Asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import inspector.core  # noqa: F401  (sets OMP_WAIT_POLICY before torch is imported)

# isort: split
import numpy as np
import torch
from PIL import Image

from inspector.batch.concept_pass import Coder, code_batch, fit_sample, shard_result
from inspector.batch.inputs import ImageFiles, make_loader
from inspector.batch.probe import plan_layers
from inspector.core.explain.concept_folder import fit
from inspector.core.models.base import ModelSpec
from inspector.core.models.load import load_model, probe_tree

LAYER = {"demo_shapes": "stage3", "resnet18": "layer4"}
SIDE = {"demo_shapes": 128, "resnet18": 224}


def draw(folder: Path, n: int, side: int) -> list[Path]:
    rng = np.random.default_rng(0)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        base = rng.integers(0, 256, 3)
        a = np.clip(base + rng.integers(-40, 41, (side, side, 3)), 0, 255).astype(np.uint8)
        y, x = rng.integers(0, side // 2, 2)
        a[y:y + side // 3, x:x + side // 3] = rng.integers(0, 256, 3)
        paths.append(folder / f"img{i:04d}.png")
        Image.fromarray(a).save(paths[-1])
    return paths


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="demo_shapes,resnet18")
    p.add_argument("--images", type=int, default=256)
    p.add_argument("--k", type=int, default=8)
    p.add_argument("--sample", type=int, default=64)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=32)
    args = p.parse_args()
    print(f"{'model':<12} {'layer':<7} {'forward img/s':>14} {'codes img/s':>12} "
          f"{'codes/forward':>14} {'fit s':>6} {'job img/s':>10} {'rel. error':>10}")
    for name in args.models.split(","):
        loaded = load_model(ModelSpec(name=name, device="cpu", seed=0))
        layer = LAYER.get(name, "layer4")
        plan = plan_layers(probe_tree(loaded), [layer], loaded.preprocess.crop_size)[layer]
        with tempfile.TemporaryDirectory() as tmp:
            paths = draw(Path(tmp), args.images, SIDE.get(name, 224))
            data = ImageFiles(paths, loaded.preprocess)
            n = len(paths)
            batches = [list(range(i, min(n, i + args.batch_size)))
                       for i in range(0, n, args.batch_size)]
            t0 = time.perf_counter()
            rows = fit_sample(loaded.model, plan, loaded.device, paths, loaded.preprocess,
                              list(range(min(n, args.sample))), 0, args.batch_size, 0)
            fitted = fit(rows, args.k, 0)
            fit_s = time.perf_counter() - t0
            forward, codes, error = [], [], 0.0
            for _ in range(args.rounds):
                t0 = time.perf_counter()
                with torch.no_grad():
                    for batch in make_loader(data, batches, 0):
                        loaded.model(batch.x)
                forward.append(n / (time.perf_counter() - t0))
                coder, result = Coder(fitted), shard_result()
                t0 = time.perf_counter()
                for batch in make_loader(data, batches, 0):
                    code_batch(coder, loaded.model, plan, batch.x, batch.indices.tolist(),
                               result)
                codes.append(n / (time.perf_counter() - t0))
                error = (coder.residual / coder.total) ** 0.5
        f, c = statistics.median(forward), statistics.median(codes)
        job = n / (fit_s + n / c)
        print(f"{name:<12} {layer:<7} {f:>14.1f} {c:>12.1f} {c / f:>14.2f} {fit_s:>6.1f} "
              f"{job:>10.1f} {error:>10.3f}", flush=True)


if __name__ == "__main__":
    main()
