"""Linear CKA between every layer of one model and every layer of another, over the same
images (Kornblith, Norouzi, Lee & Hinton 2019, "Similarity of neural network representations
revisited").

X (n x p) holds one layer's outputs over n images, one flattened row per image; K = XX' is
its Gram matrix, L = YY' the other layer's, H = I - 11'/n the centring matrix. Then

    CKA(K, L) = HSIC(K, L) / sqrt(HSIC(K, K) HSIC(L, L)) = <HKH, HLH> / (|HKH| |HLH|).

A layer's Gram is what the forward hook keeps (`gram`): n x n, whatever the layer's width,
so no activation outlives its forward. It is one float32 GEMM on the raw output, float64
from there on (centring first would cost about twice the GEMM on the CPU, and the raw GEMM
agrees with float64 to about 1e-7 on real activations).

Two estimators, which are NOT interchangeable (say which one a number comes from):

- `ExactCKA`, the biased estimator above, over all N images. The images go in blocks; a
  forward of the images of two blocks [I; J] gives the Gram blocks K_II, K_IJ, K_JJ, and the
  accumulator keeps per layer the row sums r of the whole K (N numbers) and per layer pair
  the sum of <K_blk, L_blk> over the blocks (an off-diagonal block counts twice: it stands
  for K_JI too; each diagonal block is counted once, by the forward the plan names). Then
  <HKH, HLH> = <K, L> - (2/N) r_K.r_L + (1'K1)(1'L1)/N^2. One block is one forward of all.
  With few images and wide layers it is inflated (about 0.84 against 0.18 debiased for 64
  images of 3,000 features): it converges from above as N grows.
- `MinibatchCKA`, Nguyen, Raghu & Kornblith 2021 ("Do wide and deep networks learn the same
  things?", eq. 3): the unbiased HSIC_1 of Song et al. 2012 summed over minibatches before
  the ratio, CKA = sum HSIC_1(K, L) / sqrt(sum HSIC_1(K, K) sum HSIC_1(L, L)). Each
  minibatch counts once (its HSIC_1 is divided by n(n - 3)); the official code sums
  <U(K), U(L)> without that factor, which weighs a short last minibatch less, and agrees
  when every minibatch has the same size. Minibatches must be random draws (a class-sorted
  folder would make each one a single class): the caller cuts a seeded permutation.

Both keep a few float64 arrays whose merge is addition (`state`, `from_state`, `merge`), so
shards, a resumed run and Ray workers add up to the same value, in any grouping.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

EXACT = "exact"
MINIBATCH = "minibatch"
ESTIMATORS = (EXACT, MINIBATCH)
MIN_MINIBATCH = 4  # HSIC_1 divides by n(n - 3) and (n - 1)(n - 2)
# Two centred images are one difference vector on each side, so every layer pair scores 1
# (one image: 0/0); three is the fewest whose CKA says anything.
MIN_IMAGES = 3


def gram(t: torch.Tensor) -> torch.Tensor:
    """The (n, n) float64 Gram matrix of a batch of n outputs, each flattened: one GEMM in
    float32 (float64 input stays float64; half precision is upcast first)."""
    x = t.detach().reshape(t.shape[0], -1)
    if x.dtype != torch.float64:
        x = x.float()
    return (x @ x.T).double()


def centre(k: torch.Tensor) -> torch.Tensor:
    """HKH: the Gram matrix of the features centred over the images."""
    return k - k.mean(0, keepdim=True) - k.mean(1, keepdim=True) + k.mean()


def cka(k: torch.Tensor, l: torch.Tensor) -> float:  # noqa: E741 (the paper's letter)
    """Exact linear CKA of two Gram matrices over the same images; nan when a side has no
    variance."""
    kc, lc = centre(k.double()), centre(l.double())
    den = float(kc.norm() * lc.norm())
    return float((kc * lc).sum()) / den if den > 0 else math.nan


def hsic1(k: torch.Tensor, l: torch.Tensor) -> float:  # noqa: E741
    """Song et al.'s unbiased HSIC_1 of two Gram matrices (n >= 4), as Nguyen et al. eq. 3."""
    ka, la = _off_diagonal(k.double()[None]), _off_diagonal(l.double()[None])
    n = k.shape[0]
    return float(_hsic1_pairs(*_parts(ka), *_parts(la), n)[0, 0])


def ratio(xy: torch.Tensor, xx: torch.Tensor, yy: torch.Tensor) -> torch.Tensor:
    """xy / sqrt(xx yy'), nan where a layer has no (or, with HSIC_1, negative) variance."""
    den = torch.sqrt(torch.outer(xx, yy).clamp_min(0))
    return torch.where(den > 0, xy / den.clamp_min(1e-300), torch.full_like(xy, math.nan))


