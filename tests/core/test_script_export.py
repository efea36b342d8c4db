"""Copy as Python (core.script.export): the generated script, run on its own, gives the
engine's numbers, and never imports inspector."""

from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from inspector import cli
from inspector.core.edits import interventions as iv
from inspector.core.hookset import remaining_hooks
from inspector.core.models.base import ModelSpec
from inspector.core.models.load import load_model
from inspector.core.models.script_code import ScriptExportError
from inspector.core.records.frames import ActivationFrame, GradientFrame
from inspector.core.records.kinds import GRAD_OUTPUT, OUTPUT
from inspector.core.run.capture_spec import CaptureSpec
from inspector.core.run.request import RunRequest
from inspector.core.run.session import Session
from inspector.core.script.export import script_for

FACTORY = '''
import torch
from torch import nn

CLASSES = ["red", "green", "blue"]
PREPROCESS = {"crop_size": (40, 48), "resize_size": None, "interpolation": "bicubic",
              "mean": (0.4, 0.5, 0.6), "std": (0.2, 0.25, 0.3)}


class Twice(nn.Module):
    """Calls one ReLU twice: the script describes a module by its first call."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(8, 8, 3, padding=1)
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.conv(self.relu(x)))


def build():
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), Twice(), nn.Conv2d(8, 8, 3, stride=2, padding=1),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 3),
    )
'''


# -- the two sides ----------------------------------------------------------------------------


def engine_run(spec: ModelSpec, request: RunRequest):
    """The Session's run of `request` (whose capture keeps full tensors): the model, the
    logits, and per module the first call's output and output gradient."""
    session = Session()
    try:
        loaded = session.load_model(spec).result(120)
        _, future = session.submit_request(request)
        outcome = future.result(300)
        frames = session.channel.drain()
    finally:
        session.close()
    assert outcome.status == "ok", outcome.error
    first: dict[tuple[str, str], tuple[int, np.ndarray]] = {}
    for f in frames:
        if isinstance(f, (ActivationFrame, GradientFrame)) and f.full is not None:
            key = (f.kind, f.module + (f":{f.path}" if f.path else ""))
            if key not in first or f.call < first[key][0]:
                first[key] = (f.call, f.full)
    outputs = {m: a for (kind, m), (_, a) in first.items() if kind == OUTPUT}
    gradients = {m: a for (kind, m), (_, a) in first.items() if kind == GRAD_OUTPUT}
    return loaded, outcome.logits[0].numpy(), outputs, gradients


def full_capture(names, kinds=(OUTPUT, GRAD_OUTPUT)) -> CaptureSpec:
    return CaptureSpec(modules={n: frozenset(kinds) for n in names},
                       full=frozenset(names), stats=False)


def run_script(text: str, image: Path, tmp_path: Path, env: dict | None = None):
    """Run the script as its user would, in a fresh interpreter in an empty folder, and
    prove from `-X importtime` that it never imports inspector (which the venv can import:
    the package is installed there, so not importing it is the script's doing)."""
    tmp_path.mkdir(exist_ok=True)
    script, out = tmp_path / "reproduce.py", tmp_path / "figures.json"
    script.write_text(text, encoding="utf-8")
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", str(script), str(image), str(out)],
        cwd=tmp_path, env={**clean, **(env or {})}, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    imported = [line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()
                if line.startswith("import time:")]
    assert "torch" in imported and "PIL.Image" in imported  # the check sees the imports
    assert [m for m in imported if m.split(".")[0] == "inspector"] == []
    return json.loads(out.read_text()), proc.stdout


def run_in_process(text: str, image: Path, tmp_path: Path):
    """The script's functions, run here: (logits, outputs, gradients, the model it used)."""
    script = tmp_path / "reproduce_here.py"
    script.write_text(text)
    ns = runpy.run_path(str(script), run_name="reproduce_here")
    models = []
    load = ns["load_model"]

    def keep_model():
        models.append(load())
        return models[-1]

    ns["run"].__globals__["load_model"] = keep_model  # the script's own globals (runpy copies)
    _, logits, target = ns["run"](str(image))
    assert ns["handles"] == []
    assert remaining_hooks(models[0]) == []  # every handle was removed
    return {"logits": logits.tolist(), "target": target, "modules": ns["outputs"],
            "gradients": ns["gradients"]}


