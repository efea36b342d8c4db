"""The selected module's tensor of one kind, with a header of its statistics.

ActivationView and GradientView are this with different kinds and colour maps. The view
subscribes to the selected module's frames in the run store; the store keeps every module's
frames of the runs shown (previews are small: every channel, about 1 MiB at most, see
core.stats.previews), so selecting another module after a run shows it at once, without running
again.

When the store has a reference run (run A: the pinned run, or the unedited run beside an
edited one), a selector shows B (the run shown), A, or B - A (the previews' difference, in
diverging colours centred at 0), and the mosaic can be sorted by how much each channel
changed. A run with edits says so beside the header ("edited").
"""

from __future__ import annotations

import html

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from inspector.core.records.frames import RunFinished, TensorFrame
from inspector.ui.views.base import FrameView
from inspector.ui.views.channel_bar import SORT_CHANGE, SORT_MAX, SORT_MEAN
from inspector.ui.views.tensor_header import diff_html, module_label, shape_text, stats_html
from inspector.ui.views.tensor_panel import TensorPanel
from inspector.ui.views.token_page import patch_grid

KIND_NOUNS = {  # as a header says what is shown
    "input": "input",
    "output": "output",
    "grad_output": "gradient of the output",
    "grad_input": "gradient of the input",
}
SHOW_B, SHOW_A, SHOW_DIFF = "B", "A", "B-A"  # what the compare selector shows
EDITED_STYLE = "color: #1a1a1a; background: #e0a030; border-radius: 3px; padding: 0 4px;"
HOOK_NAMES = {  # the hook to turn on in the module tree
    "input": "input",
    "output": "output",
    "grad_output": "grad output",
    "grad_input": "grad input",
}


def channel_keys(frame: TensorFrame, reference: TensorFrame | None) -> dict[str, np.ndarray]:
    """What the mosaic can sort a (C, H, W) preview's channels by: each channel's mean and
    max over the whole tensor (the frame's statistics), and, with a reference frame of the
    same shape, how much the channel changed: the mean of |B - A| over its preview."""
    keys: dict[str, np.ndarray] = {}
    s = frame.stats
    if s is not None and len(s.channel_mean) > 1:
        keys[SORT_MEAN] = np.asarray(s.channel_mean)
        keys[SORT_MAX] = np.asarray(s.channel_max)
    diff = preview_difference(frame, reference)
    if diff is not None and diff.ndim == 3:
        keys[SORT_CHANGE] = np.abs(diff).reshape(diff.shape[0], -1).mean(1)
    return keys


