"""Concepts: the image shown, factorised at a layer into K concepts (deep feature
factorisation, core.explain.concepts), each a heatmap in its own colour over the image, with
a legend of its top classes; a concept can be removed from the layer as an edit. Remove is a
toggle: checked while that concept's removal is in the edit list (wherever it was taken out:
here, the Edits dock, an undo), clicked again it takes the edit out."""

from __future__ import annotations

import html

import numpy as np
from PIL import Image
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QDialog,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from inspector.ui.featurevis.page_dialog import pixmap_of

# Distinct colours (Glasbey-like, readable on photos) for up to 12 concepts, then cycled.
PALETTE = np.array([[230, 25, 75], [60, 180, 75], [255, 225, 25], [0, 130, 200],
                    [245, 130, 48], [145, 30, 180], [70, 240, 240], [240, 50, 230],
                    [210, 245, 60], [250, 190, 212], [0, 128, 128], [170, 110, 40]], np.uint8)
SHOWN = 384  # the picture's longer side
REMOVE_TIP = ("An edit: project this concept's direction out of the layer's output at every "
              "position, in the next runs")
PUT_BACK_TIP = "Removed (an edit in the Edits dock): click to delete that edit"


def removal_of(edits, layer: str, vector) -> object | None:
    """The edit of `edits` (ui.edits.edit_list.EditList) that removes `vector` from `layer`
    (a ProjectOut of that direction, switched on or off), or None."""
    from inspector.core.edits.interventions import ProjectOut  # torch: after a model loads

    for edit in edits:
        iv = edit.intervention
        if isinstance(iv, ProjectOut) and iv.module == layer \
                and len(iv.vector) == len(vector) \
                and np.allclose(iv.vector, vector, rtol=1e-9, atol=1e-12):
            return edit
    return None


def sync_toggle(button, edit, texts: tuple[str, str] = ("Remove", "Removed"),
                remove_tip: str = REMOVE_TIP) -> None:
    """A Remove button checked, its text (`texts`: off, on) and its tooltip as its
    concept's removal `edit` is there (a checked button looks only a little darker)."""
    button.setChecked(edit is not None)
    button.setText(texts[edit is not None])
    button.setToolTip(PUT_BACK_TIP if edit is not None else remove_tip)


def overlay(display: np.ndarray, maps: np.ndarray) -> np.ndarray:
    """The picture with each pixel tinted by the concept whose map is largest there, by
    that map's value (maps: (K, h, w) in [0, 1], upsampled to the picture)."""
    h, w, _ = display.shape
    big = np.stack([np.asarray(Image.fromarray((m * 255).astype(np.uint8)).resize(
        (w, h), Image.Resampling.BILINEAR), np.float32) / 255 for m in maps])
    best = big.argmax(axis=0)
    alpha = (big.max(axis=0) * 0.7)[..., None]
    colour = PALETTE[best % len(PALETTE)].astype(np.float32)
    return (display * (1 - alpha) + colour * alpha).clip(0, 255).astype(np.uint8)