def assert_same(result: dict, logits, outputs, gradients, backward: bool = True) -> None:
    np.testing.assert_allclose(result["logits"], logits, rtol=0, atol=1e-4)
    assert set(result["modules"]) == set(outputs)
    for name, array in outputs.items():
        assert_stats(result["modules"][name], array, name)
    if backward:
        assert set(result["gradients"]) == set(gradients) and gradients
        for name, array in gradients.items():
            assert_stats(result["gradients"][name], array, f"gradient of {name}")
    else:
        assert not result.get("gradients") and not gradients


def assert_stats(stats: dict, array: np.ndarray, what: str) -> None:
    a = array.astype(np.float64)
    want = {"mean": a.mean(), "std": a.std(), "min": a.min(), "max": a.max()}
    floor = 1e-6 * float(np.abs(a).max())  # a mean of ~0 has no meaningful relative error
    for key, value in want.items():
        assert stats[key] == pytest.approx(value, rel=1e-4, abs=floor), (what, key)


# -- models --------------------------------------------------------------------------------


def test_demo_with_two_edits_and_backward(demo_samples, tmp_path):
    image = demo_samples[0]
    names = ["stem.bn", "stage1.0.conv", "stage2", "stage3.1.relu", "head"]
    edits = (iv.ZeroChannels("stage2.0.conv", (3, 17)), iv.ScaleGradient("stage1", 0.5))
    request = RunRequest(image=str(image), capture=full_capture(names), interventions=edits)
    loaded, logits, outputs, gradients = engine_run(ModelSpec(device="cpu"), request)
    unedited = engine_run(ModelSpec(device="cpu"), request.with_(interventions=()))[1]
    assert np.abs(logits - unedited).max() > 1e-3  # the edits change the run

    text = script_for(loaded, request)
    result, printed = run_script(text, image, tmp_path)

    assert_same(result, logits, outputs, gradients)
    assert result["target"] == int(np.argmax(logits))
    assert "register_forward_hook" in text and ".register_hook(" in text
    assert all(name in printed for name in names)  # the statistics table
    assert loaded.categories[result["target"]] in printed  # the predictions, by name


def test_every_edit_kind_on_the_demo(demo_samples, tmp_path):
    image = demo_samples[-1]
    names = ["stem", "stage1.1", "stage2.1", "stage3.0.bn", "stage3.0.conv", "pool", "head"]
    edits = (
        iv.Occlude("", (10, 20, 60, 70), value=0.5), iv.Clamp("stem", -1.0, None),
        iv.ScaleChannels("stage1.1", (), 2.0), iv.ScaleChannels("stage1.1", (4, 5), -1.0),
        iv.ReplaceWithMean("stage2.1"), iv.AddNoise("stage3.0.bn", 0.3, seed=11),
        iv.KeepChannels("stage3.0.conv", (1, 2, 3, 50)), iv.ScaleGradient("stage2", 3.0),
        iv.ZeroChannels("head", (0,)),
    )
    request = RunRequest(image=str(image), capture=full_capture(names), interventions=edits,
                         target=2)
    loaded, logits, outputs, gradients = engine_run(ModelSpec(device="cpu"), request)
    result = run_in_process(script_for(loaded, request), image, tmp_path)
    assert result["target"] == 2
    assert_same(result, logits, outputs, gradients)


def test_factory_file_model(tmp_path):
    factory = tmp_path / "tiny_model.py"
    factory.write_text(FACTORY)
    # A wide, transparent image: resized straight to 40 x 48 (bicubic), over white.
    rgba = np.random.default_rng(1).integers(0, 256, (70, 90, 4), dtype=np.uint8)
    image = tmp_path / "wide.png"
    Image.fromarray(rgba, "RGBA").save(image)
    spec = ModelSpec(name=None, factory=f"{factory}:build", device="cpu")
    request = RunRequest(image=str(image), gradients=False,  # and no gradient captured
                         capture=full_capture(["0", "1.relu", "1", "5"], kinds=(OUTPUT,)))
    loaded, logits, outputs, _ = engine_run(spec, request)

    text = script_for(loaded, request)
    result, printed = run_script(text, image, tmp_path / "run")

    assert_same(result, logits, outputs, {}, backward=False)
    assert "spec_from_file_location" in text and ".register_hook(" not in text
    assert loaded.categories[int(np.argmax(logits))] in printed


