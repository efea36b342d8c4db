"""timm and Hugging Face models through the app's loaders (`timm:NAME --weights FILE`,
`hf:PATH`), random weights from a seed, and the one-line message without the extras.

Nothing is downloaded: every model is built from a config with random weights, saved to a
temp folder and loaded from there, with HF_HUB_OFFLINE=1. For each model the Session's
top-1 equals a direct forward of the same model on the same preprocessed input, and its
Grad-CAM at the default layer matches one computed here with plain hooks (Pearson r).
"""

from __future__ import annotations

import json
import os

os.environ["HF_HUB_OFFLINE"] = "1"  # before huggingface_hub reads it (timm imports it)

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image

from inspector.core.models.base import MissingExtra, ModelSpec, has_module
from inspector.core.models.files import ModelLoadError
from inspector.core.models.load import load_model
from inspector.core.run.session import Session

timm = pytest.importorskip("timm")
transformers = pytest.importorskip("transformers")


def picture(size=(90, 70), seed=0) -> Image.Image:
    rng = np.random.default_rng(seed)
    array = rng.integers(0, 255, (size[1], size[0], 3), dtype=np.uint8)
    array[20:50, 30:60] = (250, 200, 30)  # something for the model to see
    return Image.fromarray(array)


@pytest.fixture(autouse=True)
def empty_caches(tmp_path, monkeypatch):
    """No pretrained weights, whatever this machine's caches hold: random weights are what
    the tests expect where no file is given."""
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch-home"))
    return tmp_path / "hf-cache"


@pytest.fixture(scope="module")
def session():
    s = Session()
    yield s
    s.close()


def hand_gradcam(model, x, module, grid) -> np.ndarray:
    """Grad-CAM at `module` with plain hooks: `grid(output)` reshapes the output into
    (1, C, h, w) here, written out per model (not with core.tokens)."""
    kept = {}

    def hook(_m, _args, output):
        output.retain_grad()
        kept["a"] = output

    handle = module.register_forward_hook(hook)
    try:
        out = model(x)
    finally:
        handle.remove()
    logits = out.logits if hasattr(out, "logits") else out
    logits[0, logits[0].argmax()].backward()
    a, g = grid(kept["a"].detach()), grid(kept["a"].grad)
    cam = F.relu((g.mean(dim=(2, 3), keepdim=True) * a).sum(1, keepdim=True))
    cam = F.interpolate(cam, size=x.shape[-2:], mode="bilinear", align_corners=False)[0, 0]
    return cam.numpy()


def check_against_direct(session, spec, layer, grid, image=None):
    """Load `spec`, run one image; top-1 and Grad-CAM against a direct computation."""
    loaded = session.load_model(spec).result(timeout=300)
    assert session.default_cam_layer() == layer
    image = image or picture()
    outcome = session.run(image, cams=(("gradcam", None),), timeout=300)
    assert outcome.status == "ok", outcome.error
    model = loaded.model
    x = loaded.preprocess(image)[None]
    with torch.no_grad():
        direct = model(x)
    direct = direct.logits if hasattr(direct, "logits") else direct
    assert int(outcome.logits[0].argmax()) == int(direct[0].argmax())
    torch.testing.assert_close(outcome.logits, direct, rtol=1e-4, atol=1e-5)
    ours = outcome.cams[("gradcam", layer)]
    theirs = hand_gradcam(model, x.clone().requires_grad_(True),
                          dict(model.named_modules())[layer], grid)
    assert ours.shape == theirs.shape == tuple(x.shape[-2:])
    assert theirs.std() > 0
    r = np.corrcoef(ours.ravel(), theirs.ravel())[0, 1]
    assert r >= 0.99, r
    return loaded, outcome


def nchw(t):
    return t


