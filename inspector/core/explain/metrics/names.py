"""The faithfulness metrics by name, their options, and the words that say how each number
was computed (the protocol every tooltip, header and summary.json carries).

No torch here: the CLI's help and the window's controls read it before torch has loaded.
"""

from __future__ import annotations

from dataclasses import dataclass

DELETION = "deletion"
INSERTION = "insertion"
AVGDROP = "avgdrop"
ROAD = "road"
SANITY = "sanity"
POINTING = "pointing"


@dataclass(frozen=True)
class Metric:
    name: str  # what --metrics takes
    title: str  # what the window shows
    keys: tuple[str, ...]  # what it adds to a method's entry in summary.json
    what: str  # one line: what it measures
    needs_boxes: bool = False


_TABLE = (
    Metric(DELETION, "Deletion", ("deletion", "deletion_curve"),
           "the score as the most relevant pixels are replaced first; a faithful map makes "
           "it fall fast (lower AUC is better)"),
    Metric(INSERTION, "Insertion", ("insertion", "insertion_curve"),
           "the score as the most relevant pixels are restored first; a faithful map makes "
           "it rise fast (higher AUC is better)"),
    Metric(AVGDROP, "Average Drop", ("avg_drop", "increase"),
           "the input multiplied by the map: the relative fall of the score (lower is "
           "better), and whether it rose instead"),
    Metric(ROAD, "ROAD", ("road_morf", "road_lerf"),
           "pixels removed by linear imputation: most relevant first (lower is better) and "
           "least relevant first (higher is better)"),
    Metric(SANITY, "Sanity check", ("sanity", "sanity_flag"),
           "the map made again as the model's weights are randomised from the top down: "
           "a map that stays the same does not show what the model learned"),
    Metric(POINTING, "Pointing game", ("pointing", "energy_pointing"),
           "whether the map's maximum falls on the object's boxes, and the share of the "
           "map's mass inside them", needs_boxes=True),
)
METRICS: dict[str, Metric] = {m.name: m for m in _TABLE}

# Other spellings people type, after lower-casing and dropping '-', '_' and spaces.
_ALIASES = {
    "averagedrop": AVGDROP,
    "drop": AVGDROP,
    "increase": AVGDROP,
    "increaseinconfidence": AVGDROP,
    "roadmorf": ROAD,
    "roadlerf": ROAD,
    "mprt": SANITY,
    "randomisation": SANITY,
    "randomization": SANITY,
    "energypointing": POINTING,
    "pointinggame": POINTING,
}

BASELINES = ("zero", "blur", "mean")
BASELINE_TEXT = {
    "zero": "zero (of the normalised input: the data set's mean colour)",
    "blur": "a blur of the input (RISE's 11 x 11 Gaussian, sigma 5)",
    "mean": "the image's own mean colour",
}
CLASS_PROBABILITY = "the softmax probability of the explained class"
ROAD_PERCENTILES = (10, 20, 30, 40, 50, 60, 70, 80, 90)
# The sanity check flags a map whose Spearman correlation with the original is still at
# least this large once every weight is random.
SANITY_FLAG_SPEARMAN = 0.5
POINTING_TOLERANCE = 15  # pixels of the picture: TorchRay's


def metric_name(name: str) -> str:
    """The canonical name of a metric: "Average-Drop" -> "avgdrop"; ValueError naming the
    known ones for any other."""
    key = name.strip().lower().replace("-", "").replace("_", "").replace(" ", "")
    key = _ALIASES.get(key, key)
    if key not in METRICS:
        raise ValueError(f"unknown metric '{name.strip()}'; known: {', '.join(METRICS)}")
    return key


def parse_metrics(text: str) -> tuple[str, ...]:
    """`--metrics deletion,insertion,...` as canonical names in the table's order."""
    asked = {metric_name(part) for part in text.split(",") if part.strip()}
    if not asked:
        raise ValueError(f"--metrics names none; known: {', '.join(METRICS)}")
    return tuple(name for name in METRICS if name in asked)


# Deletion and insertion curves of more points than this cost a forward a point and add
# nothing their area under the curve can show (1000 steps already move 0.1 % of the pixels).
MAX_STEPS = 1000


