"""Train the demo model: ``network-inspector train-demo --out DIR`` or
``python -m inspector.demo.train --out DIR``.

The defaults reproduce the shipped weights in ``resources/demo``. On 2 CPU cores it first
draws a cache of images (both cores, in DataLoader workers), then trains on it with the
eight flips and quarter-turns of each image as augmentation: drawing is about half as
costly as a training step per image, so reusing drawn images beats drawing fresh ones.

Training target: the main shape's class. When a distractor is present, a share
``distractor_weight`` of the target probability goes to the distractor's class, so the
model learns to see the smaller shape too (its class is the runner-up, and its Grad-CAM
points at it) while the main shape stays the arg-max.
"""

from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import asdict
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from torch.utils.data import DataLoader
from tqdm import tqdm

from inspector.demo import CONFIG_NAME, WEIGHTS_NAME
from inspector.demo.evaluate import MEAN, STD, accuracy, normalize
from inspector.demo.model import ARCH, CAM_LAYER, build_model, count_parameters
from inspector.demo.shapes import CLASSES, IMAGE_SIZE, ShapesDataset
from inspector.demo.train_options import TrainConfig, parse_args


def draw_cache(dataset: ShapesDataset, workers: int, progress: bool) -> dict[str, torch.Tensor]:
    """All items of ``dataset`` stacked: images (N, 3, H, W) uint8, labels, distractors."""
    n = len(dataset)
    images = torch.empty((n, 3, IMAGE_SIZE, IMAGE_SIZE), dtype=torch.uint8)
    labels = torch.empty(n, dtype=torch.long)
    distractors = torch.empty(n, dtype=torch.long)
    loader = DataLoader(dataset, batch_size=250, num_workers=workers, shuffle=False)
    i = 0
    with tqdm(total=n, desc="drawing", unit="img", disable=not progress, leave=False) as bar:
        for batch in loader:
            k = len(batch["label"])
            images[i : i + k] = batch["image"]
            labels[i : i + k] = batch["label"]
            distractors[i : i + k] = batch["distractor"]
            i += k
            bar.update(k)
    return {"images": images, "labels": labels, "distractors": distractors}


def _soft_targets(labels, distractors, n_classes: int, weight: float) -> torch.Tensor:
    t = F.one_hot(labels, n_classes).float()
    has = distractors >= 0
    if weight > 0 and has.any():
        t[has] *= 1 - weight
        t[has, distractors[has]] += weight
    return t


