"""Faithfulness metrics' cost per image against the plain forwards they need: deletion and
insertion at 20 steps on the demo model (128 px) and resnet18 (224 px, random weights).

Run by hand or by `make bench`: `python -m tests.benchmarks.bench_metrics [--rounds N]`.
Prints medians (wall and process CPU time) and ratios; asserts nothing.

Variants, interleaved (one of each per round, in a rotating order, so that load from other
processes falls on all of them alike), the same map (a seeded random one) and batch size:
  floor39       39 copies of the input forwarded in batches of `--batch`, under
                inference_mode: what deletion and insertion with one baseline must pay
  floor40       40 of them: RISE's protocol, whose two baselines share no input
  ours_zero     core.explain.metrics.curves.deletion_insertion, zero for both curves
                (39 forwards; the input's own score given, as a run has it)
  ours_rise     the same with RISE's protocol, deletion to zero, insertion from blur (40)
  torchcam      torch-cam's DeletionInsertionMetric, one baseline (39 + the input's own)
  torchcam_x2   twice that: RISE's protocol needs one torch-cam run per baseline
  quantus       Quantus 0.6.0's PixelFlipping (black baseline, one forward per step,
                the nearest step count at or above 20 that divides the input), when
                importable (`pip install --no-deps quantus==0.6.0 cachetools`)
and the sanity check of Grad-CAM (demo model, 6 units), with and without replaying the
forward below the randomised units.

Targets (issue 24): ours <= 1.2 x the floor of the same forwards, and no slower than
torch-cam on the same map.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import torch  # noqa: E402


def _demo():
    from inspector import demo
    from inspector.core.inputs.images import load_image
    from inspector.core.models.base import ModelSpec
    from inspector.core.models.load import load_model

    loaded = load_model(ModelSpec("demo_shapes", device="cpu"))
    x = loaded.preprocess(load_image(demo.sample_images()[0]))[None]
    return loaded.model, x


def _resnet18():
    import torchvision

    torch.manual_seed(0)
    return torchvision.models.resnet18(weights=None).eval(), torch.randn(1, 3, 224, 224)


def variants(model, x, batch: int) -> dict:
    from inspector.core.explain.metrics.curves import deletion_insertion
    from inspector.core.explain.metrics.forwards import Forwarder
    from inspector.core.explain.metrics.scores import class_probability

    with torch.inference_mode():
        logits = model(x)
    cls = int(logits.argmax())
    p0 = float(logits.softmax(-1)[0, cls])
    m = torch.rand(x.shape[-2:], generator=torch.Generator().manual_seed(1))

    def floor(n):
        def run():
            with torch.inference_mode():
                inputs = x.expand(n, *x.shape[1:]).contiguous()
                for s in range(0, n, batch):
                    model(inputs[s : s + batch]).softmax(-1)
        return run

    def ours(baseline: str | None):
        def run():
            forwarder = Forwarder(class_probability(model, cls), x, batch_size=batch)
            deletion_insertion(forwarder, x, m, deletion_baseline=baseline or "zero",
                               insertion_baseline=baseline or "blur", p0=p0)
        return run

    out = {"floor39": floor(39), "floor40": floor(40), "ours_zero": ours("zero"),
           "ours_rise": ours(None)}
    try:
        import torchcam  # noqa: F401

        from tests.core.metric_refs import torchcam_deletion_insertion
    except ImportError as e:
        print(f"torch-cam not installed ({e}): its columns are skipped", file=sys.stderr)
        return out
    from inspector.core.explain.metrics.curves import rise_blur

    blur = rise_blur(x)
    out["torchcam"] = lambda: torchcam_deletion_insertion(model, x, m, cls, batch_size=batch)
    out["torchcam_x2"] = lambda: (
        torchcam_deletion_insertion(model, x, m, cls, batch_size=batch),
        torchcam_deletion_insertion(model, x, m, cls, baseline=blur, batch_size=batch))
    quantus = _quantus(model, x, m, cls)
    if quantus is not None:
        out["quantus"] = quantus
    return out


def _quantus(model, x, m, cls):
    try:
        import quantus
    except ImportError as e:
        print(f"Quantus not importable ({e}): its column is skipped", file=sys.stderr)
        return None
    features = int(np.prod(x.shape[1:]))
    steps = next(s for s in range(20, features + 1) if features % s == 0)
    metric = quantus.PixelFlipping(features_in_step=features // steps, perturb_baseline="black",
                                   disable_warnings=True, display_progressbar=False)
    xb, mb = x.numpy(), m[None, None].expand(1, *x.shape[1:]).numpy().copy()
    print(f"Quantus PixelFlipping: {steps} steps of {features // steps} values")
    return lambda: metric(model=model, x_batch=xb, y_batch=np.array([cls]), a_batch=mb,
                          device="cpu")


def sanity_variants() -> dict:
    from inspector.core.explain.cam.compute import compute_cams
    from inspector.core.explain.metrics.sanity import sanity_check
    from inspector.core.explain.metrics.sanity_maps import cam_maps
    from inspector.core.models.tree import build_tree

    model, x = _demo()
    tree = build_tree(model, x)
    r = compute_cams(model, x, ["gradcam"], "stage3", tree=tree)
    originals, target = {"gradcam": r.cams["gradcam"][0]}, r.targets[0]
    explain = cam_maps(x, ["gradcam"], "stage3", target, tree)
    return {
        "sanity_replay": lambda: sanity_check(model, x, explain, originals, tree=tree,
                                              replay_before="stage3"),
        "sanity_full": lambda: sanity_check(model, x, explain, originals, tree=tree),
    }


def measure(runs: dict, rounds: int, warmup: int) -> tuple[dict, dict]:
    names = list(runs)
    wall = {n: [] for n in names}
    cpu = {n: [] for n in names}
    for r in range(warmup + rounds):
        for name in names[r % len(names):] + names[: r % len(names)]:
            t, c = time.perf_counter(), time.process_time()
            runs[name]()
            if r >= warmup:
                wall[name].append(time.perf_counter() - t)
                cpu[name].append(time.process_time() - c)
    return wall, cpu


def report(title: str, wall: dict, cpu: dict, base: str) -> str:
    med = {n: statistics.median(v) for n, v in wall.items()}
    cmed = {n: statistics.median(v) for n, v in cpu.items()}
    lines = [title, f"{'variant':<14}{'wall ms':>10}{'x ' + base:>16}{'cpu ms':>10}"
                    f"{'x ' + base:>16}"]
    for name in wall:
        lines.append(f"{name:<14}{med[name] * 1e3:>10.1f}{med[name] / med[base]:>16.3f}"
                     f"{cmed[name] * 1e3:>10.1f}{cmed[name] / cmed[base]:>16.3f}")
    if "ours_zero" in med:
        lines.append(f"ours_zero / floor39 = {med['ours_zero'] / med['floor39']:.3f} wall, "
                     f"{cmed['ours_zero'] / cmed['floor39']:.3f} cpu; ours_rise / floor40 = "
                     f"{med['ours_rise'] / med['floor40']:.3f} wall, "
                     f"{cmed['ours_rise'] / cmed['floor40']:.3f} cpu (target <= 1.2)")
    if "torchcam" in med:
        lines.append(f"ours_zero / torchcam = {cmed['ours_zero'] / cmed['torchcam']:.3f} cpu; "
                     f"ours_rise / torchcam_x2 = {cmed['ours_rise'] / cmed['torchcam_x2']:.3f}"
                     f" cpu (target <= 1)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")
    p.add_argument("--batch", type=int, default=32, help="inputs per forward (default 32)")
    p.add_argument("--models", default="demo,resnet18")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    builders = {"demo": _demo, "resnet18": _resnet18}
    for name in [n.strip() for n in args.models.split(",") if n.strip()]:
        model, x = builders[name]()
        wall, cpu = measure(variants(model, x, args.batch), args.rounds, args.warmup)
        print(report(f"-- {name} {tuple(x.shape)}, batch {args.batch}, {args.threads} "
                     f"thread(s), medians of {args.rounds} rounds", wall, cpu, "floor39"))
    wall, cpu = measure(sanity_variants(), args.rounds, args.warmup)
    print(report("-- sanity check, Grad-CAM on the demo model, 6 units", wall, cpu,
                 "sanity_full"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
