"""The selected module's tensor of one kind, with a header of its statistics.

ActivationView and GradientView are this with different kinds and colour maps. The view
subscribes to the selected module's frames in the run store; the store keeps every module's
frames of the runs shown (previews are small: at most 64 channels of 64 x 64), so selecting
another module after a run shows it at once, without running again.
"""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QSplitter, QVBoxLayout, QWidget

from inspector.core.frames import RunFinished, TensorFrame
from inspector.ui.views.base import FrameView, fmt
from inspector.ui.views.tensor_panel import TensorPanel

KIND_NOUNS = {  # as a header says what is shown
    "input": "input",
    "output": "output",
    "grad_output": "gradient of the output",
    "grad_input": "gradient of the input",
}
HOOK_NAMES = {  # the hook to turn on in the module tree
    "input": "input",
    "output": "output",
    "grad_output": "grad output",
    "grad_input": "grad input",
}


def module_label(name: str) -> str:
    return name if name else "(whole model)"


def stats_html(frame: TensorFrame) -> str:
    """One line: shape and statistics, with problems (dead channels, NaN/Inf) in colour."""
    s = frame.stats
    shape = "\u00d7".join(str(d) for d in frame.shape) or "scalar"
    parts = [
        f"shape {shape}",
        f"mean {fmt(s.mean)}",
        f"std {fmt(s.std)}",
        f"min {fmt(s.min)}",
        f"max {fmt(s.max)}",
        f"zeros {100 * s.zero_fraction:.1f}%",
    ]
    channels = len(s.channel_zero_fraction)
    if s.dead_channels and channels > 1:
        parts.append(f"<span style='color:#e0a030'>{s.dead_channels}/{channels} channels all zero</span>")
    if s.nonfinite:
        parts.append(f"<span style='color:#f05050'><b>{s.nonfinite} NaN/Inf</b></span>")
    note = preview_note(frame)
    if note:
        parts.append(f"<i>{note}</i>")
    return " \u00b7 ".join(parts)


def preview_note(frame: TensorFrame) -> str:
    """Says how the picture differs from the tensor (core reduces previews; see stats.preview)."""
    p = frame.preview
    if p is None:
        return ""
    item = tuple(frame.shape[1:])
    if p.shape == item:
        return ""
    if p.ndim == 3 and len(item) == 3:
        notes = []
        if p.shape[0] < item[0]:
            notes.append(f"first {p.shape[0]} of {item[0]} channels shown")
        if p.shape[1:] != item[1:]:
            notes.append(f"averaged to {p.shape[1]}\u00d7{p.shape[2]}")
        return ", ".join(notes)
    return "shown reduced to " + "\u00d7".join(str(d) for d in p.shape)


