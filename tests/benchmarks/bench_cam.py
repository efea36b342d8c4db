"""Grad-CAM time per image against the floor and against pytorch-grad-cam: resnet50, batch 1.

Run by hand or by `make bench`: `python -m tests.benchmarks.bench_cam [--rounds N]`.
Prints a table of medians and ratios; asserts nothing.

Variants, run interleaved (one of each per round, in a rotating order, so that load from
other processes falls on all of them alike):
  no_grad      a forward under torch.no_grad (reference only)
  floor        a forward with autograd on: what any gradient-based CAM must pay at least
  ours         inspector.core.explain.cam.compute.compute_cams(model, x, ["gradcam"], "layer4"): the maps
               at the input's size, in [0, 1], on the CPU
  ours_capture the Session's path: hooks.Capture keeping layer4 + a backward to the input +
               cam_from_capture (the GUI also shows every layer's gradient, so it pays more)
  pgc          pytorch-grad-cam's GradCAM(model, [model.layer4[-1]]) (computes every
               parameter gradient); its hooks are registered for its own calls only

Targets (issue 3): ours <= 1.05 x floor, and pgc / ours >= 2.5.
pytorch-grad-cam is not a dependency of the project. In the benchmark environment:
  pip install --no-deps grad-cam && pip install ttach opencv-python-headless matplotlib \
      scikit-learn scipy
(`pip install grad-cam` alone also works where pip's resolver accepts the installed torch.)
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


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def build_variants(model, x, layer: str):
    from inspector.core.explain.cam.compute import cam_from_capture, compute_cams
    from inspector.core.run.capture import Capture
    from inspector.core.run.capture_spec import CaptureSpec

    hw = tuple(x.shape[-2:])

    def no_grad():
        with torch.no_grad():
            model(x)

    def floor():
        with torch.enable_grad():
            model(x)

    def ours():
        return compute_cams(model, x, ["gradcam"], layer).cams["gradcam"][0]

    def ours_capture():
        cap = Capture(model, CaptureSpec(keep=frozenset({layer})))
        with cap, torch.enable_grad():
            xin = x.detach().requires_grad_(True)
            logits = model(xin)
            torch.autograd.grad(logits[0, int(logits.argmax())], xin)
        cam = cam_from_capture("gradcam", cap, layer, hw)
        cap.kept.clear()
        return cam

    variants = {"no_grad": no_grad, "floor": floor, "ours": ours, "ours_capture": ours_capture}
    try:
        from pytorch_grad_cam import GradCAM
    except ImportError as e:
        print(f"pytorch-grad-cam not installed ({e}): its column is skipped", file=sys.stderr)
        return variants

    target_module = dict(model.named_modules())[layer]
    if isinstance(target_module, torch.nn.Sequential):
        target_module = target_module[-1]  # same tensor; what its README uses

    def pgc():
        cam = GradCAM(model=model, target_layers=[target_module])
        try:
            return cam(input_tensor=x, targets=None)[0]
        finally:
            cam.activations_and_grads.release()

    variants["pgc"] = pgc
    return variants


def run(rounds: int, warmup: int, threads: int, device: str, size: int):
    import torchvision

    torch.set_num_threads(threads)
    dev = torch.device(device)
    torch.manual_seed(0)
    model = torchvision.models.resnet50(weights=None).to(dev).eval()
    x = torch.randn(1, 3, size, size, device=dev)
    variants = build_variants(model, x, "layer4")
    names = list(variants)

    # The two implementations must agree before their times mean anything.
    ours_map = variants["ours"]()
    if "pgc" in variants:
        diff = float(np.abs(ours_map - variants["pgc"]()).max())
        print(f"max |ours - pytorch-grad-cam| over the map: {diff:.2e} "
              f"(they upsample and scale in a different order)")
    wall: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    for r in range(warmup + rounds):
        order = names[r % len(names):] + names[: r % len(names)]
        for name in order:
            _sync(dev)
            t, c = time.perf_counter(), time.process_time()
            variants[name]()
            _sync(dev)
            if r >= warmup:
                wall[name].append(time.perf_counter() - t)
                cpu[name].append(time.process_time() - c)
    return wall, cpu


def report(wall: dict[str, list[float]], cpu: dict[str, list[float]]) -> str:
    """Wall-clock medians (with quartiles) and process CPU-time medians. On a machine shared
    with other work, CPU time is what a variant itself costs; wall time adds the waiting."""
    med = {n: statistics.median(v) for n, v in wall.items()}
    cmed = {n: statistics.median(v) for n, v in cpu.items()}
    lines = [f"{'variant':<14}{'wall ms':>9}{'p25':>8}{'p75':>8}{'x floor':>9}{'x ours':>8}"
             f"{'cpu ms':>9}{'x floor':>9}{'x ours':>8}"]
    for name, v in wall.items():
        q = statistics.quantiles(v, n=4) if len(v) >= 2 else [v[0], v[0], v[0]]
        lines.append(
            f"{name:<14}{med[name] * 1e3:>9.1f}{q[0] * 1e3:>8.1f}{q[2] * 1e3:>8.1f}"
            f"{med[name] / med['floor']:>9.3f}{med[name] / med['ours']:>8.2f}"
            f"{cmed[name] * 1e3:>9.1f}{cmed[name] / cmed['floor']:>9.3f}"
            f"{cmed[name] / cmed['ours']:>8.2f}"
        )
    lines.append("")
    lines.append(f"ours / floor = {med['ours'] / med['floor']:.3f} wall, "
                 f"{cmed['ours'] / cmed['floor']:.3f} cpu (target <= 1.05)")
    if "pgc" in med:
        lines.append(f"pytorch-grad-cam / ours = {med['pgc'] / med['ours']:.2f} wall, "
                     f"{cmed['pgc'] / cmed['ours']:.2f} cpu (target >= 2.5)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--threads", type=int, default=torch.get_num_threads(),
                   help="torch intra-op threads (default: torch's own choice)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--size", type=int, default=224)
    args = p.parse_args(argv)
    wall, cpu = run(args.rounds, args.warmup, args.threads, args.device, args.size)
    print(f"resnet50, {args.device}, batch 1, {args.size} x {args.size}, "
          f"{args.threads} thread(s), {args.rounds} rounds after {args.warmup} warm-up")
    print(report(wall, cpu))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
