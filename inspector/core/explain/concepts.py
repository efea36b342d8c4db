"""Concepts: deep feature factorisation (Collins et al. 2018) of a layer's activations.

Per image (or a few): the (channels x positions) activations, shifted by each channel's
minimum so that they are non-negative, factorised by scikit-learn's NMF into K concepts:
W (channels x K), each a direction in channel space, and H (K x positions), each concept's
heatmap. The steps, the random init and seed 0 are pytorch-grad-cam's `dff` (its
`concepts` are W with the offset added back, as it returns them), so the same activations
and K give the same concepts and heatmaps; unlike it, the caller's array is not modified.

A concept's effect on the classes is the model's output when the layer's output is that
concept's vector at every position (exact for a global-average-pool head, where it is
pytorch-grad-cam's `computation_on_concepts`), for the layers where that has a meaning.

scikit-learn is an optional extra (`[concepts]`): ConceptsUnavailable says how to install it.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import torch

from inspector.core.explain.cam.targets import logits_of
from inspector.core.hookset import HookSet, ModelState
from inspector.core.models.base import LoadedModel
from inspector.core.tokens import NCHW, NHWC, detect_layout

INSTALL_HINT = "pip install 'network-inspector[concepts]'"


class ConceptsUnavailable(ImportError):
    """scikit-learn is missing: one sentence saying what to install."""

    def __init__(self) -> None:
        super().__init__(f"concepts need scikit-learn, which is not installed here: "
                         f"{INSTALL_HINT}")


def sklearn_decomposition():
    """sklearn.decomposition, imported only when a factorisation runs (it costs seconds)."""
    try:
        from sklearn import decomposition
    except ImportError:
        raise ConceptsUnavailable() from None
    return decomposition


@dataclass
class Concepts:
    concepts: np.ndarray  # (C, K) as pytorch-grad-cam returns them: W + each channel's offset
    heatmaps: np.ndarray  # (B, K, h, w): H, at the layer's resolution, not rescaled
    vectors: np.ndarray  # (K, C): each concept's unit direction (W's column, without offset)
    offset: np.ndarray  # (C,) each channel's minimum, subtracted before the factorisation
    error: float  # ||X - W H||_F / ||X||_F of the shifted activations
    iterations: int
    notes: list[str] = field(default_factory=list)


def dff(activations: np.ndarray, k: int, seed: int = 0) -> Concepts:
    """Concepts of (B, C, h, w) activations; all images' positions share the K concepts."""
    decomposition = sklearn_decomposition()
    acts = np.asarray(activations)
    if acts.ndim != 4:
        raise ValueError(f"concepts need (images, channels, h, w) activations, got {acts.shape}")
    b, c, h, w = acts.shape
    if not 1 <= k <= min(c, b * h * w):
        raise ValueError(f"K must be between 1 and {min(c, b * h * w)} for {c} channels at "
                         f"{b * h * w} positions, got {k}")
    a = acts.transpose(1, 0, 2, 3).reshape(c, -1).copy()
    a[np.isnan(a)] = 0
    offset = a.min(axis=-1)
    a = a - offset[:, None]
    nmf = decomposition.NMF(n_components=k, init="random", random_state=seed)
    notes = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        W = nmf.fit_transform(a)
    if any("converge" in str(x.message).lower() for x in caught):
        notes.append(f"the factorisation stopped at {nmf.max_iter} iterations before "
                     f"converging (tolerance {nmf.tol})")
    H = nmf.components_
    norm = np.linalg.norm(a)
    error = float(np.linalg.norm(a - W @ H) / norm) if norm > 0 else 0.0
    norms = np.linalg.norm(W, axis=0)
    vectors = (W / np.where(norms > 0, norms, 1.0)).T
    return Concepts(concepts=W + offset[:, None], heatmaps=H.reshape(k, b, h, w).transpose(
        1, 0, 2, 3), vectors=vectors.astype(np.float32), offset=offset, error=error,
        iterations=int(nmf.n_iter_), notes=notes)


