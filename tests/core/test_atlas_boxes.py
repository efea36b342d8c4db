"""Receptive-field boxes against a model whose receptive field is known exactly.

Three 3 x 3 convolutions, stride 1, padding 1, positive weights and nothing between them:
the output at (i, j) of conv n depends on exactly the input pixels (i +- n, j +- n) inside
the input, and on every one of them (all paths have positive weight). The atlas's boxes
must be that square, mapped back through the resize (and the crop) onto the original image.
"""

from __future__ import annotations

import json
from fractions import Fraction
from math import ceil, floor
from pathlib import Path

import pytest
import torch
from atlas_images import draw_folder

from inspector import cli
from inspector.core.inputs.images import expand_paths, load_image
from inspector.core.inputs.preprocess import Preprocess

FACTORY = '''
import torch
from torch import nn

PREPROCESS = {PREPROCESS}


def build():
    torch.manual_seed(0)
    convs = [nn.Conv2d(3 if i == 0 else 4, 4, 3, padding=1) for i in range(3)]
    for conv in convs:
        with torch.no_grad():
            conv.weight.abs_().add_(0.01)
    return nn.Sequential(*convs, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 3))
'''

STRAIGHT = {"crop_size": (32, 32), "resize_size": None, "mean": (0.5, 0.5, 0.5),
            "std": (0.25, 0.25, 0.25)}
RESIZE_AND_CROP = {**STRAIGHT, "resize_size": 36}


def expected_box(pre: Preprocess, size, layer: int, i: int, j: int):
    """The square of conv `layer` (0-based) at (i, j), in original pixels (exact fractions)."""
    radius = layer + 1
    ch, cw = pre.crop_size
    x0, x1 = max(0, j - radius), min(cw, j + radius + 1)
    y0, y1 = max(0, i - radius), min(ch, i + radius + 1)
    w, h = size
    rw, rh = pre.resized_size(size)
    left, top = pre.crop_offset(size)
    sx, sy = Fraction(w, rw), Fraction(h, rh)
    return [max(0, floor((x0 + left) * sx)), max(0, floor((y0 + top) * sy)),
            min(w, ceil((x1 + left) * sx)), min(h, ceil((y1 + top) * sy))]


@pytest.mark.parametrize("preprocess", [STRAIGHT, RESIZE_AND_CROP], ids=["resize", "resize+crop"])
def test_boxes_are_the_known_receptive_field(preprocess, tmp_path: Path):
    folder = draw_folder(tmp_path / "images", count=8)
    model_file = tmp_path / "stack.py"
    model_file.write_text(FACTORY.replace("{PREPROCESS}", repr(preprocess)))
    out = tmp_path / "out"
    rc = cli.main(["atlas", "--model", f"{model_file}:build", "--layers", "0,2", "--top", "3",
                   "--workers", "0", "--batch-size", "4", "--quiet", "--out", str(out),
                   str(folder)])
    assert rc == 1  # the broken files
    doc = json.loads((out / "atlas.json").read_text())

    # Where each channel's maximum is, from a plain forward per image.
    import importlib.util

    spec = importlib.util.spec_from_file_location("stack", model_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.build().eval()
    pre = Preprocess(**preprocess)
    argmax, sizes = {}, {}
    for path in expand_paths([folder]):
        try:
            image = load_image(path)
        except Exception:
            continue
        sizes[str(path)] = image.size
        x = pre(image)[None]
        with torch.no_grad():
            outs = [model[0](x)]
            outs.append(model[1](outs[0]))
            outs.append(model[2](outs[1]))
        for layer in (0, 2):
            flat = outs[layer][0].flatten(1)
            argmax[(str(path), layer)] = flat.argmax(dim=1).tolist()

    checked = 0
    for layer in (0, 2):
        for c, entries in doc["layers"][str(layer)]["top"].items():
            for entry in entries:
                pos = argmax[(entry["path"], layer)][int(c)]
                i, j = divmod(pos, pre.crop_size[1])
                want = expected_box(pre, sizes[entry["path"]], layer, i, j)
                assert entry["box"] == want, (layer, c, entry)
                checked += 1
    assert checked == 2 * 4 * 3


def test_a_box_in_model_pixels_maps_back_through_resize_and_crop():
    from inspector.batch.boxes import to_original

    pre = Preprocess(**RESIZE_AND_CROP)
    # 48 x 40 -> resized 43 x 36 -> crop 32 x 32 at (6, 2) (torchvision rounds 5.5 to 6).
    assert pre.resized_size((48, 40)) == (43, 36) and pre.crop_offset((48, 40)) == (6, 2)
    # x: (0 + 6) * 48 / 43 = 6.70 -> 6, (10 + 6) * 48 / 43 = 17.86 -> 18
    # y: (5 + 2) * 40 / 36 = 7.78 -> 7, (9 + 2) * 40 / 36 = 12.22 -> 13
    assert to_original((0, 5, 10, 9), pre, (48, 40)) == (6, 7, 18, 13)
    # No gradient anywhere: the whole part of the image the model saw.
    assert to_original(None, pre, (48, 40)) == (6, 2, 43, 38)


def test_one_images_entries_in_one_batched_backward_equal_a_forward_each():
    """boxes.image_boxes (one forward, is_grads_batched) against input_boxes (the image
    repeated, one row per entry) on the demo CNN: convolutions, batch norm, ReLU, pooling."""
    from inspector.batch.boxes import image_boxes, input_boxes
    from inspector.batch.probe import plan_layers
    from inspector.core.models.base import ModelSpec
    from inspector.core.models.load import load_model
    from inspector.core.models.tree import build_tree

    loaded = load_model(ModelSpec(name="demo_shapes", device="cpu"))
    x = torch.randn(1, 3, 128, 128, generator=torch.Generator().manual_seed(0))
    tree = build_tree(loaded.model, x)
    plans = plan_layers(tree, ["stem", "stage2", "stage3"], (128, 128))
    g = torch.Generator().manual_seed(1)
    seen_sizes = set()
    for plan in plans.values():
        shape = tree.modules[plan.name].output_shape
        positions = plan.view(torch.zeros(1, *shape[1:])).shape[-1]
        channels = torch.randint(0, plan.channels, (12,), generator=g)
        where = torch.randint(0, positions, (12,), generator=g)
        one = image_boxes(loaded.model, plan, x, channels, where)
        each = input_boxes(loaded.model, plan, x.expand(12, -1, -1, -1), channels, where)
        assert one == each, plan.name
        seen_sizes |= {(b[2] - b[0]) for b in one if b is not None}
    assert len(seen_sizes) > 1  # the layers' receptive fields differ: not one box everywhere
