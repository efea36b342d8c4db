"""File ▸ Recent images and Recent models: filled from the settings each time they open."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QMessageBox


class RecentFiles(QObject):
    def __init__(self, window, images_menu, models_menu, settings, images, control) -> None:
        super().__init__(window)
        self.window = window
        self.images_menu, self.models_menu = images_menu, models_menu
        self.settings = settings
        self.images = images  # ImagePane
        self.control = control  # SessionControl: makes and loads model specs
        images_menu.aboutToShow.connect(self.fill_images)
        models_menu.aboutToShow.connect(self.fill_models)
        images.imagesAdded.connect(settings.add_recent_images)

    def fill_images(self) -> None:
        menu = self.images_menu
        menu.clear()
        for path in self.settings.recent_images():
            menu.addAction(path, lambda p=path: self.images.add_paths([p]))
        if menu.isEmpty():
            menu.addAction("(none)").setEnabled(False)

    def fill_models(self) -> None:
        from inspector.ui.open_model.dialog import spec_label

        menu = self.models_menu
        menu.clear()
        if self.control.ready:
            for fields in self.settings.recent_models():
                try:
                    spec = self.control.make_spec(**fields)
                except TypeError:
                    continue  # saved by another version: fields it does not know
                menu.addAction(spec_label(spec), lambda s=spec: self.open_model(s))
        if menu.isEmpty():
            menu.addAction("(none)").setEnabled(False)

    def model_loaded(self, spec) -> None:
        """Remember a model that loaded; a pickled one asks for trust again next time, and a
        Hugging Face folder's own code runs again only when consented to in Open model."""
        self.settings.add_recent_model({**dataclasses.asdict(spec), "trust_pickle": False,
                                        "trust_remote_code": False})

    def open_model(self, spec) -> None:
        if spec.pickle:
            answer = QMessageBox.warning(
                self.window, "Open a pickled model",
                f"Opening {Path(spec.pickle).name} runs the code inside it. Open it only if you "
                "trust the file. Open it?",
                QMessageBox.StandardButton.Open | QMessageBox.StandardButton.Cancel,
                QMessageBox.StandardButton.Cancel)
            if answer != QMessageBox.StandardButton.Open:
                return
            spec = dataclasses.replace(spec, trust_pickle=True)
        self.control.load_model(spec)
