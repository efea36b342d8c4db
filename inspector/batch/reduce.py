"""Running sums and exact per-channel top-k: what is kept of a run, whatever its length.

A `Reduction` holds, per layer, the sum over images of each channel's spatial mean, how many
images had a maximum > 0, and per channel the k best (value, image index, position) so far;
for the class maps, the sum of the Grad-CAMs per predicted class and their count; and the
images that failed. Its size depends on the channels and k, never on the number of images.

Batches fold in with `add`, whole reductions with `merge` (a shard into the total, or one
engine's pieces into another): both go through `merge_topk`, so every engine ranks alike.
Ranking is by value, descending; equal values go to the image that comes first in the job's
sorted file list (its index). torch.topk leaves the order of equal values open, so the merge
sorts instead: by index, then stably by value; (C, k + batch) values per layer, on the device.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from inspector.batch.probe import BatchStats


@dataclass
class LayerReduction:
    sum_mean: torch.Tensor  # (C,) float64
    positive: torch.Tensor  # (C,) int64: images whose maximum is > 0
    top_value: torch.Tensor  # (C, k') float32, k' <= k, descending
    top_index: torch.Tensor  # (C, k') int64
    top_pos: torch.Tensor  # (C, k') int64

    @classmethod
    def empty(cls, channels: int, device: torch.device | str = "cpu") -> LayerReduction:
        return cls(
            sum_mean=torch.zeros(channels, dtype=torch.float64, device=device),
            positive=torch.zeros(channels, dtype=torch.int64, device=device),
            top_value=torch.empty(channels, 0, dtype=torch.float32, device=device),
            top_index=torch.empty(channels, 0, dtype=torch.int64, device=device),
            top_pos=torch.empty(channels, 0, dtype=torch.int64, device=device),
        )

    def to(self, device) -> LayerReduction:
        return LayerReduction(*(t.to(device) for t in self.tensors()))

    def tensors(self) -> tuple[torch.Tensor, ...]:
        return self.sum_mean, self.positive, self.top_value, self.top_index, self.top_pos


def merge_topk(
    value: torch.Tensor, index: torch.Tensor, pos: torch.Tensor, k: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The k best of (C, n) candidates per row: largest value first, ties to the lower index.
    NaN ranks last (a NaN maximum says nothing about what a channel responds to)."""
    value = torch.nan_to_num(value, nan=float("-inf"))
    by_index = torch.argsort(index, dim=1, stable=True)
    value, index, pos = (t.gather(1, by_index) for t in (value, index, pos))
    keep = torch.sort(value, dim=1, descending=True, stable=True).indices[:, :k]
    return value.gather(1, keep), index.gather(1, keep), pos.gather(1, keep)


@dataclass
class Reduction:
    k: int
    layers: dict[str, LayerReduction]
    images: int = 0
    failed: list[tuple[int, str]] = field(default_factory=list)
    cam_sum: torch.Tensor | None = None  # (classes, h, w) float64, on the CPU
    cam_count: torch.Tensor | None = None  # (classes,) int64

    @classmethod
    def empty(cls, k: int, channels: dict[str, int], device="cpu",
              cam_shape: tuple[int, int, int] | None = None) -> Reduction:
        r = cls(k, {n: LayerReduction.empty(c, device) for n, c in channels.items()})
        if cam_shape is not None:
            r.cam_sum = torch.zeros(cam_shape, dtype=torch.float64)
            r.cam_count = torch.zeros(cam_shape[0], dtype=torch.int64)
        return r

    def add(self, indices: torch.Tensor, stats: BatchStats) -> None:
        """Fold in a batch: `indices` (B,) are the images' places in the job's file list."""
        if len(indices) == 0:
            return
        for name, layer in self.layers.items():
            dev = layer.top_value.device
            maxima = stats.maxima[name].to(dev)
            layer.sum_mean += stats.means[name].to(dev).sum(dim=0, dtype=torch.float64)
            layer.positive += (maxima > 0).sum(dim=0)
            c = maxima.shape[1]
            idx = indices.to(dev)[None, :].expand(c, -1)
            layer.top_value, layer.top_index, layer.top_pos = merge_topk(
                torch.cat([layer.top_value, maxima.T], dim=1),
                torch.cat([layer.top_index, idx], dim=1),
                torch.cat([layer.top_pos, stats.argmax[name].to(dev).T], dim=1),
                self.k,
            )
        self.images += len(indices)
        if self.cam_sum is not None and stats.cams is not None:
            classes = stats.predicted.cpu()
            inside = classes < self.cam_sum.shape[0]
            self.cam_sum.index_add_(0, classes[inside], stats.cams.cpu()[inside].double())
            self.cam_count += torch.bincount(classes[inside], minlength=self.cam_sum.shape[0])

    def merge(self, other: Reduction) -> None:
        """Fold in another reduction over different images (another shard)."""
        for name, layer in self.layers.items():
            theirs = other.layers[name].to(layer.top_value.device)
            layer.sum_mean += theirs.sum_mean
            layer.positive += theirs.positive
            layer.top_value, layer.top_index, layer.top_pos = merge_topk(
                torch.cat([layer.top_value, theirs.top_value], dim=1),
                torch.cat([layer.top_index, theirs.top_index], dim=1),
                torch.cat([layer.top_pos, theirs.top_pos], dim=1),
                self.k,
            )
        self.images += other.images
        self.failed.extend(other.failed)
        if self.cam_sum is not None and other.cam_sum is not None:
            self.cam_sum += other.cam_sum
            self.cam_count += other.cam_count

    # -- on disk (torch.save of plain containers: loads with weights_only=True) -------------------

    def state(self) -> dict:
        return {
            "k": self.k,
            "images": self.images,
            "failed": [[i, e] for i, e in self.failed],
            "layers": {n: [t.cpu() for t in layer.tensors()] for n, layer in self.layers.items()},
            "cam_sum": self.cam_sum,
            "cam_count": self.cam_count,
        }

    @classmethod
    def from_state(cls, state: dict) -> Reduction:
        return cls(
            k=int(state["k"]),
            layers={n: LayerReduction(*ts) for n, ts in state["layers"].items()},
            images=int(state["images"]),
            failed=[(int(i), str(e)) for i, e in state["failed"]],
            cam_sum=state["cam_sum"],
            cam_count=state["cam_count"],
        )
