"""What a capture hook sends: the frame of one tensor a module saw, with its statistics and
preview, made on the worker's thread and put through the sink (the run's channel).

Statistics are computed right away for tensors the model modifies in place, and handed to an
idle core for the others (core.stats.deferred, checked against the tensor's version counter
before they are sent). A 4-D tensor that core.tokens reads as channels last (B, H, W, C) for
this run's input size (ConvNeXt's and Swin's blocks) is read as (B, C, H, W), a view: its
statistics per channel and a preview of C pictures, as for a convolution's output, and its
frame says `channels_last`. A preview is a small copy made now: a later in-place op (the
ReLU after a BatchNorm) would otherwise change what is shown.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from inspector.core.records.frames import GradientFrame
from inspector.core.run.capture_spec import CaptureSpec
from inspector.core.stats import tensor_stats as _stats
from inspector.core.stats.deferred import Deferred
from inspector.core.tokens import image_size, is_channels_last

Sink = Callable[[object], None]


class FrameMaker:
    """The frames of one run's capture: `emit(cls, module, call, kind, path, tensor)`."""

    def __init__(self, spec: CaptureSpec, sink: Sink, run_id: int) -> None:
        self.spec = spec
        self.sink = sink
        self.run_id = run_id
        self.deferred: Deferred | None = None  # statistics handed to an idle core
        # The model input's (H, W), read by a pre-hook on the model itself (read_input_size):
        # which 4-D tensors are channels last depends on it.
        self.input_hw: tuple[int, int] | None = None
        self._channels_last: dict[tuple[int, ...], bool] = {}  # shape -> channels last

    def read_input_size(self, mod, args, kwargs) -> None:
        """Pre-hook on the model: the input's (H, W), before any module emits a frame."""
        size = image_size((args, kwargs))
        if size != self.input_hw:
            self.input_hw = size
            self._channels_last.clear()

    def emit(self, cls, name: str, call: int, kind: str, path: str, t: torch.Tensor) -> None:
        spec = self.spec
        deferred = self.deferred
        if deferred is not None:
            deferred.poll()  # between modules: the moment to check and send finished ones
        run_id, shape, dtype = self.run_id, tuple(t.shape), _dtype_name(t.dtype)
        full = t.detach().to("cpu", copy=True).numpy() if name in spec.full else None
        channels_last = len(shape) == 4 and self._is_channels_last(shape)
        if channels_last:
            t = t.permute(0, 3, 1, 2)
            deferred = None  # a view's statistics are computed here, not handed over
        prev = (
            _stats.preview(t, spec.preview_channels, spec.preview_size, spec.preview_elements)
            if name in spec.preview
            else None
        )

        def make(st):
            return cls(run_id=run_id, module=name, call=call, kind=kind, path=path,
                       shape=shape, dtype=dtype, stats=st, preview=prev, full=full,
                       channels_last=channels_last)

        if not spec.stats:
            self.sink(make(None))
            return
        abs_mean = cls is GradientFrame
        if deferred is not None and deferred.submit((name, call, kind, path), t, abs_mean, make):
            return  # sent later, by a poll() or by settle()
        self.sink(make(_stats.tensor_stats(t, abs_mean=abs_mean)))

    def _is_channels_last(self, shape: tuple[int, ...]) -> bool:
        """Whether a 4-D tensor of `shape` is channels last for this run's input (cached:
        a model has few distinct shapes)."""
        known = self._channels_last.get(shape)
        if known is None:
            known = self._channels_last[shape] = is_channels_last(shape, self.input_hw)
        return known


_DTYPE_NAMES: dict[torch.dtype, str] = {}


def _dtype_name(dtype: torch.dtype) -> str:
    """The name a frame carries ("float32"); cached: str(dtype) costs a microsecond."""
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = str(dtype).removeprefix("torch.")
    return name
