"""Attention maps of a segmentation transformer in a Session run: rollout and gradient
rollout explain the task's own score (Seg-Grad-CAM's: the class's logit summed over its
predicted pixels), equal to the references of test_attention_methods fed by attention read
the plain way; LeGrad and the logit lens, which read a classifier's head, are a note."""

from __future__ import annotations

import torch
from test_attention_methods import _close, chefer_rollout, vit_explain_rollout

from inspector.core.models.base import ModelSpec
from inspector.core.run.session import Session
from inspector.core.tasks import SEGMENTATION, read_output
from tests.attention_models import tv_reference

SEGMENTER = '''
from collections import OrderedDict

import torch
from torch import nn
from torch.nn import functional as F
from torchvision.models.vision_transformer import VisionTransformer

CLASSES = ["background", "a", "b"]
PREPROCESS = {"crop_size": (64, 64), "resize_size": 72,
              "mean": (0.5, 0.5, 0.5), "std": (0.25, 0.25, 0.25)}


class ViTSegmenter(nn.Module):
    """torchvision's ViT encoder and a linear head per patch token, upsampled to the input."""

    def __init__(self):
        super().__init__()
        self.vit = VisionTransformer(image_size=64, patch_size=16, num_layers=3, num_heads=4,
                                     hidden_dim=64, mlp_dim=128, num_classes=3)
        self.classifier = nn.Linear(64, 3)
        nn.init.normal_(self.classifier.weight, std=0.5)

    def forward(self, x):
        tokens = self.vit._process_input(x)
        cls = self.vit.class_token.expand(tokens.shape[0], -1, -1)
        tokens = self.vit.encoder(torch.cat([cls, tokens], dim=1))[:, 1:]
        b, n, _ = tokens.shape
        side = int(n ** 0.5)
        scores = self.classifier(tokens).transpose(1, 2).reshape(b, 3, side, side)
        return OrderedDict(out=F.interpolate(scores, size=x.shape[-2:], mode="bilinear"))


def build():
    torch.manual_seed(0)
    return ViTSegmenter().eval()
'''


def test_a_segmentation_transformer_gets_rollout_and_gradient_rollout_of_its_score(tmp_path):
    path = tmp_path / "segmenter.py"
    path.write_text(SEGMENTER)
    session = Session()
    try:
        session.load_model(ModelSpec(name=None, factory=f"{path}:build", device="cpu")).result()
        # The app's catalogs give tasks to torchvision's models only (CNNs): this one is told.
        session.loaded.task = SEGMENTATION
        model = session.loaded.model
        torch.manual_seed(5)
        x = torch.randn(1, 3, 64, 64)
        out = session.run(x, cams=(("rollout", None), ("gradrollout", None), ("legrad", None)))
        session.channel.drain()
        assert out.status == "ok", out.error
        assert out.mask is not None and out.mask.shape == (64, 64)
        assert sorted(m for m, _ in out.cams) == ["gradrollout", "rollout"]
        assert any("LeGrad and the logit lens read a classifier's head" in n for n in out.notes)
        # The references: attention with need_weights=True, the gradient of the task's score.
        output, attn, bases = tv_reference(model, x.clone().requires_grad_(True), grad=True)
        task = read_output(SEGMENTATION, output, None, session.loaded.categories, 3)
        assert task.target == out.target
        grads = torch.autograd.grad(task.score, bases)
        ref = chefer_rollout([a.detach() for a in attn],
                             [g.reshape(a.shape) for g, a in zip(grads, attn, strict=True)])
        _close(out.grids["gradrollout"].ravel(), ref[0, 1:])
        ref = vit_explain_rollout([a.detach() for a in attn], 0.0, "mean")
        _close(out.grids["rollout"].ravel(), ref[0, 1:])
    finally:
        session.close()