def test_torchvision_architecture_with_a_checkpoint(tmp_path):
    import torchvision

    torch.manual_seed(3)
    model = torchvision.models.get_model("resnet18", weights=None, num_classes=7)
    checkpoint = tmp_path / "resnet18_7.pt"
    # Wrapped and prefixed as DataParallel training scripts save it; the loader unwraps both.
    torch.save({"state_dict": {f"module.{k}": v for k, v in model.state_dict().items()}},
               checkpoint)
    image = tmp_path / "photo.jpg"
    # 300 x 275: resized to 279 x 256, a crop starting at 27.5, rounded half to even (28).
    photo = np.random.default_rng(2).integers(0, 256, (275, 300, 3), dtype=np.uint8)
    Image.fromarray(photo).save(image, quality=90)
    names = ["conv1", "layer1.0.relu", "layer2", "layer4.1.bn2", "fc"]  # relu: twice a block
    edits = (iv.ReplaceWithMean("layer3.0"), iv.ScaleGradient("layer2.1", 0.25))
    request = RunRequest(image=str(image), capture=full_capture(names), interventions=edits,
                         target=3)
    spec = ModelSpec(name="resnet18", checkpoint=str(checkpoint), device="cpu")
    loaded, logits, outputs, gradients = engine_run(spec, request)

    result, _ = run_script(script_for(loaded, request), image, tmp_path / "run")

    assert result["target"] == 3
    assert_same(result, logits, outputs, gradients)


def test_torchvision_pretrained_weights_from_the_hub_cache(tmp_path, monkeypatch):
    """The pretrained case, without a download: a file of the right name in torch hub's
    cache is what torchvision (and the app) load."""
    import torchvision

    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    weights = torchvision.models.SqueezeNet1_1_Weights.DEFAULT
    cache = tmp_path / "torch" / "hub" / "checkpoints"
    cache.mkdir(parents=True)
    torch.manual_seed(4)
    torch.save(torchvision.models.squeezenet1_1().state_dict(), cache / Path(weights.url).name)
    image = tmp_path / "photo.png"
    Image.fromarray(np.random.default_rng(5).integers(0, 256, (240, 260, 3), np.uint8)).save(image)
    request = RunRequest(image=str(image), capture=full_capture(["features.3", "classifier"]),
                         interventions=(iv.Clamp("features.3", 0.0, 0.5),))
    loaded, logits, outputs, gradients = engine_run(ModelSpec(name="squeezenet1_1"), request)
    assert loaded.pretrained

    text = script_for(loaded, request)
    assert "torchvision.models.SqueezeNet1_1_Weights.IMAGENET1K_V1" in text
    assert_same(run_in_process(text, image, tmp_path), logits, outputs, gradients)


def test_trusted_pickled_module(demo_samples, tmp_path):
    torch.manual_seed(6)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 5, stride=4), torch.nn.GELU(),
                                torch.nn.Flatten(), torch.nn.Linear(4 * 55 * 55, 5))
    path = tmp_path / "whole.pt"
    torch.save(model, path)
    spec = ModelSpec(name=None, pickle=str(path), trust_pickle=True, device="cpu")
    request = RunRequest(image=str(demo_samples[1]), capture=full_capture(["1", "3"]),
                         interventions=(iv.ZeroChannels("1", (0, 2)),))
    loaded, logits, outputs, gradients = engine_run(spec, request)

    text = script_for(loaded, request)
    assert "weights_only=False" in text
    assert_same(run_in_process(text, demo_samples[1], tmp_path), logits, outputs, gradients)


def test_16_bit_image_stretched(demo_samples, tmp_path):
    gray = np.linspace(1000, 5000, 96 * 112).reshape(96, 112).astype(np.uint16)
    image = tmp_path / "deep.png"
    Image.fromarray(gray).save(image)  # a 16-bit PNG holding 12-bit data
    request = RunRequest(image=str(image), capture=full_capture(["stem.conv", "head"]),
                         stretch=True)
    loaded, logits, outputs, gradients = engine_run(ModelSpec(device="cpu"), request)
    result = run_in_process(script_for(loaded, request), image, tmp_path)
    assert_same(result, logits, outputs, gradients)


