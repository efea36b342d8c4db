"""Atlas throughput against a plain batched forward over the same images and loader.

    python -m tests.benchmarks.bench_atlas [--models demo_shapes,resnet18] [--images 256]
        [--rounds 3] [--batch-size 32] [--workers N]

Per model, in one process on the CPU, interleaved round by round:
  forward  the same DataLoader (inputs.make_loader, same workers, same batches), and
           model(x) under torch.no_grad(): the floor
  atlas    the statistics pass of `network-inspector atlas` (local engine: hooks reducing
           two layers, top-k merge on the device, Grad-CAM at the CAM layer per batch,
           shards written) over the same images
  boxes    the atlas's second pass (receptive-field boxes of the final top-k), reported on
           its own: its cost depends on channels x top, not on the number of images; then,
           on the first --box-entries entries, interleaved: entries of one image sharing its
           forward (batched backward, the engine's way) against a forward per entry (the
           way before, forced by making the batched path fail)

Prints images/s medians and atlas / forward; target (issue 17): atlas >= 0.8 x forward.
Asserts nothing. Images are drawn into a temporary folder (resnet18 gets 256 x 256 ones).
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

from inspector.batch import boxes as boxes_module
from inspector.batch.boxes import compute_boxes
from inspector.batch.engine.shards import JobKey, ShardStore
from inspector.batch.inputs import ImageFiles, default_workers, make_loader, shard_batches
from inspector.batch.job import StatsJob
from inspector.batch.local import run_local
from inspector.batch.probe import plan_layers
from inspector.batch.writers import entries_of
from inspector.core.explain.cam.compute import compute_cams
from inspector.core.explain.cam.layer import default_target_layer
from inspector.core.models.base import ModelSpec
from inspector.core.models.load import load_model
from inspector.core.models.tree import build_tree

LAYERS = {"demo_shapes": ["stage1", "stage3"], "resnet18": ["layer2", "layer4"]}
SIDE = {"demo_shapes": 128, "resnet18": 256}


def draw(folder: Path, n: int, side: int) -> list[Path]:
    rng = np.random.default_rng(0)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        a = rng.integers(0, 256, (side, side, 3), dtype=np.uint8)
        path = folder / f"img{i:05d}.png"
        Image.fromarray(a).save(path, compress_level=1)
        paths.append(path)
    return paths


def _no_batched_backward(*args, **kwargs):
    raise RuntimeError("the batched path switched off")


def bench(name: str, n: int, rounds: int, batch_size: int, workers: int,
          box_entries: int) -> None:
    loaded = load_model(ModelSpec(name=name, device="cpu"))
    model = loaded.model
    h, w = loaded.preprocess.crop_size
    tree = build_tree(model, torch.zeros(1, 3, h, w))
    cam_layer = default_target_layer(model, tree)
    trial = compute_cams(model, torch.zeros(1, 3, h, w), ["gradcam"], cam_layer)
    with tempfile.TemporaryDirectory() as tmp:
        paths = draw(Path(tmp) / "images", n, SIDE[name])
        job = StatsJob(
            paths=tuple(paths), preprocess=loaded.preprocess,
            plans=plan_layers(tree, LAYERS[name], (h, w)), cam_layer=cam_layer,
            cam_shape=(int(trial.logits.shape[-1]), *trial.raw["gradcam"].shape[-2:]),
            top=9, shard_size=256, batch_size=batch_size,
        )
        shards = list(range(-(-n // job.shard_size)))
        dataset = ImageFiles(paths, loaded.preprocess)

        def forward() -> None:
            batches = shard_batches(shards, n, job.shard_size, batch_size)
            with torch.no_grad():
                for batch in make_loader(dataset, batches, workers):
                    model(batch.x)

        def atlas() -> None:
            store = ShardStore(Path(tmp) / "out")
            key = JobKey.of("atlas", ModelSpec(name=name), 0,
                            {"layers": LAYERS[name], "top": job.top}, job.shard_size, paths)
            store.prepare(key, resume=False)
            run_local(job, model, torch.device("cpu"), shards, store, workers)

        times: dict[str, list[float]] = {"forward": [], "atlas": []}
        forward()  # warm-up: page cache, allocator, one-time torch set-up
        for r in range(rounds):
            order = ("forward", "atlas") if r % 2 == 0 else ("atlas", "forward")
            for variant in order:
                t0 = time.perf_counter()
                (forward if variant == "forward" else atlas)()
                times[variant].append(time.perf_counter() - t0)

        store = ShardStore(Path(tmp) / "out")
        total = job.empty("cpu")
        for s in shards:
            total.merge(store.load(s))
        entries = entries_of(total)
        t0 = time.perf_counter()
        compute_boxes(model, job.plans, dataset, entries, torch.device("cpu"), batch_size,
                      workers)
        boxes_s = time.perf_counter() - t0

        some = sorted(entries, key=lambda e: (e.index, e.layer))[:box_entries]
        box_times: dict[str, list[float]] = {"shared": [], "per_entry": []}
        for r in range(rounds):
            for variant in (("shared", "per_entry") if r % 2 == 0 else ("per_entry", "shared")):
                real = boxes_module.image_boxes
                if variant == "per_entry":
                    boxes_module.image_boxes = _no_batched_backward
                try:
                    t0 = time.perf_counter()
                    compute_boxes(model, job.plans, dataset, some, torch.device("cpu"),
                                  batch_size, workers)
                    box_times[variant].append(time.perf_counter() - t0)
                finally:
                    boxes_module.image_boxes = real

    fwd = n / statistics.median(times["forward"])
    atl = n / statistics.median(times["atlas"])
    print(f"{name:<12} {n:>6} {fwd:>12.1f} {atl:>10.1f} {atl / fwd:>7.2f}   "
          f"{len(entries)} entries over {len({e.index for e in entries})} images in "
          f"{boxes_s:.1f} s; {len(some)} entries: shared forward "
          f"{statistics.median(box_times['shared']):.1f} s, a forward per entry "
          f"{statistics.median(box_times['per_entry']):.1f} s")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="demo_shapes,resnet18")
    p.add_argument("--images", type=int, default=256)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--workers", type=int, default=default_workers())
    p.add_argument("--box-entries", type=int, default=512,
                   help="entries of the interleaved boxes comparison")
    args = p.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"{args.workers} loader workers, batch {args.batch_size}, medians of {args.rounds}")
    print(f"{'model':<12} {'images':>6} {'forward i/s':>12} {'atlas i/s':>10} {'ratio':>7}   "
          f"boxes pass (top 9, two layers)")
    for name in args.models.split(","):
        bench(name.strip(), args.images, args.rounds, args.batch_size, args.workers,
              args.box_entries)


if __name__ == "__main__":
    main()