def concept_logits(loaded: LoadedModel, layer: str, vectors: np.ndarray) -> np.ndarray | None:
    """(K, classes): the model's output with the layer's output replaced by each (C,) vector
    at every position; None where that has no meaning (a token layer, whose class token the
    patch tokens do not set, or a model that is not a classifier)."""
    if loaded.task != "classification" or not layer:
        return None
    model = loaded.model
    v = torch.as_tensor(np.asarray(vectors, np.float32), device=loaded.device)
    crop = tuple(loaded.preprocess.crop_size)
    refused: list[bool] = []

    def replace(_module, _args, output):
        if not isinstance(output, torch.Tensor):
            refused.append(True)
            return None
        if output.ndim == 2:
            return v.to(output.dtype)
        layout = detect_layout(tuple(output.shape), crop)
        if layout is None or layout.kind not in (NCHW, NHWC):
            refused.append(True)
            return None
        gh, gw = layout.grid
        if layout.kind == NCHW:
            return v[:, :, None, None].expand(len(v), v.shape[1], gh, gw).to(output.dtype)
        return v[:, None, None, :].expand(len(v), gh, gw, v.shape[1]).to(output.dtype)

    x = torch.zeros(len(v), 3, *crop, device=loaded.device)
    with torch.no_grad(), ModelState(model, training=False), HookSet() as hooks:
        hooks.forward(model.get_submodule(layer), replace)
        out = logits_of(model(x))
    if refused or out.ndim != 2:
        return None
    return out.float().cpu().numpy()


def top_classes(logits: np.ndarray, categories: list[str], n: int = 5) -> list[list[dict]]:
    """Per concept, its n classes by softmax probability: [{"index", "label", "p"}, ...]."""
    z = logits - logits.max(axis=1, keepdims=True)
    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    out = []
    for row in p:
        best = np.argsort(-row, kind="stable")[:n]
        out.append([{"index": int(i), "label": categories[i] if i < len(categories)
                     else f"class {i}", "p": float(row[i])} for i in best])
    return out


@dataclass
class ImageConcepts:
    """One image's concepts at a layer, for the window's Concepts view."""

    layer: str
    display: np.ndarray  # (H, W, 3) uint8: the model input's picture
    maps: np.ndarray  # (K, h, w): each concept's heatmap scaled to [0, 1] (grad-cam's way)
    result: Concepts
    classes: list[list[dict]] | None  # per concept its top classes (None: no class effect)


def image_concepts(loaded: LoadedModel, image, layer: str, k: int) -> ImageConcepts:
    """The concepts of one image (a path, a PIL image, a PreparedImage) at `layer`."""
    from PIL import Image

    from inspector.core.inputs.images import as_rgb, load_image
    from inspector.core.inputs.preprocess import PreparedImage
    from inspector.core.tokens import spatialize

    if isinstance(image, PreparedImage):
        image = image.image
    img = image if isinstance(image, Image.Image) else load_image(image)
    prepared = loaded.preprocess.prepare(img if img.mode == "RGB" else as_rgb(img))
    kept: list[torch.Tensor] = []

    def hook(_module, _args, output):
        if isinstance(output, torch.Tensor):
            kept[:] = [output.detach()]

    with torch.no_grad(), ModelState(loaded.model, training=False), HookSet() as hooks:
        hooks.forward(loaded.model.get_submodule(layer), hook)
        x = prepared.x[None].to(loaded.device)
        loaded.model(list(x) if loaded.task == "detection" else x)
    if not kept:
        raise ValueError(f"'{layer}' returned no single tensor to factorise")
    acts = kept[0]
    acts = acts[:, :, None, None] if acts.ndim == 2 else spatialize(
        acts, tuple(loaded.preprocess.crop_size), layer, batch_size=1)[0]
    result = dff(acts.float().cpu().numpy(), k)
    maps = result.heatmaps[0]
    lo = maps.min(axis=(1, 2), keepdims=True)
    maps = maps - lo
    maps = maps / (1e-7 + maps.max(axis=(1, 2), keepdims=True))  # grad-cam's scale_cam_image
    logits = concept_logits(loaded, layer, result.concepts.T)
    classes = top_classes(logits, loaded.categories) if logits is not None else None
    return ImageConcepts(layer, np.asarray(prepared.display), maps, result, classes)
