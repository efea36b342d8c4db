"""What a statistics pass needs to know, in one picklable value (it travels to Ray actors)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from inspector.batch.inputs import Source
from inspector.batch.probe import LayerPlan
from inspector.batch.reduce import Reduction
from inspector.core.inputs.preprocess import Preprocess


@dataclass(frozen=True)
class StatsJob:
    # inputs.list_sources' order (image files sorted, then videos' frames); an image's index
    # in it is its identity in the job
    paths: tuple[Source, ...]
    preprocess: Preprocess
    plans: dict[str, LayerPlan]
    cam_layer: str | None  # None: no class maps (the model has no layer a CAM can read)
    cam_shape: tuple[int, int, int] | None  # (classes, h, w) of the class-map sums
    top: int
    shard_size: int
    batch_size: int
    every: int = 1  # the stride of the videos' frames: what their decoders step by

    def empty(self, device: torch.device | str = "cpu") -> Reduction:
        channels = {name: plan.channels for name, plan in self.plans.items()}
        return Reduction.empty(self.top, channels, device, self.cam_shape)

    def shard_of(self, index: int) -> int:
        return index // self.shard_size
