"""The window with models of other families: the CAM layer box, and the open-model dialog's
timm and Hugging Face tabs and seed.

The CAM layer box used to list only (B, C, h, w) outputs: on torchvision's vit_b_16 it
showed `conv_proj`, the only one, while the default map is read at the last block's first
norm (a token layer). The box lists every layer a CAM can read, and its selection is the
layer of the map shown.
"""

from __future__ import annotations

import os
from dataclasses import replace

import numpy as np
import pytest
from test_main_window import TIMEOUT, wait_run, write_png  # noqa: F401

from inspector.ui.open_model import dialog as model_dialog
from inspector.ui.views.activation_view import ActivationView
from inspector.ui.views.tensor_panel import TOKENS
from inspector.ui.views.token_page import TOKEN_GRID_FEATURE, TOKEN_GRID_MEAN

VIT_DEFAULT = "encoder.layers.encoder_layer_11.ln_1"


def combo_layers(cam) -> list[str]:
    return [cam.controls.layer_combo.itemData(i) for i in range(cam.controls.layer_combo.count())]


def test_the_cam_layer_box_of_vit_b_16_lists_token_layers_and_shows_the_maps_layer(
    make_window, qtbot, tmp_path, monkeypatch
):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "no-cache"))  # random weights, always
    window = make_window(model={"name": "vit_b_16", "seed": 0},
                         images=[write_png(tmp_path / "x.png")])
    wait_run(qtbot, window)
    cam = window.views["cam"]
    qtbot.waitUntil(lambda: cam.choice()[0] is not None, timeout=TIMEOUT)
    layers = combo_layers(cam)
    assert window.runs.default_cam_layer == VIT_DEFAULT
    # conv_proj (B, 768, 14, 14), and token layers: every block, its norms, its MLP.
    assert {"conv_proj", "encoder.layers.encoder_layer_0", VIT_DEFAULT,
            "encoder.layers.encoder_layer_11.mlp", "encoder.ln"} <= set(layers)
    assert "heads.head" not in layers  # (B, 1000): no grid
    assert layers.index("conv_proj") < layers.index(VIT_DEFAULT)  # forward order
    assert cam.controls.layer_combo.currentData() == VIT_DEFAULT == cam.choice()[0].layer
    qtbot.waitUntil(lambda: cam.drawn[0] is not None, timeout=TIMEOUT)
    assert "not computed yet" not in cam._header_text()
    assert VIT_DEFAULT in cam._header_text()

    # Another layer chosen in the box: the next map is computed there.
    chosen = "encoder.layers.encoder_layer_5.ln_2"
    cam.controls.layer_combo.setCurrentIndex(layers.index(chosen))
    # Said while the run computes it; then the map drawn is that layer's.
    qtbot.waitUntil(lambda: cam.drawn[0] is not None and cam.drawn[0].layer == chosen,
                    timeout=TIMEOUT)
    assert cam.choice()[0].layer == chosen == cam.controls.layer_combo.currentData()
    assert "not computed yet" not in cam._header_text()


def test_an_hf_vit_folder_runs_in_the_window_with_its_token_layer_as_cam_layer(
    make_window, qtbot, tmp_path, monkeypatch
):
    transformers = pytest.importorskip("transformers")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    config = transformers.ViTConfig(
        image_size=64, patch_size=8, num_hidden_layers=2, hidden_size=32, num_attention_heads=2,
        intermediate_size=64, num_labels=3, id2label={0: "cat", 1: "dog", 2: "fox"},
        label2id={"cat": 0, "dog": 1, "fox": 2})
    folder = tmp_path / "vit"
    # No progress bar while saving: tqdm's monitor thread would outlive the test.
    transformers.utils.logging.disable_progress_bar()
    try:
        transformers.ViTForImageClassification(config).save_pretrained(folder)
    finally:
        transformers.utils.logging.enable_progress_bar()
    transformers.ViTImageProcessor(size={"height": 64, "width": 64}).save_pretrained(folder)
    window = make_window(model={"name": f"hf:{folder}"}, images=[write_png(tmp_path / "x.png")])
    wait_run(qtbot, window)
    cam = window.views["cam"]
    qtbot.waitUntil(lambda: cam.choice()[0] is not None, timeout=TIMEOUT)
    layer = "vit.layers.1.layernorm_before"
    assert cam.controls.layer_combo.currentData() == layer == cam.choice()[0].layer
    assert cam.choice()[0].cam.shape == (64, 64)
    top = window.views["predictions"].frame.top
    assert {p.label for p in top} == {"cat", "dog", "fox"}
    assert window.status.model.text()  # the model is named in the status bar


def test_a_timm_model_without_timm_is_one_line_in_the_window_and_the_model_stays(
    make_window, qtbot, tmp_path, monkeypatch
):
    import sys

    window = make_window(images=[write_png(tmp_path / "x.png")])
    wait_run(qtbot, window)
    monkeypatch.setitem(sys.modules, "timm", None)  # as if not installed
    errors = window.reporter.count
    window.control.load_model(window.control.make_spec(name="timm:resnet18"))
    qtbot.waitUntil(lambda: window.reporter.count > errors and not window.control.loading,
                    timeout=TIMEOUT)
    assert window.reporter.last_message == (
        "Could not load timm:resnet18: timm is not installed: "
        "pip install 'network-inspector[timm]'")
    assert "Traceback" not in window.reporter.last_details
    assert window.model_name == "build_model"  # the tiny model is still loaded


# -- a token layer as its patch grid -------------------------------------------------------------


