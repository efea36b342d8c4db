"""The camera as a stream of frames: Qt Multimedia's QCamera into a QVideoSink, each frame a
QImage (the video player runs them through the model as it does a video's frames).

Qt Multimedia is in PySide6-Addons, which a PySide6-Essentials install lacks: then
`camera_status` says so and what to install, and File ▸ Camera stays disabled with that note.
It is imported only when asked about (the File menu opening, File ▸ Camera).
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal


def _multimedia():
    from PySide6 import QtMultimedia  # noqa: PLC0415 - PySide6-Addons: may be missing

    return QtMultimedia


def missing_multimedia_note() -> str:
    import PySide6

    return ("Qt Multimedia is not installed (it comes with PySide6-Addons): "
            f"pip install PySide6-Addons=={PySide6.__version__}")


def camera_status() -> tuple[bool, str]:
    """(whether File ▸ Camera can stream, a note: the camera's name, or why not)."""
    try:
        mm = _multimedia()
    except ImportError:
        return False, missing_multimedia_note()
    device = mm.QMediaDevices.defaultVideoInput()
    if device.isNull():
        inputs = mm.QMediaDevices.videoInputs()
        if not inputs:
            return False, "Qt Multimedia finds no camera on this computer"
        device = inputs[0]
    return True, device.description()


class CameraStream(QObject):
    """The default camera, streaming: `frame(QImage)` per frame, `failed(str)` once when it
    cannot start or stops with an error. `stop()` releases the camera."""

    frame = Signal(object)  # QImage
    failed = Signal(str)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.name = ""
        self._camera = self._session = self._sink = None

    def start(self) -> bool:
        ok, note = camera_status()
        if not ok:
            self.failed.emit(note)
            return False
        mm = _multimedia()
        self.name = note
        device = mm.QMediaDevices.defaultVideoInput()
        if device.isNull():
            device = mm.QMediaDevices.videoInputs()[0]
        self._camera = mm.QCamera(device, self)
        self._session = mm.QMediaCaptureSession(self)
        self._sink = mm.QVideoSink(self)
        self._session.setCamera(self._camera)
        self._session.setVideoSink(self._sink)
        self._sink.videoFrameChanged.connect(self._frame)
        self._camera.errorOccurred.connect(self._error)
        self._camera.start()
        return True

    def _frame(self, video_frame) -> None:
        image = video_frame.toImage()
        if not image.isNull():
            self.frame.emit(image)

    def _error(self, _error, text: str) -> None:
        self.stop()
        self.failed.emit(f"The camera stopped: {text or 'an error in Qt Multimedia'}")

    @property
    def active(self) -> bool:
        return self._camera is not None and self._camera.isActive()

    def pause(self, paused: bool) -> None:
        if self._camera is None:
            return
        if paused:
            self._camera.stop()
        else:
            self._camera.start()

    def stop(self) -> None:
        if self._camera is not None:
            self._sink.videoFrameChanged.disconnect(self._frame)
            self._camera.stop()
            self._session.setCamera(None)
            self._camera = self._session = self._sink = None
