"""A video through the model, as the window plays it, against the plain forward (issue 16).

When a video plays faster than the model runs, the views update once per finished run: the
frames run per second are what the user sees move. This measures them headless, on the path
the window's frames take: core.inputs.video.ReadAhead decodes on its own thread (4 frames ahead),
and each frame, as a PIL image, goes through Session.run with the request the window makes
of a frame while the video plays (`live`: ui.run.builder, ui.run.capture_choice), and with its
default request for a still image (every leaf's input, output and output gradient with
statistics, the previews the window captures, a backward, Grad-CAM at the default layer),
its frames drained as the window's router does. Against it, in the same process, on the
same frames already decoded and preprocessed: `model(x)` under `torch.no_grad()`, the
plain forward's throughput. Target: live >= 0.7 x plain.

Variants, interleaved (one pass over the clip each per round, in a rotating order):
  plain         model(x), no_grad, batch 1, on the preprocessed frames
  plain_video   the same on each frame as the runs get it: decoded by ReadAhead (on its
                thread, as for the runs), preprocessed (PIL resize, crop, normalize), then
                model(x) under no_grad: what every run of a video frame pays at least
  window        the window's default run of each decoded frame (gradients on)
  no_gradients  the same with Run > Compute gradients off: statistics and previews of every
                leaf, no backward, no Grad-CAM (the window drops gradient CAMs then)
  live          the run the window makes of each frame while a video plays (ui.run.builder,
                `live`): the selected module's output with statistics and previews, the
                predictions, Grad-CAM at the default layer with a backward that stops there,
                with one intra-op thread fewer (core.run.runtime.stream_threads), the core
                left to the window's UI thread and decoder (none here)
  live_script   the same run with the process's thread count, as a script's
                `Session.run(image, gradients=False, cams=...)` makes it

Also, with `--window`: the real window (offscreen) plays a 60 fps clip for a while, and
prints frames shown per second, the runs whose results reached the views per second (each
is a frame shown with its own activations, predictions and CAM), frames dropped, and the
lateness of a 16 ms timer on the UI thread meanwhile (whether playing keeps the window
responsive). The runs reaching the views are compared with what the plain forward could
give the same clip: its throughput above, or the clip's frame rate when that is lower (no
window shows more frames than the video has).

Models: the bundled demo CNN (128 x 128) and torchvision's resnet18 with random weights
(224 x 224), on the CPU. Prints medians and ratios; asserts nothing.

    python -m tests.benchmarks.bench_video [--rounds 5] [--frames 40] [--threads N]
                                           [--models demo,resnet18] [--window]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import inspector.core  # noqa: F401  (sets OMP_WAIT_POLICY before torch is imported)

# isort: split
import torch

from inspector.core.explain.catalog import DEFAULT_CAM
from inspector.core.inputs.video import ReadAhead
from inspector.core.inputs.video_reader import VideoReader
from inspector.core.models.base import ModelSpec
from inspector.core.records.kinds import DEFAULT_KINDS
from inspector.core.run.capture_spec import CaptureSpec
from inspector.core.run.runtime import stream_threads
from inspector.core.run.session import Session
from tests.benchmarks.threads import configure_threads

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the clip writer
from video_clip import next_frame, write_clip  # noqa: E402

MODELS = {
    "demo": ModelSpec(name="demo_shapes", device="cpu"),
    "resnet18": ModelSpec(name="resnet18", device="cpu"),
}


def _requests(session: Session) -> dict[str, dict]:
    """The window's default request (its capture choice), with and without gradients, and
    its live request while a video plays."""
    from inspector.ui.run import capture_choice

    tree, model = session.tree, session.loaded.model
    leaves = {n: frozenset(DEFAULT_KINDS) for n in CaptureSpec.leaves(model, DEFAULT_KINDS)
              .modules}
    selected = capture_choice.default_module(tree)
    requests = {}
    for name, backward in (("window", True), ("no_gradients", False)):
        preview = capture_choice.preview_modules(tree, leaves, selected, backward)
        requests[name] = {
            "capture": CaptureSpec(modules=leaves, preview=preview),
            "gradients": backward,
            "cams": ((DEFAULT_CAM, None),) if backward else (),
        }
    live = capture_choice.live_modules(leaves, selected)
    requests["live"] = {"capture": CaptureSpec(modules=live, preview=frozenset(live)),
                        "gradients": False, "cams": ((DEFAULT_CAM, None),),
                        "threads": stream_threads()}
    requests["live_script"] = {**requests["live"], "threads": None}
    return requests


def _through_session(session: Session, clip: Path, frames: int, request: dict,
                     prepare=None) -> float:
    """Seconds per frame: decoded by ReadAhead (which runs `prepare` on each frame, as
    the window's player has it make the model input there), each run as the window runs
    it."""

    def run(frame) -> None:
        outcome = session.run(frame.prepared or frame.image, **request)
        session.channel.drain()
        if outcome.status != "ok":
            raise RuntimeError(outcome.error)

    return _decoded(clip, frames, run, prepare)


def _plain_video(model, preprocess, clip: Path, frames: int) -> float:
    """Seconds per frame: decoded by ReadAhead, preprocessed, `model(x)` under no_grad."""

    def run(frame) -> None:
        with torch.no_grad():
            model(preprocess(frame.image)[None])

    return _decoded(clip, frames, run)


def _decoded(clip: Path, frames: int, run, prepare=None) -> float:
    """Seconds per frame of `run(frame)` on each frame ReadAhead decodes."""
    ahead = ReadAhead(clip)
    ahead.prepare = prepare
    try:
        done = 0
        t0 = time.perf_counter()
        while done < frames:
            frame = next_frame(ahead, timeout=5)
            if frame is None:
                raise ahead.error or RuntimeError(f"{clip} ended after {done} frames")
            run(frame)
            done += 1
        return (time.perf_counter() - t0) / frames
    finally:
        ahead.close()


def _plain(model, xs: list[torch.Tensor]) -> float:
    t0 = time.perf_counter()
    with torch.no_grad():
        for x in xs:
            model(x)
    return (time.perf_counter() - t0) / len(xs)


def bench_model(name: str, clip: Path, frames: int, rounds: int, warmup: int) -> dict:
    session = Session()
    try:
        loaded = session.load_model(MODELS[name]).result()
        with VideoReader(clip) as reader:
            images = [f.image for _, f in zip(range(frames), reader.frames())]
        xs = [loaded.preprocess(im)[None] for im in images]
        model = loaded.model.eval()
        requests = _requests(session)
        variants = {
            "plain": lambda: _plain(model, xs),
            "plain_video": lambda: _plain_video(model, loaded.preprocess, clip, frames),
            **{v: (lambda r=r: _through_session(session, clip, frames, r,
                                                loaded.preprocess.prepare))
               for v, r in requests.items()},
        }
        names = list(variants)
        times: dict[str, list[float]] = {n: [] for n in names}
        for r in range(warmup + rounds):
            for variant in names[r % len(names):] + names[: r % len(names)]:
                seconds = variants[variant]()
                if r >= warmup:
                    times[variant].append(seconds)
        previews = len(requests["window"]["capture"].preview)
        return {"times": times, "leaves": len(requests["window"]["capture"].modules),
                "previews": previews, "input": tuple(xs[0].shape[-2:]),
                "live": ", ".join(requests["live"]["capture"].modules) or "(none)",
                "cam_layer": session.default_cam_layer()}
    finally:
        session.close()


def report(name: str, result: dict) -> str:
    times = result["times"]
    fps = {n: 1 / statistics.median(v) for n, v in times.items()}
    lines = [f"{name} ({result['input'][0]} x {result['input'][1]}): {result['leaves']} leaves "
             f"captured, previews of {result['previews']}; live: {result['live']} and "
             f"Grad-CAM at {result['cam_layer']}",
             f"  {'variant':<14}{'ms/frame':>10}{'frames/s':>10}{'x plain':>9}"]
    for v in times:
        lines.append(f"  {v:<14}{1e3 / fps[v]:>10.1f}{fps[v]:>10.1f}{fps[v] / fps['plain']:>9.2f}")
    for v in ("window", "live", "live_script"):
        per_round = [p / w for w, p in zip(times[v], times["plain"], strict=True)]
        lines.append(f"  {v} / plain throughput: {fps[v] / fps['plain']:.2f} (of medians), "
                     f"{statistics.median(per_round):.2f} (median of per-round ratios)"
                     + ("; target >= 0.7" if v.startswith("live") else ""))
    return "\n".join(lines)


# -- the real window ----------------------------------------------------------------------------


def bench_window(name: str, clip: Path, seconds: float, plain_fps: float) -> str:
    """The window plays `clip` for `seconds`: frames shown and run per second, frames
    dropped, runs reaching the views against min(clip fps, plain_fps), and a 16 ms UI
    timer's lateness meanwhile."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    import numpy as np
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from inspector.ui.shell.app_settings import AppSettings
    from inspector.ui.window.main_window import MainWindow

    app = QApplication.instance() or QApplication([])
    with tempfile.TemporaryDirectory() as tmp:
        window = MainWindow(AppSettings.in_file(str(Path(tmp) / "settings.ini")))
        window.build_views()
        window.show()
        fields = {"name": MODELS[name].name, "device": "cpu"}
        window.start([], fields, session=Session())
        deadline = time.monotonic() + 120
        while not window.model_name and time.monotonic() < deadline:
            app.processEvents()
            time.sleep(0.01)
        window.images.add_paths([clip])
        late: list[float] = []
        expected = [0.0]

        def tick() -> None:
            now = time.perf_counter()
            if expected[0]:
                late.append(max(0.0, now - expected[0]))
            expected[0] = now + 0.016

        timer = QTimer()
        timer.timeout.connect(tick)
        timer.start(16)
        player = window.video
        stored: list[int] = []  # runs the views were given (not skipped for a newer run)
        window.router.runStored.connect(stored.append)
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            app.processEvents()
            time.sleep(0.001)
        elapsed = time.perf_counter() - t0
        shown, run, dropped = player.counts.shown, player.counts.run, player.counts.dropped
        to_views = len(stored)
        timer.stop()
        window.close()
        app.processEvents()
    fps = player_fps(clip)
    ceiling = min(fps, plain_fps)
    return (f"{name} in the window, {elapsed:.0f} s of a {fps:g} fps clip: "
            f"{shown / elapsed:.1f} frames shown/s, {run / elapsed:.1f} run/s, {dropped} "
            f"dropped, {to_views / elapsed:.1f} runs/s reached the views = "
            f"{to_views / elapsed / ceiling:.2f} x min(clip {fps:g} fps, plain "
            f"{plain_fps:.1f} fps); 16 ms UI timer lateness p50 "
            f"{np.percentile(late, 50) * 1e3:.1f} ms, p99 {np.percentile(late, 99) * 1e3:.1f} "
            f"ms, max {max(late) * 1e3:.1f} ms")


def player_fps(clip: Path) -> float:
    with VideoReader(clip) as reader:
        return reader.info.fps


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--frames", type=int, default=40, help="frames per pass")
    ap.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    ap.add_argument("--window", action="store_true",
                    help="also play a clip in the real window (offscreen)")
    ap.add_argument("--window-seconds", type=float, default=10.0)
    args = ap.parse_args(argv)
    threads = configure_threads(args.threads)
    print(f"torch {torch.__version__}, {threads} intra-op threads, "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}, batch 1, CPU, "
          f"medians of {args.rounds} interleaved passes of {args.frames} frames after "
          f"{args.warmup} warm-up passes")
    with tempfile.TemporaryDirectory() as tmp:
        # 256 x 256 (the models resize and crop it), 30 fps, moving shapes.
        clip = write_clip(Path(tmp) / "clip.mp4", size=256, frames=max(args.frames, 30) + 5,
                          fps=30)
        plain_fps = {}
        for name in args.models.split(","):
            result = bench_model(name, clip, args.frames, args.rounds, args.warmup)
            plain_fps[name] = 1 / statistics.median(result["times"]["plain"])
            print(report(name, result), flush=True)
        if args.window:
            long_clip = write_clip(Path(tmp) / "long.mp4", size=256, frames=600, fps=60)
            for name in args.models.split(","):
                print(bench_window(name, long_clip, args.window_seconds, plain_fps[name]),
                      flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
