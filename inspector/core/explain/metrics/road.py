"""ROAD, RemOve And Debias (Rong et al. 2022), as pytorch-grad-cam's ROADMostRelevantFirst
and ROADLeastRelevantFirst compute it, at its percentiles (names.ROAD_PERCENTILES).

At percentile p, p% of the pixel positions are kept and the others are imputed from their
neighbours (imputation.impute), so that what is removed leaves no sharp edge for the model
to read: most relevant first (MoRF) keeps the least relevant positions and removes the
rest; least relevant first (LeRF) keeps the most relevant. The score of each imputed input
is a point of the curve. A faithful map makes MoRF's scores low and LeRF's high.

Which positions are kept (a decision of this app, see docs/faithfulness.md): the
ceil((P - 1) p / 100) positions on the kept side of the map's order, ties in reading order
as deletion's. On a map without ties that is exactly pytorch-grad-cam's rule (keep
`m < np.percentile(m, p)`, or `1 - m` for LeRF); on a map with ties, which a ReLU'd CAM
has in plenty (half its pixels can be exactly 0), that rule keeps no pixel at all at low
percentiles (a singular system) or the same pixels at several, and this one stays defined.

The curve's x axis is the fraction of positions removed, ascending, as deletion's:
fraction f is pytorch-grad-cam's percentile 100 (1 - f) (its percentile counts what is
kept). Its summary number is the mean score over the percentiles (pytorch-grad-cam's
ROAD...Average); ROAD combined is (mean LeRF - mean MoRF) / 2.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from inspector.core.explain.metrics.curves import Curve, as_maps, curve, pixel_ranks
from inspector.core.explain.metrics.forwards import Forwarder
from inspector.core.explain.metrics.imputation import impute
from inspector.core.explain.metrics.names import ROAD_PERCENTILES
from inspector.core.hookset import ModelState

IMPUTED = "linear imputation"


def kept_count(positions: int, percentile: int) -> int:
    """Positions kept at `percentile`: ceil((P - 1) * p / 100), in integers."""
    return ((positions - 1) * int(percentile) + 99) // 100


def road_keep_masks(saliency, percentiles: Sequence[int], most_relevant_first: bool
                    ) -> torch.Tensor:
    """(n, H, W) bool, True where a position is kept, one mask per percentile."""
    m = as_maps(saliency, tuple(torch.as_tensor(saliency).shape[-2:]), "cpu")[0]
    h, w = m.shape
    positions = h * w
    rank = pixel_ranks(m[None])[0]  # 0: the most relevant
    masks = []
    for p in percentiles:
        n = kept_count(positions, p)
        keep = rank >= positions - n if most_relevant_first else rank < n
        masks.append(keep.reshape(h, w))
    return torch.stack(masks)


def road_work(percentiles: Sequence[int]) -> int:
    """Units of progress of one map's ROAD: a solve and a forward per percentile and order."""
    return 4 * len(percentiles)


def road(forwarder: Forwarder, x: torch.Tensor, saliency, *,
         percentiles: Sequence[int] = ROAD_PERCENTILES, noise: float = 0.01, seed: int = 0
         ) -> tuple[Curve, Curve]:
    """(MoRF, LeRF) curves of one map (H, W) for x (1, C, H, W). The noise generator is
    seeded with `seed` once for MoRF's percentiles and once for LeRF's, drawn in the order
    given (pytorch-grad-cam after torch.manual_seed(seed) before each group)."""
    x = x[:1].detach()
    positions = x.shape[-2] * x.shape[-1]
    m = as_maps(saliency, tuple(x.shape[-2:]), "cpu")[0]
    removed = torch.tensor([(positions - kept_count(positions, p)) / positions
                            for p in percentiles], dtype=torch.float32)
    order = torch.argsort(removed, stable=True)
    curves = []
    with ModelState(forwarder.scorer.model, training=False):
        for morf in (True, False):
            generator = torch.Generator().manual_seed(int(seed))
            imputed = []
            for keep in road_keep_masks(m, percentiles, morf):
                imputed.append(impute(x[0], keep, noise, generator, check=forwarder.check))
                forwarder.advance(1)
            with torch.inference_mode():
                scores = forwarder.score_all(torch.stack(imputed))
            curves.append(curve(removed[order], scores[order], IMPUTED))
    return curves[0], curves[1]
