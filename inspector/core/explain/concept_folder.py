"""Concepts shared by a whole folder: fit on a sample, then code every image.

pytorch-grad-cam's orientation (channels as the NMF's samples) cannot be streamed, so here
the rows are positions (of all images) and the features channels: X (rows, C) ~ H (rows, K)
W (K, C), the same Frobenius problem transposed; W's rows are the concepts.

1. Fit: the positions of a sample of the images (a seeded random subset of each image's
   positions, `max_rows` at most, so memory is bounded whatever the folder's size) are
   shifted by each channel's minimum over the sample (0 for a post-ReLU layer) and
   factorised by scikit-learn's MiniBatchNMF (init nndsvda, random_state = the seed).
2. Codes: every image's positions, shifted and clipped at 0, coded with W fixed
   (scikit-learn's non_negative_factorization, update_H=False); per concept its maximum
   over the image's positions, where, its mean; and summed exactly over all rows, ||X - HW||^2, ||X||^2 and each concept's
   ||H_k W_k||^2: the reconstruction error and the shares `concepts.json` reports.

The fit happens once, in one process, in index order: the concepts depend on the seed and
the images, never on which machine coded which image.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from inspector.core.explain.concepts import sklearn_decomposition

MAX_ROWS = 32768  # positions in the fit: 32768 x 2048 channels x 4 bytes = 256 MiB at most
FIT_BATCH = 1024
TRANSFORM_ITER = 200  # scikit-learn's default


def sample_rows(acts: np.ndarray, rng: np.random.Generator, per_image: int) -> np.ndarray:
    """(n * per_image, C): up to per_image random positions of each of (n, C, P) activations."""
    n, c, p = acts.shape
    keep = min(p, per_image)
    picks = [acts[i][:, rng.permutation(p)[:keep]].T for i in range(n)]
    return np.concatenate(picks).astype(np.float32) if picks else np.zeros((0, c), np.float32)


@dataclass
class FolderFit:
    """The fitted concepts: W (K, C) and the per-channel offset (C,)."""

    components: np.ndarray
    offset: np.ndarray
    fit_rows: int
    fit_error: float  # on the sample, relative Frobenius
    seed: int


def fit(rows: np.ndarray, k: int, seed: int) -> FolderFit:
    """MiniBatchNMF of the sample `rows` (n, C) into k concepts."""
    decomposition = sklearn_decomposition()
    n, c = rows.shape
    if not 1 <= k <= min(c, n):
        raise ValueError(f"K must be between 1 and {min(c, n)} for {c} channels and a sample "
                         f"of {n} positions, got {k}")
    offset = rows.min(axis=0)
    x = rows - offset
    nmf = decomposition.MiniBatchNMF(n_components=k, init="nndsvda", random_state=seed,
                                     batch_size=FIT_BATCH)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning: the error is measured below
        h = nmf.fit_transform(x)
    norm = float(np.linalg.norm(x))
    error = float(np.linalg.norm(x - h @ nmf.components_) / norm) if norm else 0.0
    return FolderFit(nmf.components_.astype(np.float32), offset.astype(np.float32), n, error,
                     seed)


@dataclass
class ImageCodes:
    """One image's codes per concept: maximum, its flat position, mean; (K,) each."""

    maximum: np.ndarray
    position: np.ndarray
    mean: np.ndarray


class Coder:
    """Codes images with the fitted W fixed, and sums the error terms over all rows."""

    def __init__(self, fitted: FolderFit) -> None:
        self.fitted = fitted
        self.decomposition = sklearn_decomposition()
        k = fitted.components.shape[0]
        self.residual = 0.0  # sum ||x - h W||^2
        self.total = 0.0  # sum ||x||^2
        self.share = np.zeros(k, np.float64)  # per concept, sum ||h_k W_k||^2
        self.rows = 0

    def code(self, acts: np.ndarray) -> list[ImageCodes]:
        """(n, C, P) activations of n images -> their codes; the sums grow by their rows."""
        n, c, p = acts.shape
        x = np.clip(acts.transpose(0, 2, 1).reshape(-1, c) - self.fitted.offset, 0, None)
        x = x.astype(np.float32)
        w = self.fitted.components
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # ConvergenceWarning: the error is summed below
            # The public way to code rows with the components fixed: update_H=False keeps W
            # (sklearn's H) and starts the codes from a constant, so they are deterministic.
            h, _, _ = self.decomposition.non_negative_factorization(
                x, H=w, n_components=w.shape[0], init="custom", update_H=False,
                solver="cd", max_iter=TRANSFORM_ITER)
        h = h.astype(np.float32)
        # Element-wise in float32, summed in float64: exact enough, and the error terms
        # cost less than the coding itself.
        self.residual += float(np.square(x - h @ w).sum(dtype=np.float64))
        self.total += float(np.square(x).sum(dtype=np.float64))
        self.share += (h.astype(np.float64) ** 2).sum(axis=0) * (w.astype(np.float64) ** 2).sum(1)
        self.rows += len(x)
        per_image = h.reshape(n, p, -1)
        return [ImageCodes(m.max(axis=0), m.argmax(axis=0), m.mean(axis=0)) for m in per_image]

    def sums(self) -> dict:
        return {"residual": self.residual, "total": self.total, "share": self.share.tolist(),
                "rows": self.rows}
