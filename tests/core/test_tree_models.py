"""Module tree hazards, model loading from checkpoints/pickles/factories, devices."""

from __future__ import annotations

import socket

import pytest
import torch
import torchvision
from safetensors.torch import save_file
from torch import nn

from inspector.core.models import load as model_table
from inspector.core.models import tree as T
from inspector.core.models.base import DEFAULT_PREPROCESS, Family, LoadedModel, ModelSpec
from inspector.core.models.devices import pick_device
from inspector.core.models.files import CheckpointMismatch, ModelLoadError
from inspector.core.models.load import list_models, load_model


def test_resnet18_tree_hazards():
    model = torchvision.models.resnet18()
    tree = T.build_tree(model, torch.zeros(1, 3, 64, 64))
    assert tree["layer1.0.relu"].hazards >= {T.INPLACE, T.REUSED}
    assert T.OUTPUT_MODIFIED_INPLACE in tree["layer1.0.bn1"].hazards  # the ReLU after it
    assert T.OUTPUT_MODIFIED_INPLACE in tree["layer1.0.bn2"].hazards  # out += identity
    assert not tree["fc"].hazards
    assert tree["fc"].output_shape == (1, 1000)
    assert tree["layer4"].output_shape == (1, 512, 2, 2)
    assert tree[""].params_total == sum(p.numel() for p in model.parameters())
    assert tree["conv1"].params_own == 64 * 3 * 7 * 7
    assert tree.with_spatial_output()[-1] == "layer4"  # the last spatial map to be returned
    assert tree.order[-1] == ""  # the model's forward returns last


def test_vit_out_proj_never_called_and_tuple_output():
    model = torchvision.models.vit_b_16()
    tree = T.build_tree(model, torch.zeros(1, 3, 224, 224))
    attn = "encoder.layers.encoder_layer_0.self_attention"
    assert T.NEVER_CALLED in tree[f"{attn}.out_proj"].hazards
    assert T.TUPLE_OUTPUT in tree[attn].hazards
    assert tree["encoder.ln"].output_shape == (1, 197, 768)


def test_tree_probe_leaves_no_hooks_and_restores_mode():
    model = torchvision.models.resnet18().train()
    T.build_tree(model, torch.zeros(1, 3, 32, 32))
    assert all(m.training for m in model.modules())
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())


def _small_resnet_state(tmp_path, num_classes=10):
    model = torchvision.models.resnet18(num_classes=num_classes)
    return model, model.state_dict()


def test_checkpoint_pt_and_safetensors_roundtrip(tmp_path):
    model, state = _small_resnet_state(tmp_path)
    pt = tmp_path / "fine_tuned.pth"
    torch.save({"state_dict": {f"module.{k}": v for k, v in state.items()}}, pt)
    loaded = load_model(ModelSpec(name="resnet18", checkpoint=str(pt), device="cpu"))
    assert loaded.model.fc.out_features == 10  # the head's size comes from the file
    assert torch.equal(loaded.model.conv1.weight, state["conv1.weight"])
    st = tmp_path / "w.safetensors"
    save_file({k: v.contiguous() for k, v in state.items()}, str(st))
    loaded = load_model(ModelSpec(name="resnet18", checkpoint=str(st), device="cpu"))
    assert torch.equal(loaded.model.layer4[1].bn2.running_var, state["layer4.1.bn2.running_var"])
    assert len(loaded.categories) == 10


def test_checkpoint_mismatch_names_the_keys(tmp_path):
    _, state = _small_resnet_state(tmp_path, 1000)
    del state["layer2.0.conv1.weight"]
    state["extra.bias"] = torch.zeros(3)
    state["layer3.0.bn1.weight"] = torch.zeros(7)
    pt = tmp_path / "broken.pt"
    torch.save(state, pt)
    with pytest.raises(CheckpointMismatch) as info:
        load_model(ModelSpec(name="resnet18", checkpoint=str(pt), device="cpu"))
    msg = str(info.value)
    assert "broken.pt" in msg and "layer2.0.conv1.weight" in msg and "extra.bias" in msg
    assert "layer3.0.bn1.weight (file [7], model [256])" in msg


class Whole(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)

    def forward(self, x):
        return self.fc(x.mean((2, 3)))