def preview_difference(b: TensorFrame | None, a: TensorFrame | None) -> np.ndarray | None:
    """B - A of two frames' previews; None unless both have one of the same shape."""
    if b is None or a is None or b.preview is None or a.preview is None:
        return None
    if b.preview.shape != a.preview.shape or tuple(b.shape) != tuple(a.shape):
        return None
    return b.preview - a.preview


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
        self._painted_reference: int | None = None  # the store's reference_run when painted

        self.header = QLabel()
        self.header.setTextFormat(Qt.TextFormat.RichText)
        self.header.setWordWrap(True)
        self.header.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.part_combo = QComboBox()
        self.part_combo.setToolTip("This module was called more than once or returned several tensors")
        self.part_combo.currentIndexChanged.connect(self._part_chosen)
        self.part_combo.hide()
        self.edited_label = QLabel("edited")
        self.edited_label.setStyleSheet(EDITED_STYLE)
        self.edited_label.hide()
        self.compare_combo = QComboBox()
        self.compare_combo.addItem("B: this run", SHOW_B)
        self.compare_combo.addItem("A: reference", SHOW_A)
        self.compare_combo.addItem("B \u2212 A", SHOW_DIFF)
        self.compare_combo.setToolTip(
            "A is the pinned run, or the run without the edits; B is the run shown.\n"
            "B \u2212 A: the difference of their previews, blue below 0, red above."
        )
        self.compare_combo.currentIndexChanged.connect(lambda _i: self.request_panel())
        # Never narrower than its text ("after (this run)"): the header wraps instead.
        self.compare_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.compare_combo.setSizePolicy(QSizePolicy.Policy.Minimum, QSizePolicy.Policy.Fixed)
        self.compare_combo.hide()
        self.panel = TensorPanel(diverging=diverging)

        self.header_bar = QWidget()  # what a saved PNG shows above the picture
        self.header_row = QHBoxLayout(self.header_bar)
        self.header_row.setContentsMargins(0, 0, 0, 0)
        self.header_row.addWidget(self.edited_label, 0, Qt.AlignmentFlag.AlignTop)
        self.header_row.addWidget(self.header, 1)
        self.header_row.addWidget(self.compare_combo, 0, Qt.AlignmentFlag.AlignTop)
        self.header_row.addWidget(self.part_combo, 0, Qt.AlignmentFlag.AlignTop)
        top = QWidget()
        top_layout = QVBoxLayout(top)
        top_layout.setContentsMargins(4, 4, 4, 0)
        top_layout.addWidget(self.header_bar)
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
        self.panel.reset_channels()  # channel numbers mean nothing in another module
        self.request_panel()

    def set_kind(self, kind: str) -> None:
        if kind not in self.kinds or kind == self.kind:
            return
        self.kind = kind
        self._part = None
        self.request_panel()

    @property
    def compare(self) -> str:
        """What is shown: SHOW_B (the run shown), SHOW_A (the reference run) or SHOW_DIFF."""
        return self.compare_combo.currentData() if self.reference_run is not None else SHOW_B

    @property
    def reference_run(self) -> int | None:
        """Run A, when there is one that is not the run shown."""
        ref = self.store.reference_run
        return ref if ref is not None and ref != self.shown_run else None

    def reference_frame(self) -> TensorFrame | None:
        """Run A's frame of the part shown (same module, kind, call and path)."""
        frame, ref = self.current_frame(), self.reference_run
        if frame is None or ref is None:
            return None
        parts = self.store.tensors(frame.module, (frame.kind,), ref)
        return parts.get((frame.kind, frame.call, frame.path))

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

    def _names(self) -> tuple[str, str]:
        """What the reference run and the run shown are called: ("A", "B") for a pinned run,
        ("before", "after") for the unedited and the edited run (RunStore.reference_names)."""
        names = self.store.reference_names() if self.reference_run is not None else None
        return names or ("A", "B")

    def _sync_compare(self) -> None:
        has_reference = self.reference_run is not None
        self.compare_combo.setVisible(has_reference)
        if has_reference:
            first, second = self._names()
            for index, text in enumerate((f"{second} (this run)", first,
                                          f"{second} \u2212 {first}")):
                self.compare_combo.setItemText(index, text)

    def request_paint(self) -> None:
        # Pinning run A changes what the panel shows without a frame arriving (the compare
        # actions then ask every view to paint): draw the panel again too.
        if self.store.reference_run != self._painted_reference:
            self._panel_dirty = True
        super().request_paint()

    def _sync_edited(self, frame: TensorFrame | None) -> None:
        started = self.store.started(frame.run_id) if frame is not None else None
        edits = started.edits if started is not None else ()
        self.edited_label.setVisible(bool(edits))
        self.edited_label.setToolTip("This run applied:\n" + "\n".join(edits) if edits else "")

    def _paint(self) -> None:
        self._panel_dirty = False
        self._painted_reference = self.store.reference_run
        self._sync_part_combo()
        self._sync_compare()
        frame = self.current_frame()
        reference = self.reference_frame()
        compare = self.compare
        shown = reference if compare == SHOW_A else frame
        self._sync_edited(shown)
        if frame is None or (compare != SHOW_B and reference is None):
            if self.module is None:
                self.header.setText("")
            else:
                self.header.setText(f"<b>{html.escape(module_label(self.module))}</b>")
            text = self._empty_text() if frame is None else (
                f"The {self._names()[0]} run has no {KIND_NOUNS[self.kind]} of this module "
                "to compare with.")
            self.panel.show_message(text)
            return
        name = f"<b>{html.escape(module_label(shown.module))}</b> {KIND_NOUNS[shown.kind]}"
        # Tokens pooled by core no longer form their patch grid: no grid then. A preview
        # that averaged features only (768 -> 256 in vit_b_16) keeps every token.
        pooled = shown.preview is not None and tuple(shown.preview.shape) != shown.item_shape
        tokens = self._token_layout(shown)
        if tokens is not None:
            pooled = tokens["token_grid"] is None
        keys = channel_keys(shown, reference if compare != SHOW_A else frame)
        first, second = self._names()
        if compare == SHOW_DIFF:
            diff = preview_difference(frame, reference)
            difference = f"{second} \u2212 {first}"
            if diff is None:
                self.header.setText(name)
                self.panel.show_message(
                    f"{difference} needs both runs' previews of the same shape: "
                    f"{second} {shape_text(frame)}, {first} {shape_text(reference)}.")
                return
            self.header.setText(f"{name} \u00b7 <b>{difference}</b> (run {frame.run_id} "
                                f"\u2212 run {reference.run_id}) \u00b7 {diff_html(diff)}")
            self.panel.show_tensor(diff, tokens_are_patches=not pooled, channel_keys=keys,
                                   diverging=True, **(tokens or {}))
            return
        what = f" \u00b7 <b>{first}</b> (run {shown.run_id})" if compare == SHOW_A else ""
        text = f"{name}{what} \u00b7 {stats_html(shown)}"
        finished = self.store.last_finished()
        if compare == SHOW_B and finished is not None and frame.run_id < finished:
            text += " \u00b7 <i>from an earlier run (the last run did not capture it)</i>"
        self.header.setText(text)
        self.panel.show_tensor(shown.preview, tokens_are_patches=not pooled, channel_keys=keys,
                               **(tokens or {}))

    def _token_layout(self, frame: TensorFrame) -> dict | None:
        """For a (B, N, D) output whose preview kept every token: its patch grid (found for
        the model input's size, as CAMs read it) and its feature count, as show_tensor
        takes them; None otherwise."""
        preview, shape = frame.preview, tuple(frame.shape)
        if preview is None or preview.ndim != 2 or len(shape) != 3 or preview.shape[0] != shape[1]:
            return None
        started = self.store.started(frame.run_id)
        display = started.display if started is not None else None
        input_hw = tuple(display.shape[:2]) if display is not None else None
        return {"token_grid": patch_grid(shape[1], input_hw), "features": shape[2]}
