"""Every bad model file is a sentence that names the file and the fault (core.models.files).

The corpus is made here in tmp_path: text and empty files named .pt, torch.save files and
safetensors files cut in half, state_dicts for the wrong architecture, a pickled whole model,
factory files that do not build a model. Each must raise ModelLoadError, never anything else,
with a one-line message a user can act on.
"""

from __future__ import annotations

import io
import sys
import types
import warnings
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch
import torchvision
from PIL import Image
from safetensors.torch import save_file
from torch import nn

from inspector.core.models.base import DEFAULT_MODEL as DEMO_MODEL
from inspector.core.models.base import ModelSpec
from inspector.core.models.files import SHOWN, ModelLoadError, file_format
from inspector.core.models.load import load_model


@pytest.fixture(scope="module")
def demo_state() -> dict[str, torch.Tensor]:
    from inspector.demo import load_demo_model

    model, _ = load_demo_model(device="cpu")
    return {k: v.clone() for k, v in model.state_dict().items()}


class Whole(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 2)

    def forward(self, x):
        return self.fc(x.mean((2, 3)))


def weights(path: Path) -> ModelSpec:
    return ModelSpec(name=DEMO_MODEL, checkpoint=str(path), device="cpu")


def factory(path: Path, source: str, fn: str = "build") -> ModelSpec:
    path.write_text(source)
    return ModelSpec(name=None, factory=f"{path}:{fn}", device="cpu")


def half(path: Path) -> Path:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path


def safetensors(path: Path, state) -> Path:
    save_file({k: v.contiguous() for k, v in state.items()}, str(path))
    return path


# -- the corpus: each case writes its file and returns the spec that opens it ----------------


def text_pt(d, state):
    (d / "notes.pt").write_text("These are my training notes.\nepoch 1: loss 0.3\n")
    return weights(d / "notes.pt")


def json_pth(d, state):
    (d / "config.pth").write_text('{"lr": 0.1, "layers": [1, 2, 3]}\n')
    return weights(d / "config.pth")


def empty_pt(d, state):
    (d / "empty.pt").write_bytes(b"")
    return weights(d / "empty.pt")


def truncated_zip(d, state):
    torch.save(state, d / "half.pt")
    return weights(half(d / "half.pt"))


def truncated_legacy(d, state):
    torch.save(state, d / "old.pt", _use_new_zipfile_serialization=False)
    return weights(half(d / "old.pt"))


def truncated_safetensors(d, state):
    return weights(half(safetensors(d / "half.safetensors", state)))


def header_cut_safetensors(d, state):
    data = safetensors(d / "stub.safetensors", state).read_bytes()
    (d / "stub.safetensors").write_bytes(data[:40])  # the length, and part of the header
    return weights(d / "stub.safetensors")


def corrupt_safetensors(d, state):
    (d / "garbled.safetensors").write_bytes((20).to_bytes(8, "little") + b"{not json at all!!!!")
    return weights(d / "garbled.safetensors")


def missing_keys_safetensors(d, state):
    gone = sorted(state)[:2]
    return weights(safetensors(d / "partial.safetensors", {k: v for k, v in state.items()
                                                           if k not in gone}))


def wrong_architecture(d, state):
    torch.save(torchvision.models.resnet18(num_classes=3).state_dict(), d / "resnet.pt")
    return weights(d / "resnet.pt")


def wrong_shape(d, state):
    key = next(k for k, v in state.items() if v.ndim == 4)
    torch.save({**state, key: torch.zeros(1, 1, 1, 1)}, d / "reshaped.pt")
    return weights(d / "reshaped.pt")


def whole_module_as_weights(d, state):
    torch.save(Whole(), d / "whole.pt")
    return weights(d / "whole.pt")


def pickle_without_trust(d, state):
    torch.save(Whole(), d / "whole.pt")
    return ModelSpec(name=None, pickle=str(d / "whole.pt"), device="cpu")


def pickle_of_missing_code(d, state):
    gone = types.ModuleType("gone_model_code")
    gone.Net = type("Net", (nn.Module,), {"__module__": "gone_model_code"})
    sys.modules["gone_model_code"] = gone
    try:
        torch.save(gone.Net(), d / "orphan.pt")
    finally:
        del sys.modules["gone_model_code"]
    return ModelSpec(name=None, pickle=str(d / "orphan.pt"), trust_pickle=True, device="cpu")


