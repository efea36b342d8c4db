"""Feature visualisation: seconds per step and per channel, and torch-lucent beside it.

    python -m tests.benchmarks.bench_featurevis [--model resnet50] [--layer layer4]
        [--batch 64] [--steps 8] [--lucent PATH] [--lucent-steps 128]

1. `--model`'s `--layer` at its input size (resnet50 layer4 at 224 px: the issue's case),
   one channel, then `--batch` channels optimised as one batch: the median seconds per
   step over `--steps` steps (after one warm-up step), and the time per channel of a
   512-step run (Lucid's default) = 512 x that median / channels. `--steps 512` measures
   the whole run instead of extrapolating it.
2. torch-lucent, where it can be imported (it is not a dependency; `--lucent PATH` adds a
   folder holding it, with kornia), in the same process: the demo model's stage3, 8
   channels in one batch at 128 px, `--lucent-steps` steps each; seconds per step and the
   channels' objective on the final pictures (untransformed, evaluated the same way for
   both). Lucent 0.1.8 needs two shims on today's kornia and IPython missing: they are
   applied here, not in the app.

Prints a table; asserts nothing. No GPU is used unless the model loads on one.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import types

import inspector.core  # noqa: F401  (sets OMP_WAIT_POLICY before torch is imported)

# isort: split
import numpy as np
import torch

from inspector.core.explain.featurevis.render import Optimisation, channel_means
from inspector.core.explain.featurevis.settings import FeatureVisSettings, Target
from inspector.core.models.base import ModelSpec
from inspector.core.models.load import load_model


def step_times(loaded, layer: str, channels: list[int], steps: int) -> list[float]:
    opt = Optimisation(loaded, layer, [Target("channel", c) for c in channels],
                       FeatureVisSettings(steps=steps + 1))
    times = []
    for _ in range(steps + 1):
        t0 = time.perf_counter()
        opt.run(1)
        times.append(time.perf_counter() - t0)
    return times[1:]


def speed(args) -> None:
    loaded = load_model(ModelSpec(name=args.model, device=args.device, seed=0))
    print(f"{loaded.description}; {args.layer} at {loaded.preprocess.crop_size}, "
          f"{torch.get_num_threads()} threads, device {loaded.device}")
    print(f"{'channels':>9} {'s/step (median)':>16} {'steps timed':>12} "
          f"{'s per channel, 512 steps':>25}")
    for n in (1, args.batch):
        times = step_times(loaded, args.layer, list(range(n)), args.steps)
        med = statistics.median(times)
        print(f"{n:>9} {med:>16.3f} {len(times):>12} {512 * med / n:>25.1f}", flush=True)


def _lucent(path: str | None):
    if path:
        sys.path.append(path)
    for name in ("IPython", "IPython.display"):  # lucent.misc.io imports it at import time
        sys.modules.setdefault(name, types.ModuleType(name))
    try:
        import kornia
        import kornia.geometry.transform as kgt

        kornia.get_rotation_matrix2d = kgt.get_rotation_matrix2d  # gone from kornia's top
        kornia.warp_affine = kgt.warp_affine
        from lucent.optvis import objectives, param, render, transform
    except ImportError as e:
        return None, str(e)
    return (objectives, param, render, transform), None


def versus_lucent(args) -> None:
    modules, why = _lucent(args.lucent)
    if modules is None:
        print(f"\ntorch-lucent: not importable here ({why}); skipped")
        return
    objectives, param, render, transform = modules
    loaded = load_model(ModelSpec(device="cpu"))
    channels, steps, side = list(range(8)), args.lucent_steps, loaded.preprocess.crop_size[0]
    mean = torch.tensor(loaded.preprocess.mean)[:, None, None]
    std = torch.tensor(loaded.preprocess.std)[:, None, None]
    obj = objectives.Objective.sum([objectives.channel("stage3", c, batch=i)
                                    for i, c in enumerate(channels)])
    np.random.seed(0)
    torch.manual_seed(0)
    t0 = time.perf_counter()
    images = render.render_vis(
        loaded.model, obj, lambda: param.image(side, batch=len(channels)),
        transforms=[*transform.standard_transforms, lambda x: (x - mean) / std],
        thresholds=(steps,), preprocess=False, progress=False, show_image=False,
        fixed_image_size=side)
    lucent_s = (time.perf_counter() - t0) / steps
    theirs = (np.clip(images[-1], 0, 1) * 255).round().astype(np.uint8)
    opt = Optimisation(loaded, "stage3", [Target("channel", c) for c in channels],
                       FeatureVisSettings(steps=steps))
    t0 = time.perf_counter()
    opt.run(steps)
    ours_s = (time.perf_counter() - t0) / steps
    ours = opt.picture()
    a = np.diag(channel_means(loaded, "stage3", theirs)[:, channels])
    b = np.diag(channel_means(loaded, "stage3", ours)[:, channels])
    print(f"\ndemo_shapes stage3, {len(channels)} channels in one batch, {side} px, {steps} "
          f"steps each; objective = the channel's mean on its final picture, untransformed")
    print(f"{'':>14} {'s/step':>8} {'median objective':>17}  per channel")
    print(f"{'torch-lucent':>14} {lucent_s:>8.3f} {np.median(a):>17.2f}  "
          + " ".join(f"{v:.2f}" for v in a))
    print(f"{'inspector':>14} {ours_s:>8.3f} {np.median(b):>17.2f}  "
          + " ".join(f"{v:.2f}" for v in b))
    print(f"ratio (lucent / inspector) s/step: {lucent_s / ours_s:.2f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="resnet50")
    p.add_argument("--layer", default="layer4")
    p.add_argument("--device", default="cpu")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--lucent", default=None, help="a folder holding torch-lucent and kornia")
    p.add_argument("--lucent-steps", type=int, default=128)
    p.add_argument("--no-speed", action="store_true", help="only the torch-lucent comparison")
    args = p.parse_args()
    if not args.no_speed:
        speed(args)
    versus_lucent(args)


if __name__ == "__main__":
    main()
