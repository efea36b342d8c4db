"""`train-demo`'s options and the trainer's settings, without torch: `--help` answers at
once, and a bad option is refused before torch and the trainer are imported."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path


@dataclass
class TrainConfig:
    seed: int = 0  # training images are data set `seed`; validation is `seed + 1`
    images: int = 16000  # drawn once, reused with flips and quarter-turns
    steps: int = 1000
    batch_size: int = 64
    lr: float = 2e-3
    weight_decay: float = 5e-4
    distractor_weight: float = 0.25
    val_images: int = 1000
    widths: tuple[int, int, int, int] = (16, 32, 64, 96)
    zero_mean_stem: bool = True
    augment: bool = True  # random flips and quarter-turns
    workers: int = 2  # processes drawing the cache; 0 draws in this process


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="network-inspector train-demo",
        description="Train the bundled demo model (drawn shapes) on the CPU. With the "
                    "defaults it reproduces the shipped weights and takes about 20 min on "
                    "2 CPU cores (docs/cli.md#train-demo).",
    )
    p.add_argument("--out", required=True, type=Path, help="folder for the weights and JSON")
    p.add_argument("--steps", type=int, default=TrainConfig.steps,
                   help=f"training steps of {TrainConfig.batch_size} images each "
                        f"(default {TrainConfig.steps})")
    p.add_argument("--seed", type=int, default=TrainConfig.seed,
                   help="seed of the drawn training images and of the weights; validation "
                        f"uses seed + 1 (default {TrainConfig.seed})")
    p.add_argument("--images", type=int, default=TrainConfig.images,
                   help=f"images drawn for the training cache (default {TrainConfig.images})")
    p.add_argument("--workers", type=int, default=TrainConfig.workers,
                   help="processes drawing the cache; 0 draws in this process "
                        f"(default {TrainConfig.workers})")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    return p


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return build_parser().parse_args(argv)
