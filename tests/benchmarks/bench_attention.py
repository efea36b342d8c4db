"""Attention maps against the plain passes they are measured by: torchvision vit_b_16, batch 1.

Run by hand or by `make bench`: `python -m tests.benchmarks.bench_attention [--rounds N]`.
Prints a table of medians and ratios; asserts nothing.

Variants, interleaved (one of each per round, in a rotating order, so that load from other
processes falls on all of them alike):
  plain          a forward under torch.no_grad, fused attention (MHA's native kernel)
  rollout        core.explain.attention.maps.attention_maps(model, x, ["rollout"]): the
                 forward on the non-fused path, the map on the grid and at the input's size
  fwd_bwd        a forward with autograd from the input and the gradient of the top logit
                 w.r.t. the input: a plain forward + backward
  gradrollout    attention_maps(..., ["gradrollout"]): its graph starts at the first attention
  legrad         attention_maps(..., ["legrad"]): the last 4 blocks
  plain_after    `plain` again (the same code): after a capture the fused path is back, and
                 this column shows the noise between two equal variants
  session_plain  a Session run capturing nothing, without gradients
  session_rollout  the same run with the rollout map

Targets (issue 25): rollout <= 1.3 x plain, gradrollout and legrad <= 1.3 x fwd_bwd,
plain_after ~ plain (a run that asks for no attention keeps the fused path; tested by
structure in tests/core/test_attention_capture.py, since two equal variants differ by more
than 2% here), session_rollout / session_plain the same overhead in the Session.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def build_variants(model, x, session):
    from inspector.core.explain.attention.maps import attention_maps
    from inspector.core.run.capture_spec import CaptureSpec

    def plain():
        with torch.no_grad():
            model(x)

    def fwd_bwd():
        xin = x.detach().requires_grad_(True)
        with torch.enable_grad():
            out = model(xin)
            torch.autograd.grad(out[0, int(out.argmax())], xin)

    def maps(method):
        return lambda: attention_maps(model, x, [method])

    def session_run(cams):
        return lambda: session.run(x, capture=CaptureSpec(), gradients=False, cams=cams)

    return {"plain": plain, "rollout": maps("rollout"), "fwd_bwd": fwd_bwd,
            "gradrollout": maps("gradrollout"), "legrad": maps("legrad"),
            "plain_after": plain, "session_plain": session_run(()),
            "session_rollout": session_run((("rollout", None),))}


def run(rounds: int, warmup: int, threads: int, device: str):
    import torchvision

    from inspector.core.models.base import DEFAULT_PREPROCESS, LoadedModel
    from inspector.core.models.tree import build_tree
    from inspector.core.run.session import Session

    torch.set_num_threads(threads)
    dev = torch.device(device)
    torch.manual_seed(0)
    model = torchvision.models.vit_b_16(weights=None)
    torch.nn.init.normal_(model.heads.head.weight, std=0.02)  # zero-initialised otherwise
    model = model.to(dev).eval()
    x = torch.randn(1, 3, 224, 224, device=dev)
    session = Session()
    session.loaded = LoadedModel(model, "vit_b_16", "vit_b_16 (random)", False,
                                 [str(i) for i in range(1000)], DEFAULT_PREPROCESS, dev)
    session.tree = build_tree(model, x)
    variants = build_variants(model, x, session)
    names = list(variants)
    wall: dict[str, list[float]] = {n: [] for n in names}
    try:
        for r in range(warmup + rounds):
            order = names[r % len(names):] + names[: r % len(names)]
            for name in order:
                _sync(dev)
                t = time.perf_counter()
                variants[name]()
                _sync(dev)
                if r >= warmup:
                    wall[name].append(time.perf_counter() - t)
                session.channel.drain()
    finally:
        session.close()
    return wall


def report(wall: dict[str, list[float]]) -> str:
    med = {n: statistics.median(v) for n, v in wall.items()}
    low = {n: min(v) for n, v in wall.items()}
    base = {"plain": "plain", "rollout": "plain", "fwd_bwd": "plain", "gradrollout": "fwd_bwd",
            "legrad": "fwd_bwd", "plain_after": "plain", "session_plain": "plain",
            "session_rollout": "session_plain"}
    lines = [f"{'variant':<17}{'median ms':>10}{'min ms':>9}{'against':>15}{'x median':>10}"
             f"{'x min':>8}"]
    for name in wall:
        b = base[name]
        lines.append(f"{name:<17}{med[name] * 1e3:>10.1f}{low[name] * 1e3:>9.1f}{b:>15}"
                     f"{med[name] / med[b]:>10.3f}{low[name] / low[b]:>8.3f}")
    lines.append("")
    lines.append(f"rollout / plain = {med['rollout'] / med['plain']:.3f} (target <= 1.3); "
                 f"gradrollout / fwd_bwd = {med['gradrollout'] / med['fwd_bwd']:.3f}, "
                 f"legrad / fwd_bwd = {med['legrad'] / med['fwd_bwd']:.3f} (targets <= 1.3); "
                 f"plain_after / plain = {med['plain_after'] / med['plain']:.3f} (the noise)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--threads", type=int, default=torch.get_num_threads(),
                   help="torch intra-op threads (default: torch's own choice)")
    p.add_argument("--device", default="cpu")
    args = p.parse_args(argv)
    wall = run(args.rounds, args.warmup, args.threads, args.device)
    print(f"torchvision vit_b_16 (random weights), {args.device}, batch 1, 224 x 224, "
          f"{args.threads} thread(s), {args.rounds} rounds after {args.warmup} warm-up")
    print(report(wall))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
