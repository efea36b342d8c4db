"""From an edit to the updated predictions, against a plain run of the same image (issue 15).

When an edit is switched on, the window already holds the unedited run of the image (kept
with keep_outputs), so what the edit costs is one run: the edited run, compared with that
cached run (compare_with: the per-module distances are measured in its hooks). It is timed
against a plain run with the window's default capture: every leaf's input, output and
output gradient with statistics, the previews of the first convolution, a backward, and
Grad-CAM at the model's default layer. Both go through Session.run (the worker thread, the
frame channel; the frames are drained outside the timing).

Variants, interleaved (one of each per round, in a rotating order, so that load from other
processes falls on all alike):
  plain      the run as the window makes it
  edited     the same with one edit (zero 8 channels of a middle conv), compared with the
             cached unedited run: the target is <= 1.5 x plain
  edit_only  the edit without the comparison (what the comparison itself adds)

Models: the bundled demo CNN (128 x 128) and torchvision's resnet18 with random weights
(224 x 224), on the CPU, batch 1. Prints medians (with quartiles) and ratios of medians, and
the median of the per-round ratios; asserts nothing.

    python -m tests.benchmarks.bench_edits [--rounds 20] [--threads N] [--models demo,resnet18]
"""

from __future__ import annotations

import argparse
import statistics
import time

import inspector.core  # noqa: F401  (sets OMP_WAIT_POLICY before torch is imported)

# isort: split
import torch

from inspector.core.edits.interventions import ZeroChannels
from inspector.core.explain.catalog import DEFAULT_CAM
from inspector.core.models.base import ModelSpec
from inspector.core.records.frames import RunFinished
from inspector.core.records.kinds import DEFAULT_KINDS
from inspector.core.run.capture_spec import CaptureSpec
from inspector.core.run.session import Session
from tests.benchmarks.threads import configure_threads

MODELS = {
    # name: (model spec, the conv whose channels the edit zeroes)
    "demo": (ModelSpec(name="demo_shapes", device="cpu"), "stage2.0.conv"),
    "resnet18": (ModelSpec(name="resnet18", device="cpu"), "layer2.0.conv1"),
}


def _image(loaded) -> torch.Tensor:
    from inspector import demo
    from inspector.core.inputs.images import load_image

    return loaded.preprocess(load_image(demo.sample_images()[0]))


def _window_request(session: Session) -> dict:
    """What the window asks of a run by default (ui.run.builder, ui.run.capture_choice)."""
    model, tree = session.loaded.model, session.tree
    first_conv = next(n for n in tree.with_spatial_output()
                      if tree[n].is_leaf and tree[n].params_own)
    capture = CaptureSpec.leaves(model, DEFAULT_KINDS, preview=frozenset({first_conv}))
    return {"capture": capture, "backward": True, "cams": ((DEFAULT_CAM, None),)}


def bench_model(name: str, rounds: int, warmup: int) -> dict[str, list[float]]:
    spec, module = MODELS[name]
    session = Session()
    try:
        loaded = session.load_model(spec).result()
        x = _image(loaded)
        window = _window_request(session)
        edit = (ZeroChannels(module, channels=tuple(range(8))),)
        baseline = session.run(x, keep_outputs=True, **window)  # cached once, as the window does
        assert baseline.status == "ok", baseline.error
        session.channel.drain()
        variants = {
            "plain": lambda: session.run(x, **window),
            "edited": lambda: session.run(x, interventions=edit, compare_with=baseline.run_id,
                                          **window),
            "edit_only": lambda: session.run(x, interventions=edit, **window),
        }
        names = list(variants)
        wall: dict[str, list[float]] = {n: [] for n in names}
        forward: dict[str, list[float]] = {n: [] for n in names}
        for r in range(warmup + rounds):
            order = names[r % len(names):] + names[: r % len(names)]
            for variant in order:
                t = time.perf_counter()
                outcome = variants[variant]()
                elapsed = time.perf_counter() - t
                frames = session.channel.drain()
                if outcome.status != "ok":
                    raise RuntimeError(f"{name} {variant}: {outcome.error}")
                if variant == "edited" and outcome.divergence is None:
                    raise RuntimeError(f"{name}: the cached run's outputs were not kept")
                finished = next(f for f in frames if isinstance(f, RunFinished))
                if r >= warmup:
                    wall[variant].append(elapsed)
                    forward[variant].append(finished.timings.get("forward", 0.0))
        return {"wall": wall, "forward": forward, "modules": len(window["capture"].modules)}
    finally:
        session.close()


def report(name: str, result: dict) -> str:
    wall, forward = result["wall"], result["forward"]
    med = {n: statistics.median(v) for n, v in wall.items()}
    fmed = {n: statistics.median(v) for n, v in forward.items()}
    lines = [f"{name}: {result['modules']} leaves captured",
             f"  {'variant':<11}{'run ms':>9}{'p25':>8}{'p75':>8}{'x plain':>9}"
             f"{'forward ms':>12}{'x plain':>9}"]
    for v, times in wall.items():
        q = statistics.quantiles(times, n=4) if len(times) >= 2 else [times[0]] * 3
        lines.append(f"  {v:<11}{med[v] * 1e3:>9.1f}{q[0] * 1e3:>8.1f}{q[2] * 1e3:>8.1f}"
                     f"{med[v] / med['plain']:>9.3f}{fmed[v] * 1e3:>12.1f}"
                     f"{fmed[v] / fmed['plain']:>9.3f}")
    per_round = [e / p for e, p in zip(wall["edited"], wall["plain"], strict=True)]
    lines.append(f"  edited / plain: {med['edited'] / med['plain']:.3f} (ratio of medians), "
                 f"{statistics.median(per_round):.3f} (median of per-round ratios); "
                 f"target <= 1.5")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    args = ap.parse_args(argv)
    threads = configure_threads(args.threads)
    print(f"torch {torch.__version__}, {threads} intra-op threads, "
          f"OMP_WAIT_POLICY={__import__('os').environ.get('OMP_WAIT_POLICY')}, batch 1, CPU, "
          f"medians of {args.rounds} interleaved rounds after {args.warmup} warm-up rounds")
    for name in args.models.split(","):
        print(report(name, bench_model(name, args.rounds, args.warmup)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