@pytest.mark.parametrize("extra, features, input_hw, grid", [
    (1, 768, (224, 224), (14, 14)),  # vit_b_16: the preview averages 768 features into 256
    (2, 192, (224, 224), (14, 14)),  # DeiT: class and distillation tokens
    (0, 32, (64, 112), (8, 14)),  # Swin-like: no extra token, a wide input
])
def test_a_token_layer_is_shown_as_its_patch_grid(qtbot, extra, features, input_hw, grid):
    from view_frames import act, shown, started

    view = shown(qtbot, ActivationView())
    view.set_module("blocks.11")
    gh, gw = grid
    n = extra + gh * gw
    kept = min(features, 256)  # what core's preview keeps of the features
    preview = np.random.default_rng(1).normal(size=(n, kept)).astype(np.float32)
    view.store.put(started(1, display=np.zeros((*input_hw, 3), np.uint8)))
    view.store.put(replace(act(1, "blocks.11", preview), shape=(1, n, features)))
    panel = view.panel
    assert panel.mode == TOKENS and not panel.controls.token_combo.isHidden()
    panel.controls.token_combo.setCurrentIndex(panel.controls.token_combo.findData(TOKEN_GRID_MEAN))
    np.testing.assert_allclose(panel.tokens.item.image,
                               preview[extra:].mean(1).reshape(gh, gw), rtol=1e-5)
    title = panel.tokens.plot.titleLabel.text
    assert f"{gh}\u00d7{gw} patch grid" in title
    layout_combo = panel.controls.token_combo
    layout_combo.setCurrentIndex(layout_combo.findData(TOKEN_GRID_FEATURE))
    panel.controls.feature_spin.setValue(2)
    np.testing.assert_array_equal(panel.tokens.item.image, preview[extra:, 2].reshape(gh, gw))
    if kept < features:  # a column of the preview is a group of features: said so
        assert "features 6\u20138 (averaged in the preview)" in panel.tokens.plot.titleLabel.text


# -- the dialog -----------------------------------------------------------------------------------


@pytest.fixture
def dialog(qtbot):
    d = model_dialog.ModelDialog(catalog=["demo_shapes", "resnet18"], devices=["cpu"])
    qtbot.addWidget(d)
    return d


def open_button(d):
    return d.buttons.button(d.buttons.StandardButton.Open)


def test_the_timm_tab_filters_its_list_as_you_type(dialog, tmp_path):
    pytest.importorskip("timm")
    import timm

    dialog.tabs.setCurrentIndex(model_dialog.TIMM)
    dialog.timm.fill()  # offscreen, a tab page may not get its show event
    assert dialog.timm.filtered.rowCount() == len(timm.list_models())
    dialog.timm.search.setText("CONVNEXT_AT")  # case does not matter
    shown = [dialog.timm.filtered.index(i, 0).data()
             for i in range(dialog.timm.filtered.rowCount())]
    assert shown and all("convnext_at" in name for name in shown)
    assert "convnext_atto" in shown
    assert dialog.timm.name() in shown
    assert open_button(dialog).isEnabled()
    spec = dialog.spec()
    assert spec.name == f"timm:{dialog.timm.name()}" and spec.checkpoint is None
    assert spec.seed is None  # "a new seed each load"

    dialog.timm.weights.edit.setText(str(tmp_path / "missing.safetensors"))
    assert not open_button(dialog).isEnabled()
    weights = tmp_path / "w.safetensors"
    weights.write_bytes(b"x")
    dialog.timm.weights.edit.setText(str(weights))
    dialog.seed.setValue(42)
    assert open_button(dialog).isEnabled()
    spec = dialog.spec()
    assert (spec.checkpoint, spec.seed) == (str(weights), 42)
    dialog.timm.search.setText("no model has this name")
    assert dialog.timm.name() is None and not open_button(dialog).isEnabled()


def test_the_hugging_face_tab_asks_for_a_folder_and_consent_to_its_code(dialog, tmp_path):
    pytest.importorskip("transformers")
    dialog.tabs.setCurrentIndex(model_dialog.HF)
    assert not open_button(dialog).isEnabled()
    dialog.hf.folder.edit.setText(str(tmp_path))
    assert "config.json" in open_button(dialog).toolTip()
    (tmp_path / "config.json").write_text("{}")
    dialog.hf.folder.edit.setText(str(tmp_path) + os.sep)  # any edit re-checks
    assert open_button(dialog).isEnabled()
    spec = dialog.spec()
    assert spec.name.startswith("hf:") and spec.trust_remote_code is False
    dialog.hf.trust.setChecked(True)
    assert dialog.spec().trust_remote_code is True
    assert model_dialog.spec_label(spec) == f"{tmp_path.name} (Hugging Face)"


@pytest.mark.parametrize("tab, module, extra", [
    (model_dialog.TIMM, "timm", "timm"), (model_dialog.HF, "transformers", "hf")])
def test_without_the_library_the_tab_says_what_to_install(qtbot, monkeypatch, tab, module,
                                                         extra):
    import sys

    monkeypatch.setitem(sys.modules, module, None)
    d = model_dialog.ModelDialog(catalog=["demo_shapes"], devices=["cpu"])
    qtbot.addWidget(d)
    d.tabs.setCurrentIndex(tab)
    line = f"{module} is not installed: pip install 'network-inspector[{extra}]'"
    assert not open_button(d).isEnabled()
    assert open_button(d).toolTip() == line
    page = d.timm if tab == model_dialog.TIMM else d.hf
    assert page.missing.text() == line


def test_the_gui_command_line_passes_the_seed_and_the_consent():
    from inspector.app import model_fields, parse_args

    fields = model_fields(parse_args(["--model", "hf:/models/vit", "--seed", "3",
                                      "--trust-remote-code"]))
    assert fields == {"name": "hf:/models/vit", "seed": 3, "trust_remote_code": True}
    assert model_fields(parse_args(["--model", "timm:resnet18"])) == {"name": "timm:resnet18"}
