"""File ▸ Camera: Qt Multimedia's frames through the window's video player.

The camera's frames take the video path (a fake camera fed by the test). Without a camera
(CI has none, nor this project's machines) the part of camera.CameraStream that does not
depend on the camera, VideoSinkStream (a QVideoSink's frames as QImages on the GUI thread),
is fed by Qt Multimedia's QMediaPlayer playing a clip: real frames decoded and delivered by
Qt Multimedia, through the same sink and signals. Those tests skip where Qt Multimedia does
not import (a PySide6-Essentials install: `pip install 'network-inspector[camera]'`).
"""

from __future__ import annotations

import importlib
import sys

import numpy as np
import pytest
import test_video_player as video_tests  # a sibling test module: needs PyAV
from PySide6.QtCore import QObject, QThread, QUrl, Signal
from PySide6.QtGui import QImage
from video_clip import frame_pixels

from inspector.ui.image.canvas import pil_from_qimage, qimage_from_rgb
from inspector.ui.video import camera as camera_module
from inspector.ui.video.camera import VideoSinkStream, camera_status

# The video tests' window (its models: one slow, one fast) and clip, as fixtures here too.
make_window = video_tests.make_window
clip = video_tests.clip
TIMEOUT = video_tests.TIMEOUT

# Qt Multimedia's FFmpeg backend says which optional libraries it did not find (PipeWire,
# VA-API hardware decoding) and that it converts frames on the CPU without a GPU: warnings
# about the machine, not the app, which pytest-qt would otherwise fail the test for.
pytestmark = pytest.mark.qt_log_ignore(r"^Couldn't (load|resolve) .+ (library|symbols)$",
                                       r"No RHI backend\. Using CPU conversion")

NO_CAMERA = "Qt Multimedia finds no camera on this computer"


@pytest.fixture
def mm():
    """Qt Multimedia, or the test skips."""
    try:
        return importlib.import_module(camera_module.QT_MULTIMEDIA)
    except ImportError as exc:
        pytest.skip(f"Qt Multimedia does not import ({exc}): "
                    "pip install 'network-inspector[camera]'")


class ClipStream(VideoSinkStream):
    """A clip that Qt Multimedia's QMediaPlayer decodes into the stream's QVideoSink: what
    CameraStream gives the player, with real Qt Multimedia frames and no camera."""

    what = "The clip"

    def __init__(self, mm, path) -> None:
        super().__init__()
        self.mm, self.path, self.name = mm, path, path.name
        self.player = None

    def start(self) -> bool:
        self.player = self.mm.QMediaPlayer(self)
        self.player.setVideoSink(self._new_sink())
        self.player.errorOccurred.connect(self._source_failed)
        self.player.setSource(QUrl.fromLocalFile(str(self.path)))
        self.player.play()
        return True

    def pause(self, paused: bool) -> None:
        if self.player is not None:
            self.player.pause() if paused else self.player.play()

    def stop(self) -> None:
        if self.player is not None:
            self.player.errorOccurred.disconnect(self._source_failed)
            self.player.stop()
            self.player = None
        super().stop()


def test_frames_queued_while_the_gui_thread_is_busy_leave_only_the_newest(mm, qtbot):
    stream = VideoSinkStream()
    sink = stream._new_sink()
    shown = []
    stream.frame.connect(shown.append)

    def feed(i: int) -> None:
        sink.setVideoFrame(mm.QVideoFrame(QImage(qimage_from_rgb(frame_pixels(i, 64)))))

    for i in range(3):  # no event handled in between: the GUI thread is busy
        feed(i)
    assert shown == []  # queued to the GUI thread's event loop, not emitted on the spot
    qtbot.waitUntil(lambda: len(shown) >= 1)
    qtbot.wait(0)
    assert len(shown) == 1 and shown[0].format() == QImage.Format.Format_RGB888
    assert np.array_equal(np.asarray(pil_from_qimage(shown[0])), frame_pixels(2, 64))
    sink.setVideoFrame(mm.QVideoFrame())  # the empty frame a source sends when it stops
    feed(3)
    qtbot.waitUntil(lambda: len(shown) >= 2)
    assert np.array_equal(np.asarray(pil_from_qimage(shown[1])), frame_pixels(3, 64))
    feed(4)
    stream.stop()  # a frame queued before stop() is not emitted after it
    qtbot.wait(0)
    assert len(shown) == 2