# -- timm -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name, save, layer", [
    ("resnet18", "safetensors", "layer4"),
    ("convnext_atto", "torch", "norm_pre"),
])
def test_a_timm_model_with_a_weights_file(session, tmp_path, name, save, layer):
    torch.manual_seed(1)
    built = timm.create_model(name, pretrained=False, num_classes=7)
    if save == "safetensors":
        from safetensors.torch import save_file

        path = tmp_path / f"{name}.safetensors"
        save_file(built.state_dict(), str(path))
    else:
        path = tmp_path / f"{name}.pth"
        torch.save(built.state_dict(), path)
    spec = ModelSpec(name=f"timm:{name}", checkpoint=str(path), device="cpu")
    loaded, _ = check_against_direct(session, spec, layer, nchw)
    # The file's 7 classes (a fine-tuned head), its weights, timm's preprocessing.
    assert loaded.categories == [f"class {i}" for i in range(7)]
    for key, value in built.state_dict().items():
        torch.testing.assert_close(loaded.model.state_dict()[key], value)
    cfg = timm.data.resolve_data_config(model=built)
    assert loaded.preprocess.crop_size == tuple(cfg["input_size"][1:])
    assert loaded.preprocess.interpolation == cfg["interpolation"] == "bicubic"
    assert loaded.preprocess.resize_size == int(cfg["input_size"][1] / cfg["crop_pct"])
    assert loaded.preprocess.mean == pytest.approx(cfg["mean"])
    assert loaded.pretrained and loaded.seed is None


def test_timm_preprocessing_equals_timms_own_transform():
    from inspector.core.models.timm_models import timm_preprocess

    model = timm.create_model("resnet18", pretrained=False)
    cfg = timm.data.resolve_data_config(model=model)
    pre, note = timm_preprocess(cfg)
    assert note == ""
    image = picture((150, 110))
    theirs = timm.data.create_transform(**cfg)(image)
    torch.testing.assert_close(pre(image), theirs, rtol=0, atol=1e-5)


def test_timm_without_weights_has_imagenet_names_and_says_random(session):
    loaded = load_model(ModelSpec(name="timm:resnet18", device="cpu", seed=5))
    assert not loaded.pretrained and loaded.seed == 5
    assert len(loaded.categories) == 1000 and loaded.categories[0] == "tench"
    assert "RANDOM" in loaded.description and loaded.description.endswith(", seed 5")


def test_timm_weights_from_the_hf_cache_are_used_offline(empty_caches):
    from safetensors.torch import save_file

    hub_id = timm.models.get_pretrained_cfg("resnet18").hf_hub_id  # timm/resnet18.<tag>
    snapshot = empty_caches / f"models--{hub_id.replace('/', '--')}" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (empty_caches / f"models--{hub_id.replace('/', '--')}" / "refs").mkdir()
    (empty_caches / f"models--{hub_id.replace('/', '--')}" / "refs" / "main").write_text("abc123")
    torch.manual_seed(8)
    trained = timm.create_model("resnet18")
    save_file(trained.state_dict(), str(snapshot / "model.safetensors"))

    loaded = load_model(ModelSpec(name="timm:resnet18", device="cpu"))
    assert loaded.pretrained and loaded.seed is None
    assert "from the HF cache" in loaded.description
    assert loaded.source == str(snapshot / "model.safetensors")
    for key, value in trained.state_dict().items():
        torch.testing.assert_close(loaded.model.state_dict()[key], value)


def test_an_unknown_timm_model_is_one_sentence():
    with pytest.raises(ModelLoadError, match="unknown timm model 'no_such_net'"):
        load_model(ModelSpec(name="timm:no_such_net", device="cpu"))


def test_a_timm_weights_file_for_another_model_names_the_keys(tmp_path):
    path = tmp_path / "other.pth"
    torch.save(timm.create_model("convnext_atto").state_dict(), path)
    with pytest.raises(ModelLoadError, match="does not fit timm resnet18"):
        load_model(ModelSpec(name="timm:resnet18", checkpoint=str(path), device="cpu"))


# -- Hugging Face ---------------------------------------------------------------------------------


def save_hf(folder, model, size=64):
    model.save_pretrained(folder)
    transformers.ViTImageProcessor(size={"height": size, "width": size}).save_pretrained(folder)
    return folder