def trusted_text(d, state):
    (d / "readme.pt").write_text("not a model\n")
    return ModelSpec(name=None, pickle=str(d / "readme.pt"), trust_pickle=True, device="cpu")


def folder(d, state):
    (d / "checkpoints.pt").mkdir()
    return weights(d / "checkpoints.pt")


def missing(d, state):
    return weights(d / "nowhere.pt")


def image_named_pt(d, state):
    Image.new("RGB", (4, 4)).save(d / "photo.pt", format="PNG")
    return weights(d / "photo.pt")


def foreign_zip(d, state):
    with zipfile.ZipFile(d / "bundle.pt", "w") as z:
        z.writestr("readme.txt", "hello")
    return weights(d / "bundle.pt")


def torchscript(d, state):
    with warnings.catch_warnings():  # torch.jit is deprecated; such files still exist
        warnings.simplefilter("ignore", FutureWarning)
        torch.jit.script(nn.Linear(2, 2)).save(str(d / "scripted.pt"))
    return weights(d / "scripted.pt")


def not_tensors(d, state):
    torch.save({"epoch": 3, "lr": 0.1}, d / "trainer.pt")
    return weights(d / "trainer.pt")


def factory_syntax_error(d, state):
    return factory(d / "net.py", "import torch\ndef build(:\n    pass\n")


def factory_missing_function(d, state):
    return factory(d / "net.py", "def make():\n    pass\n")


def factory_not_callable(d, state):
    return factory(d / "net.py", "build = 3\n")


def factory_needs_arguments(d, state):
    return factory(d / "net.py", "def build(classes):\n    pass\n")


def factory_returns_non_module(d, state):
    return factory(d / "net.py", "def build():\n    return {'weights': 1}\n")


def factory_raises(d, state):
    return factory(d / "net.py", "def build():\n    raise ValueError('bad config')\n")


def factory_import_fails(d, state):
    return factory(d / "net.py", "import no_such_package_xyz\ndef build():\n    pass\n")


def factory_exits(d, state):
    return factory(d / "net.py", "import sys\ndef build():\n    sys.exit(3)\n")


def factory_exits_on_import(d, state):
    return factory(d / "net.py", "import sys\nsys.exit()\ndef build():\n    pass\n")


def factory_raises_keyboard_interrupt(d, state):
    return factory(d / "net.py", "def build():\n    raise KeyboardInterrupt\n")


def factory_file_missing(d, state):
    return ModelSpec(name=None, factory=f"{d / 'gone.py'}:build", device="cpu")


@dataclass
class Case:
    make: Callable
    file: str  # the name the message must contain
    fault: tuple[str, ...]  # what it must say is wrong