def test_a_clip_through_qt_multimedia_runs_like_camera_frames(mm, make_window, qtbot, clip):
    window = make_window("build_fast")
    player = window.video
    stream = ClipStream(mm, clip)
    gui_thread, images, threads = QThread.currentThread(), [], set()
    stream.frame.connect(images.append)
    stream.frame.connect(lambda _image: threads.add(QThread.currentThread() is gui_thread))
    player.open_camera(stream)
    assert player.controls.isVisible() and not player.controls.slider.isEnabled()
    ended = mm.QMediaPlayer.MediaStatus.EndOfMedia
    qtbot.waitUntil(lambda: player.counts.run >= 3 or stream.player.mediaStatus() == ended,
                    timeout=TIMEOUT)
    assert window.reporter.count == 0, window.reporter.last_message
    assert player.counts.run >= 1
    # Qt Multimedia's frames, emitted on the GUI thread, in the format the player reads.
    assert images and {image.format() for image in images} == {QImage.Format.Format_RGB888}
    assert threads == {True}  # Qt Multimedia decodes on a thread of its own
    assert player.frame_entry.size == (64, 64)  # the clip's frame size
    assert video_tests._frame_label(window) == "Camera (clip.mp4)"
    assert player.counts.shown >= player.counts.run
    assert f"{player.counts.run} run" in window.status.stream.text()
    video_tests.wait_run(qtbot, window)
    run = window.last_run
    assert run.status == "ok", window.reporter.last_message
    assert window.router.store.get(("predictions",), run.run_id) is not None
    assert window.views["activation"].current_frame().run_id == run.run_id
    # The picture shown is a frame of the clip (Qt's YUV -> RGB, not PyAV's: close, not
    # equal), in RGB order: the yellow square and the blue bar, not swapped.
    shown = video_tests._shown_pixels(window).astype(np.int16)
    assert min(np.abs(shown - frame).mean() for frame in video_tests._decoded(clip)) < 4
    # Pause reaches the source; leaving the stream stops and lets go of it.
    source = stream.player
    player.toggle()
    assert not player.playing
    assert source.playbackState() == mm.QMediaPlayer.PlaybackState.PausedState
    player.stop()
    assert source.playbackState() == mm.QMediaPlayer.PlaybackState.StoppedState
    assert player._camera is None and stream.player is None
    video_tests.wait_run(qtbot, window)  # the full run of the paused frame


@pytest.mark.qt_log_ignore("Could not open media")
def test_a_source_that_fails_is_one_message_and_stops(mm, make_window, qtbot, tmp_path):
    window = make_window("build_fast")
    stream = ClipStream(mm, tmp_path / "missing.mp4")
    window.video.open_camera(stream)
    # QMediaPlayer's errorOccurred(Error, QString), the signature QCamera's has too.
    qtbot.waitUntil(lambda: window.reporter.count > 0, timeout=TIMEOUT)
    message = window.reporter.last_message
    assert message.startswith("The clip stopped: ") and message != "The clip stopped: "
    assert "\n" not in message
    assert window.video._camera is None and stream.player is None
    assert not window.video.controls.isVisible()


def test_a_camera_that_cannot_open_says_so(mm, qtbot):
    stream = camera_module.CameraStream()
    failed = []
    stream.failed.connect(failed.append)
    # A device that is no camera: Qt reports it when the QCamera is made, not by a signal.
    assert stream.start(mm.QCameraDevice()) is False
    assert len(failed) == 1 and failed[0].startswith("The camera could not start: ")
    assert failed[0] != "The camera could not start: "
    assert stream._camera is None


