"""The two passes of `network-inspector concepts` over images: the layer's activations of a
batch, the fit sample's rows, and a shard's codes (the same code on this machine and on a
Ray actor, so that both engines give the same numbers)."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from inspector.batch.inputs import ImageFiles, Source, VideoFrames, make_loader, read_item
from inspector.batch.probe import LayerPlan
from inspector.core.explain.concept_folder import MAX_ROWS, Coder, FolderFit, sample_rows
from inspector.core.hookset import HookSet, ModelState, tensor_leaves
from inspector.core.inputs.preprocess import Preprocess


def activations(model: nn.Module, plan: LayerPlan, x: torch.Tensor) -> np.ndarray:
    """(n, C, positions) float32 of the layer's last call, as LayerPlan.view reads it."""
    kept: list[torch.Tensor] = []

    def hook(_module, _args, output):
        kept[:] = [t for _, t in tensor_leaves(output)][:1]

    with torch.no_grad(), ModelState(model, training=False), HookSet() as hooks:
        hooks.forward(model.get_submodule(plan.name), hook)
        model(x)
    if not kept:
        raise ValueError(f"'{plan.name}' returned no tensor")
    return plan.view(kept[0]).float().cpu().numpy()


def fit_sample(model: nn.Module, plan: LayerPlan, device: torch.device, sources: list[Source],
               preprocess: Preprocess, indices: list[int], seed: int, batch_size: int,
               workers: int, every: int = 1, on_images=lambda n: None) -> np.ndarray:
    """The fit's rows: a seeded random subset of the positions of each sample image, in
    index order, MAX_ROWS at most in all."""
    rng = np.random.default_rng(seed)
    dataset = ImageFiles(sources, preprocess, every=every)
    chunks = [indices[i:i + batch_size] for i in range(0, len(indices), batch_size)]
    rows: list[np.ndarray] = []
    per_image = None
    for batch in make_loader(dataset, chunks, workers):
        if batch.x is not None:
            acts = activations(model, plan, batch.x.to(device))
            if per_image is None:  # a quarter of the positions, within the bound
                per_image = max(1, min(-(-acts.shape[2] // 4), MAX_ROWS // max(1, len(indices))))
            rows.append(sample_rows(acts, rng, per_image))
        on_images(len(batch))
    dataset.close()
    return np.concatenate(rows) if rows else np.zeros((0, plan.channels), np.float32)


def code_batch(coder: Coder, model: nn.Module, plan: LayerPlan, x: torch.Tensor,
               indices: list[int], result: dict) -> None:
    """Code a batch of images into a shard's `result` (see shard_result)."""
    for i, codes in zip(indices, coder.code(activations(model, plan, x))):
        result["images"][str(i)] = {"max": codes.maximum.tolist(),
                                    "pos": codes.position.tolist(),
                                    "mean": codes.mean.tolist()}


def shard_result() -> dict:
    return {"images": {}, "failed": []}


def code_shard_items(model: nn.Module, plan: LayerPlan, device: torch.device, fitted: FolderFit,
                     preprocess: Preprocess, items: list[tuple[int, Source]],
                     batch_size: int, every: int = 1) -> dict:
    """One shard's codes from its (index, source) list, decoded here (a Ray actor)."""
    coder, result = Coder(fitted), shard_result()
    with VideoFrames(every) as videos:
        decoded = [read_item(s, i, preprocess, videos=videos) for i, s in items]
    for start in range(0, len(decoded), batch_size):
        part = decoded[start:start + batch_size]
        ok = [it for it in part if it.error is None]
        result["failed"] += [[it.index, it.error] for it in part if it.error is not None]
        if ok:
            code_batch(coder, model, plan, torch.stack([it.x for it in ok]).to(device),
                       [it.index for it in ok], result)
    result["sums"] = coder.sums()
    return result