def _dihedral(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """Each image turned by a random quarter-turn and maybe mirrored (labels unchanged)."""
    out = torch.empty_like(x)
    k = torch.randint(0, 8, (len(x),), generator=g)
    for code in range(8):
        sel = (k == code).nonzero().flatten()
        if len(sel) == 0:
            continue
        y = torch.rot90(x[sel], code % 4, dims=(2, 3))
        out[sel] = torch.flip(y, dims=(3,)) if code >= 4 else y
    return out


def _center_stem(model) -> None:
    """Keep the stem's kernels zero-mean, i.e. blind to flat colour (see model.py)."""
    with torch.no_grad():
        w = model.stem.conv.weight
        w -= w.mean(dim=(2, 3), keepdim=True)


def _lr_at(step: int, total: int, peak: float) -> float:
    """Linear warm-up over 5% of the steps, then a cosine decay to zero."""
    warm = max(1, total // 20)
    if step < warm:
        return peak * (step + 1) / warm
    return peak * 0.5 * (1 + math.cos(math.pi * (step - warm) / max(1, total - warm)))


def train(out_dir, steps: int | None = None, seed: int = 0, progress: bool = True,
          config: TrainConfig | None = None) -> dict:  # fmt: skip
    """Train the demo CNN and write ``shapes_cnn.safetensors`` and ``shapes_cnn.json``.

    Returns metrics: ``losses`` (one per step), ``accuracy`` (on ``val_images`` images of
    data set seed + 1), ``seconds``, ``parameters``.
    """
    cfg = config or TrainConfig()
    cfg.seed = seed
    if steps is not None:
        cfg.steps = int(steps)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()

    torch.manual_seed(cfg.seed)
    gen = torch.Generator().manual_seed(cfg.seed)
    cache = draw_cache(ShapesDataset(cfg.images, cfg.seed), cfg.workers, progress)
    n_classes = len(CLASSES)
    model = build_model(n_classes, cfg.widths).to(memory_format=torch.channels_last)
    decay = [p for p in model.parameters() if p.ndim > 1]
    no_decay = [p for p in model.parameters() if p.ndim <= 1]
    opt = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": cfg.weight_decay},
            {"params": no_decay, "weight_decay": 0},
        ],
        lr=cfg.lr,
    )
    losses: list[float] = []
    model.train()
    order = torch.randperm(cfg.images, generator=gen)
    pos = 0
    bar = tqdm(range(cfg.steps), desc="training", unit="step", disable=not progress)
    for step in bar:
        if pos + cfg.batch_size > cfg.images:
            order, pos = torch.randperm(cfg.images, generator=gen), 0
        idx = order[pos : pos + cfg.batch_size]
        pos += cfg.batch_size
        x = cache["images"][idx]
        x = normalize(_dihedral(x, gen) if cfg.augment else x)
        x = x.contiguous(memory_format=torch.channels_last)
        target = _soft_targets(
            cache["labels"][idx], cache["distractors"][idx], n_classes, cfg.distractor_weight
        )
        for group in opt.param_groups:
            group["lr"] = _lr_at(step, cfg.steps, cfg.lr)
        loss = F.cross_entropy(model(x), target)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if cfg.zero_mean_stem:
            _center_stem(model)
        losses.append(loss.item())
        if step % 10 == 0:
            bar.set_postfix(loss=f"{sum(losses[-10:]) / len(losses[-10:]):.3f}")
    bar.close()

    model.eval()
    model = model.to(memory_format=torch.contiguous_format)
    acc = accuracy(model, ShapesDataset(cfg.val_images, cfg.seed + 1)) if cfg.val_images else None
    seconds = time.perf_counter() - started
    _save(model, out, cfg, acc, seconds)
    return {"losses": losses, "accuracy": acc, "seconds": seconds,
            "parameters": count_parameters(model), "out_dir": str(out)}  # fmt: skip


def _save(model: torch.nn.Module, out: Path, cfg: TrainConfig, acc, seconds: float) -> None:
    """The weights (safetensors) and the model card the app loads them with."""
    state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(out / WEIGHTS_NAME), metadata={"arch": ARCH})
    meta = {
        "name": "demo_shapes",
        "description": "Small CNN trained on drawn shapes (inspector.demo); label = the larger shape",
        "classes": list(CLASSES),
        "preprocess": {
            "crop_size": [IMAGE_SIZE, IMAGE_SIZE],
            # Shorter side to 128 first, so a photo or a large drawing is seen whole;
            # the shipped 128 x 128 samples pass through unchanged.
            "resize_size": IMAGE_SIZE,
            "mean": list(MEAN),
            "std": list(STD),
            "interpolation": "bilinear",
        },
        "arch": {"name": ARCH, "widths": list(cfg.widths), "cam_layer": CAM_LAYER},
        "trained": {
            "seed": cfg.seed,
            "steps": cfg.steps,
            "accuracy": acc,
            "seconds": round(seconds, 1),
            "config": asdict(cfg),
            "torch": torch.__version__,
        },
    }
    (out / CONFIG_NAME).write_text(json.dumps(meta, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cfg = TrainConfig(images=args.images, workers=args.workers)
    m = train(args.out, steps=args.steps, seed=args.seed, progress=not args.no_progress, config=cfg)
    print(f"accuracy {m['accuracy']:.4f} on {cfg.val_images} fresh images (data set seed "
          f"{args.seed + 1}); {m['seconds']:.0f} s; wrote {args.out / WEIGHTS_NAME} "
          f"and {args.out / CONFIG_NAME}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
