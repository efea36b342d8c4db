"""Videos and the camera in the window: a clip written with PyAV plays through the model
with every view live, frames that come while a run is busy are dropped and counted in the
status bar, and pause, step and seek show (and run) the frame asked for. File ▸ Camera's
tests are in test_camera.py."""

from __future__ import annotations

import sys
import textwrap

import numpy as np
import pytest

from inspector.ui.image.canvas import pil_from_qimage, qimage_from_rgb
from inspector.ui.shell.app_settings import AppSettings
from inspector.ui.window.main_window import MainWindow

av = pytest.importorskip("av", reason="PyAV is the optional extra 'network-inspector[video]'")

from test_main_window import drop, wait_run  # noqa: E402
from video_clip import FRAMES, frame_pixels, write_clip  # noqa: E402

TIMEOUT = 60_000

# A model slower than the video (10 fps): while one frame runs, the next ones are dropped.
MODELS = textwrap.dedent('''
    import time

    import torch
    from torch import nn

    CLASSES = ["left", "middle", "right"]
    PREPROCESS = {"crop_size": (64, 64), "resize_size": None,
                  "mean": (0.5, 0.5, 0.5), "std": (0.25, 0.25, 0.25)}


    class Slow(nn.Module):
        def __init__(self, seconds):
            super().__init__()
            self.seconds = seconds

        def forward(self, x):
            time.sleep(self.seconds)  # releases the GIL, as a real forward does
            return x


    def _net(seconds):
        torch.manual_seed(0)
        return nn.Sequential(Slow(seconds), nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
                             nn.Conv2d(8, 8, 3, stride=2, padding=1), nn.ReLU(),
                             nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 3)).eval()


    def build_slow():
        return _net(0.5)


    def build_fast():
        return _net(0.0)
''')


@pytest.fixture
def clip(tmp_path):
    return write_clip(tmp_path / "clip.mp4")


@pytest.fixture
def make_window(make_window, tmp_path):
    """The window on one of MODELS' builders (conftest's make_window, a video model's)."""
    models = tmp_path / "video_models.py"
    models.write_text(MODELS)

    def make(builder="build_fast") -> MainWindow:
        return make_window({"name": None, "factory": f"{models}:{builder}"})

    return make


def _frame_label(window) -> str:
    request = window.control.last_request
    return request.label if request is not None else ""


def _shown_pixels(window) -> np.ndarray:
    return np.asarray(pil_from_qimage(window.images.canvas.image))


def _decoded(clip) -> list[np.ndarray]:
    from inspector.core.inputs.video_reader import VideoReader

    with VideoReader(clip) as reader:
        return [np.asarray(f.image) for f in reader.frames()]


def test_a_dropped_video_plays_through_the_model_and_busy_frames_are_dropped(
    make_window, qtbot, clip
):
    window = make_window("build_slow")
    player = window.video
    assert drop(window, [clip]) == (True, True)
    qtbot.waitUntil(lambda: window.images.list.count() == 1, timeout=TIMEOUT)
    entry = window.images.current()
    assert entry.video is not None and entry.video.frame_count == FRAMES
    assert player.controls.isVisible()
    # While it plays, each frame is a live run with a core left to the UI and the decoder.
    from inspector.core.run.runtime import stream_threads

    qtbot.waitUntil(lambda: player.counts.run >= 1, timeout=TIMEOUT)
    assert window.control.last_request.threads == stream_threads()
    # Played to the end: every frame shown once, then paused on the last.
    qtbot.waitUntil(lambda: not player.playing and player.index == FRAMES - 1, timeout=TIMEOUT)
    dropped = player.counts.dropped
    assert player.counts.shown == FRAMES
    assert player.counts.run >= 1 and dropped >= 1  # the model is slower than the video
    # Each frame shown was run or dropped (replaced before the model was free), never
    # queued; the last one, if playing ended before it ran, runs when playing stops on it.
    assert player.counts.run + dropped == FRAMES
    assert _frame_label(window) == f"clip.mp4 · frame {FRAMES - 1}"
    # The frames' model input was made on the decoding thread, for the model loaded.
    entry = player.frame_entry
    assert entry.source is entry.prepared and entry.prepared.image is entry.image
    assert entry.prepared.preprocess == window.control.loaded.preprocess
    stream = window.status.stream
    assert stream.isVisible()
    assert f"{dropped} dropped" in stream.text()
    assert f"{player.counts.run} run" in stream.text()
    # The views show a frame's run: the activation mosaic and the predictions are live.
    wait_run(qtbot, window)
    assert window.last_run.status == "ok", window.reporter.last_message
    assert window.views["activation"].current_frame().run_id == window.last_run.run_id
    # Choosing an image stops the video.
    window.images.list.add_image(pil_from_qimage(qimage_from_rgb(frame_pixels(3, 64))), "still")
    qtbot.waitUntil(lambda: player.video is None, timeout=TIMEOUT)
    assert not player.controls.isVisible() and not stream.isVisible()


