"""Comparing models in the window: File ▸ Compare with model… runs compare-models on the
strip's images and shows the CKA heatmap; a clicked cell selects its layer in the tree and
lists the pair's matched channels with both mosaics; A/B compare's "Patch sweep from A"
plots the sweep beside the divergence plot, and a clicked point selects its module."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from PySide6.QtCore import QPointF, Qt
from test_main_window import TIMEOUT, wait_run, write_png  # noqa: F401 (a fixture)


def _images(tmp_path, count=6):
    colours = [(40, 80, 160), (200, 40, 40), (30, 160, 60), (120, 120, 20), (90, 30, 140),
               (10, 10, 10), (220, 220, 220), (60, 200, 200)]
    return [write_png(tmp_path / f"img{i}.png", color=colours[i % len(colours)])
            for i in range(count)]


def test_compare_with_model_shows_the_heatmap_and_matched_channels(
        make_window, qtbot, tmp_path):
    window = make_window(images=_images(tmp_path))
    wait_run(qtbot, window)
    actions = window.compare_models
    assert actions.action.text() == "Compare with &model…"
    actions.open_dialog()
    dialog = actions.dialog
    assert dialog is not None and dialog.use_strip.isChecked()
    assert "MB" in dialog.memory.text() or "KB" in dialog.memory.text()
    assert dialog.spec_b() is None  # the same name, no weights: B is A
    small = dialog.cost.batch
    dialog.model_b.setCurrentText("resnet34")  # another architecture: its own activations
    dialog.update_memory()
    assert dialog.cost.batch > small + 100 * 2**20 and "resnet34" in dialog.memory.text()
    dialog.model_b.setCurrentText(dialog.a_text)
    dialog.update_memory()
    assert dialog.spec_b() is None and dialog.cost.batch == small
    dialog.out.setText(str(tmp_path / "cmp"))
    dialog.run()
    qtbot.waitUntil(lambda: actions.view is not None and actions.view.doc is not None,
                    timeout=TIMEOUT)
    view = actions.view
    doc = json.loads((tmp_path / "cmp" / "cka.json").read_text())
    assert view.doc == doc and doc["images"] == 6
    assert np.abs(np.diag(view.values) - 1).max() <= 1e-6
    assert actions.dock.isVisible() and "Linear CKA" in view.header.text()
    assert "exact" in view.header.text()
    # A cell: its layer of A is selected in the tree, its channels matched on the thread.
    row = next(i for i, n in enumerate(doc["layers_a"]) if window.tree.select_module(n) and
               len(window.control.session.tree[n].output_shape or ()) == 4)
    window.tree.select_module(doc["layers_a"][-1])
    view.select(row, row)
    assert window.tree.current_module() == doc["layers_a"][row]
    qtbot.waitUntil(lambda: view.matches.table.rowCount() > 0
                    or view.matches.status.text().startswith("No matched"), timeout=TIMEOUT)
    assert view.matches.table.rowCount() > 0, view.matches.status.text()
    assert float(view.matches.table.item(0, 2).text()) == 1.0  # itself
    assert not view.matches.mosaic_a.pixmap().isNull()
    assert not view.matches.mosaic_b.pixmap().isNull()
    qtbot.waitUntil(lambda: not actions.runner.running, timeout=TIMEOUT)
    qtbot.wait(200)
    actions.dock.grab().save(str(tmp_path / "model_comparison.png"))


NET_B = """
import torch
from torch import nn


