"""Loading another model with edits on: each edit is checked against the new model, an
occlusion box moves to the same part of the picture in the new model input, and the status
bar and the Edits dock say which edits were kept, changed or dropped, and why."""

from __future__ import annotations

from test_main_window import TINY, wait_run, write_png  # noqa: F401

# A model of another input size (a crop of 112 after resizing the shorter side to 128,
# against tiny_models' 64 after 72), with a 4-channel features.0 and no features.3.
LARGER_INPUT = '''
import torch
from torch import nn

PREPROCESS = {"crop_size": (112, 112), "resize_size": 128,
              "mean": (0.485, 0.456, 0.406), "std": (0.229, 0.224, 0.225)}


class Larger(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU())
        self.head = nn.Linear(4, 3)

    def forward(self, x):
        return self.head(self.features(x).mean(dim=(2, 3)))


def build():
    torch.manual_seed(0)
    return Larger().eval()
'''


def test_switching_models_moves_occlusions_with_the_picture_and_says_what_was_dropped(
    make_window, qtbot, tmp_path
):
    from inspector.core.edits.interventions import Occlude, ZeroChannels

    window = make_window(images=[write_png(tmp_path / "x.png")])  # 96 x 80
    wait_run(qtbot, window)
    actions = window.edit_actions
    actions.add_occlusion((10, 5, 31, 21))
    actions.zero_channel("features.0", 1)
    actions.zero_channel("features.0", 7)  # the new features.0 has 4 channels
    actions.replace_with_mean("features.3")  # the new model has no features.3
    wait_run(qtbot, window)
    assert len(window.edits) == 4
    pane = window.images
    assert pane.mode == "original"
    outlined = pane.canvas.marks  # the box on the picture, x 23.4..46.9, y 10..27.8

    factory = tmp_path / "larger.py"
    factory.write_text(LARGER_INPUT)
    window.control.load_model(window.control.make_spec(name=None, factory=f"{factory}:build"))
    qtbot.waitUntil(lambda: "features.3" not in window.tree.model.tree.modules, timeout=60_000)
    run = wait_run(qtbot, window)

    # The tiny model's input: 96 x 80 resized to 86 x 72, cropped at x 11, y 4; the new
    # one's: resized to 153 x 128, cropped at x 20, y 8. Input box x 10..31, y 5..21 is
    # picture x 23.4..46.9, y 10..27.8, which is new-input x 17.4..54.7, y 8..36.4.
    moved = Occlude("", box=(17, 8, 55, 37))
    assert [e.intervention for e in window.edits] == [moved, ZeroChannels("features.0", (1,))]
    assert window.control.last_request.interventions == (moved, ZeroChannels("features.0", (1,)))
    assert run.status == "ok"
    # Outlined on the picture where it was, give or take a pixel of the new input's grid.
    (now,), (before,) = pane.canvas.marks, outlined
    assert all(abs(a - b) < 96 / 153 for a, b in zip(now, before, strict=True)), (now, before)

    dock = window.docks["edits"].widget()
    # The dock keeps a note, one edit a line; the status bar says the same in a sentence.
    assert dock.note.isVisibleTo(dock)
    assert dock.note.text().split("\n") == [
        "Edits after switching to build:",
        "\u2022 kept 'input:occlude=10,5,31,21' as 'input:occlude=17,8,55,37' (rescaled from "
        "the 64 x 64 input to build's 112 x 112: the same part of the picture)",
        "\u2022 kept 'features.0:zero=1'",
        "\u2022 dropped 'features.0:zero=7' (in build, 'features.0' outputs [1, 4, 112, 112]: "
        "channels [7] out of range: the output has 4 channels (0..3) on dim 1)",
        "\u2022 dropped 'features.3:mean' (build has no module 'features.3')"]
    said = window.reporter.label.text()
    assert said.startswith("Loaded build (from larger.py). Edits after switching to build: "
                           "kept 'input:occlude=10,5,31,21' as 'input:occlude=17,8,55,37'")
    assert said.endswith(", dropped 'features.3:mean' (build has no module 'features.3').")
    # The dock's row says the new box; the history that named the old edits is gone.
    rows = window.docks["edits"].widget().rows()
    assert rows[0].check.text() == moved.describe()
    assert not window.history.canUndo()
    dock.note_close.click()
    assert not dock.note.isVisibleTo(dock)


def test_the_note_goes_once_no_edit_is_left(make_window, qtbot, tmp_path):
    """It stayed after Clear all, and after later switches that carried no edits."""
    window = make_window(images=[write_png(tmp_path / "x.png")])
    wait_run(qtbot, window)
    dock = window.docks["edits"].widget()
    factory = tmp_path / "larger.py"
    factory.write_text(LARGER_INPUT)

    def switch(spec) -> None:
        generation = window._model_generation
        window.control.load_model(window.control.make_spec(**spec))
        qtbot.waitUntil(lambda: window._model_generation > generation, timeout=60_000)
        wait_run(qtbot, window)

    window.edit_actions.replace_with_mean("features.3")  # the larger model has none
    wait_run(qtbot, window)
    switch({"name": None, "factory": f"{factory}:build"})
    assert dock.note.isVisibleTo(dock) and len(window.edits) == 0  # dropped, and said so
    switch(TINY)  # back, with no edit to carry: the note is old news
    assert not dock.note.isVisibleTo(dock)

    window.edit_actions.zero_channel("features.0", 1)
    window.edit_actions.replace_with_mean("features.3")
    wait_run(qtbot, window)
    switch({"name": None, "factory": f"{factory}:build"})
    assert dock.note.isVisibleTo(dock) and len(window.edits) == 1
    window.window_edits.clear_action.trigger()  # Clear all: nothing left to speak of
    assert not dock.note.isVisibleTo(dock)