def test_pause_step_and_seek_show_and_run_the_frame_asked_for(make_window, qtbot, clip):
    window = make_window("build_fast")
    player = window.video
    frames = _decoded(clip)
    window.images.add_paths([clip])
    qtbot.waitUntil(lambda: player.index >= 3, timeout=TIMEOUT)
    if player.playing:
        player.toggle()
    assert not player.playing
    here = player.index

    def shows(index: int) -> bool:
        return (player.index == index and _frame_label(window) == f"clip.mp4 · frame {index}"
                and np.array_equal(_shown_pixels(window), frames[index]))

    player.step(1)
    qtbot.waitUntil(lambda: shows(here + 1), timeout=TIMEOUT)
    player.step(-1)
    qtbot.waitUntil(lambda: shows(here), timeout=TIMEOUT)
    player.controls.slider.setValue(25)  # the user drags the slider
    qtbot.waitUntil(lambda: shows(25), timeout=TIMEOUT)
    assert player.controls.counter.text() == f"25 / {FRAMES - 1}"
    assert not player.playing  # a seek while paused stays paused
    player.step(1)
    player.step(1)  # twice before the first is shown: two frames on
    qtbot.waitUntil(lambda: shows(27), timeout=TIMEOUT)
    assert "clip.mp4 · frame 27" in window.images.caption.text()
    wait_run(qtbot, window)
    assert window.last_run.status == "ok", window.reporter.last_message
    # Play from there: it goes on to the end.
    player.toggle()
    qtbot.waitUntil(lambda: not player.playing and player.index == FRAMES - 1, timeout=TIMEOUT)


