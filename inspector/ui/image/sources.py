"""Where images come from: the open dialogs, the clipboard, and files dropped on the window
(video files too: the image pane lists them, and the video player plays them).

`ImageSources` is an event filter on the main window: a drop anywhere (also on a view deep
inside a dock, whose drag events Qt hands up to the window) adds the files to the image pane.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QEvent, QObject
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QFileDialog

IMAGE_FILTER = ("Images and videos (*.png *.jpg *.jpeg *.bmp *.gif *.tif *.tiff *.webp *.ppm "
                "*.mp4 *.mkv *.mov *.avi *.webm);;"
                "Images (*.png *.jpg *.jpeg *.bmp *.gif *.tif *.tiff *.webp *.ppm);;"
                "Videos (*.mp4 *.mkv *.mov *.avi *.webm);;All files (*)")
_DRAGS = (QEvent.Type.DragEnter, QEvent.Type.DragMove)


class ImageSources(QObject):
    def __init__(self, window, images, settings, reporter) -> None:
        super().__init__(window)
        self.window = window
        self.images = images  # ImagePane
        self.settings = settings
        self.reporter = reporter
        window.setAcceptDrops(True)
        window.installEventFilter(self)

    def open_images(self) -> None:
        start = str(self.settings.value("image_dir", str(Path.home())))
        paths, _ = QFileDialog.getOpenFileNames(self.window, "Open images or videos", start,
                                                IMAGE_FILTER)
        if paths:
            self.settings.set_value("image_dir", str(Path(paths[0]).parent))
            self.images.add_paths(paths)

    def open_folder(self) -> None:
        start = str(self.settings.value("image_dir", str(Path.home())))
        folder = QFileDialog.getExistingDirectory(self.window, "Open a folder of images", start)
        if folder:
            self.settings.set_value("image_dir", folder)
            self.images.add_paths([folder])

    def paste(self) -> None:
        mime = QGuiApplication.clipboard().mimeData()
        if not self.images.take_mime(mime):
            self.reporter.report("The clipboard holds no image or image file")

    def eventFilter(self, watched, event) -> bool:  # noqa: N802 (Qt's name)
        kind = event.type()
        if kind in _DRAGS:
            if self.images.accepts(event.mimeData()):
                event.acceptProposedAction()
            else:
                event.ignore()
            return True
        if kind == QEvent.Type.Drop:
            if self.images.take_mime(event.mimeData()):
                event.acceptProposedAction()
            else:
                event.ignore()
            return True
        return False
