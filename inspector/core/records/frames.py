"""What the UI and the CLI receive from a run: small immutable records, never live tensors.

Every frame carries the run id, so a consumer can drop frames of a run it no longer shows.
Data frames (activations, gradients) may be dropped by the channel when the consumer falls
behind; control frames (RunStarted, RunFinished, ErrorFrame) never are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class TensorStats:
    """Statistics of one tensor. Per-channel arrays are over dim 1 (dim 0 is the batch).

    For a 1-D tensor (or 0-D), the per-channel arrays have one entry.
    """

    mean: float
    std: float
    min: float
    max: float
    zero_fraction: float
    numel: int
    channel_mean: np.ndarray
    channel_std: np.ndarray
    channel_min: np.ndarray
    channel_max: np.ndarray
    channel_zero_fraction: np.ndarray
    abs_mean: float = 0.0  # mean |x|: what a gradient-flow plot shows per layer
    nonfinite: int = 0  # count of NaN/Inf values: exploding activations or gradients

    @property
    def abs_max(self) -> float:
        return max(abs(self.min), abs(self.max))

    @property
    def dead_channels(self) -> int:
        """Channels that are zero everywhere (dead ReLU units, for example)."""
        return int(np.count_nonzero(self.channel_zero_fraction >= 1.0))


@dataclass(frozen=True)
class RunStarted:
    run_id: int
    label: str  # what is being run: an image's file name, usually
    model: str
    device: str
    image_size: tuple[int, int] | None = None  # original (width, height)
    display: np.ndarray | None = None  # the preprocessed input un-normalized, HxWx3 uint8
    time: float = 0.0  # time.time() at start
    edits: tuple[str, ...] = ()  # descriptions of the interventions this run applies


@dataclass(frozen=True)
class TensorFrame:
    """What a hook saw on one tensor of one call of one module."""

    run_id: int
    module: str  # qualified name as in model.named_modules(); "" is the model itself
    call: int  # 0 for the first call of this module in the run, 1 for the second, ...
    kind: str  # one of KINDS
    path: str  # where the tensor sits in a tuple/list/dict output: "" for a plain tensor, "0", "logits", "1.key"
    shape: tuple[int, ...]
    dtype: str
    stats: TensorStats
    preview: np.ndarray | None = None  # float32, first item of the batch, reduced (see core.stats.previews)
    full: np.ndarray | None = None  # the whole tensor, only when asked for (export)
    # A channels-last (B, H, W, C) tensor (core.tokens.is_channels_last): its statistics'
    # channels and its preview's first axis are the C of the last dim, so that the preview
    # is (C, H, W) like any other map's. `shape` and `full` keep the tensor's own layout.
    channels_last: bool = False

    @property
    def key(self) -> tuple[str, int, str, str]:
        return (self.module, self.call, self.kind, self.path)

    @property
    def item_shape(self) -> tuple[int, ...]:
        """One batch item's shape, laid out as the preview is: (C, H, W) for channels last."""
        item = tuple(self.shape[1:])
        if self.channels_last and len(item) == 3:
            h, w, c = item
            return (c, h, w)
        return item


@dataclass(frozen=True)
class ActivationFrame(TensorFrame):
    """A module's input or output (kind is INPUT or OUTPUT)."""


@dataclass(frozen=True)
class GradientFrame(TensorFrame):
    """A gradient (kind is GRAD_OUTPUT or GRAD_INPUT)."""


@dataclass(frozen=True)
class Prediction:
    index: int
    label: str
    prob: float
    logit: float


@dataclass(frozen=True)
class PredictionFrame:
    run_id: int
    top: tuple[Prediction, ...]
    target: int | None  # the class whose score was back-propagated, if any
    # Detection models (core.tasks): `top` lists detections (index: the rank by score) and
    # target is the detection explained; `detections` are all of them
    # (core.tasks.detection.Detection, boxes in model-input pixels). Segmentation models:
    # `mask`, the (H, W) class per model-input pixel, and `top` the classes present.
    task: str = "classification"
    detections: tuple = ()
    mask: np.ndarray | None = None
    legend: tuple[tuple[int, str], ...] = ()  # (class, label) of every class in the mask
    # Detection models: the score under which the model dropped detections (its own
    # score_thresh), so that "nothing detected" can say above what; None: unknown.
    score_threshold: float | None = None


@dataclass(frozen=True)
class CamFrame:
    """A class activation map (or input attribution), at the model input's resolution in [0, 1]."""

    run_id: int
    method: str
    layer: str
    target: int
    cam: np.ndarray  # float32, H x W of the model input