def test_an_hf_vit_from_its_folder(session, tmp_path):
    torch.manual_seed(2)
    labels = {i: name for i, name in enumerate(["cat", "dog", "fox", "owl", "yak"])}
    config = transformers.ViTConfig(
        image_size=64, patch_size=8, num_hidden_layers=2, hidden_size=48, num_attention_heads=3,
        intermediate_size=96, num_labels=5, id2label=labels,
        label2id={v: k for k, v in labels.items()})
    folder = save_hf(tmp_path / "vit", transformers.ViTForImageClassification(config))

    def tokens(t):  # (1, 1 + 64, D): the class token, then an 8 x 8 grid
        return t[:, 1:].reshape(1, 8, 8, -1).permute(0, 3, 1, 2)

    loaded, outcome = check_against_direct(
        session, ModelSpec(name=f"hf:{folder}", device="cpu"), "vit.layers.1.layernorm_before",
        tokens)
    assert loaded.categories == ["cat", "dog", "fox", "owl", "yak"]
    # Fused attention: runs that read the probabilities switch to eager for the run only.
    assert loaded.model.config._attn_implementation == "sdpa"
    assert loaded.preprocess.crop_size == (64, 64) and loaded.preprocess.resize_size is None
    # The processor's own output, for the same picture (PIL resize, bilinear).
    processor = transformers.AutoImageProcessor.from_pretrained(folder, use_fast=False)
    image = picture()
    theirs = torch.as_tensor(processor(image, return_tensors="np")["pixel_values"])
    torch.testing.assert_close(loaded.preprocess(image)[None], theirs, rtol=0, atol=0.03)


def test_an_hf_swin_from_its_folder(session, tmp_path):
    torch.manual_seed(3)
    config = transformers.SwinConfig(image_size=64, patch_size=4, embed_dim=16, depths=[1, 1],
                                     num_heads=[2, 2], window_size=4, num_labels=4)
    folder = save_hf(tmp_path / "swin", transformers.SwinForImageClassification(config))

    def tokens(t):  # (1, 64, C): an 8 x 8 grid, no class token
        return t.reshape(1, 8, 8, -1).permute(0, 3, 1, 2)

    loaded, _ = check_against_direct(
        session, ModelSpec(name=f"hf:{folder}", device="cpu"),
        "swin.encoder.layers.1.blocks.0.layernorm_before", tokens)
    assert loaded.categories == [f"LABEL_{i}" for i in range(4)]


def test_hf_remote_code_needs_consent(tmp_path):
    folder = tmp_path / "remote"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(
        {"model_type": "custom", "auto_map": {"AutoModelForImageClassification": "m.Net"}}))
    (folder / "m.py").write_text("raise SystemExit('this code must not run')\n")
    with pytest.raises(ModelLoadError, match="--trust-remote-code"):
        load_model(ModelSpec(name=f"hf:{folder}", device="cpu"))


@pytest.mark.parametrize("make, message", [
    (lambda p: p / "none", "no such folder"),
    (lambda p: (p / "f.txt").write_text("x") and p / "f.txt", "is a file"),
    (lambda p: p, "has no config.json"),
])
def test_an_hf_path_that_is_no_model_folder_is_one_sentence(tmp_path, make, message):
    with pytest.raises(ModelLoadError, match=message):
        load_model(ModelSpec(name=f"hf:{make(tmp_path)}", device="cpu"))


def test_processor_sizes_map_onto_preprocess():
    from inspector.core.models.hf_models import processor_preprocess

    convnext, _ = processor_preprocess(transformers.ConvNextImageProcessor(
        size={"shortest_edge": 224}, crop_pct=0.875))
    assert (convnext.crop_size, convnext.resize_size) == ((224, 224), 256)
    assert convnext.interpolation == "bicubic"
    big, _ = processor_preprocess(transformers.ConvNextImageProcessor())  # 384: no crop
    assert (big.crop_size, big.resize_size) == ((384, 384), None)
    deit, notes = processor_preprocess(transformers.DeiTImageProcessor())
    assert (deit.crop_size, deit.resize_size) == ((224, 224), 256) and notes
    beit, _ = processor_preprocess(transformers.BeitImageProcessor())
    assert (beit.crop_size, beit.resize_size) == ((224, 224), None)
    assert beit.mean == (0.5, 0.5, 0.5)


# -- seeds and missing extras ---------------------------------------------------------------------


@pytest.mark.parametrize("name", ["resnet18", "timm:resnet18"])
def test_the_same_seed_builds_the_same_random_weights(name):
    a = load_model(ModelSpec(name=name, device="cpu", seed=11)).model.state_dict()
    torch.manual_seed(99)  # whatever happened to the generator in between
    b = load_model(ModelSpec(name=name, device="cpu", seed=11)).model.state_dict()
    c = load_model(ModelSpec(name=name, device="cpu", seed=12)).model.state_dict()
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)


