"""The two models `compare-models` compares: loaded, probed, their layers chosen, and the
images read once for both.

B is A itself when neither --model-b nor --weights-b is given: one forward per batch, the
same Gram matrices on both sides (the diagonal is then exactly 1). Each model sees the image
through its own preprocessing; the image is decoded once (`ImagePairs`).

`--layers auto` is every leaf module that returns one tensor, in forward order, but for the
ones that only pass their input on (nn.Identity, Dropout, which is the identity in eval
mode, and Flatten, the same numbers): their rows would repeat the layer before them.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

import torch
from torch.utils.data import Dataset

from inspector.batch.engine.command import OptionError
from inspector.batch.inputs import Source, as_source
from inspector.batch.names import unknown_modules
from inspector.batch.probe import LayerPlan, plan_layers
from inspector.core.compare.channels import ChannelRead, reads_for
from inspector.core.inputs.images import ImageLoadError, load_image
from inspector.core.inputs.preprocess import Preprocess
from inspector.core.models.tree import NEVER_CALLED, TUPLE_OUTPUT, ModuleTree

AUTO = "auto"
PASS_THROUGH = ("Identity", "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout",
                "FeatureAlphaDropout", "Flatten", "Unflatten")


def auto_layers(tree: ModuleTree) -> list[str]:
    """The leaves with one tensor output, in forward order, but for pass-through ones."""
    return [n for n in tree.order
            if n and tree[n].is_leaf and tree[n].type_name not in PASS_THROUGH
            and not ({NEVER_CALLED, TUPLE_OUTPUT} & tree[n].hazards)
            and tree[n].output_shape and len(tree[n].output_shape) >= 2]


def choose_layers(tree: ModuleTree, names: list[str] | str, side: str) -> list[str]:
    """`names` (a list, or AUTO) checked against the tree, in forward order; OptionError (exit
    status 2) naming an unknown one, with close names."""
    if names == AUTO or names == [AUTO]:
        layers = auto_layers(tree)
        if not layers:
            raise OptionError(f"model {side} has no leaf module with one output tensor")
        return layers
    names = list(dict.fromkeys(names))
    unknown = [n for n in names if not n or n not in tree.modules]
    if unknown:
        raise OptionError(f"model {side}: {unknown_modules(unknown, tree)}")
    order = {n: i for i, n in enumerate(tree.order)}
    return sorted(names, key=lambda n: order.get(n, len(order)))


def split_match(text: str, tree_a: ModuleTree, tree_b: ModuleTree) -> tuple[str, str]:
    """--match LA:LB as (LA, LB): split at the ':' that leaves a module of A on the left and
    one of B on the right (module names may hold a ':'); OptionError otherwise."""
    if ":" not in text:
        raise OptionError(f"--match takes LAYER_A:LAYER_B, got '{text}'")
    for pos in (i for i, ch in enumerate(text) if ch == ":"):
        left, right = text[:pos], text[pos + 1:]
        if left in tree_a.modules and right in tree_b.modules and left and right:
            return left, right
    left, _, right = text.rpartition(":")
    wrong = []
    if left not in tree_a.modules:
        close = difflib.get_close_matches(left, list(tree_a.modules), n=3)
        wrong.append(f"model A has no module '{left}'" +
                     (f" (did you mean {', '.join(close)}?)" if close else ""))
    if right not in tree_b.modules:
        close = difflib.get_close_matches(right, list(tree_b.modules), n=3)
        wrong.append(f"model B has no module '{right}'" +
                     (f" (did you mean {', '.join(close)}?)" if close else ""))
    raise OptionError(f"--match {text}: {'; '.join(wrong) or 'no such layer pair'}")


@dataclass(frozen=True)
class SideLayers:
    """One model's layers as the Gram hooks read them."""

    names: tuple[str, ...]
    calls: dict[str, int]
    seq_first: frozenset[str]

    @classmethod
    def of(cls, plans: dict[str, LayerPlan]) -> SideLayers:
        return cls(tuple(plans), {n: p.calls for n, p in plans.items()},
                   frozenset(n for n, p in plans.items() if p.seq_first))


@dataclass(frozen=True)
class MatchPlan:
    """--match: the layer of each side, how its channels are read, and its calls."""

    layer_a: str
    layer_b: str
    read_a: ChannelRead
    read_b: ChannelRead
    calls_a: int
    calls_b: int
    channels_a: int
    channels_b: int
    grid: tuple[int, ...] | None
    note: str


def plan_side(tree: ModuleTree, layers: list[str], hw: tuple[int, int], side: str) -> SideLayers:
    try:
        return SideLayers.of(plan_layers(tree, layers, hw))
    except ValueError as e:
        raise OptionError(f"model {side}: {e}") from None


def plan_match(tree_a: ModuleTree, tree_b: ModuleTree, la: str, lb: str,
               hw_a: tuple[int, int], hw_b: tuple[int, int]) -> MatchPlan:
    """How the two layers' channels are read and paired; OptionError when they cannot be."""
    try:
        pa = plan_layers(tree_a, [la], hw_a)[la]
        pb = plan_layers(tree_b, [lb], hw_b)[lb]
        read_a, read_b, grid, note = reads_for(
            tree_a[la].output_shape, tree_b[lb].output_shape,
            (pa.channels_last, pa.seq_first), (pb.channels_last, pb.seq_first))
    except ValueError as e:
        raise OptionError(f"--match {la}:{lb}: {e}") from None
    return MatchPlan(la, lb, read_a, read_b, pa.calls, pb.calls, pa.channels, pb.channels,
                     grid, note)


@dataclass(frozen=True)
class PairItem:
    """One image read for both models: its index, each model's input (x_b None: the same as
    x_a), or why it could not be read."""

    index: int
    x_a: torch.Tensor | None
    x_b: torch.Tensor | None
    error: str | None


def read_pair(source: Source, index: int, pre_a: Preprocess, pre_b: Preprocess | None
              ) -> PairItem:
    """An image file decoded once, prepared for A and (when its preprocessing differs) B."""
    source = as_source(source)
    if source.frame is not None:
        return PairItem(index, None, None, "video frames are not compared; name image files")
    try:
        image = load_image(source.path)
        x_a = pre_a(image)
        x_b = None if pre_b is None else pre_b(image)
    except ImageLoadError as e:
        return PairItem(index, None, None, e.reason)
    except Exception as e:  # an image Pillow reads but the preprocessing cannot use
        return PairItem(index, None, None, f"cannot preprocess ({type(e).__name__}: {e})")
    return PairItem(index, x_a, x_b, None)


class ImagePairs(Dataset):
    """`dataset[i]` is the PairItem of sources[i]; picklable, for DataLoader processes."""

    def __init__(self, sources, pre_a: Preprocess, pre_b: Preprocess | None) -> None:
        self.sources = [as_source(s) for s in sources]
        self.pre_a, self.pre_b = pre_a, pre_b

    def __len__(self) -> int:
        return len(self.sources)

    def __getitem__(self, index: int) -> PairItem:
        return read_pair(self.sources[index], index, self.pre_a, self.pre_b)


def collate_pairs(items: list[PairItem]) -> list[PairItem]:
    return items  # a group's forward stacks the readable ones (plan.run_group)
