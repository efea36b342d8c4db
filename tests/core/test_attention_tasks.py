"""Attention maps of a segmentation and a detection transformer in a Session run: rollout
and gradient rollout explain the task's own score (Seg-Grad-CAM's, the class's logit summed
over its predicted pixels; a detection's score), equal to the references of
test_attention_methods fed by attention read the plain way; LeGrad and the logit lens, which
read a classifier's head, are a note."""

from __future__ import annotations

import pytest
import torch
from test_attention_methods import _close, chefer_rollout, vit_explain_rollout

from inspector.core.models.base import ModelSpec
from inspector.core.run.session import Session
from inspector.core.tasks import DETECTION, SEGMENTATION, forward, read_output
from tests.attention_models import tv_reference

MODELS = '''
from collections import OrderedDict

import torch
from torch import nn
from torch.nn import functional as F
from torchvision.models.vision_transformer import VisionTransformer

CLASSES = ["background", "a", "b"]
PREPROCESS = {"crop_size": (64, 64), "resize_size": 72,
              "mean": (0.5, 0.5, 0.5), "std": (0.25, 0.25, 0.25)}


class ViTDetector(nn.Module):
    """torchvision's ViT encoder, three fixed boxes scored from the class token (a list of
    images in, one dict per image out, as torchvision's detectors)."""

    def __init__(self):
        super().__init__()
        self.vit = VisionTransformer(image_size=64, patch_size=16, num_layers=3, num_heads=4,
                                     hidden_dim=64, mlp_dim=128, num_classes=3)
        nn.init.normal_(self.vit.heads.head.weight, std=0.5)
        self.register_buffer("boxes", torch.tensor([[0., 0., 32., 32.], [16., 16., 48., 48.],
                                                    [32., 32., 64., 64.]]))

    def forward(self, images):
        scores = self.vit(torch.stack(list(images))).sigmoid()
        return [{"boxes": self.boxes, "labels": torch.arange(3), "scores": s} for s in scores]


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


def build_segmenter():
    torch.manual_seed(0)
    return ViTSegmenter().eval()


def build_detector():
    torch.manual_seed(0)
    return ViTDetector().eval()
'''


class TaskCall(torch.nn.Module):
    """The model called as the Session calls a model of its task (a list for detection)."""

    def __init__(self, task, model):
        super().__init__()
        self.task, self.model = task, model

    def forward(self, x):
        return forward(self.task, self.model, x)


@pytest.mark.parametrize("task", [SEGMENTATION, DETECTION])
def test_a_task_transformer_gets_rollout_and_gradient_rollout_of_its_score(tmp_path, task):
    path = tmp_path / "task_vits.py"
    path.write_text(MODELS)
    builder = "build_segmenter" if task == SEGMENTATION else "build_detector"
    session = Session()
    try:
        session.load_model(ModelSpec(name=None, factory=f"{path}:{builder}", device="cpu")
                           ).result()
        # The app's catalogs give tasks to torchvision's models only (CNNs): this one is told.
        session.loaded.task = task
        model = session.loaded.model
        torch.manual_seed(5)
        x = torch.randn(1, 3, 64, 64)
        out = session.run(x, cams=(("rollout", None), ("gradrollout", None), ("legrad", None)))
        session.channel.drain()
        assert out.status == "ok", out.error
        if task == SEGMENTATION:
            assert out.mask is not None and out.mask.shape == (64, 64)
        assert sorted(m for m, _ in out.cams) == ["gradrollout", "rollout"]
        assert any("LeGrad and the logit lens read a classifier's head" in n for n in out.notes)
        # The references: attention with need_weights=True, the gradient of the task's score.
        output, attn, bases = tv_reference(TaskCall(task, model), x.clone().requires_grad_(True),
                                           grad=True)
        read = read_output(task, output, None, session.loaded.categories, 3)
        assert read.target == out.target
        grads = torch.autograd.grad(read.score, bases)
        ref = chefer_rollout([a.detach() for a in attn],
                             [g.reshape(a.shape) for g, a in zip(grads, attn, strict=True)])
        _close(out.grids["gradrollout"].ravel(), ref[0, 1:])
        ref = vit_explain_rollout([a.detach() for a in attn], 0.0, "mean")
        _close(out.grids["rollout"].ravel(), ref[0, 1:])
    finally:
        session.close()
