"""File ▸ New atlas…: the atlas command run from the window on a thread of its own, with its
progress in the dialog, the result opened in the Dataset dock (the same entries as the command
makes), a cancel that leaves the window usable and a resumable folder, and bad options said
in one sentence."""

from __future__ import annotations

import textwrap
import threading
from pathlib import Path

from PySide6.QtCore import Qt
from test_main_window import wait_run

from inspector import cli
from inspector.ui.atlas.atlas_file import read_atlas

TIMEOUT = 120_000
DEMO_LAYERS = "stage1.1.relu,stage3.1.relu"
# A model slow enough (0.15 s a forward) that a cancel arrives while the atlas runs.
SLOW_MODEL = textwrap.dedent('''
    import time

    import torch
    from torch import nn


    class Slow(nn.Module):
        def forward(self, x):
            time.sleep(0.15)  # releases the GIL, as a real forward does
            return x


    def build():
        torch.manual_seed(0)
        return nn.Sequential(Slow(), nn.Conv2d(3, 6, 3, padding=1), nn.ReLU(),
                             nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(6, 3)).eval()
''')


def fill(dialog, inputs, layers: str, out: Path, **spins) -> None:
    dialog.inputs.clear()
    dialog.add_inputs(inputs)
    dialog.layers.setText(layers)
    dialog.out.setText(str(out))
    dialog.device.setCurrentText("cpu")
    for name, value in spins.items():
        getattr(dialog, name).setValue(value)


def click(qtbot, button) -> None:
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)


def atlas_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "atlas" and t.is_alive()]


def test_new_atlas_runs_the_command_on_a_thread_and_opens_what_it_wrote(
    make_window, qtbot, tmp_path, demo_samples
):
    window = make_window({"name": "demo_shapes", "device": "cpu"})
    atlas = window.atlas
    dialog = atlas.new_dialog()
    assert dialog is not None and dialog.isVisible()
    samples = str(Path(demo_samples[0]).parent)

    # A layer the model lacks: the command's sentence in the dialog and the status bar.
    fill(dialog, [samples], "stage1.1.relu,no_such_layer", tmp_path / "bad")
    with qtbot.waitSignal(atlas.runner.finished, timeout=TIMEOUT) as ended:
        click(qtbot, dialog.run_button)
    assert ended.args[0].status == "failed" and ended.args[0].code == 2
    assert "no_such_layer" in dialog.status.text()
    assert "no_such_layer" in window.reporter.last_message
    assert "Traceback" not in dialog.status.text()
    assert dialog.isVisible() and dialog.run_button.isEnabled()

    # The real run: progress reaches the dialog while the atlas runs (the window's event
    # loop goes on: the signals are queued from the atlas's thread).
    out = tmp_path / "gui_atlas"
    fill(dialog, [samples], DEMO_LAYERS, out, top=3, batch_size=4, shard_size=4)
    progress = []
    atlas.runner.progress.connect(
        lambda stage, done, total: progress.append((stage, done, total, atlas.runner.running,
                                                    dialog.progress.value())))
    with qtbot.waitSignal(atlas.runner.finished, timeout=TIMEOUT) as ended:
        click(qtbot, dialog.run_button)
        assert not dialog.run_button.isEnabled()
    result = ended.args[0]
    assert result.status == "ok" and result.code == 0, result.messages
    count = len(demo_samples)
    assert ("atlas", count, count, True, count) in progress  # the dialog's bar was full
    assert dialog.status.text() == "Done."
    assert [p[1] for p in progress if p[0] == "atlas"] == sorted(
        p[1] for p in progress if p[0] == "atlas")
    assert any(stage == "boxes" for stage, *_ in progress)
    assert all(running for *_, running, _ in progress)  # each arrived while it ran
    assert not atlas_threads()
    # Opened in the dock, and the dialog closed.
    qtbot.waitUntil(lambda: not dialog.isVisible(), timeout=TIMEOUT)
    shown = atlas.view.atlas
    assert shown is not None and shown.folder == out
    assert shown.model == window.model_name
    assert list(shown.layers) == DEMO_LAYERS.split(",")

    # The command with the same options writes the same entries.
    cli_out = tmp_path / "cli_atlas"
    rc = cli.main(["atlas", "--model", "demo_shapes", "--device", "cpu", "--layers",
                   DEMO_LAYERS, "--top", "3", "--batch-size", "4", "--shard-size", "4",
                   "--workers", "0", "--quiet", "--out", str(cli_out), samples])
    assert rc == 0
    made = read_atlas(cli_out)
    assert shown.layers == made.layers and shown.images == made.images == count

    # The window kept working: an image still runs.
    window.images.add_paths([demo_samples[0]])
    assert wait_run(qtbot, window).status == "ok"
    window.grab().save("/tmp/videoatlas-atlas-window.png")