def test_the_model_itself_is_printed_by_its_tree_name(demo_samples, tmp_path):
    """The root module ("" in named_modules) prints as the module tree names it, not as a
    row with a blank name; the JSON keeps the module names the engine uses."""
    image = demo_samples[0]
    request = RunRequest(image=str(image), capture=full_capture(["", "head"]))
    loaded, logits, outputs, gradients = engine_run(ModelSpec(device="cpu"), request)

    result, printed = run_script(script_for(loaded, request), image, tmp_path)

    assert_same(result, logits, outputs, gradients)
    assert "" in result["modules"]
    # The statistics tables: "name shape mean std min max", outputs then gradients.
    rows = [line for line in printed.splitlines() if line.split()[-5:-4] == ["1x8"]]
    assert [row[:32].strip() for row in rows] == ["head", "demo_shapes"] * 2  # forward order
    assert loaded.name == "demo_shapes"  # what the tree shows for the model itself


def test_all_leaves_without_a_capture(demo_samples, tmp_path):
    loaded = load_model(ModelSpec(device="cpu"))
    text = script_for(loaded, RunRequest(image=str(demo_samples[0])))
    ns = runpy.run_path(_write(tmp_path, text), run_name="x")
    leaves = [n for n, m in loaded.model.named_modules() if n and not list(m.children())]
    assert ns["CAPTURED"] == leaves
    outputs_only = RunRequest(image=None, gradients=False, capture=CaptureSpec.for_modules(["head"]))
    chosen = script_for(loaded, outputs_only, modules=["head", "stem"])
    ns = runpy.run_path(_write(tmp_path, chosen), run_name="x")
    assert ns["CAPTURED"] == ["stem", "head"]  # forward order
    assert "capture_gradient" not in chosen


def test_the_script_runs_where_the_run_ran(demo_samples, tmp_path):
    loaded = load_model(ModelSpec(device="cpu"))
    request = RunRequest(image=str(demo_samples[0]), capture=full_capture(["head"]))
    assert 'DEVICE = "cpu"' in script_for(loaded, request)
    loaded.device = torch.device("cuda")  # what a run on a GPU machine records
    text = script_for(loaded, request)
    assert 'DEVICE = "cuda" if torch.cuda.is_available() else "cpu"' in text
    ns = runpy.run_path(_write(tmp_path, text), run_name="x")
    assert ns["DEVICE"] == ("cuda" if torch.cuda.is_available() else "cpu")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_demo_on_cuda(demo_samples, tmp_path):
    image = demo_samples[2]
    edits = (iv.KeepChannels("stage3.0", (5, 9, 40)), iv.AddNoise("stage1", 0.2, seed=3))
    request = RunRequest(image=str(image), capture=full_capture(["stage1", "stage3.1", "head"]),
                         interventions=edits)
    loaded, logits, outputs, gradients = engine_run(ModelSpec(device="cuda"), request)
    result, printed = run_script(script_for(loaded, request), image, tmp_path)
    assert " on cuda" in printed
    assert_same(result, logits, outputs, gradients)


# -- what cannot be written --------------------------------------------------------------------


class Invert(iv.Intervention):
    def describe(self):
        return f"invert {self.module}"

    def edit_output(self, output, run_id):
        return -output


@pytest.mark.parametrize(
    ("request_args", "named"),
    [
        ({"interventions": (iv.AddNoise("stem", 0.1),)}, "no seed"),
        ({"interventions": (Invert("stem"),)}, "Invert"),
        ({"interventions": (iv.Clamp("stem.nope", 0, 1),)}, "stem.nope"),
        ({"capture": CaptureSpec.for_modules(["stage9"])}, "stage9"),
        ({"target": 99}, "target class 99"),
        ({"interventions": (iv.Occlude("", (0, 0, 200, 10)),)}, "128 x 128 model input"),
    ],
)
def test_a_run_that_cannot_be_written_names_the_part(request_args, named):
    loaded = load_model(ModelSpec(device="cpu"))
    with pytest.raises(ScriptExportError) as e:
        script_for(loaded, RunRequest(image=None, **request_args))
    assert named in str(e.value) and "\n" not in str(e.value)
    assert isinstance(e.value, ValueError)


