"""Synthetic frames for the view and router tests: what core's hooks would send, built from
arrays, and a channel to send them through; and how a test reads what a view drew where
the view has no accessor of its own (a tile of the mosaic, a plot's copy action)."""

from __future__ import annotations

import math

import numpy as np
from PySide6.QtWidgets import QApplication

from inspector.core.records.frames import (
    ActivationFrame,
    CamFrame,
    GradientFrame,
    Prediction,
    PredictionFrame,
    RunStarted,
    TensorStats,
)
from inspector.core.records.kinds import GRAD_OUTPUT, OUTPUT
from inspector.ui.views.clipboard import COPY_TEXT
from inspector.ui.views.mosaic import GAP

# -- synthetic frames ---------------------------------------------------------------------------


def make_stats(batch: np.ndarray) -> TensorStats:
    """TensorStats of a tensor with its batch dimension, as core computes them (dim 1 = channel)."""
    x = np.asarray(batch, dtype=np.float64)
    per = np.moveaxis(x, 1, 0).reshape(x.shape[1], -1) if x.ndim >= 2 else x.reshape(1, -1)
    finite = x[np.isfinite(x)] if x.size else np.zeros(1)
    return TensorStats(
        mean=float(finite.mean()),
        std=float(finite.std()),
        min=float(finite.min()),
        max=float(finite.max()),
        zero_fraction=float((x == 0).mean()),
        numel=int(x.size),
        channel_mean=per.mean(1),
        channel_std=per.std(1),
        channel_min=per.min(1),
        channel_max=per.max(1),
        channel_zero_fraction=(per == 0).mean(1),
        abs_mean=float(np.abs(finite).mean()),
        nonfinite=int((~np.isfinite(x)).sum()),
    )


def act(run, module, preview, kind=OUTPUT, call=0, path="", stats=None):
    """An ActivationFrame whose preview is `preview` (the first batch item)."""
    preview = np.asarray(preview, np.float32)
    return ActivationFrame(
        run_id=run, module=module, call=call, kind=kind, path=path,
        shape=(1, *preview.shape), dtype="float32",
        stats=stats or make_stats(preview[None]), preview=preview,
    )


def grad(run, module, preview, kind=GRAD_OUTPUT, stats=None, call=0):
    preview = np.asarray(preview, np.float32)
    return GradientFrame(
        run_id=run, module=module, call=call, kind=kind, path="",
        shape=(1, *preview.shape), dtype="float32",
        stats=stats or make_stats(preview[None]), preview=preview,
    )


def started(run, display=None):
    return RunStarted(run_id=run, label="img.png", model="m", device="cpu", display=display)


def shown(qtbot, widget):
    qtbot.addWidget(widget)
    widget.resize(640, 480)
    widget.show()
    qtbot.waitExposed(widget)
    return widget


def tile(item_image: np.ndarray, k: int, rows_cols: tuple[int, int], h: int, w: int):
    _, cols = rows_cols
    r, c = divmod(k, cols)
    return item_image[r * (h + GAP): r * (h + GAP) + h, c * (w + GAP): c * (w + GAP) + w]


def mosaic_tile(mosaic, k: int) -> np.ndarray:
    """The (H, W) part of a Mosaic's image that is tile k."""
    y, x = mosaic.origin(k)
    return mosaic.image[y:y + mosaic.height, x:x + mosaic.width]


def paint_pending() -> None:
    """One turn of the event loop: the paint a view scheduled for a burst of frames
    (FrameView.schedule_paint) runs, as it would between two ticks of the frame router."""
    QApplication.processEvents()


def copy_action(plot):
    """The "Copy to clipboard" action that clipboard.add_copy_action put in the right-click
    menu of `plot` (a PlotWidget or PlotItem), or None."""
    box = plot.getPlotItem().getViewBox() if hasattr(plot, "getPlotItem") else plot.getViewBox()
    actions = box.menu.actions() if box.menu is not None else []
    return next((a for a in actions if a.text() == COPY_TEXT), None)


RNG = np.random.default_rng(0)


def predictions(run, target):
    probs = [0.6, 0.2, 0.1, 0.06, 0.04]
    labels = ["tabby", "tiger cat", "Egyptian cat", "lynx", "carton"]
    top = tuple(Prediction(index=280 + i, label=lab, prob=p, logit=math.log(p))
                for i, (lab, p) in enumerate(zip(labels, probs, strict=True)))
    return PredictionFrame(run_id=run, top=top, target=target)


def cam_frame(run, cam, method="gradcam", layer="layer4", target=281):
    return CamFrame(run_id=run, method=method, layer=layer, target=target,
                    cam=np.asarray(cam, np.float32))


class FakeChannel:
    """What the frame router drains: `pending` frames, and a count the channel dropped."""

    def __init__(self, dropped: int = 0):
        self.pending, self.dropped = [], dropped

    def drain(self, max_frames=None):
        out, self.pending = self.pending[:max_frames], self.pending[max_frames:]
        return out