def test_cancel_mid_run_keeps_the_window_usable_and_resume_finishes_the_atlas(
    make_window, qtbot, tmp_path, demo_samples
):
    models = tmp_path / "slow_model.py"
    models.write_text(SLOW_MODEL)
    window = make_window({"name": None, "factory": f"{models}:build"})
    atlas = window.atlas
    dialog = atlas.new_dialog()
    samples = str(Path(demo_samples[0]).parent)
    out = tmp_path / "atlas"
    fill(dialog, [samples], "2", out, top=2, batch_size=1, shard_size=1)

    def cancel_after_the_first_batch(stage, done, _total):
        if stage == "atlas" and done >= 1 and dialog.cancel_button.isEnabled():
            dialog.grab().save("/tmp/videoatlas-atlas-dialog.png")
            click(qtbot, dialog.cancel_button)

    atlas.runner.progress.connect(cancel_after_the_first_batch)
    with qtbot.waitSignal(atlas.runner.finished, timeout=TIMEOUT) as ended:
        click(qtbot, dialog.run_button)
    atlas.runner.progress.disconnect(cancel_after_the_first_batch)
    result = ended.args[0]
    assert result.status == "cancelled", result.messages
    said = dialog.status.text()
    assert "cancelled" in said and "tick Resume" in said and "--resume" not in said, said
    assert dialog.progress.value() >= 1  # the bar stays where the run stopped
    assert not (out / "atlas.json").exists()
    kept = sorted((out / "shards").glob("shard-*.pt"))
    assert 1 <= len(kept) < len(demo_samples)  # stopped mid-run, finished shards kept
    assert not atlas_threads() and not atlas.runner.running
    assert dialog.isVisible() and dialog.run_button.isEnabled()
    assert atlas.view.atlas is None

    # The window is usable: an image runs through the model.
    window.images.add_paths([demo_samples[0]])
    assert wait_run(qtbot, window).status == "ok"

    # The next atlas works: resumed, it finishes from the kept shards and opens in the dock.
    dialog.resume.setChecked(True)
    progress = []
    atlas.runner.progress.connect(lambda stage, done, total: progress.append((stage, total)))
    with qtbot.waitSignal(atlas.runner.finished, timeout=TIMEOUT) as ended:
        click(qtbot, dialog.run_button)
    assert ended.args[0].status == "ok", ended.args[0].messages
    assert ("atlas", len(demo_samples) - len(kept)) in progress  # the kept shards not redone
    shown = atlas.view.atlas
    assert shown is not None and shown.folder == out and shown.images == len(demo_samples)


def test_closing_the_window_stops_an_atlas_running(make_window, qtbot, tmp_path, demo_samples):
    models = tmp_path / "slow_model.py"
    models.write_text(SLOW_MODEL)
    window = make_window({"name": None, "factory": f"{models}:build"})
    dialog = window.atlas.new_dialog()
    fill(dialog, [str(Path(demo_samples[0]).parent)], "2", tmp_path / "atlas", batch_size=1)
    with qtbot.waitSignal(window.atlas.runner.progress, timeout=TIMEOUT):
        click(qtbot, dialog.run_button)
    assert atlas_threads()
    window.close()
    assert not atlas_threads()
    assert not (tmp_path / "atlas" / "atlas.json").exists()
