"""Edits carried over to another model: which still apply, in what form, and why not.

The window's edits were made for the model loaded when they were made: module names,
channel counts and the model input's size may all differ in the next one. `carry_edits`
checks each edit against the new model as `analyse --edit` is checked
(core.edits.spec.check_edits) and says, per edit, whether it is kept as it was, kept in a
new form, or dropped, and why; `summary` says it in one sentence for the window (`describe`: one edit's part).

An occlusion box describes a region of the picture, so it follows the picture: its
model-input pixels are mapped onto the picture through the old model's resize and centre
crop, then into the new model's input through the new model's (clipped to what the new crop
sees; dropped when none of it is left). The picture is the one shown (`picture_size`) when
there is one; with two presets that resize the shorter side, the result is the same for
every picture. Without one, the old model input itself stands for the picture.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from inspector.core.edits.interventions import Intervention, Occlude
from inspector.core.edits.spec import EditSpecError, check_edits, format_edit
from inspector.core.inputs.preprocess import Preprocess
from inspector.core.models.tree import ModuleTree


@dataclass(frozen=True)
class Carried:
    """What became of one edit: `after` is None when it was dropped; `why` says why it was
    dropped or changed ("" when kept as it was)."""

    before: Intervention
    after: Intervention | None
    why: str = ""

    @property
    def dropped(self) -> bool:
        return self.after is None

    @property
    def changed(self) -> bool:
        """Kept, but it now reads differently (an occlusion box moved)."""
        return self.after is not None and format_edit(self.after) != format_edit(self.before)


def carry_edits(edits: Iterable[Intervention], tree: ModuleTree, new: Preprocess,
                old: Preprocess | None = None, picture_size: tuple[int, int] | None = None,
                model: str = "this model") -> list[Carried]:
    """Each edit, checked against the model of `tree` and `new` (its preprocessing); `old`
    is the preprocessing the edits were made for (None: unknown, boxes are only checked),
    `picture_size` the (width, height) of the picture shown, `model` the new model's name
    for the reasons."""
    return [_carry(edit, tree, new, old, picture_size, model) for edit in edits]


def _carry(edit, tree, new, old, picture_size, model) -> Carried:
    if isinstance(edit, Occlude):
        return _carry_box(edit, new, old, picture_size, model)
    if edit.module not in tree:
        return Carried(edit, None, f"{model} has no module '{edit.module}'")
    # The channel dim was read from the old model's output layout (channels-last or not):
    # read it again from the new one's.
    fresh = replace(edit, dim=None) if hasattr(edit, "dim") else edit
    try:
        (checked,) = check_edits((fresh,), tree, new.crop_size)
    except EditSpecError as e:
        why = str(e).split("': ", 1)[-1]  # without "edit 'SPEC'": the sentence names it
        return Carried(edit, None, f"in {model}, {why}")
    return Carried(edit, checked)


def _same_geometry(a: Preprocess, b: Preprocess) -> bool:
    return a.crop_size == b.crop_size and a.resize_size == b.resize_size


def _carry_box(edit: Occlude, new: Preprocess, old: Preprocess | None,
               picture_size: tuple[int, int] | None, model: str) -> Carried:
    h, w = new.crop_size
    x0, y0, x1, y1 = edit.box
    if old is None or _same_geometry(old, new):
        if 0 <= x0 < x1 <= w and 0 <= y0 < y1 <= h:
            return Carried(edit, edit)
        return Carried(edit, None, f"the box is not inside {model}'s {w} x {h} input")
    size = picture_size or (old.crop_size[1], old.crop_size[0])
    box, clipped = new.box_to_input(old.box_to_original(edit.box, size), size)
    oh, ow = old.crop_size
    if box is None:
        return Carried(edit, None, f"that part of the picture is outside what {model}'s "
                                   f"{w} x {h} crop sees")
    why = (f"rescaled from the {ow} x {oh} input to {model}'s {w} x {h}: the same part of "
           f"the picture")
    if clipped:
        why += ", clipped to what the new crop sees"
    return Carried(edit, replace(edit, box=box), why)


def describe(c: Carried) -> str:
    """"kept 'SPEC'", "kept 'SPEC' as 'SPEC' (why)" or "dropped 'SPEC' (why)"."""
    if c.dropped:
        return f"dropped '{format_edit(c.before)}' ({c.why})"
    if c.changed:
        return f"kept '{format_edit(c.before)}' as '{format_edit(c.after)}' ({c.why})"
    return f"kept '{format_edit(c.after)}'"


def summary(carried: Iterable[Carried], model: str) -> str:
    """'Edits after switching to resnet18: kept 'input:occlude=…' as '…' (rescaled …),
    dropped 'stage3:zero=5' (resnet18 has no module 'stage3').' ("" without edits)."""
    parts = [describe(c) for c in carried]
    return f"Edits after switching to {model}: {', '.join(parts)}." if parts else ""
