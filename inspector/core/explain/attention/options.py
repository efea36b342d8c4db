"""What a run asks of attention, besides the attention maps in its CAM list: the options of
attention rollout, the explorer's and the logit lens's data, and attention kept whole.

No torch here: the window and the CLI build this value before the engine has loaded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

FUSIONS = ("mean", "max", "min")  # how rollout fuses the heads of a block
LEGRAD_BLOCKS = 4  # LeGrad's blocks when no first block is named: the last four


@dataclass(frozen=True)
class AttentionOptions:
    """fusion: how attention rollout fuses the heads of each block (mean, max or min).
    discard: the fraction of the lowest entries of each block's head-fused attention set to
        0 before rollout (vit-explain's discard_ratio, applied as it does: after fusion,
        per image, sparing the class token's attention to itself); 0 <= discard < 1.
    explorer: the run sends an AttentionFrame (every block's attention of the first image,
        for the window's attention explorer).
    lens: the logit lens's top-k per block (a LensFrame, RunOutcome.logit_lens); 0: none.
    keep: attention modules whose (heads, tokens, tokens) attention of the first image the
        run's outcome keeps (RunOutcome.attention; NPZ attention/NAME).
    """

    fusion: str = "mean"
    discard: float = 0.0
    explorer: bool = False
    lens: int = 0
    keep: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.fusion not in FUSIONS:
            raise ValueError(f"rollout fusion must be one of {', '.join(FUSIONS)}, "
                             f"not '{self.fusion}'")
        discard = float(self.discard)
        if not (math.isfinite(discard) and 0.0 <= discard < 1.0):
            raise ValueError(f"rollout discard must be at least 0 and under 1, got {self.discard}")
        if int(self.lens) < 0:
            raise ValueError(f"the logit lens's top-k must be 0 or more, got {self.lens}")
        object.__setattr__(self, "keep", frozenset(self.keep))

    @property
    def asks_beyond_maps(self) -> bool:
        """Whether the run wants attention data other than maps (explorer, lens, kept)."""
        return self.explorer or self.lens > 0 or bool(self.keep)

    def describe_rollout(self) -> str:
        """How rollout fused and discarded, in words (headers, captions)."""
        text = f"{self.fusion} over heads"
        if self.discard > 0:
            text += f", lowest {self.discard:.0%} discarded"
        return text
