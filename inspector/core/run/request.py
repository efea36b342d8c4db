"""A run, described as data: everything one run needs, in one frozen value.

The window builds a `RunRequest` from its widgets and submits it; the CLI and scripts build
theirs from their arguments. The Session keeps nothing of a run between runs: a different
capture, target or CAM layer is a different value, not a setting changed in place.

No torch here (the window builds values before the engine has loaded), and no Qt.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from inspector.core.records.targets import Target

if TYPE_CHECKING:
    from inspector.core.edits.interventions import Intervention
    from inspector.core.explain.attention.options import AttentionOptions
    from inspector.core.explain.catalog import AttributionOptions
    from inspector.core.explain.metrics.names import MetricOptions
    from inspector.core.run.capture_spec import CaptureSpec


@dataclass(frozen=True)
class RunRequest:
    # A path, a PIL image, a core.inputs.preprocess.PreparedImage (a video frame) or a
    # preprocessed (3, H, W) / (1, 3, H, W) tensor.
    image: Any
    # What the hooks capture. None: the input, output and output gradient of every leaf.
    capture: CaptureSpec | None = None
    target: Target = None  # what to explain (see Target); None: the top prediction
    # True: the captured modules' gradients (the capture's gradient kinds) and a backward
    # from the target's score down to the model input. False: no gradient frames, whatever
    # the capture lists; a gradient CAM still gets its layer's gradient, from a backward
    # that stops at that layer (the forward records autograd only from the CAM layer on: a
    # video's live run). An edit of gradients runs the backward to the input either way.
    gradients: bool = True
    interventions: tuple[Intervention, ...] = ()
    cams: tuple[tuple[str, str | None], ...] = ()  # (method, layer or None for the default)
    # Input attributions of the target (core.explain.catalog.ATTRIBUTION_METHODS), after the CAMs;
    # None options: AttributionOptions() defaults.
    attributions: tuple[str, ...] = ()
    attribution_options: AttributionOptions | None = None
    # Attention rollout's options and what else the run reads of a transformer's attention
    # (the explorer's frame, the logit lens, attention kept whole); None: nothing beyond the
    # attention maps in `cams`, with the default options. Only then is attention read on
    # the non-fused path: otherwise the model runs its fused kernels untouched.
    attention: AttentionOptions | None = None
    # Faithfulness metrics of every map the run makes (core.explain.metrics), computed after
    # them with the run's edits on; None: none. metric_boxes: the object's boxes for the
    # pointing game, [x0, y0, x1, y1] in the picture's pixels (model-input pixels for a
    # tensor input). metric_mask: instead, an image file of the object's mask at the
    # picture's size (nonzero: the object).
    metrics: MetricOptions | None = None
    metric_boxes: tuple[tuple[float, float, float, float], ...] = ()
    metric_mask: str = ""
    topk: int = 5
    label: str = ""
    # 16-bit, 32-bit and float images: False scales them by their type's range (as
    # torchvision's ToDtype(scale=True)), True stretches their own min..max to 0..255.
    stretch: bool = False
    # Comparisons between runs: keep_outputs keeps this run's outputs of the captured
    # modules in the Session (detached copies; the last few such runs), and compare_with
    # names such a run, to which this one is compared (a DivergenceFrame; see core.compare.divergence).
    keep_outputs: bool = False
    compare_with: int | None = None
    # torch's intra-op threads for this run on the worker (then put back); None: the
    # process's count. A window playing a video leaves a core to its UI and decoder
    # (core.run.runtime.stream_threads).
    threads: int | None = None

    def with_(self, **changes: Any) -> RunRequest:
        return replace(self, **changes)
