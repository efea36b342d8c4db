"""Which device a model runs on: CUDA if available, then MPS, then the CPU, or the one named."""

from __future__ import annotations

import torch

from inspector.core.models.files import ModelLoadError


def pick_device(name: str | None = None) -> torch.device:
    """CUDA if available, then MPS, then CPU; or the named device, checked to exist."""
    if name in (None, "", "auto"):
        if torch.cuda.is_available():
            return torch.device("cuda")
        mps = getattr(torch.backends, "mps", None)
        if mps is not None and mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        dev = torch.device(name)
    except RuntimeError as e:
        raise ModelLoadError(f"unknown device '{name}': {e}") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ModelLoadError(f"device '{name}' asked for, but CUDA is not available here")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ModelLoadError(
                f"device '{name}' asked for, but there are {torch.cuda.device_count()} CUDA devices"
            )
    if dev.type == "mps" and not (torch.backends.mps.is_available()):
        raise ModelLoadError(f"device '{name}' asked for, but MPS is not available here")
    return dev


def available_devices() -> list[str]:
    out = ["cpu"]
    if torch.cuda.is_available():
        out = [f"cuda:{i}" for i in range(torch.cuda.device_count())] + out
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        out.insert(0, "mps")
    return out