class ConceptsDialog(QDialog):
    """The concepts of the current image at `layer`: `compute` runs on the worker."""

    def __init__(self, parent, ctx, edit_actions, layer: str) -> None:
        super().__init__(parent)
        self.ctx, self.edit_actions, self.layer = ctx, edit_actions, layer
        self.setWindowTitle(f"Concepts of {layer}")
        self.k = QSpinBox()
        self.k.setRange(1, 32)
        self.k.setValue(4)
        self.k.setToolTip("K: the number of concepts (NMF components)")
        self.go = QPushButton("Factorise")
        self.go.clicked.connect(self.compute)
        self.picture = QLabel()
        self.picture.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.picture.setMinimumSize(SHOWN, SHOWN)
        self.legend = QVBoxLayout()
        self.note = QLabel()
        self.note.setWordWrap(True)
        top = QHBoxLayout()
        top.addWidget(QLabel("Concepts"))
        top.addWidget(self.k)
        top.addWidget(self.go)
        top.addStretch(1)
        body = QHBoxLayout()
        body.addWidget(self.picture)
        side = QWidget()
        side.setLayout(self.legend)
        body.addWidget(side, 1)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addLayout(body, 1)
        layout.addWidget(self.note)
        self.resize(900, SHOWN + 160)
        self.result = None
        self.entry = None  # the image entry factorised (ui.run.builder.RunBuilder.entry)
        self.removes: dict[int, QPushButton] = {}  # concept -> its Remove toggle
        self.edits = edit_actions.history.edits
        self.edits.changed.connect(self._sync_removes)
        # Another image shown: its concepts, once its run is in (not on each rerun of the
        # same image, e.g. after Remove, and never while one factorisation is in flight).
        ctx.control.router.runFinished.connect(self._run_finished)

    def compute(self) -> None:
        control = self.ctx.control
        request = self.ctx.runs.request()
        if control.session is None or control.loaded is None or request is None:
            self.note.setText("Load a model and open an image first.")
            return
        from inspector.core.explain.concepts import image_concepts

        layer, k, image, session = self.layer, self.k.value(), request.image, control.session
        self.entry = self.ctx.runs.entry
        if self.entry is not None:
            self.setWindowTitle(f"Concepts of {layer}: {self.entry.name}")
        self.go.setEnabled(False)
        self.note.setText(f"Factorising {layer} into {k} concepts…")
        future = session.worker.submit(
            lambda _cancel: image_concepts(session.loaded, image, layer, k), tag="concepts")
        control.router.watch(future, self._done)

    def _run_finished(self, _finished) -> None:
        if self.isVisible() and self.go.isEnabled() and self.entry is not None \
                and self.ctx.runs.entry is not self.entry:
            self.compute()

    def _done(self, future) -> None:
        self.go.setEnabled(True)
        error = None if future.cancelled() else future.exception()
        if future.cancelled() or error is not None:
            self.note.setText(f"The concepts could not be computed: {error}")
            return
        self.show_result(future.result())

    def show_result(self, result) -> None:
        self.result = result
        shown = overlay(result.display, result.maps)
        pix = pixmap_of(shown).scaled(SHOWN, SHOWN, Qt.AspectRatioMode.KeepAspectRatio,
                                      Qt.TransformationMode.SmoothTransformation)
        self.picture.setPixmap(pix)
        self.removes = {}
        while self.legend.count():
            item = self.legend.takeAt(0)
            if item.widget() is not None:
                item.widget().deleteLater()
        for c in range(len(result.maps)):
            self.legend.addWidget(self._row(result, c))
        self.legend.addStretch(1)
        self._sync_removes()
        r = result.result
        notes = "; ".join(n[:1].upper() + n[1:] + "." for n in r.notes)
        self.note.setText(
            f"NMF of the {r.concepts.shape[0]} channels x {result.maps[0].size} positions of "
            f"{result.layer} (scikit-learn, random init, seed 0, as pytorch-grad-cam's dff): "
            f"relative reconstruction error {r.error:.3f} after {r.iterations} iterations. "
            f"Each pixel is tinted by its strongest concept, as strongly as that concept's "
            f"map (each scaled to its own max). {notes}")

    def _row(self, result, c: int) -> QWidget:
        colour = "#" + "".join(f"{int(v):02x}" for v in PALETTE[c % len(PALETTE)])
        if result.classes is None:
            classes = "no class effect for this layer"
        else:
            classes = ", ".join(f"{html.escape(e['label'])} {e['p']:.2f}"
                                for e in result.classes[c][:3])
        text = QLabel(f"<span style='background:{colour}'>&nbsp;&nbsp;&nbsp;</span> "
                      f"<b>concept {c}</b>: {classes}")
        text.setToolTip("The classes the head gives this concept's channel vector placed at "
                        "every position of the layer (pytorch-grad-cam's "
                        "computation_on_concepts), softmax probabilities")
        remove = QPushButton("Remove")
        remove.setCheckable(True)
        remove.setToolTip(REMOVE_TIP)
        remove.clicked.connect(lambda on: self.remove(c) if on else self.put_back(c))
        self.removes[c] = remove
        row = QWidget()
        line = QHBoxLayout(row)
        line.setContentsMargins(0, 0, 0, 0)
        line.addWidget(text, 1)
        line.addWidget(remove)
        return row

    def vector(self, c: int) -> tuple[float, ...]:
        return tuple(float(v) for v in self.result.result.vectors[c])

    def label(self, c: int) -> str:
        """Concept `c` in words, for its edit: the concepts are the image's."""
        image = self.entry.name if self.entry is not None else "the image"
        return f"concept {c} of {image}"

    def remove(self, c: int) -> None:
        """Concept `c` removed from the layer, as an edit (once: a second is not made)."""
        from inspector.core.edits.interventions import ProjectOut

        if removal_of(self.edits, self.layer, self.vector(c)) is None:
            self.edit_actions.add(ProjectOut(self.layer, self.vector(c), label=self.label(c)))
        self._sync_removes()  # also when the edit was refused

    def put_back(self, c: int) -> None:
        """Concept `c`'s removal edit deleted (an undoable step, as in the Edits dock)."""
        edit = removal_of(self.edits, self.layer, self.vector(c))
        if edit is not None:
            self.edit_actions.history.delete(edit)
        self._sync_removes()

    def _sync_removes(self) -> None:
        if self.result is None:
            return
        for c, button in self.removes.items():
            sync_toggle(button, removal_of(self.edits, self.layer, self.vector(c)))
