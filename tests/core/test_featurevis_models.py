"""Feature visualisation on a ViT's token layer and on a detection model's backbone."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from inspector.core.explain.featurevis.param import FourierImage
from inspector.core.explain.featurevis.render import evaluate, render
from inspector.core.explain.featurevis.settings import FeatureVisSettings, Target, image_seed
from inspector.core.models.base import ModelSpec, has_module
from inspector.core.models.load import load_model


@pytest.mark.slow
@pytest.mark.skipif(not has_module("timm"), reason="timm is not installed (the [timm] extra)")
def test_a_vit_token_layers_channel_rises():
    torch.set_num_threads(1)
    loaded = load_model(ModelSpec(name="timm:vit_tiny_patch16_224", device="cpu", seed=0))
    targets = [Target("channel", 0), Target("channel", 7)]
    start = evaluate(loaded, "blocks.6", FourierImage(
        [image_seed(0, "blocks.6", t) for t in targets], 224, 224).uint8(), targets)
    vis = render(loaded, "blocks.6", targets, FeatureVisSettings(steps=8))
    assert vis.pixels.shape == (2, 224, 224, 3)
    assert np.all(vis.objective > start), (start, vis.objective)


@pytest.mark.slow
def test_a_detection_backbone_layer_runs_through_the_backbone():
    torch.set_num_threads(1)
    loaded = load_model(ModelSpec(name="fasterrcnn_mobilenet_v3_large_fpn", device="cpu",
                                  seed=0))
    vis = render(loaded, "backbone.body.6", [Target("channel", 3)], FeatureVisSettings(steps=2))
    assert vis.pixels.shape[1:3] == tuple(loaded.preprocess.crop_size)
    assert np.isfinite(vis.objective).all()
    with pytest.raises(ValueError, match="backbone"):
        render(loaded, "roi_heads.box_head", [Target("channel", 0)], FeatureVisSettings(steps=1))
    with pytest.raises(ValueError, match="no class logit"):
        render(loaded, "", [Target("class", 1)], FeatureVisSettings(steps=1))


@pytest.mark.slow
def test_a_segmentation_models_backbone_channel_and_class_map_rise():
    torch.set_num_threads(1)
    loaded = load_model(ModelSpec(name="lraspp_mobilenet_v3_large", device="cpu", seed=0))
    for layer, target in (("backbone.6", Target("channel", 3)), ("", Target("class", 15))):
        start = evaluate(loaded, layer, FourierImage(
            [image_seed(0, layer, target)], *loaded.preprocess.crop_size).uint8(), [target])
        vis = render(loaded, layer, [target], FeatureVisSettings(steps=4))
        assert vis.pixels.shape[1:3] == tuple(loaded.preprocess.crop_size)
        assert np.isfinite(vis.objective).all() and vis.objective[0] > start[0], (
            layer, start, vis.objective)