def build():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 12, 3, stride=2, padding=1), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(12, 4))
"""


def test_another_architecture_over_a_folder(make_window, qtbot, tmp_path,
                                            monkeypatch):
    """With memory short after loading (under KEEP_FREE free), the pair is not kept: a click
    loads both models again, and says so."""
    from inspector.batch.compare_models import memory as compare_memory

    monkeypatch.setattr(compare_memory, "available_bytes", lambda: 1 << 20)
    folder = tmp_path / "folder"
    folder.mkdir()
    images = _images(folder, 5)
    window = make_window(images=images[:1])
    wait_run(qtbot, window)
    (tmp_path / "net.py").write_text(NET_B)
    actions = window.compare_models
    actions.open_dialog()
    dialog = actions.dialog
    assert dialog.use_folder.isChecked()  # one image in the strip: too few, a folder
    dialog.model_b.setCurrentText(f"{tmp_path / 'net.py'}:build")
    assert dialog.spec_b() is not None and dialog.spec_b().factory.endswith("net.py:build")
    assert "unknown until B loads" in dialog.memory.text()  # not torchvision's: said so
    dialog.folder.setText(str(folder))
    dialog.out.setText(str(tmp_path / "cmp"))
    from inspector import cli

    atlas_b = tmp_path / "atlas_b"  # an atlas of model B's first convolution
    assert cli.main(["atlas", "--model", f"{tmp_path / 'net.py'}:build", "--device", "cpu",
                     "--quiet", "--workers", "0", "--layers", "0", "--top", "1", "--out",
                     str(atlas_b), str(folder)]) == 0
    dialog.atlas_a.setText(str(tmp_path / "no_atlas"))
    dialog.atlas_b.setText(str(atlas_b))
    dialog.run()
    qtbot.waitUntil(lambda: actions.view is not None and actions.view.doc is not None,
                    timeout=TIMEOUT)
    view = actions.view
    doc = view.doc
    assert doc["images"] == 5 and doc["same_model"] is False
    assert doc["layers_b"] == ["0", "1", "2", "4"]  # B's own leaves (the Flatten passes on)
    assert view.values.shape == (len(doc["layers_a"]), 4)
    tree = window.control.session.tree
    row = next(i for i, n in enumerate(doc["layers_a"])
               if len(tree[n].output_shape or ()) == 4)
    qtbot.waitUntil(lambda: not actions.runner.running, timeout=TIMEOUT)
    assert not actions.runner.loaded  # released at the end of the job
    view.select(row, 0)  # A's convolution layer against B's convolution
    assert window.tree.current_module() == doc["layers_a"][row]
    assert "Loading both models again" in view.matches.status.text()
    assert "<b>B</b> 0" in view.matches.title.text()
    qtbot.waitUntil(lambda: view.matches.table.rowCount() > 0
                    or view.matches.status.text().startswith("No matched"), timeout=TIMEOUT)
    channels_a = tree[doc["layers_a"][row]].output_shape[1]
    assert view.matches.table.rowCount() == min(channels_a, 12), view.matches.status.text()
    assert not view.matches.mosaic_b.pixmap().isNull()
    # B's atlas: the top pairs' crops under B's mosaic; A's folder holds none: said
    crops = view.matches.crops_b.pixmap()
    assert not crops.isNull()
    assert crops.width() == min(4, view.matches.table.rowCount()) * (52 + 2)
    assert view.matches.crops_a.pixmap().isNull()
    assert "no crops from" in view.matches.status.toolTip()
    qtbot.waitUntil(lambda: not actions.runner.running, timeout=TIMEOUT)
    view.grab().save(str(tmp_path / "model_comparison_atlas.png"))


def test_patch_sweep_from_a_beside_the_divergence_plot(make_window, qtbot, tmp_path):
    first, second = _images(tmp_path, 2)
    window = make_window(images=[first])
    wait_run(qtbot, window)
    compare = window.compare
    panel = compare.sweep.panel
    assert panel.button.text() == "Patch sweep from A"
    assert not compare.sweep.run(None)  # nothing pinned yet: said in the panel
    assert "Pin a run as A" in panel.header.text()
    compare.pin_action.trigger()
    wait_run(qtbot, window)
    window.images.add_paths([second])
    qtbot.waitUntil(lambda: window.control.last_request.label == second.name, timeout=TIMEOUT)
    wait_run(qtbot, window)
    window.docks["divergence"].show()
    window.docks["divergence"].raise_()
    assert compare.sweep.run(None)
    qtbot.waitUntil(lambda: panel.sweep is not None, timeout=TIMEOUT)
    sweep = panel.sweep
    assert sweep.logit[-1] == sweep.clean_logit  # the last module gives A's run
    assert len(panel.curve.getData()[0]) == len(sweep.modules)
    assert "Patch sweep" in panel.header.text()
    qtbot.waitExposed(panel)
    vb = panel.plot.getPlotItem().vb
    scene = vb.mapViewToScene(QPointF(0, sweep.logit[0]))
    view_pos = panel.plot.mapFromScene(scene)
    qtbot.mouseClick(panel.plot.viewport(), Qt.MouseButton.LeftButton, pos=view_pos)
    qtbot.waitUntil(lambda: window.tree.current_module() == sweep.modules[0], timeout=TIMEOUT)
    qtbot.wait(200)  # the header's new lines laid out
    window.docks["divergence"].widget().grab().save(str(tmp_path / "patch_sweep.png"))


def _sweep_shown(qtbot, window, second):
    """Pin the current run as A, run `second` as B, and sweep: the panel shows it."""
    compare = window.compare
    compare.pin_action.trigger()
    wait_run(qtbot, window)
    window.images.add_paths([second])
    window.images.list.setCurrentRow(window.images.list.count() - 1)
    qtbot.waitUntil(lambda: window.control.last_request.label == second.name, timeout=TIMEOUT)
    wait_run(qtbot, window)
    assert compare.sweep.run(None), compare.sweep.panel.header.text()
    qtbot.waitUntil(lambda: compare.sweep.panel.sweep is not None, timeout=TIMEOUT)
    assert compare.sweep.panel.plot.isVisibleTo(compare.sweep.panel)


def test_a_patch_sweep_goes_with_unpin_a_and_with_another_model(
        make_window, qtbot, tmp_path):
    first, second, third = _images(tmp_path, 3)
    window = make_window(images=[first])
    wait_run(qtbot, window)
    panel = window.compare.sweep.panel
    _sweep_shown(qtbot, window, second)
    window.compare.unpin_action.trigger()
    assert panel.sweep is None and not panel.plot.isVisibleTo(panel)
    assert "Pin a run as A" in panel.header.text()

    _sweep_shown(qtbot, window, third)
    (tmp_path / "net.py").write_text(NET_B)
    generation = window._model_generation
    window.control.load_model(window.control.make_spec(name=None,
                                                       factory=f"{tmp_path / 'net.py'}:build"))
    qtbot.waitUntil(lambda: window._model_generation > generation, timeout=TIMEOUT)
    wait_run(qtbot, window)
    assert panel.sweep is None and not panel.plot.isVisibleTo(panel)
    assert "Pin a run as A" in panel.header.text()


def test_an_atlas_of_a_stage_gives_its_crops_to_the_leaf_that_is_its_output(
        make_window, qtbot, tmp_path, demo_samples):
    """The CKA rows are leaves (stage3.1.relu), the suggested atlas layer a stage (stage3):
    the leaf whose output is the stage's shows the atlas's crops; another leaf inside the
    stage says in the pane why it has none."""
    from inspector import cli

    folder = Path(demo_samples[0]).parent
    atlas = tmp_path / "atlas"
    assert cli.main(["atlas", "--model", "demo_shapes", "--device", "cpu", "--quiet",
                     "--workers", "0", "--layers", "stage3", "--top", "1", "--out",
                     str(atlas), str(folder)]) == 0
    window = make_window(model={"name": "demo_shapes", "device": "cpu"},
                         images=demo_samples[:6])
    wait_run(qtbot, window)
    actions = window.compare_models
    actions.open_dialog()
    dialog = actions.dialog
    dialog.out.setText(str(tmp_path / "cmp"))
    dialog.atlas_a.setText(str(atlas))
    dialog.run()
    qtbot.waitUntil(lambda: actions.view is not None and actions.view.doc is not None,
                    timeout=TIMEOUT)
    qtbot.waitUntil(lambda: not actions.runner.running, timeout=TIMEOUT)
    view = actions.view
    layers = view.doc["layers_a"]
    assert "stage3" not in layers and "stage3.1.relu" in layers  # the rows are leaves

    def match(name):
        row = layers.index(name)
        view.select(row, row)
        qtbot.waitUntil(lambda: view.matches.table.rowCount() > 0
                        or view.matches.status.text().startswith("No matched"),
                        timeout=TIMEOUT)
        qtbot.waitUntil(lambda: not actions.runner.running, timeout=TIMEOUT)
        assert view.matches.table.rowCount() > 0, view.matches.status.text()
        return view.matches

    panel = match("stage3.1.relu")
    assert not panel.crops_a.pixmap().isNull()
    assert "from the atlas's stage3" in panel.status.toolTip()
    panel = match("stage3.0.conv")
    assert panel.crops_a.pixmap().isNull()
    assert "is inside it but is not its output" in panel.status.text()
