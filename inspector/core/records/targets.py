"""What a run explains, as values: a class index (classifiers), a detection of a detection
model, a class of a segmentation model. Records, like the frames: core.tasks reads a model's
output for them and core.run.request carries one in each run."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DetectionTarget:
    """Explain detection `index` of a detection model's output (0: the highest score).

    With `box` (model-input pixels) and `class_index`, the detection chosen is the one of
    that class that overlaps the box most, whatever its rank: a box the user clicked stays
    the same object when an edit or the next video frame reorders the scores."""

    index: int = 0
    box: tuple[float, float, float, float] | None = None
    class_index: int | None = None

    def __str__(self) -> str:
        return f"det:{self.index}"


@dataclass(frozen=True)
class SegmentationTarget:
    """Explain class `index` of a segmentation model, summed over its predicted pixels."""

    index: int

    def __str__(self) -> str:
        return f"seg:{self.index}"


# What a run explains: a class index (classifiers), a detection, a segmentation class, or
# None (the top-1 class, the first detection, the largest non-background class).
Target = int | DetectionTarget | SegmentationTarget | None