def test_without_a_seed_one_is_drawn_and_recorded():
    first = load_model(ModelSpec(name="resnet18", device="cpu"))
    again = load_model(ModelSpec(name="resnet18", device="cpu", seed=first.seed))
    assert first.seed is not None and not first.pretrained
    w = "conv1.weight"
    assert torch.equal(first.model.state_dict()[w], again.model.state_dict()[w])


@pytest.mark.parametrize("family, module, extra", [
    ("timm:resnet18", "timm", "timm"), ("hf:/some/folder", "transformers", "hf")])
def test_a_missing_extra_is_one_line_naming_the_pip_install(monkeypatch, family, module, extra):
    monkeypatch.setitem(__import__("sys").modules, module, None)  # import fails
    assert not has_module(module)
    with pytest.raises(MissingExtra) as info:
        load_model(ModelSpec(name=family, device="cpu"))
    assert str(info.value) == (f"{module} is not installed: "
                               f"pip install 'network-inspector[{extra}]'")


# -- the command line -----------------------------------------------------------------------------


def test_analyse_a_timm_model_and_record_the_seed(tmp_path, capsys):
    from inspector.cli import main

    torch.manual_seed(4)
    weights = tmp_path / "r18.pth"
    torch.save(timm.create_model("resnet18", num_classes=3).state_dict(), weights)
    picture().save(tmp_path / "a.png")
    out = tmp_path / "out"
    code = main(["analyse", "--model", "timm:resnet18", "--weights", str(weights), "--device",
                 "cpu", "--out", str(out), "--quiet", "--no-tensorboard", str(tmp_path / "a.png")])
    assert code == 0, capsys.readouterr().err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["model"] == "timm:resnet18" and summary["cam_layer"] == "layer4"
    assert summary["seed"] is None and summary["pretrained"] is True
    assert summary["images"][0]["error"] is None

    out = tmp_path / "random"
    code = main(["analyse", "--model", "resnet18", "--seed", "7", "--device", "cpu", "--cam",
                 "none", "--out", str(out), "--quiet", "--no-tensorboard",
                 str(tmp_path / "a.png")])
    assert code == 0, capsys.readouterr().err
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["seed"], summary["pretrained"]) == (7, False)


