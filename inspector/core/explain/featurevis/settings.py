"""What a feature visualisation computes: its settings and its targets (one per image)."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass

import numpy as np

# Bumped whenever the algorithm changes what a picture looks like: the cache keys include it.
FEATUREVIS_VERSION = 1

CHANNEL = "channel"  # a channel's mean over the layer's positions
NEURON = "neuron"  # one channel at the centre position
CLASS = "class"  # a class logit of the model's output
DIRECTION = "direction"  # the mean dot product with a unit vector in channel space
OBJECTIVES = (CHANNEL, NEURON, CLASS, DIRECTION)
TRANSFORMS = ("lucid-standard", "none")
# Beyond these a run cannot finish on any machine (a 4096-pixel batch already takes GBs; Lucid
# uses 512 steps): refused with a sentence before any memory is taken.
MAX_STEPS = 100_000
MAX_SIZE = 4096


@dataclass(frozen=True)
class FeatureVisSettings:
    """Lucid's defaults (Adam 0.05, 512 steps, sd 0.01, 1/f spectrum, decorrelated colour,
    the standard transforms), plus a diversity weight and the redirected-ReLU steps.

    size: the side of the parameterised picture (its longer side for a non-square input);
        None: the model input's. The transforms resample it to the model input every step.
    redirect_relu_steps: for so many first steps, an image on which a ReLU passes no
        gradient at all gets Lucid's redirected gradient (relu.py), so that a channel that
        is 0 on the first random picture can still come alive.
    diversity: the weight of Lucid's diversity term among images of one objective (0: off).
    cossim_pow: a direction's dot product weighted by max(0.1, cos)^cossim_pow (Lucid).
    """

    steps: int = 512
    size: int | None = None
    seed: int = 0
    lr: float = 0.05
    sd: float = 0.01
    decay_power: float = 1.0
    transforms: str = "lucid-standard"
    redirect_relu_steps: int = 16
    diversity: float = 0.0
    cossim_pow: float = 0.0

    def check(self) -> None:
        """ValueError with one sentence for settings that cannot work."""
        if not 1 <= self.steps <= MAX_STEPS:
            raise ValueError(f"steps must be from 1 to {MAX_STEPS}")
        if self.size is not None and not 8 <= self.size <= MAX_SIZE:
            raise ValueError(f"the picture's size must be from 8 to {MAX_SIZE} pixels")
        if not self.lr > 0 or not self.sd > 0:
            raise ValueError("the learning rate and the initial spread must be above 0")
        if self.transforms not in TRANSFORMS:
            raise ValueError(f"transforms must be one of {', '.join(TRANSFORMS)}")
        if self.redirect_relu_steps < 0 or self.diversity < 0:
            raise ValueError("redirect_relu_steps and diversity must be 0 or more")

    def key(self) -> dict:
        """What a picture depends on, as JSON values (the cache key's part)."""
        return asdict(self)


@dataclass(frozen=True)
class Target:
    """What one image of a batch maximises. `index`: the channel (CHANNEL, NEURON), the
    class (CLASS) or the direction's number (DIRECTION, whose `vector` is in channel space).
    `copy`: which of several images of one objective (they differ by seed; the diversity
    term pushes them apart)."""

    kind: str
    index: int
    vector: tuple[float, ...] | None = None
    copy: int = 0

    def __post_init__(self) -> None:
        if self.kind not in OBJECTIVES:
            raise ValueError(f"unknown objective '{self.kind}'; choose {', '.join(OBJECTIVES)}")
        if (self.kind == DIRECTION) != (self.vector is not None):
            raise ValueError("a direction objective needs its vector (and only it has one)")

    def objective_key(self) -> str:
        """The objective alone, without the copy: images with equal keys form a group."""
        if self.vector is None:
            return f"{self.kind}:{self.index}"
        data = np.asarray(self.vector, np.float32).tobytes()
        return f"{self.kind}:{self.index}:{hashlib.sha256(data).hexdigest()[:16]}"

    def key(self) -> str:
        return f"{self.objective_key()}#{self.copy}"


def image_seed(seed: int, layer: str, target: Target) -> int:
    """One image's own seed: its picture does not depend on which batch it is optimised in."""
    digest = hashlib.sha256(f"{int(seed)}\0{layer}\0{target.key()}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)