def test_playing_submits_live_runs_and_pausing_runs_the_frame_in_full(make_window, qtbot,
                                                                      clip):
    from inspector.core.records.kinds import GRAD_OUTPUT, OUTPUT
    from inspector.ui.run.frame_router import MIN_DELIVERY_INTERVAL_S
    from inspector.ui.video.player import STREAM_DELIVERY_INTERVAL_S

    window = make_window("build_fast")
    player, control = window.video, window.control
    submitted = []  # (run id, request, whether the player was playing)
    control.runSubmitted.connect(
        lambda run_id: submitted.append((run_id, control.last_request, player.playing)))
    selected = window.tree.current_module()
    layer = window.runs.default_cam_layer
    assert selected and layer
    window.images.add_paths([clip])
    qtbot.waitUntil(lambda: player.counts.run >= 3, timeout=TIMEOUT)
    assert player.controls.live.isVisible()
    # Small runs: the router hands each to the views at a stream's pace, not every 0.2 s.
    assert window.router.min_interval_s == STREAM_DELIVERY_INTERVAL_S
    # While playing: the selected module's output and the CAM, no gradient frames (a
    # gradient CAM's backward then stops at its layer).
    live = [(run_id, request) for run_id, request, playing in submitted if playing]
    assert len(live) >= 3
    for _, request in live:
        assert request.gradients is False
        assert dict(request.capture.modules) == {selected: frozenset({OUTPUT})}
        assert request.capture.preview == {selected}
        assert [method for method, _ in request.cams] == ["gradcam"]
    # A live run reaches the views: its CAM and the selected module's activations.
    qtbot.waitUntil(lambda: any(window.router.store.status(run_id) == "ok"
                                for run_id, _ in live), timeout=TIMEOUT)
    shown = next(run_id for run_id, _ in live if window.router.store.status(run_id) == "ok")
    assert window.router.store.get(("cam", "gradcam", layer), shown) is not None
    assert window.router.store.get(("tensor", selected, OUTPUT, 0, ""), shown) is not None
    # Pausing runs the frame shown again, with everything.
    before = len(submitted)
    if player.playing:
        player.toggle()
    assert not player.controls.live.isVisible()
    assert window.router.min_interval_s == MIN_DELIVERY_INTERVAL_S
    assert len(submitted) == before + 1
    _, full, playing = submitted[-1]
    assert not playing and full.gradients is True
    assert full.label == f"clip.mp4 · frame {player.index}"
    assert len(full.capture.modules) > 1
    assert any(GRAD_OUTPUT in kinds for kinds in full.capture.modules.values())
    wait_run(qtbot, window)
    assert window.last_run.status == "ok", window.reporter.last_message
    run = window.last_run.run_id
    assert window.router.store.get(("tensor", selected, GRAD_OUTPUT, 0, ""), run) is not None
    # Paused, a step runs its frame in full at once: no second run of the frame left.
    player.step(1)
    qtbot.waitUntil(lambda: len(submitted) == before + 2, timeout=TIMEOUT)
    assert submitted[-1][1].gradients is True
    assert submitted[-1][1].label == f"clip.mp4 · frame {player.index}"


def test_without_pyav_a_video_is_a_message_naming_the_extra(make_window, qtbot, clip,
                                                             monkeypatch):
    window = make_window("build_fast")
    monkeypatch.setitem(sys.modules, "av", None)  # `import av` raises ImportError
    assert drop(window, [clip]) == (True, True)
    qtbot.waitUntil(lambda: window.reporter.count > 0, timeout=TIMEOUT)
    message = window.reporter.last_message
    assert message.startswith("Could not open clip.mp4: video files need PyAV")
    assert "pip install 'network-inspector[video]'" in message
    assert window.images.list.count() == 0
    assert window.video.video is None


def test_a_file_that_is_not_a_video_is_a_message_and_closing_mid_video_stops_decoding(
    make_window, qtbot, clip, tmp_path
):
    import threading

    window = make_window("build_fast")
    broken = tmp_path / "broken.mkv"
    broken.write_bytes(b"\x1a\x45\xdf\xa3 not really matroska")
    window.images.add_paths([broken, clip])
    qtbot.waitUntil(lambda: window.images.list.count() == 1 and window.reporter.count > 0,
                    timeout=TIMEOUT)
    assert window.reporter.last_message.startswith("Could not open broken.mkv: ")
    qtbot.waitUntil(lambda: window.video.index >= 1, timeout=TIMEOUT)
    assert window.video.playing
    window.close()  # while playing: the decoding thread stops with the window
    assert window.video.video is None
    assert not [t for t in threading.enumerate() if t.name == "video-decode"]


def test_a_frame_waiting_for_the_model_is_dropped_when_a_step_replaces_it(make_window, qtbot,
                                                                          clip):
    window = make_window("build_slow")
    player = window.video
    window.images.add_paths([clip])
    # Playing, a frame comes while the first run is busy: it waits for the model...
    qtbot.waitUntil(lambda: player.counts.shown >= 2 and player._waiting, timeout=TIMEOUT)
    player.step(1)  # ... and the user steps on: the frame stepped to runs instead
    qtbot.waitUntil(lambda: player._awaiting is None and not player.playing, timeout=TIMEOUT)
    wait_run(qtbot, window)
    # Every frame shown was run or dropped; none is left waiting.
    assert player.counts.run + player.counts.dropped == player.counts.shown
    assert player.counts.dropped >= 1 and not player._waiting