@dataclass(frozen=True)
class MetricOptions:
    """What a run's faithfulness metrics compute, and how.

    metrics: the metrics asked for (names in METRICS; other spellings are accepted).
    steps: deletion and insertion perturb ceil(P / steps) of the P pixel positions a step.
    baseline: None for RISE's protocol (deletion replaces pixels with zero, insertion
        starts from a blur of the input); "zero", "blur" or "mean" sets both curves'.
    road_percentiles: ROAD's percentiles (pytorch-grad-cam's): percentile p keeps the p%
        of the pixels the order ranks on the kept side, and imputes the others.
    road_noise: the noise ROAD's imputation adds (pytorch-grad-cam's default, in
        normalised-input units); 0 gives its noise-free numbers.
    seed: ROAD's noise and the sanity check's random weights.
    batch_size: perturbed inputs per forward (also bounded by memory).
    sanity_flag: the Spearman correlation at the last randomisation step from which a map
        is flagged.
    pointing_tolerance: the pointing game's hit distance, in picture pixels (strictly less).
    """

    metrics: tuple[str, ...] = (DELETION, INSERTION, AVGDROP)
    steps: int = 20
    baseline: str | None = None
    road_percentiles: tuple[int, ...] = ROAD_PERCENTILES
    road_noise: float = 0.01
    seed: int = 0
    batch_size: int = 32
    sanity_flag: float = SANITY_FLAG_SPEARMAN
    pointing_tolerance: int = POINTING_TOLERANCE

    def __post_init__(self) -> None:
        names = tuple(n for n in METRICS if n in {metric_name(m) for m in self.metrics})
        object.__setattr__(self, "metrics", names)
        if not 1 <= int(self.steps) <= MAX_STEPS:
            raise ValueError(f"--metric-steps must be between 1 and {MAX_STEPS} (each step is "
                             f"a forward of every map's perturbed image), not {self.steps}")
        if self.baseline is not None and self.baseline not in BASELINES:
            raise ValueError(f"unknown baseline '{self.baseline}'; choose "
                             f"{', '.join(BASELINES)}")
        if int(self.batch_size) < 1:
            raise ValueError(f"the metrics' batch size must be 1 or more, not {self.batch_size}")
        bad = [p for p in self.road_percentiles if not 0 < int(p) < 100]
        if bad or not self.road_percentiles:
            raise ValueError(f"ROAD's percentiles must lie between 0 and 100, got "
                             f"{list(self.road_percentiles)}")
        if not float(self.road_noise) >= 0:
            raise ValueError(f"ROAD's noise must be 0 or more, not {self.road_noise}")

    @property
    def deletion_baseline(self) -> str:
        return self.baseline or "zero"

    @property
    def insertion_baseline(self) -> str:
        return self.baseline or "blur"

    def asks(self, metric: str) -> bool:
        return metric in self.metrics

    def curves_text(self) -> str:
        """How deletion and insertion were run, in words."""
        if self.baseline is None:
            base = (f"deletion to {BASELINE_TEXT['zero']}, insertion from "
                    f"{BASELINE_TEXT['blur']} (RISE's protocol)")
        else:
            base = f"deletion to and insertion from {BASELINE_TEXT[self.baseline]}"
        return (f"{base}; {self.steps} steps of ceil(P / {self.steps}) pixels in the map's "
                f"order (ties: the first pixel in reading order first); AUC by the trapezoid "
                f"rule over the fractions perturbed")

    def road_text(self) -> str:
        noise = ("no noise" if not self.road_noise
                 else f"noise {self.road_noise:g} (seed {self.seed})")
        return (f"ROAD: pixels removed by noisy linear imputation ({noise}) at "
                f"{len(self.road_percentiles)} percentiles; MoRF removes the most relevant "
                f"first, LeRF the least; the number is the mean score over the percentiles")

    def sanity_text(self) -> str:
        return (f"cascading randomisation of a copy of the model from the top unit down "
                f"(seed {self.seed}); Spearman rank correlation and SSIM (7 x 7 window) of "
                f"each map with the original; flagged when Spearman >= {self.sanity_flag:g} "
                f"with every unit random")

    def describe(self, metric: str, score: str = CLASS_PROBABILITY) -> str:
        """How one metric's numbers were computed: a tooltip's text."""
        texts = {
            DELETION: self.curves_text(),
            INSERTION: self.curves_text(),
            AVGDROP: "Average Drop = max(0, p - p') / p and Increase = p' > p, where p' is "
                     "the score of the normalised input times the map (in [0, 1])",
            ROAD: self.road_text(),
            SANITY: self.sanity_text(),
            POINTING: f"a hit when the map's maximum on the picture lies less than "
                      f"{self.pointing_tolerance} pixels from a box; energy = the map's "
                      f"mass inside the boxes / its whole mass",
        }
        return f"{METRICS[metric].title}: {texts[metric]}. Score: {score}."

    def protocol(self, score: str = CLASS_PROBABILITY) -> str:
        """Everything the numbers of these options depend on, in one paragraph."""
        parts = [f"score: {score}"]
        if self.asks(DELETION) or self.asks(INSERTION):
            parts.append(self.curves_text())
        if self.asks(AVGDROP):
            parts.append("Average Drop and Increase on the input times the map")
        if self.asks(ROAD):
            parts.append(self.road_text())
        if self.asks(SANITY):
            parts.append(self.sanity_text())
        if self.asks(POINTING):
            parts.append(f"pointing tolerance {self.pointing_tolerance} picture pixels")
        return "; ".join(parts)