class TensorView(FrameView):
    """Shows the selected module's tensor of the kind chosen in `kinds`."""

    def __init__(self, kinds: tuple[str, ...], diverging: bool, parent: QWidget | None = None,
                 store=None):
        super().__init__(parent, store)
        self.kinds = kinds
        self.kind = kinds[0]
        self.module: str | None = None
        self._part: tuple[int, str] | None = None  # (call, path) the user chose
        self._panel_dirty = True

        self.header = QLabel()
        self.header.setTextFormat(Qt.TextFormat.RichText)
        self.header.setWordWrap(True)
        self.header.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.part_combo = QComboBox()
        self.part_combo.setToolTip("This module was called more than once or returned several tensors")
        self.part_combo.currentIndexChanged.connect(self._part_chosen)
        self.part_combo.hide()
        self.panel = TensorPanel(diverging=diverging)

        self.header_row = QHBoxLayout()
        self.header_row.addWidget(self.header, 1)
        self.header_row.addWidget(self.part_combo)
        top = QWidget()
        top_layout = QVBoxLayout(top)
        top_layout.setContentsMargins(4, 4, 4, 0)
        top_layout.addLayout(self.header_row)
        top_layout.addWidget(self.panel, 1)
        self.splitter = QSplitter(Qt.Orientation.Vertical)
        self.splitter.addWidget(top)
        self.splitter.setChildrenCollapsible(False)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.splitter)
        # The selected module's frames only (none until a module is selected).
        self.module_subscription = self.subscribe(self._frame_stored, kinds, modules=())
        self.request_panel()

    # -- API --------------------------------------------------------------------------------
    def set_module(self, name: str | None) -> None:
        if name == self.module:
            return
        self.module = name
        self.module_subscription.modules = set() if name is None else {name}
        self._part = None
        self.panel.zoomed = None  # channel numbers mean nothing in another module
        self.request_panel()

    def set_kind(self, kind: str) -> None:
        if kind not in self.kinds or kind == self.kind:
            return
        self.kind = kind
        self._part = None
        self.request_panel()

    def current_frame(self) -> TensorFrame | None:
        parts = self._parts()
        if not parts:
            return None
        if self._part is not None:
            for key, frame in parts:
                if key == self._part:
                    return frame
        return parts[0][1]

    # -- what the store says ------------------------------------------------------------------
    def _frame_stored(self, frame: TensorFrame) -> None:
        if frame.kind == self.kind:
            self.request_panel()

    def run_changed(self, frame) -> None:
        if self.module is None:
            return  # "Select a module" whatever the runs do
        shown = self.current_frame()
        # Started: the hint becomes "waiting for ...". Finished: say so when the run did not
        # capture what is shown, or failed before it (the store then shows nothing).
        if shown is None or (isinstance(frame, RunFinished) and shown.run_id < frame.run_id):
            self.request_panel()

    def cleared(self) -> None:
        self._panel_dirty = True
        super().cleared()

    # -- internals --------------------------------------------------------------------------
    def request_panel(self) -> None:
        """The header and tensor need drawing (now if visible, else when shown)."""
        self._panel_dirty = True
        self.request_paint()

    def _parts(self) -> list[tuple[tuple[int, str], TensorFrame]]:
        if self.module is None:
            return []
        frames = self.store.tensors(self.module, (self.kind,), self.shown_run)
        return sorted(((call, path), f) for (_kind, call, path), f in frames.items())

    def _part_chosen(self, index: int) -> None:
        if index >= 0 and self.part_combo.count() > 1:
            self._part = self.part_combo.itemData(index)
            self.request_panel()

    def _sync_part_combo(self) -> None:
        parts = [key for key, _ in self._parts()]
        self.part_combo.blockSignals(True)
        self.part_combo.clear()
        for call, path in parts:
            text = f"call {call}" + (f" \u00b7 [{path}]" if path else "")
            self.part_combo.addItem(text, (call, path))
        if self._part in parts:
            self.part_combo.setCurrentIndex(parts.index(self._part))
        self.part_combo.blockSignals(False)
        self.part_combo.setVisible(len(parts) > 1)

    def _empty_text(self) -> str:
        noun = KIND_NOUNS[self.kind]
        if self.module is None:
            return f"Select a module in the tree to see its {noun} here."
        name = f"\u201c{module_label(self.module)}\u201d"
        if self.store.current_run is None:
            return f"Drop an image on the window to run the model: the {noun} of {name} appears here."
        if self.store.running:
            return f"Waiting for the {noun} of {name}\u2026"
        if self.failed:
            return f"The last run failed before the {noun} of {name} was computed: the status bar says why."
        return (
            f"No {noun} of {name} was captured in this run.\n"
            f"Turn on its \u201c{HOOK_NAMES[self.kind]}\u201d hook in the module tree, "
            "or check that the module is called."
        )

    def _paint(self) -> None:
        self._panel_dirty = False
        self._sync_part_combo()
        frame = self.current_frame()
        if frame is None:
            if self.module is None:
                self.header.setText("")
            else:
                self.header.setText(f"<b>{html.escape(module_label(self.module))}</b>")
            self.panel.show_message(self._empty_text())
            return
        noun = KIND_NOUNS[frame.kind]
        text = f"<b>{html.escape(module_label(frame.module))}</b> {noun} \u00b7 {stats_html(frame)}"
        finished = self.store.last_finished()
        if finished is not None and frame.run_id < finished:
            text += " \u00b7 <i>from an earlier run (the last run did not capture it)</i>"
        self.header.setText(text)
        # Tokens pooled by core no longer form their patch grid: no grid then.
        pooled = frame.preview is not None and tuple(frame.preview.shape) != tuple(frame.shape[1:])
        self.panel.show_tensor(frame.preview, tokens_are_patches=not pooled)