def test_without_a_model_nothing_runs_and_nothing_counts_as_dropped(qtbot, tmp_path, clip):
    from inspector.core.run.session import Session

    broken = tmp_path / "broken_model.py"
    broken.write_text("def build():\n    raise RuntimeError('no model today')\n")
    window = MainWindow(AppSettings.in_file(str(tmp_path / "settings.ini")))
    qtbot.addWidget(window)
    window.build_views()
    window.show()
    window.start([], {"name": None, "factory": f"{broken}:build"}, session=Session())
    qtbot.waitUntil(lambda: window.reporter.count > 0, timeout=TIMEOUT)
    window.images.add_paths([clip])
    qtbot.waitUntil(lambda: window.video.counts.shown >= 5, timeout=TIMEOUT)
    # Frames the model could never run were not dropped by a busy model.
    assert window.video.counts.run == 0 and window.video.counts.dropped == 0
    assert "0 run · 0 dropped" in window.status.stream.text()


def _status_texts(window) -> list[str]:
    from PySide6.QtWidgets import QLabel

    return [label.text() for label in window.statusBar().findChildren(QLabel)
            if label.isVisible() and label.text()]


def test_a_still_image_shows_no_frame_counts(make_window, qtbot):
    window = make_window("build_fast")
    window.images.list.add_image(pil_from_qimage(qimage_from_rgb(frame_pixels(3, 64))), "still")
    wait_run(qtbot, window)
    window.runs.rerun()
    wait_run(qtbot, window)
    # However often it runs, nothing in the status bar counts frames for a still image.
    assert not [t for t in _status_texts(window) if "shown" in t or "dropped" in t], \
        _status_texts(window)


def test_a_video_has_one_set_of_frame_counts_and_one_frame_numbering(make_window, qtbot,
                                                                      clip):
    window = make_window("build_fast")
    player, stream = window.video, window.status.stream
    window.images.add_paths([clip])
    qtbot.waitUntil(lambda: not player.playing and player.index == FRAMES - 1, timeout=TIMEOUT)
    wait_run(qtbot, window)
    # The slider's counter and the caption number the frame the same way (from 0, as the
    # run's name and the batch commands do).
    assert player.controls.slider.value() == FRAMES - 1 == player.controls.slider.maximum()
    assert player.controls.counter.text() == f"{FRAMES - 1} / {FRAMES - 1}"
    assert f"frame {FRAMES - 1} / {FRAMES - 1}" in window.images.caption.text()
    assert _frame_label(window) == f"clip.mp4 · frame {FRAMES - 1}"
    # One label counts the frames, and its figures are the player's one count.
    counting = [t for t in _status_texts(window) if "shown" in t or "dropped" in t]
    assert counting == [stream.text()]
    assert (f"{player.counts.shown} shown · {player.counts.run} run · "
            f"{player.counts.dropped} dropped") in stream.text()
    assert player.counts.shown == FRAMES == player.counts.run + player.counts.dropped
    window.statusBar().grab().save("/tmp/videoatlas-status.png")


def test_the_rate_is_measured_while_playing_only(make_window, qtbot, clip):
    window = make_window("build_fast")
    player, stream = window.video, window.status.stream
    window.images.add_paths([clip])
    qtbot.waitUntil(lambda: player.index >= 1, timeout=TIMEOUT)
    if player.playing:
        player.toggle()
    wait_run(qtbot, window)
    assert player.counts.rate() is None and "fps" not in stream.text()
    # Paused, a step shows and runs a frame, but no rate is made of one interval.
    here = player.index
    player.step(1)
    qtbot.waitUntil(lambda: player.index == here + 1, timeout=TIMEOUT)
    wait_run(qtbot, window)
    assert player.counts.rate() is None and "fps" not in stream.text()
    assert player.controls.counter.text() == f"{here + 1} / {FRAMES - 1}"
    # Playing again, the rate appears once enough frames were shown.
    player.toggle()
    qtbot.waitUntil(lambda: "fps" in stream.text(), timeout=TIMEOUT)
    assert player.playing or player.index == FRAMES - 1
    assert player.counts.rate() > 0