@pytest.mark.parametrize("command", ["analyse", "tree", "atlas"])
def test_the_cli_without_the_extra_says_what_to_install(monkeypatch, tmp_path, capsys, command):
    from inspector.cli import main

    monkeypatch.setitem(__import__("sys").modules, "timm", None)
    args = {"analyse": ["--out", str(tmp_path), "x.png"], "tree": [],
            "atlas": ["--layers", "layer4", "--out", str(tmp_path), str(tmp_path)]}[command]
    assert main([command, "--model", "timm:resnet18", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("network-inspector: timm is not installed: "
                   "pip install 'network-inspector[timm]'")


def test_copy_as_python_refuses_a_hub_model_in_one_sentence(tmp_path):
    from inspector.core.models.script_code import ScriptExportError
    from inspector.core.run.request import RunRequest
    from inspector.core.script.export import script_for

    path = tmp_path / "r18.pth"
    torch.save(timm.create_model("resnet18").state_dict(), path)
    loaded = load_model(ModelSpec(name="timm:resnet18", checkpoint=str(path), device="cpu"))
    with pytest.raises(ScriptExportError, match="timm:resnet18 is a timm model"):
        script_for(loaded, RunRequest(image=None))


HF_FAMILIES = {
    "deit": ("DeiTConfig", "DeiTForImageClassification", {"patch_size": 8, "image_size": 64},
             "deit.layers.1.layernorm_before"),
    "beit": ("BeitConfig", "BeitForImageClassification", {"patch_size": 8, "image_size": 64,
                                                          "use_mean_pooling": True},
             "beit.layers.1.layernorm_before"),
    "convnext": ("ConvNextConfig", "ConvNextForImageClassification",
                 {"hidden_sizes": [8, 16, 24, 32], "depths": [1, 1, 1, 1]},
                 "convnext.encoder.stages.3"),
    "resnet": ("ResNetConfig", "ResNetForImageClassification",
               {"embedding_size": 8, "hidden_sizes": [8, 16, 24, 32], "depths": [1, 1, 1, 1]},
               "resnet.encoder.stages.3"),
}
TRANSFORMER = {"num_hidden_layers": 2, "hidden_size": 32, "num_attention_heads": 2,
               "intermediate_size": 64}


@pytest.mark.parametrize("family", sorted(HF_FAMILIES))
def test_other_hf_families_run_with_cams_at_their_default_layer(session, tmp_path, family):
    from inspector.core.explain.cam.compute import compute_cams

    config_name, model_name, options, layer = HF_FAMILIES[family]
    if "patch_size" in options:
        options = {**options, **TRANSFORMER}
    torch.manual_seed(6)
    config = getattr(transformers, config_name)(num_labels=3, **options)
    folder = save_hf(tmp_path / family, getattr(transformers, model_name)(config))
    loaded = session.load_model(ModelSpec(name=f"hf:{folder}", device="cpu")).result(300)
    assert session.default_cam_layer() == layer
    image = picture()
    outcome = session.run(image, cams=(("gradcam", None),), timeout=300)
    assert outcome.status == "ok", outcome.error
    with torch.no_grad():
        direct = loaded.model(loaded.preprocess(image)[None]).logits
    torch.testing.assert_close(outcome.logits, direct, rtol=1e-4, atol=1e-5)
    assert outcome.cams[("gradcam", layer)].shape == (64, 64)
    # The lean path (no Session) at the default layer agrees with the Session's map.
    lean = compute_cams(loaded.model, loaded.preprocess(image)[None])
    assert lean.layer == layer
    torch.testing.assert_close(lean.logits, direct, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(lean.cams["gradcam"][0], outcome.cams[("gradcam", layer)],
                               atol=1e-4)
    if family in ("convnext", "resnet"):
        # At the backbone, which returns a ModelOutput that the head reads by attribute
        # (`outputs.pooler_output`): the hook's copy keeps its type, so the forward goes
        # on, and the map is refused in words (the head reads the pooled output, computed
        # before the hook), not an AttributeError from inside transformers.
        backbone = layer.split(".")[0]
        with pytest.raises(ValueError, match=f"does not depend on layer '{backbone}'"):
            compute_cams(loaded.model, loaded.preprocess(image)[None], layer=backbone)


def tiny_vit_config(**changes):
    return transformers.ViTConfig(**{
        "image_size": 32, "patch_size": 8, "num_hidden_layers": 1, "hidden_size": 32,
        "num_attention_heads": 2, "intermediate_size": 64, "num_labels": 3, **changes})


def test_an_hf_folder_without_a_processor_runs_at_its_config_image_size(tmp_path):
    """It was fed ImageNet's 224 pixels, which a 32-pixel ViT cannot take: `tree` ended in a
    traceback."""
    folder = tmp_path / "vit32"
    transformers.ViTForImageClassification(tiny_vit_config()).save_pretrained(folder)
    loaded = load_model(ModelSpec(name=f"hf:{folder}", device="cpu"))
    assert loaded.preprocess.crop_size == (32, 32)
    assert any("resized to 32 pixels" in note for note in loaded.notes)
    from test_cli import run_cli  # the command in a process of its own

    done = run_cli("tree", "--model", f"hf:{folder}")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr


def test_an_hf_folder_whose_tensors_do_not_fit_its_config_is_one_sentence(tmp_path, capfd):
    """transformers printed its whole load report (a coloured table) and our sentence ended
    with its 'look at the above report!'."""
    import json

    folder = tmp_path / "mismatch"
    transformers.ViTForImageClassification(tiny_vit_config()).save_pretrained(folder)
    config = json.loads((folder / "config.json").read_text())
    config.update(hidden_size=48, intermediate_size=96)
    (folder / "config.json").write_text(json.dumps(config))
    capfd.readouterr()
    # As a user's script (or an earlier test) may have set it: the report is a warning, and
    # at this verbosity transformers would not have written it where the loader reads it.
    logging = transformers.utils.logging
    before = logging.get_verbosity()
    logging.set_verbosity_error()
    try:
        with pytest.raises(ModelLoadError) as info:
            load_model(ModelSpec(name=f"hf:{folder}", device="cpu"))
        assert logging.get_verbosity() == logging.ERROR  # put back as it was
    finally:
        logging.set_verbosity(before)
    message = str(info.value)
    assert "of its tensors do not fit the shapes its config.json gives" in message, message
    assert "above report" not in message and "\x1b" not in message
    assert "MISMATCH" in info.value.details  # the report, whole, for the Details button
    printed = capfd.readouterr()
    assert "MISMATCH" not in printed.err and "MISMATCH" not in printed.out
