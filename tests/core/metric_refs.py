"""The reference implementations the faithfulness metrics are compared with, called on a
given model, input and map: torch-cam's DeletionInsertionMetric and ClassificationMetric,
and pytorch-grad-cam's ROAD. Test-only (make test installs them): a test that needs one
skips without it.

    model: an nn.Module returning logits (B, K), in eval mode
    x:     (1, C, H, W) float32, the normalised model input
    m:     (H, W) float32 map at the input's size
    cls:   the class explained (a Python int)
"""

from __future__ import annotations

import importlib.util
import sys
import types
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import numpy as np
import torch


class MapExtractor:
    """torch-cam's CAM-extractor protocol around a fixed map: its metrics call
    extractor(class_idx, scores) -> [maps], fuse_cams(...), _hooks_off() and .model."""

    def __init__(self, model, maps):  # maps (B, h, w)
        self.model, self.maps = model, maps

    def __call__(self, class_idx=None, scores=None, normalized=True, *, targets=None, **kw):
        return [self.maps]

    def fuse_cams(self, cams):
        return cams[0]

    @contextmanager
    def _hooks_off(self):
        yield


def torchcam_deletion_insertion(model, x, m, cls, steps=20, baseline=None, batch_size=32):
    """(fractions, deletion curve, insertion curve, deletion AUC, insertion AUC) of torch-cam
    with ONE baseline for both curves (None: zeros; a tensor: that input)."""
    from torchcam.metrics import DeletionInsertionMetric

    metric = DeletionInsertionMetric(MapExtractor(model, m[None]), partial(torch.softmax, dim=-1),
                                     steps=steps, baseline=baseline, batch_size=batch_size)
    seen = {}
    inner = metric._compute_curves  # private: the only place the curves exist

    def keep_curves(*args, **kwargs):
        seen["curves"] = inner(*args, **kwargs)
        return seen["curves"]

    metric._compute_curves = keep_curves
    metric.update(x, class_idx=int(cls))
    fractions, deletion, insertion = seen["curves"]
    s = metric.summary()
    return fractions, deletion[0], insertion[0], s["deletion_auc"], s["insertion_auc"]


def torchcam_avg_drop(model, x, m, cls):
    """(Average Drop, Increase in Confidence) of torch-cam's ClassificationMetric."""
    from torchcam.metrics import ClassificationMetric

    metric = ClassificationMetric(MapExtractor(model, m[None]), partial(torch.softmax, dim=-1))
    metric.update(x, class_idx=int(cls))
    s = metric.summary()
    return s["avg_drop"], bool(s["conf_increase"])


def pgc_road_module():
    """pytorch_grad_cam.metrics.road without the package's __init__ (which imports every
    CAM and matplotlib); it needs scipy and opencv."""
    if "pytorch_grad_cam.metrics.road" in sys.modules:
        return sys.modules["pytorch_grad_cam.metrics.road"]
    spec = importlib.util.find_spec("pytorch_grad_cam")
    if spec is None:
        raise ImportError("pytorch-grad-cam is not installed")
    root = Path(spec.submodule_search_locations[0]).parent
    for name in ("pytorch_grad_cam", "pytorch_grad_cam.metrics"):
        if name not in sys.modules:
            mod = types.ModuleType(name)
            mod.__path__ = [str(Path(root, *name.split(".")))]
            sys.modules[name] = mod
    import pytorch_grad_cam.metrics.road as road

    return road


def pgc_road(model, x, m, cls, percentiles=range(10, 100, 10), noise=0.0, seed=None):
    """{"morf": (n,), "lerf": (n,)}: the softmax probability of `cls` after pytorch-grad-cam's
    imputation at each of its percentiles (percentile order). seed: torch's global generator
    seeded before the MoRF draws and again before the LeRF draws."""
    road = pgc_road_module()

    def target(out):  # pytorch_grad_cam's ClassifierOutputSoftmaxTarget
        return torch.softmax(out, dim=-1)[..., int(cls)]

    cams = m[None].detach().cpu().numpy().astype(np.float32)
    res = {}
    for name, metric_cls in (("morf", road.ROADMostRelevantFirst),
                             ("lerf", road.ROADLeastRelevantFirst)):
        if seed is not None:
            torch.manual_seed(seed)
        vals = []
        for p in percentiles:
            metric = metric_cls(percentile=p)
            metric.perturbation.imputer.noise = noise  # the constructor takes no noise
            vals.append(float(metric(x, cams, [target], model, return_diff=False)[0]))
        res[name] = torch.tensor(vals)
    return res


def pgc_available() -> bool:
    try:
        import cv2  # noqa: F401
        import scipy  # noqa: F401

        pgc_road_module()
    except ImportError:
        return False
    return True
