"""Feature visualisation and concepts in the window, on the demo model: a channel's picture
forming beside its zoom (runs are served between the chunks), the cache on the next visit,
a page as one batch, the Dataset dock's strip, the Concepts view and its edit."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_main_window import wait_run

from inspector import cli
from inspector.ui.featurevis.actions import STEPS_KEY
from inspector.ui.shell.app_settings import AppSettings
from inspector.ui.window.main_window import MainWindow

TIMEOUT = 120_000
DEMO = {"name": "demo_shapes"}


@pytest.fixture
def window(qtbot, tmp_path, monkeypatch, demo_samples):
    from inspector.core.run.session import Session

    monkeypatch.setenv("INSPECTOR_CACHE_DIR", str(tmp_path / "cache"))
    settings = AppSettings.in_file(str(tmp_path / "settings.ini"))
    settings.set_value(STEPS_KEY, 48)
    window = MainWindow(settings)
    qtbot.addWidget(window)
    window.build_views()
    window.show()
    window.start([str(demo_samples[0])], dict(DEMO), session=Session())
    qtbot.waitUntil(lambda: window.model_name != "" or window.reporter.count > 0,
                    timeout=TIMEOUT)
    assert window.model_name, window.reporter.last_message
    wait_run(qtbot, window)
    window.tree.select_module("stage3")
    activation = window.views["activation"]
    qtbot.waitUntil(lambda: activation.current_frame() is not None
                    and activation.current_frame().module == "stage3", timeout=TIMEOUT)
    qtbot.waitUntil(lambda: window.featurevis.runner.weights is not None, timeout=TIMEOUT)
    return window


def test_a_channels_picture_forms_beside_its_zoom_and_comes_from_the_cache_after(
        window, qtbot, tmp_path):
    fv, panel = window.featurevis, window.views["activation"].panel
    updates = []
    fv.runner.updated.connect(lambda job: updates.append(job.done))
    served = []
    window.router.runFinished.connect(lambda frame: served.append((frame, fv.runner.running)))
    fv.visualise_channel("stage3", 5)
    assert panel.zoomed == 5
    qtbot.waitUntil(lambda: len(updates) >= 2, timeout=TIMEOUT)
    window.runs.rerun()  # between two chunks: the run does not wait for the whole job
    qtbot.waitUntil(lambda: fv.runner.job.finished, timeout=TIMEOUT)
    job = fv.runner.job
    assert job.error is None and updates[-1] == 48 and len(set(updates)) >= 4
    assert any(running for _, running in served), "no run was served while the job ran"
    page = panel.zoom_page
    assert page.picture_plot is not None and page.picture_plot.isVisible()
    assert page.picture_item.image.shape == (128, 128, 3)
    assert np.array_equal(page.picture_item.image, job.pictures[5])
    assert job.objective[5] > 1.0  # it excites the channel
    assert list((tmp_path / "cache" / "featurevis").rglob("*.png"))
    # Again: from the cache, no optimisation.
    again = fv.runner.start("stage3", [5], fv.settings())
    qtbot.waitUntil(lambda: again.finished, timeout=TIMEOUT)
    assert again.cached == {5} and again.done == 0
    assert np.array_equal(again.pictures[5], job.pictures[5])


def test_visualise_page_optimises_the_pages_channels_as_one_batch(window, qtbot):
    fv = window.featurevis
    window.settings.set_value(STEPS_KEY, 8)
    fv.visualise_page("stage3")
    dialog = fv.dialog
    assert dialog is not None and dialog.isVisible()
    job = dialog.job
    assert job.channels == list(range(64))
    qtbot.waitUntil(lambda: job.finished, timeout=TIMEOUT)
    assert job.error is None and len(job.objective) == 64
    icons = [dialog.list.item(i).icon() for i in range(dialog.list.count())]
    assert len(icons) == 64 and not any(icon.isNull() for icon in icons)
    assert "step" not in dialog.progress.format()


def test_a_cancelled_page_says_so_and_its_half_made_pictures_are_no_visualisation(
        window, qtbot, tmp_path):
    fv, panel = window.featurevis, window.views["activation"].panel
    window.settings.set_value(STEPS_KEY, 48)
    updates = []
    fv.runner.updated.connect(lambda job: updates.append(job.done))
    fv.visualise_page("stage3")
    dialog, job = fv.dialog, fv.dialog.job
    qtbot.waitUntil(lambda: len(updates) >= 2 and updates[-1] > 0, timeout=TIMEOUT)
    dialog.stop.click()
    qtbot.waitUntil(lambda: job.finished, timeout=TIMEOUT)
    bar = dialog.progress
    assert "cancelled" in bar.format() and "done" not in bar.format(), bar.format()
    assert 0 < bar.value() == job.done < bar.maximum()
    status = window.reporter.label.text()
    assert "cancelled" in status and f"step {job.done} of 48" in status, status
    assert job.cancelled and job.error is None and job.objective == {}  # none ended
    assert not list((tmp_path / "cache" / "featurevis").rglob("*.png"))
    # The half-made pictures are no channel's visualisation: not on the zoom page, not in
    # the cache; asking again optimises the channel from the start.
    assert fv.picture("stage3", 5) is None and fv.zoom_picture(5) is None
    panel.zoom(5)
    page = panel.zoom_page
    assert page.picture_plot is None or not page.picture_plot.isVisible()
    assert fv.runner.cached_picture("stage3", 5, fv.settings()) is None
    again = fv.runner.start("stage3", [5], fv.settings())
    qtbot.waitUntil(lambda: again.done > 0 or again.finished, timeout=TIMEOUT)
    assert again.cached == set() and again.error is None
    fv.runner.cancel()
    qtbot.waitUntil(lambda: again.finished, timeout=TIMEOUT)


def inside(rect, outer) -> bool:
    """`rect` (QRect or QRectF) within `outer`, to a pixel."""
    return (rect.left() >= outer.left() - 1 and rect.top() >= outer.top() - 1
            and rect.right() <= outer.right() + 1 and rect.bottom() <= outer.bottom() + 1)


def test_the_pictures_and_their_captions_fit_the_pane_and_the_dialog_at_1440x900(
        window, qtbot):
    from PySide6.QtCore import QRect
    from PySide6.QtWidgets import QApplication

    fv, activation = window.featurevis, window.views["activation"]
    assert (window.width(), window.height()) == (1440, 900)
    window.settings.set_value(STEPS_KEY, 8)
    fv.visualise_channel("stage3", 5)
    qtbot.waitUntil(lambda: fv.runner.job.finished, timeout=TIMEOUT)
    for _ in range(3):
        QApplication.processEvents()
        qtbot.wait(20)
    page = activation.panel.zoom_page
    view = page.view
    assert page.picture_plot.isVisible()
    # The zoom page inside the pane, and the picture, its plot and its caption inside it.
    corner = view.mapTo(activation, view.rect().topLeft())
    assert inside(QRect(corner, view.size()), activation.rect())
    shown = view.viewport().rect()
    for item in (page.picture_plot, page.picture_item, page.picture_plot.titleLabel.item):
        rect = view.mapFromScene(item.sceneBoundingRect()).boundingRect()
        assert inside(rect, shown), (type(item).__name__, rect, shown)
    caption = page.picture_plot.titleLabel.text
    assert "mean" in caption or caption.endswith("\u2026")
    assert "after 8 steps" in page.picture_plot.toolTip()  # the whole caption
    # Visualise page: every picture in the list's view, not under its scroll bar.
    fv.visualise_page("stage3")
    dialog = fv.dialog
    qtbot.waitUntil(lambda: dialog.job.finished, timeout=TIMEOUT)
    for _ in range(3):
        QApplication.processEvents()
        qtbot.wait(20)
    frame = dialog.frameGeometry()  # the offscreen screen is smaller than the window
    assert frame.width() <= window.width() and frame.height() <= window.height()
    port = dialog.list.viewport().rect()
    assert dialog.list.horizontalScrollBar().maximum() == 0
    for row in range(dialog.list.count()):
        rect = dialog.list.visualItemRect(dialog.list.item(row))
        assert port.left() <= rect.left() and rect.right() <= port.right(), (row, rect, port)


def test_the_dataset_dock_shows_a_channels_picture_beside_its_top_images(
        window, qtbot, tmp_path, demo_samples):
    out = tmp_path / "atlas"
    assert cli.main(["atlas", "--model", "demo_shapes", "--device", "cpu", "--layers",
                     "stage3", "--top", "3", "--workers", "0", "--quiet", "--out", str(out),
                     str(Path(demo_samples[0]).parent)]) == 0
    assert window.atlas.open(out)
    view, fv = window.atlas.view, window.featurevis
    view.select("stage3", 7)
    assert fv.strip.isVisible() and fv.strip_button.isVisible()
    fv.strip_button.click()
    qtbot.waitUntil(lambda: fv.runner.job.finished, timeout=TIMEOUT)
    assert fv.strip_picture.pixmap() is not None and not fv.strip_picture.pixmap().isNull()
    assert "after 48 steps" in fv.strip_caption.text()
    assert not fv.strip_button.isVisible()


def _concepts_of_stage3(window, qtbot):
    """The Concepts dialog of stage3, once the shown image is factorised."""
    window.featurevis.show_concepts("stage3")
    dialog = window.featurevis.concepts
    qtbot.waitUntil(lambda: dialog.result is not None, timeout=TIMEOUT)
    return dialog


def test_concepts_of_the_image_follow_it_and_removing_one_is_an_edit(window, qtbot,
                                                                      demo_samples):
    dialog = _concepts_of_stage3(window, qtbot)
    result = dialog.result
    assert result.maps.shape == (4, 16, 16)
    assert result.classes is not None and len(result.classes) == 4
    assert "reconstruction error" in dialog.note.text()
    assert not dialog.picture.pixmap().isNull()
    edits = len(window.edits)
    dialog.remove(0)
    assert len(window.edits) == edits + 1
    assert "remove concept 0 of" in window.edits[len(window.edits) - 1].describe()
    wait_run(qtbot, window)
    assert dialog.result is result  # a rerun of the same image: its concepts stay
    # Another image shown: the dialog factorises it once its run is in.
    window.images.add_paths([str(demo_samples[3])])
    wait_run(qtbot, window)
    qtbot.waitUntil(lambda: dialog.result is not result, timeout=TIMEOUT)
    assert Path(demo_samples[3]).name in dialog.windowTitle()
    assert not np.array_equal(dialog.result.maps, result.maps)
    dialog.close()


def test_concepts_remove_names_its_concept_and_is_a_toggle_of_its_edit(window, qtbot,
                                                                       demo_samples):
    dialog = _concepts_of_stage3(window, qtbot)
    from PySide6.QtCore import QPoint
    from PySide6.QtWidgets import QPushButton

    rows = sorted((b for b in dialog.findChildren(QPushButton) if b.text() == "Remove"),
                  key=lambda b: b.mapTo(dialog, QPoint()).y())
    assert len(rows) == 4
    first, second = rows[1], rows[2]
    before = len(window.edits)
    first.click()
    assert len(window.edits) == before + 1 and first.isChecked() and not second.isChecked()
    assert (first.text(), second.text()) == ("Removed", "Remove")
    edit = window.edits[before]
    image = Path(demo_samples[0]).name
    assert edit.describe() == f"remove concept 1 of {image} (96 channels) from stage3"
    first.click()  # again: the edit goes, not a second one
    assert len(window.edits) == before and not first.isChecked()
    first.click()
    second.click()
    labels = [e.describe() for e in list(window.edits)[before:]]
    assert len(labels) == 2 and len(set(labels)) == 2, labels  # told apart
    # Deleted in the Edits dock, brought back by an undo: the toggle follows.
    dock = window.window_edits.view
    dock.row_for(window.edits[before]).delete.click()
    assert not first.isChecked() and second.isChecked()
    window.history.undo()
    assert first.isChecked() and len(window.edits) == before + 2
    wait_run(qtbot, window)
    dialog.close()
    qtbot.waitUntil(lambda: window.featurevis.concepts is None, timeout=TIMEOUT)
    window.history.undo()  # the edits change with the dialog gone: nothing follows them
    assert len(window.edits) == before + 1


def test_a_folders_concepts_open_in_the_dataset_dock_and_one_becomes_an_edit(
        window, qtbot, tmp_path, demo_samples):
    out = tmp_path / "concepts"
    assert cli.main(["concepts", "--model", "demo_shapes", "--device", "cpu", "--layer",
                     "stage3", "--k", "3", "--top", "2", "--workers", "0", "--quiet",
                     "--out", str(out), str(Path(demo_samples[0]).parent)]) == 0
    assert window.atlas.open(out)
    view = window.atlas.view
    assert view.atlas.kind == "concepts" and view.atlas.layers["stage3"].channels == 3
    view.select("stage3", 1)
    assert "<b>Concepts</b>" in view.header.text()
    assert len(view.list.items()) == 2
    # A concept is no channel to visualise: the strip gives its numbers and its removal.
    fv = window.featurevis
    assert fv.strip.isVisible() and fv.strip_remove.isVisible()
    assert not fv.strip_button.isVisible() and not fv.strip_picture.isVisible()
    doc = json.loads((out / "concepts.json").read_text())
    share = doc["concepts"][1]["share"]
    assert "Concept 1" in fv.strip_caption.text()
    assert f"{100 * share:.1f}% of the layer" in fv.strip_caption.text()
    assert "Σ‖h" in fv.strip_caption.toolTip()  # how the share is computed
    assert doc["concepts"][1]["top_classes"][0]["label"] in fv.strip_caption.text()
    edits = len(window.edits)
    fv.strip_remove.click()
    assert len(window.edits) == edits + 1
    edit = window.edits[len(window.edits) - 1].intervention
    assert edit.module == "stage3" and edit.describe() == \
        "remove concept 1 of concepts (96 channels) from stage3"
    assert fv.strip_remove.isChecked()
    fv.strip_remove.click()  # again: the edit goes
    assert len(window.edits) == edits and not fv.strip_remove.isChecked()
    window.history.undo()
    assert len(window.edits) == edits + 1 and fv.strip_remove.isChecked()
    expected = np.load(out / "concepts.npz")["vectors"][1]
    assert np.allclose(edit.vector, expected, rtol=1e-6)
    wait_run(qtbot, window)
    # Back on an atlas of channels, the strip is the picture's again.
    atlas = tmp_path / "atlas"
    assert cli.main(["atlas", "--model", "demo_shapes", "--device", "cpu", "--layers",
                     "stage3", "--top", "2", "--workers", "0", "--quiet", "--out", str(atlas),
                     str(Path(demo_samples[0]).parent)]) == 0
    assert window.atlas.open(atlas)
    view.select("stage3", 1)
    assert fv.strip_picture.isVisible() and not fv.strip_remove.isVisible()
