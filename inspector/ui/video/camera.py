"""The camera as a stream of frames: Qt Multimedia's QCamera into a QVideoSink, each frame a
QImage (the video player runs them through the model as it does a video's frames).

Qt Multimedia is in PySide6-Addons, which a PySide6-Essentials install lacks: then
`camera_status` says so and what to install, and File ▸ Camera stays disabled with that note.
It is imported only when asked about (the File menu opening, File ▸ Camera).

What does not depend on the camera (a QVideoSink's frames as QImages on the GUI thread, the
source's errorOccurred as `failed`) is VideoSinkStream: the tests feed it from a QMediaPlayer
playing a clip, which takes the same path without a camera.
"""

from __future__ import annotations

import importlib

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QImage

QT_MULTIMEDIA = "PySide6.QtMultimedia"


def _multimedia():
    # import_module, not `from PySide6 import QtMultimedia`: a missing module is then a
    # ModuleNotFoundError, told apart from one installed that cannot load its libraries.
    return importlib.import_module(QT_MULTIMEDIA)


def missing_multimedia_note() -> str:
    import PySide6

    return ("Qt Multimedia is not installed (it comes with PySide6-Addons): "
            f"pip install 'network-inspector[camera]' (or PySide6-Addons=={PySide6.__version__})")


def multimedia_problem() -> str | None:
    """None when Qt Multimedia imports; else why not, in one line."""
    try:
        _multimedia()
    except ModuleNotFoundError:
        return missing_multimedia_note()
    except ImportError as exc:  # installed, but a library it links is missing (libpulse.so.0)
        return f"Qt Multimedia is installed but does not load: {exc}"
    return None


def _default_camera(mm):
    """The system's default camera, else the first listed; None when there is none."""
    device = mm.QMediaDevices.defaultVideoInput()
    if not device.isNull():
        return device
    inputs = mm.QMediaDevices.videoInputs()
    return inputs[0] if inputs else None


def camera_status() -> tuple[bool, str]:
    """(whether File ▸ Camera can stream, a note: the camera's name, or why not)."""
    problem = multimedia_problem()
    if problem is not None:
        return False, problem
    device = _default_camera(_multimedia())
    if device is None:
        return False, "Qt Multimedia finds no camera on this computer"
    return True, device.description()


class VideoSinkStream(QObject):
    """The frames a Qt Multimedia source puts into a QVideoSink, as `frame(QImage)` signals
    on the GUI thread (Format_RGB888, as image_canvas.pil_from_qimage reads it); `failed(str)`
    once when the source stops with an error. A source (a subclass) makes its sink with
    `_new_sink()` and connects its errorOccurred(Error, QString) to `_source_failed`.

    The sink's videoFrameChanged comes on Qt Multimedia's own thread (the FFmpeg backend's
    renderer), so it is queued to this object, and no Python runs on that thread. Each frame
    that arrives only replaces the one kept; the newest is converted and emitted once the
    frames queued before it were seen. A GUI thread held up for a while (a view redrawing)
    thus skips to the newest frame instead of showing a backlog of old ones one by one.
    """

    frame = Signal(object)  # QImage, Format_RGB888
    failed = Signal(str)
    _newest = Signal()  # queued: emitted with the first frame kept, handled after the queue
    what = "The video"  # how `failed` names the source

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.name = ""
        self._sink = None
        self._kept = None  # the newest QVideoFrame not emitted yet
        self._newest.connect(self._emit_newest, Qt.ConnectionType.QueuedConnection)

    def _new_sink(self):
        sink = _multimedia().QVideoSink(self)
        sink.videoFrameChanged.connect(self._arrived, Qt.ConnectionType.QueuedConnection)
        self._sink = sink
        return sink

    def _arrived(self, video_frame) -> None:
        if self._sink is None:
            return  # queued before stop()
        waiting = self._kept is not None
        self._kept = video_frame
        if not waiting:
            self._newest.emit()

    def _emit_newest(self) -> None:
        video_frame, self._kept = self._kept, None
        if video_frame is None:  # stop() came between
            return
        image = video_frame.toImage()  # Format_RGB32 for the FFmpeg backend's YUV frames
        if image.isNull():
            return  # the empty frame a source sends when it stops, or one that cannot map
        self.frame.emit(image.convertToFormat(QImage.Format.Format_RGB888))

    def _source_failed(self, _error, text: str) -> None:
        """errorOccurred(Error, QString), of QCamera and QMediaPlayer alike."""
        self.stop()
        self.failed.emit(f"{self.what} stopped: {text or 'an error in Qt Multimedia'}")

    def stop(self) -> None:
        """No more frames (a subclass releases its source, then calls this)."""
        if self._sink is not None:
            self._sink.videoFrameChanged.disconnect(self._arrived)
            self._sink.deleteLater()
            self._sink = None
        self._kept = None


class CameraStream(VideoSinkStream):
    """The default camera (or a QCameraDevice given to `start`), streaming. `stop()`
    releases the camera."""

    what = "The camera"

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._camera = self._session = None

    def start(self, device=None) -> bool:
        """Start streaming; False, with `failed` emitted, when it cannot."""
        if device is None:
            ok, note = camera_status()
            if not ok:
                self.failed.emit(note)
                return False
        mm = _multimedia()
        device = device if device is not None else _default_camera(mm)
        camera = mm.QCamera(device, self)
        if camera.error() != mm.QCamera.Error.NoError:
            # Qt sets this error while making the QCamera (no such device: it went since the
            # menu looked), before errorOccurred can be connected, so it is asked here.
            message = f"The camera could not start: {camera.errorString()}"
            camera.deleteLater()
            self.failed.emit(message)
            return False
        self.name = device.description()
        self._camera = camera
        self._session = mm.QMediaCaptureSession(self)
        self._session.setCamera(camera)
        self._session.setVideoSink(self._new_sink())
        camera.errorOccurred.connect(self._source_failed)
        camera.start()
        return True

    def pause(self, paused: bool) -> None:
        if self._camera is not None:
            self._camera.setActive(not paused)  # off while paused: its light goes out too

    def stop(self) -> None:
        camera, session = self._camera, self._session
        self._camera = self._session = None
        if camera is not None:
            camera.errorOccurred.disconnect(self._source_failed)
            camera.stop()
            session.setCamera(None)
            session.setVideoSink(None)
            # Deleted, not only stopped: the device is closed even while this stream lives.
            camera.deleteLater()
            session.deleteLater()
        super().stop()