@pytest.mark.parametrize("name", ["squeezenet1_1", "vit_b_16"])
def test_torchvision_random_weights_are_drawn_again_from_their_seed(name, tmp_path,
                                                                     monkeypatch):
    """No pretrained file: the load's seed (drawn and said in its description) is in the
    script, which builds the same weights (vit_b_16: its zero head re-drawn as the app does)."""
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "empty"))
    image = tmp_path / "photo.png"
    Image.fromarray(np.random.default_rng(7).integers(0, 256, (230, 250, 3), np.uint8)).save(image)
    layer = {"squeezenet1_1": "features.3", "vit_b_16": "encoder.layers.encoder_layer_11"}[name]
    request = RunRequest(image=str(image), capture=full_capture([layer]))
    loaded, logits, outputs, gradients = engine_run(ModelSpec(name=name, device="cpu"), request)
    assert not loaded.pretrained and loaded.seed is not None
    text = script_for(loaded, request)
    assert f"SEED = {loaded.seed}" in text
    assert_same(run_in_process(text, image, tmp_path), logits, outputs, gradients)


def test_models_a_script_cannot_load(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "empty"))
    random = load_model(ModelSpec(name="squeezenet1_1", device="cpu"))
    random.seed = None  # weights drawn with no record of how
    with pytest.raises(ScriptExportError, match="without a recorded seed"):
        script_for(random, RunRequest(image=None))
    unknown = load_model(ModelSpec(device="cpu"))
    unknown.spec = None  # built by hand, not by load_model
    with pytest.raises(ScriptExportError, match="not loaded by"):
        script_for(unknown, RunRequest(image=None))
    pickled = tmp_path / "demo.pt"
    torch.save(load_model(ModelSpec(device="cpu")).model, pickled)
    with pytest.raises(ScriptExportError, match="pickled model is built from Network Inspector"):
        script_for(load_model(ModelSpec(name=None, pickle=str(pickled), trust_pickle=True,
                                        device="cpu")),
                   RunRequest(image=None))
    ours = tmp_path / "ours.py"
    ours.write_text("from inspector.demo.model import build_model\n\n"
                    "def build():\n    return build_model(3)\n")
    with pytest.raises(ScriptExportError, match=r"inspector\.demo\.model"):
        script_for(load_model(ModelSpec(name=None, factory=f"{ours}:build", device="cpu")),
                   RunRequest(image=None))


# -- the CLI -----------------------------------------------------------------------------------


def test_analyse_emit_script_matches_its_npz(demo_samples, tmp_path, capsys):
    image, out, script = demo_samples[0], tmp_path / "out", tmp_path / "reproduce.py"
    code = cli.main(["analyse", "--model", "demo_shapes", "--device", "cpu",
                     "--layers", "stage2.1,head", "--cam", "none", "--no-tensorboard",
                     "--edit", "stage2.0.conv:zero=3,17", "--edit", "stage1:grad-scale=0.5",
                     "--quiet", "--out", str(out), "--emit-script", str(script), str(image)])
    assert code == 0, capsys.readouterr().err
    npz = np.load(out / image.stem / f"{image.stem}.npz")
    text = script.read_text()
    assert "edit_1_zero_channels" in text and "edit_2_scale_gradient" in text

    result, _ = run_script(text, image, tmp_path)

    np.testing.assert_allclose(result["logits"], npz["logits"].reshape(-1), rtol=0, atol=1e-4)
    for name in ("stage2.1", "head"):
        assert_stats(result["modules"][name], npz[f"activation/{name}"], name)
        assert_stats(result["gradients"][name], npz[f"gradient/{name}"], f"gradient of {name}")


def test_analyse_emit_script_to_a_missing_folder(demo_samples, tmp_path, capsys):
    code = cli.main(["analyse", "--device", "cpu", "--cam", "none", "--quiet",
                     "--no-tensorboard", "--out", str(tmp_path / "out"),
                     "--emit-script", str(tmp_path / "nowhere" / "s.py"), str(demo_samples[0])])
    err = capsys.readouterr().err
    assert code == 2 and "nowhere" in err and "Traceback" not in err
    assert not (tmp_path / "out" / demo_samples[0].stem).exists()  # before any image


def _write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "generated.py"
    path.write_text(text)
    return str(path)