CASES = {
    "text named .pt": Case(text_pt, "notes.pt", ("is a text file", "not a PyTorch checkpoint")),
    "json named .pth": Case(json_pth, "config.pth", ("is a text file",)),
    "empty file": Case(empty_pt, "empty.pt", ("is empty",)),
    "torch.save zip cut in half": Case(truncated_zip, "half.pt", ("cut short", "incomplete")),
    "legacy torch.save cut in half": Case(truncated_legacy, "old.pt", ("cut short",)),
    "safetensors cut in half": Case(truncated_safetensors, "half.safetensors",
                                    ("cut short", "bytes of tensors")),
    "safetensors header cut": Case(header_cut_safetensors, "stub.safetensors",
                                   ("cut short", "header")),
    "garbled safetensors": Case(corrupt_safetensors, "garbled.safetensors",
                                ("damaged", "not valid JSON")),
    "safetensors missing keys": Case(missing_keys_safetensors, "partial.safetensors",
                                     ("does not fit demo_shapes", "2 missing")),
    "wrong architecture": Case(wrong_architecture, "resnet.pt",
                               ("does not fit demo_shapes", "another architecture", "unexpected",
                                "conv1.weight", "more")),
    "wrong shape": Case(wrong_shape, "reshaped.pt", ("wrong shape", "(file [1, 1, 1, 1], model")),
    "whole module as weights": Case(whole_module_as_weights, "whole.pt",
                                    ("not only tensors", "Whole", "weights_only=True",
                                     "trusted pickle", "--trust-pickle")),
    "pickle without trust": Case(pickle_without_trust, "whole.pt",
                                 ("runs any code", "explicit trust", "--trust-pickle")),
    "pickle of missing code": Case(pickle_of_missing_code, "orphan.pt",
                                   ("not importable here", "gone_model_code")),
    "trusted pickle that is text": Case(trusted_text, "readme.pt", ("is a text file",)),
    "folder": Case(folder, "checkpoints.pt", ("is a folder",)),
    "missing file": Case(missing, "nowhere.pt", ("no such file",)),
    "png named .pt": Case(image_named_pt, "photo.pt", ("is a PNG image",)),
    "zip not from torch.save": Case(foreign_zip, "bundle.pt", ("not one torch.save wrote",)),
    "torchscript": Case(torchscript, "scripted.pt", ("TorchScript",)),
    "dict of numbers": Case(not_tensors, "trainer.pt", ("not a state_dict", "epoch", "lr")),
    "factory syntax error": Case(factory_syntax_error, "net.py", ("syntax error on line 2",)),
    "factory function missing": Case(factory_missing_function, "net.py",
                                     ("no function 'build'", "it defines make")),
    "factory not callable": Case(factory_not_callable, "net.py", ("'build'", "not a function")),
    "factory needs arguments": Case(factory_needs_arguments, "net.py:build",
                                    ("needs arguments",)),
    "factory returns non-module": Case(factory_returns_non_module, "net.py:build",
                                       ("type dict", "not an nn.Module")),
    "factory raises": Case(factory_raises, "net.py:build", ("raised ValueError: bad config",)),
    "factory import fails": Case(factory_import_fails, "net.py",
                                 ("not installed", "no_such_package_xyz")),
    "factory file missing": Case(factory_file_missing, "gone.py", ("no such file",)),
    "factory calls sys.exit": Case(factory_exits, "net.py:build()",
                                   ("called sys.exit(3)", "instead of returning a model")),
    "factory exits on import": Case(factory_exits_on_import, "net.py",
                                    ("while it was imported", "called sys.exit()")),
    "factory raises KeyboardInterrupt": Case(factory_raises_keyboard_interrupt, "net.py:build()",
                                             ("raised KeyboardInterrupt itself",
                                              "not a Ctrl+C")),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_a_bad_model_file_is_one_sentence_naming_the_file_and_the_fault(case, tmp_path,
                                                                        demo_state):
    spec = case.make(tmp_path, demo_state)
    with pytest.raises(ModelLoadError) as info:
        load_model(spec)
    message = str(info.value)
    assert case.file in message, message
    for fault in case.fault:
        assert fault in message, message
    assert "\n" not in message and "\x1b" not in message and "Traceback" not in message
    assert info.value.details  # the longer text, for the window's Details button


def test_a_long_mismatch_is_shortened_and_the_details_list_every_key(tmp_path, demo_state):
    spec = wrong_architecture(tmp_path, demo_state)
    with pytest.raises(ModelLoadError) as info:
        load_model(spec)
    unexpected = list(torchvision.models.resnet18(num_classes=3).state_dict())
    assert len(unexpected) > SHOWN
    assert f"and {len(unexpected) - SHOWN} more" in str(info.value)
    assert unexpected[-1] not in str(info.value)
    assert all(key in info.value.details for key in unexpected)


def test_files_are_recognised_by_their_content_not_their_name(tmp_path, demo_state):
    # A safetensors file saved as .pt, and a torch.save file named .safetensors, both load.
    safetensors(tmp_path / "really_safetensors.pt", demo_state)
    torch.save(demo_state, tmp_path / "really_torch.safetensors")
    for name in ("really_safetensors.pt", "really_torch.safetensors"):
        loaded = load_model(weights(tmp_path / name))
        first = next(iter(demo_state))
        assert torch.equal(loaded.model.state_dict()[first], demo_state[first])
    buffer = io.BytesIO()
    torch.save({"w": torch.zeros(1)}, buffer)
    (tmp_path / "zip.bin").write_bytes(buffer.getvalue())
    assert file_format(tmp_path / "zip.bin") == "zip"
    (tmp_path / "cut.txt").write_bytes("é".encode() * 2047 + b"\xc3")  # cut mid-character
    assert file_format(tmp_path / "cut.txt") == "a text file"
    (tmp_path / "noise").write_bytes(np.random.default_rng(0).bytes(64).replace(b"\x80", b"\0"))
    assert file_format(tmp_path / "noise") == "a file of an unknown format"


def test_a_failed_factory_leaves_no_module_behind(tmp_path):
    spec = factory_raises(tmp_path, None)
    before = set(sys.modules)
    with pytest.raises(ModelLoadError):
        load_model(spec)
    assert set(sys.modules) == before