def _stack(grams: Sequence[torch.Tensor]) -> torch.Tensor:
    return torch.stack([g.double() for g in grams])


def _off_diagonal(k: torch.Tensor) -> torch.Tensor:
    k = k.clone()
    k.diagonal(dim1=1, dim2=2).zero_()
    return k


def _parts(k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(flattened K~, its row sums K~1, 1'K~1) per layer of a (L, n, n) stack."""
    rows = k.sum(2)
    return k.reshape(k.shape[0], -1), rows, rows.sum(1)


def _hsic1_pairs(fa, ra, sa, fb, rb, sb, n: int) -> torch.Tensor:
    """HSIC_1 of every layer of one side with every layer of the other: (La, Lb)."""
    tr, mid, rr = fa @ fb.T, torch.outer(sa, sb), ra @ rb.T
    return (tr + mid / ((n - 1) * (n - 2)) - 2.0 / (n - 2) * rr) / (n * (n - 3))


def _hsic1_self(f, r, s, n: int) -> torch.Tensor:
    """HSIC_1(K_i, K_i) of each layer: (L,)."""
    tr, mid, rr = (f * f).sum(1), s * s, (r * r).sum(1)
    return (tr + mid / ((n - 1) * (n - 2)) - 2.0 / (n - 2) * rr) / (n * (n - 3))


class MinibatchCKA:
    """Sums of HSIC_1 over minibatches for every pair of layers (see the module docstring):
    La x Lb + La + Lb float64 numbers, whatever the number of images."""

    def __init__(self, layers_a: int, layers_b: int) -> None:
        self.xy = torch.zeros(layers_a, layers_b, dtype=torch.float64)
        self.xx = torch.zeros(layers_a, dtype=torch.float64)
        self.yy = torch.zeros(layers_b, dtype=torch.float64)
        self.batches = 0
        self.images = 0

    def add(self, grams_a: Sequence[torch.Tensor], grams_b: Sequence[torch.Tensor] | None = None
            ) -> None:
        """One minibatch: the Gram of each layer of A, and of B (None: B is A, the same Grams)."""
        n = grams_a[0].shape[0]
        if n < MIN_MINIBATCH:
            raise ValueError(f"a minibatch needs at least {MIN_MINIBATCH} images, got {n}")
        pa = _parts(_off_diagonal(_stack(grams_a)))
        pb = pa if grams_b is None else _parts(_off_diagonal(_stack(grams_b)))
        self.xy += _hsic1_pairs(*pa, *pb, n).cpu()
        self.xx += _hsic1_self(*pa, n).cpu()
        self.yy += _hsic1_self(*pb, n).cpu()
        self.batches += 1
        self.images += n

    def merge(self, other: MinibatchCKA) -> None:
        self.xy += other.xy
        self.xx += other.xx
        self.yy += other.yy
        self.batches += other.batches
        self.images += other.images

    def value(self) -> torch.Tensor:
        """(La, Lb) CKA; nan for a layer without variance. Slightly below 0 is possible."""
        return ratio(self.xy, self.xx, self.yy)

    def state(self) -> dict[str, torch.Tensor]:
        return {"xy": self.xy, "xx": self.xx, "yy": self.yy,
                "counts": torch.tensor([self.batches, self.images], dtype=torch.int64)}

    @classmethod
    def from_state(cls, state: dict[str, torch.Tensor]) -> MinibatchCKA:
        out = cls(*state["xy"].shape)
        out.xy, out.xx, out.yy = (state[k].double().clone() for k in ("xy", "xx", "yy"))
        out.batches, out.images = (int(v) for v in state["counts"])
        return out


class ExactCKA:
    """The exact (biased) estimator over N images seen in blocks (see the module docstring):
    per layer pair the sum of <K, L> over blocks, per layer its row sums over all N images;
    La x Lb + (La + Lb)(N + 1) float64 numbers."""

    def __init__(self, layers_a: int, layers_b: int, images: int) -> None:
        self.n_images = images
        self.kl = torch.zeros(layers_a, layers_b, dtype=torch.float64)
        self.kk = torch.zeros(layers_a, dtype=torch.float64)
        self.ll = torch.zeros(layers_b, dtype=torch.float64)
        self.rows_a = torch.zeros(layers_a, images, dtype=torch.float64)
        self.rows_b = torch.zeros(layers_b, images, dtype=torch.float64)
        self.diagonal = torch.zeros(images, dtype=torch.int64)  # diagonal blocks counted
        self.seen = torch.zeros(images, dtype=torch.bool)  # in any block

    def add(self, index: torch.Tensor, first: torch.Tensor, grams_a: Sequence[torch.Tensor],
            grams_b: Sequence[torch.Tensor] | None = None, diagonal: tuple[bool, bool] = (True, True),
            cross: bool = False) -> None:
        """One forward's Grams. `index`: each row's image in 0..N-1; `first`: which rows are
        the first block's (the others are the second's). `diagonal`: whether this forward
        counts the first / second block's diagonal block; `cross`: whether it counts the
        block between them (twice: K_IJ and K_JI). A forward of one block: all rows first."""
        ka = _stack(grams_a)
        kb = ka if grams_b is None else _stack(grams_b)
        index = index.to(torch.int64).cpu()
        first = first.to(torch.bool).cpu()
        sides = (first, ~first)
        for side, counted in zip(sides, diagonal, strict=True):
            rows = torch.nonzero(side).flatten()
            if counted and rows.numel():
                self._block(index[rows], index[rows], ka[:, rows][:, :, rows],
                            kb[:, rows][:, :, rows], 1.0)
                self.diagonal[index[rows]] += 1
        i, j = torch.nonzero(sides[0]).flatten(), torch.nonzero(sides[1]).flatten()
        if cross and i.numel() and j.numel():
            self._block(index[i], index[j], ka[:, i][:, :, j], kb[:, i][:, :, j], 2.0)
        self.seen[index] = True

    def _block(self, rows, cols, ka, kb, weight: float) -> None:
        fa, fb = ka.reshape(ka.shape[0], -1), kb.reshape(kb.shape[0], -1)
        self.kl += weight * (fa @ fb.T).cpu()
        self.kk += weight * (fa * fa).sum(1).cpu()
        self.ll += weight * (fb * fb).sum(1).cpu()
        self.rows_a.index_add_(1, rows, ka.sum(2).cpu())
        self.rows_b.index_add_(1, rows, kb.sum(2).cpu())
        if weight == 2.0:  # the transposed block's row sums
            self.rows_a.index_add_(1, cols, ka.sum(1).cpu())
            self.rows_b.index_add_(1, cols, kb.sum(1).cpu())

    def merge(self, other: ExactCKA) -> None:
        for name in ("kl", "kk", "ll", "rows_a", "rows_b", "diagonal"):
            getattr(self, name).add_(getattr(other, name))
        self.seen |= other.seen

    @property
    def images(self) -> int:
        """The images counted (those whose diagonal block was seen)."""
        return int((self.diagonal > 0).sum())

    def check(self) -> None:
        """ValueError when the blocks do not add up to one Gram matrix over the same images:
        an image read in one forward but not in another, or a diagonal block counted twice."""
        twice = torch.nonzero(self.diagonal > 1).flatten()
        if twice.numel():
            raise ValueError(f"image {int(twice[0])}'s diagonal block was counted twice")
        partial = torch.nonzero(self.seen & (self.diagonal == 0)).flatten()
        if partial.numel():
            raise ValueError(f"image {int(partial[0])} was read in one forward but not in "
                             f"another: run again")

    def value(self) -> torch.Tensor:
        """(La, Lb) CKA over the images counted; nan for a layer without variance."""
        self.check()
        n = self.images
        if n == 0:
            return torch.full_like(self.kl, math.nan)
        ra, rb = self.rows_a, self.rows_b
        sa, sb = ra.sum(1), rb.sum(1)
        xy = self.kl - 2.0 / n * (ra @ rb.T) + torch.outer(sa, sb) / n**2
        xx = self.kk - 2.0 / n * (ra * ra).sum(1) + sa * sa / n**2
        yy = self.ll - 2.0 / n * (rb * rb).sum(1) + sb * sb / n**2
        return ratio(xy, xx, yy)

    def state(self) -> dict[str, torch.Tensor]:
        return {"kl": self.kl, "kk": self.kk, "ll": self.ll, "rows_a": self.rows_a,
                "rows_b": self.rows_b, "diagonal": self.diagonal, "seen": self.seen}

    @classmethod
    def from_state(cls, state: dict[str, torch.Tensor]) -> ExactCKA:
        la, lb = state["kl"].shape
        out = cls(la, lb, state["rows_a"].shape[1])
        for name in ("kl", "kk", "ll", "rows_a", "rows_b", "diagonal", "seen"):
            setattr(out, name, state[name].clone())
        return out
