"""On the shipped demo model, the metrics tell a real map from a meaningless one: over the
12 sample images (RISE's protocol, 20 steps), Grad-CAM's mean deletion AUC is lower and its
mean insertion AUC higher than those of a random map and of a centred Gaussian.

Per image that does not hold (a map of per-pixel noise deletes scattered pixels, which the
model reads as a pattern of its own: deletion rewards it on some images), nor for deletion
over held-out renders (docs/faithfulness.md has the numbers): the test is on the means.
"""

from __future__ import annotations

import numpy as np
import torch

from inspector import demo
from inspector.core.explain.cam.compute import compute_cams
from inspector.core.explain.metrics.curves import deletion_insertion
from inspector.core.explain.metrics.forwards import Forwarder
from inspector.core.explain.metrics.scores import class_probability
from inspector.core.inputs.images import load_image
from inspector.core.models.base import ModelSpec
from inspector.core.models.load import load_model


def centred_gaussian(h: int, w: int, sigma_fraction: float = 0.25) -> torch.Tensor:
    yy, xx = torch.meshgrid(torch.arange(h) + 0.5, torch.arange(w) + 0.5, indexing="ij")
    s = sigma_fraction * min(h, w)
    return torch.exp(-((yy - h / 2) ** 2 + (xx - w / 2) ** 2) / (2 * s * s))


def test_gradcam_beats_a_random_map_and_a_centred_gaussian_on_the_samples():
    loaded = load_model(ModelSpec("demo_shapes"))
    files = demo.sample_images()
    assert len(files) == 12
    xs = torch.stack([loaded.preprocess(load_image(f)) for f in files])
    cams = compute_cams(loaded.model, xs, ["gradcam"], "stage3")
    g = torch.Generator().manual_seed(0)
    h, w = xs.shape[-2:]
    gaussian = centred_gaussian(h, w)
    aucs = {"gradcam": [], "random": [], "gaussian": []}
    for i in range(len(xs)):
        x = xs[i : i + 1]
        maps = torch.stack([torch.from_numpy(cams.cams["gradcam"][i]),
                            torch.rand(h, w, generator=g), gaussian])
        forwarder = Forwarder(class_probability(loaded.model, cams.targets[i]), x)
        for name, (d, ins) in zip(aucs, deletion_insertion(forwarder, x, maps), strict=True):
            aucs[name].append((d.auc, ins.auc))
    mean = {k: np.mean(v, axis=0) for k, v in aucs.items()}  # (deletion, insertion)
    for other in ("random", "gaussian"):
        assert mean["gradcam"][0] < mean[other][0], mean
        assert mean["gradcam"][1] > mean[other][1], mean