@dataclass(frozen=True)
class AttentionFrame:
    """Every block's attention of the run's first image, for the attention explorer
    (core.explain.attention: its probabilities, read on the non-fused path for this run).

    probs: (blocks, heads, queries, tokens) float16; queries is every token, or only the
        class token's row (1) when the whole would exceed the frame's budget (`all_queries`).
    distance: (blocks, heads) float32, each head's mean attention distance in patches.
    prefix: the tokens before the patch grid (class, distillation, registers); grid: the
        patch grid (rows, columns) of the model input.
    """

    run_id: int
    modules: tuple[str, ...]  # the attention modules, forward order
    probs: np.ndarray
    distance: np.ndarray
    prefix: int
    grid: tuple[int, int]
    class_token: bool = True
    all_queries: bool = True
    budget_note: str = ""  # why only the class token's row came, when so


@dataclass(frozen=True)
class LensFrame:
    """The logit lens: after each block, its tokens through the model's own final norm and
    head (core.explain.attention.lens), as class probabilities."""

    run_id: int
    blocks: tuple[str, ...]  # forward order
    target: int | None  # the class explained
    target_probs: np.ndarray  # (blocks,) float32: the explained class's probability per block
    top: tuple[tuple[Prediction, ...], ...]  # per block its top classes
    how: str = ""  # what was applied to each block's tokens, in words
    target_label: str = ""


@dataclass(frozen=True)
class MetricsFrame:
    """A map's faithfulness scores on the run's image (core.explain.metrics): one per CAM or
    attribution of a run that asked for metrics (RunRequest.metrics)."""

    run_id: int
    method: str
    layer: str  # as the map's CamFrame: the CAM layer, or ATTRIBUTION_LAYER
    target: int
    scores: Any  # core.explain.metrics.results.MapScores
    options: Any  # core.explain.metrics.names.MetricOptions: what was computed, and how
    score: str  # what the score is, in words (core.explain.metrics.scores.score_text)
    cam: np.ndarray | None = None  # the map the window shows for it (its CamFrame's)

    @property
    def protocol(self) -> str:
        """How every number was computed, in words."""
        return self.options.protocol(self.score)


@dataclass(frozen=True)
class DivergenceFrame:
    """Where this run parts ways with a reference run (run A, or the unedited run): per
    captured module, in forward order, the relative L2 distance ||B - A|| / ||A|| and the
    cosine similarity between the two runs' outputs (the first call, the whole tensor)."""

    run_id: int
    reference_run: int
    modules: tuple[str, ...]  # forward order
    rel_l2: np.ndarray  # float64, one per module
    cosine: np.ndarray  # float64, one per module


@dataclass(frozen=True)
class ProgressFrame:
    """How far a long step of a run has got: Score-CAM's masked forwards, for one."""

    run_id: int
    step: str  # what is being done, in words: "Score-CAM"
    done: int
    total: int
    elapsed: float  # seconds since the step began
    detail: str = ""  # what within the step: "scoring Grad-CAM (3 of 12)"
    left: float | None = None  # the step's own estimate of the seconds left, when it has one


@dataclass(frozen=True)
class RunFinished:
    run_id: int
    status: str  # "ok", "error" or "cancelled"
    timings: dict[str, float] = field(default_factory=dict)  # seconds: "preprocess", "forward", ...
    interventions: tuple[str, ...] = ()  # descriptions of what was applied during the run
    never_called: tuple[str, ...] = ()  # captured modules whose hooks never fired
    # Frames of this run that never arrived: dropped by the channel (as it finished), or
    # whose statistics an in-place op invalidated before they were checked (deferred_stats).
    frames_dropped: int = 0
    # (maps scored, maps to score) when the scoring alone was stopped (Session.stop_scoring):
    # the run itself is complete ("ok"); None otherwise.
    scoring_stopped: tuple[int, int] | None = None


@dataclass(frozen=True)
class ErrorFrame:
    run_id: int | None  # None when the error is not about a run (a model load, say)
    message: str  # one line, for a status bar
    details: str = ""  # the traceback or the list of problems, for a details dialog
    module: str | None = None  # the module in which it happened, when known
    exception: str = ""  # the exception's type name


@dataclass(frozen=True)
class ModelLoaded:
    """Sent when a model finished loading on the worker (the UI rebuilds its tree)."""

    name: str
    description: str  # "resnet18 (pretrained, ImageNet)", "demo_shapes (shipped weights)", ...
    pretrained: bool
    device: str
    tree: Any  # core.models.tree.ModuleTree
    notes: tuple[str, ...] = ()  # what the user should know: random weights, a slower path
    cam_layer: str | None = None  # where a CAM is computed unless the user names a layer
    source: str = ""  # the file or folder the weights came from ("" for random weights)
    # Why the attention maps, the attention explorer and the logit lens are off for this
    # model, in one sentence (core.explain.attention.find.refusal); "" when they apply.
    attention: str = ""
