"""Occlusion drawn on the Original view: the rectangle is mapped through the model's resize
and centre crop into model-input pixels (core.inputs.preprocess), a part outside the crop is left
out and the status bar says so, and the occluded boxes are outlined on the original too."""

from __future__ import annotations

from PySide6.QtCore import QPointF, Qt
from PySide6.QtTest import QTest
from test_main_window import wait_run, write_png  # noqa: F401

from inspector.ui.image.pane import ORIGINAL


def shift_drag(canvas, a: tuple[float, float], b: tuple[float, float]) -> None:
    """A real Shift+drag between two points of the picture (its own pixel coordinates)."""
    start, end = canvas.from_image(QPointF(*a)), canvas.from_image(QPointF(*b))
    QTest.mousePress(canvas, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.ShiftModifier,
                     start.toPoint())
    QTest.mouseRelease(canvas, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.ShiftModifier,
                       end.toPoint())


def test_a_rectangle_drawn_on_the_original_occludes_the_model_input_pixels_under_it(
    make_window, qtbot, tmp_path
):
    from inspector.core.edits.interventions import Occlude

    window = make_window(images=[write_png(tmp_path / "x.png")])  # 96 x 80
    wait_run(qtbot, window)
    pane, canvas = window.images, window.images.canvas
    assert pane.mode == ORIGINAL and canvas.image.size().toTuple() == (96, 80)

    # The tiny model resizes 96 x 80 to 86 x 72 and crops 64 x 64 at x 11, y 4. Picture
    # pixels x 30..60, y 20..50 are model-input x 15.9..42.8, y 14..41.
    shift_drag(canvas, (30.5, 20.5), (59.5, 49.5))
    assert [e.intervention for e in window.edits] == [Occlude("", box=(15, 14, 43, 41))]
    wait_run(qtbot, window)
    assert window.control.last_request.interventions == (Occlude("", box=(15, 14, 43, 41)),)
    # Outlined on the original over the picture pixels those input pixels came from.
    (mark,) = canvas.marks
    assert [round(v, 1) for v in mark] == [29.0, 20.0, 60.3, 50.0]

    # Reaching past the crop's left edge: the part inside is occluded, and that is said.
    shift_drag(canvas, (0.5, 0.5), (20.5, 20.5))
    assert window.edits[1].intervention == Occlude("", box=(0, 0, 8, 15))
    assert window.reporter.label.text() == (
        "Clipped to the model's centre crop: occluded input pixels x 0..8, y 0..15 (the rest "
        "of the rectangle is never seen by the model)")
    # Wholly left of the crop: nothing is occluded, and the message says why.
    shift_drag(canvas, (0.5, 30.5), (9.5, 50.5))
    assert len(window.edits) == 2
    assert window.reporter.label.text().startswith("Nothing occluded: the rectangle is outside")
    wait_run(qtbot, window)

    # The Occlude button says it works on both views, and leaves the view as it is: a plain
    # drag on the original works too.
    assert "on the Model input view, or on the Original" in pane.occlude_action.toolTip()
    pane.occlude_action.setChecked(True)
    assert pane.mode == ORIGINAL
    start, end = canvas.from_image(QPointF(40.5, 30.5)), canvas.from_image(QPointF(50.5, 40.5))
    QTest.mousePress(canvas, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                     start.toPoint())
    QTest.mouseRelease(canvas, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                       end.toPoint())
    assert len(window.edits) == 3
    pane.occlude_action.setChecked(False)
    wait_run(qtbot, window)