def test_file_camera_is_on_only_where_qt_multimedia_finds_a_camera(make_window, qtbot):
    window = make_window("build_fast")
    action = window.menus.camera
    file_menu = action.associatedObjects()[0]
    file_menu.aboutToShow.emit()
    available, note = camera_status()
    assert action.isEnabled() == available
    assert note in action.toolTip()
    if camera_module.multimedia_problem() is None:
        cameras = camera_module._multimedia().QMediaDevices.videoInputs()
        assert available == bool(cameras)
        if not cameras:
            assert note == NO_CAMERA
            window.video.open_camera()
            assert window.reporter.last_message == NO_CAMERA
            assert window.video._camera is None and not window.video.controls.isVisible()


def test_without_qt_multimedia_the_camera_says_what_to_install(make_window, qtbot, monkeypatch):
    import PySide6

    window = make_window("build_fast")
    monkeypatch.setitem(sys.modules, camera_module.QT_MULTIMEDIA, None)
    monkeypatch.delattr(PySide6, "QtMultimedia", raising=False)
    available, note = camera_status()
    assert not available
    assert note == camera_module.missing_multimedia_note()
    assert "pip install 'network-inspector[camera]'" in note
    assert f"PySide6-Addons=={PySide6.__version__}" in note
    window.video.open_camera()
    assert window.reporter.last_message == note


def test_qt_multimedia_that_cannot_load_is_a_one_line_message(make_window, qtbot, monkeypatch):
    window = make_window("build_fast")
    missing = "libpulse.so.0: cannot open shared object file: No such file or directory"

    def unloadable():
        raise ImportError(missing)

    monkeypatch.setattr(camera_module, "_multimedia", unloadable)
    note = f"Qt Multimedia is installed but does not load: {missing}"
    assert camera_status() == (False, note)
    action = window.menus.camera
    action.associatedObjects()[0].aboutToShow.emit()
    assert not action.isEnabled() and action.toolTip() == note
    window.video.open_camera()
    assert window.reporter.last_message == note


class FakeCamera(QObject):
    """What camera.CameraStream gives the player, fed by the test."""

    frame = Signal(object)
    failed = Signal(str)
    name = "test camera"

    def __init__(self) -> None:
        super().__init__()
        self.paused = False
        self.stopped = False

    def start(self) -> bool:
        return True

    def pause(self, paused: bool) -> None:
        self.paused = paused

    def stop(self) -> None:
        self.stopped = True


def test_camera_frames_take_the_video_path(make_window, qtbot):
    window = make_window("build_slow")
    camera = FakeCamera()
    window.video.open_camera(camera)
    assert window.video.controls.isVisible()
    assert not window.video.controls.slider.isEnabled()  # live: no seek
    images = [QImage(qimage_from_rgb(frame_pixels(i, 64))) for i in range(6)]
    for image in images:
        camera.frame.emit(image)
    # The first frame runs; the others come while it is busy (the model sleeps 0.5 s):
    # each replaced before it ran is dropped, the newest waits as the frame shown...
    assert window.video.counts.run == 1 and window.video.counts.dropped == 4
    assert "4 dropped" in window.status.stream.text()
    assert video_tests._frame_label(window) == "Camera (test camera)"
    # the newest is shown
    assert np.array_equal(video_tests._shown_pixels(window), frame_pixels(5, 64))
    # ... and runs as soon as the first run has reached the views: they show its results.
    first = window.control.current_run
    qtbot.waitUntil(lambda: window.video.counts.run == 2, timeout=TIMEOUT)
    assert window.control.current_run > first
    video_tests.wait_run(qtbot, window)  # the views have the newest frame's run
    assert window.last_run.status == "ok", window.reporter.last_message
    assert window.video.counts.dropped == 4
    window.video.toggle()
    assert camera.paused
    camera.failed.emit("The camera stopped: unplugged")
    assert window.reporter.last_message == "The camera stopped: unplugged"
    assert camera.stopped and window.video._camera is None
