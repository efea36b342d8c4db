"""Edits carried over to another model (core.edits.carry) and the box geometry they use
(Preprocess.box_to_input / box_to_original): an occlusion follows the picture, a channel
edit is checked against the new model, and each dropped or changed edit says why."""

from __future__ import annotations

import torch
from torch import nn

from inspector.core.edits.carry import carry_edits, summary
from inspector.core.edits.interventions import Occlude, ReplaceWithMean, ZeroChannels
from inspector.core.inputs.preprocess import Preprocess, pixel_box
from inspector.core.models.tree import build_tree

MEAN, STD = (0.5, 0.5, 0.5), (0.25, 0.25, 0.25)
DEMO = Preprocess((128, 128), 128, MEAN, STD)  # the demo model's: shorter side to 128, crop
RESNET = Preprocess((224, 224), 256, MEAN, STD)  # torchvision's: shorter side 256, crop 224
STRAIGHT = Preprocess((64, 64), None, MEAN, STD)  # resized straight to 64 x 64


def tree_of(model: nn.Module, size: int):
    return build_tree(model.eval(), torch.zeros(1, 3, size, size))


def small_net(width: int) -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, width, 3, padding=1), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(width, 2))


def test_a_box_on_the_picture_maps_into_the_model_input_and_back():
    # A 300 x 200 picture, shorter side to 128: 192 x 128, the crop starts at x 32; one
    # input pixel is 1.5625 picture pixels.
    size = (300, 200)
    assert DEMO.box_to_input((75, 50, 150, 100), size) == ((16, 32, 64, 64), False)
    assert DEMO.box_to_original((16, 32, 64, 64), size) == (75.0, 50.0, 150.0, 100.0)
    # Partly left of the crop: clipped at its edge, and said so; wholly outside: nothing.
    assert DEMO.box_to_input((30, 50, 100, 100), size) == ((0, 32, 32, 64), True)
    assert DEMO.box_to_input((0, 0, 40, 200), size) == (None, True)
    # A box touching part of a pixel covers all of it; a corner a rounding error off a
    # pixel edge does not reach into the next pixel.
    assert pixel_box((1.2, 0.9999999, 3.0000001, 2.5), 10, 10) == ((1, 1, 3, 3), False)


def test_an_occlusion_follows_the_picture_into_a_larger_input_and_channel_edits_are_checked():
    old_tree, new_tree = tree_of(small_net(8), 128), tree_of(small_net(4), 224)
    edits = [Occlude("", box=(32, 32, 96, 96)), ZeroChannels("0", (5,)),
             ZeroChannels("stage3", (5,)), ReplaceWithMean("0", dim=-1),
             Occlude("", box=(0, 0, 8, 128))]
    assert "stage3" not in old_tree  # (the names are the new model's question only)
    out = carry_edits(edits, new_tree, RESNET, old=DEMO, picture_size=(300, 300),
                      model="resnet18")
    box, zero5, stage3, mean, edge = out
    # The demo crop is the whole shorter side, resnet18's the middle 224/256 of it: input
    # pixel u of 128 is pixel 112 + (u - 64) * 2 of 224 (along a longer side the resize's
    # rounding may move it by a pixel).
    assert box.after == Occlude("", box=(48, 48, 176, 176)) and box.changed
    assert "128 x 128" in box.why and "224 x 224" in box.why
    assert zero5.dropped and "out of range" in zero5.why and "4 channels" in zero5.why
    assert stage3.dropped and stage3.why == "resnet18 has no module 'stage3'"
    # A channel dim read from the old model's layout is read again from the new one's.
    assert mean.after == ReplaceWithMean("0", dim=None) and not mean.changed
    assert edge.dropped and "outside what resnet18's 224 x 224 crop sees" in edge.why
    text = summary(out, "resnet18")
    assert text.startswith("Edits after switching to resnet18: kept 'input:occlude=32,32,96,96'"
                           " as 'input:occlude=48,48,176,176' (rescaled from the 128 x 128")
    assert "dropped 'stage3:zero=5' (resnet18 has no module 'stage3')" in text
    assert summary([], "resnet18") == ""


def test_a_box_that_reaches_past_the_new_crop_is_clipped_and_an_unchanged_model_keeps_all():
    tree = tree_of(small_net(8), 64)
    # The demo's input covers the picture's middle square; straight 64 x 64 covers it all:
    # on a square picture, the whole demo input is the whole new input.
    (whole,) = carry_edits([Occlude("", box=(0, 0, 128, 128))], tree, STRAIGHT, old=DEMO,
                           picture_size=(100, 100))
    assert whole.after.box == (0, 0, 64, 64) and "clipped" not in whole.why
    # Back the other way on a wide picture: the new crop misses its sides.
    (wide,) = carry_edits([Occlude("", box=(0, 0, 64, 64))], tree_of(small_net(8), 128),
                          DEMO, old=STRAIGHT, picture_size=(200, 100))
    assert wide.after.box == (0, 0, 128, 128) and wide.why.endswith("clipped to what the "
                                                                    "new crop sees")
    # The same geometry (the same model reloaded): every edit kept as it was.
    same = carry_edits([Occlude("", box=(1, 2, 30, 40)), ZeroChannels("0", (7,))], tree,
                       STRAIGHT, old=STRAIGHT, picture_size=(500, 90))
    assert [c.after for c in same] == [c.before for c in same]
    assert not any(c.changed or c.dropped for c in same)
    # Unknown old geometry: a box that does not fit the new input is dropped, saying so.
    (big,) = carry_edits([Occlude("", box=(0, 0, 100, 100))], tree, STRAIGHT)
    assert big.dropped and big.why == "the box is not inside this model's 64 x 64 input"