def test_pickled_module_needs_trust(tmp_path):
    path = tmp_path / "whole.pt"
    torch.save(Whole(), path)
    with pytest.raises(ModelLoadError, match="runs any code"):
        load_model(ModelSpec(name=None, pickle=str(path), device="cpu"))
    # As a checkpoint (weights_only=True), it is refused with an explanation, not unpickled.
    with pytest.raises(ModelLoadError, match="trusted pickle"):
        load_model(ModelSpec(name="resnet18", checkpoint=str(path), device="cpu"))
    loaded = load_model(ModelSpec(name=None, pickle=str(path), trust_pickle=True, device="cpu"))
    assert isinstance(loaded.model, Whole) and loaded.categories == ["class 0", "class 1"]


def test_not_a_model_file(tmp_path):
    junk = tmp_path / "junk.pth"
    junk.write_bytes(b"\x00\x01 definitely not a checkpoint")
    with pytest.raises(ModelLoadError, match="junk.pth"):
        load_model(ModelSpec(name="resnet18", checkpoint=str(junk), device="cpu"))
    with pytest.raises(ModelLoadError, match="no such file"):
        load_model(ModelSpec(name="resnet18", checkpoint=str(tmp_path / "nope.pt")))


def test_factory_file(tmp_path):
    src = tmp_path / "mynet.py"
    src.write_text(
        "import torch.nn as nn\n"
        "CLASSES = ['cat', 'dog']\n"
        "def build_model():\n"
        "    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten(),"
        " nn.Linear(4, 2))\n"
    )
    loaded = load_model(ModelSpec(name=None, factory=f"{src}:build_model", device="cpu"))
    assert loaded.categories == ["cat", "dog"]
    with pytest.raises(ModelLoadError, match="no function 'nope'"):
        load_model(ModelSpec(name=None, factory=f"{src}:nope"))


def test_torchvision_without_cached_weights_is_random_and_offline(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))  # an empty hub cache

    def no_network(*a, **k):
        raise AssertionError("tried to use the network")

    monkeypatch.setattr(socket, "create_connection", no_network)
    loaded = load_model(ModelSpec(name="vit_b_16", device="cpu"))
    assert not loaded.pretrained and "RANDOM" in loaded.description
    assert loaded.model.heads.head.weight.abs().sum() > 0  # zero head re-initialised
    assert len(loaded.categories) == 1000 and loaded.preprocess.crop_size == (224, 224)


def test_torchvision_uses_cached_weights(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    weights = torchvision.models.get_model_weights("resnet18").DEFAULT
    ckpt = tmp_path / "hub" / "checkpoints" / weights.url.rsplit("/", 1)[-1]
    ckpt.parent.mkdir(parents=True)
    state = torchvision.models.resnet18().state_dict()
    torch.save(state, ckpt)
    loaded = load_model(ModelSpec(name="resnet18", device="cpu"))
    assert loaded.pretrained
    assert torch.equal(loaded.model.fc.weight, state["fc.weight"])


def test_unknown_model_and_device():
    with pytest.raises(ModelLoadError, match="unknown model 'resnet9000'"):
        load_model(ModelSpec(name="resnet9000"))
    with pytest.raises(ModelLoadError):
        pick_device("cuda:7" if torch.cuda.is_available() else "cuda")
    assert pick_device("cpu").type == "cpu"
    assert "resnet18" in list_models() and "demo_shapes" in list_models()


def test_a_program_registers_its_own_family_and_its_name_wins(monkeypatch):
    model_table.families()  # the entry points' families are found first
    monkeypatch.setattr(model_table, "_registered", list(model_table._registered))  # undone after

    def load(spec, device):
        return LoadedModel(nn.Sequential(nn.Flatten(), nn.Linear(3 * 224 * 224, 2)), spec.name,
                           "mine", True, ["a", "b"], DEFAULT_PREPROCESS, device)

    for description in ("first", "second"):  # the same name again replaces the family
        model_table.register_family(Family(name="mine", claims=lambda s: s.name == "resnet18",
                                           load=load, names=lambda d=description: [d]))
    loaded = load_model(ModelSpec(name="resnet18", device="cpu"))
    assert (loaded.family, loaded.categories) == ("mine", ["a", "b"])  # not torchvision's
    assert [f.name for f in model_table.families()].count("mine") == 1
    assert "second" in list_models() and "first" not in list_models()


def test_random_weights_are_said_once():
    """The description said RANDOM weights and a note said it again, in the same line."""
    loaded = load_model(ModelSpec(name="resnet18", device="cpu", seed=1))
    assert not loaded.pretrained and "RANDOM weights" in loaded.description
    assert not any("random weights" in note.lower() for note in loaded.notes), loaded.notes
