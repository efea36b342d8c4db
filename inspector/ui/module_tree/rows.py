"""What each row of the module tree shows in its first eight columns (cells.py names them):
texts, colours, fonts, icons and tooltips, made from core's ModuleTree, the newest output
statistics in the run store, the edits of the next runs and an opened atlas.

Qt asks for every role of every visible cell on each repaint, so a row's texts, brushes and
fonts are made once and kept until its statistics or its edits change (`forget`).
Statistics of an earlier run than the newest with statistics (a module the last runs did
not capture) are grey and italic, and their tooltip names that run.
"""

from __future__ import annotations

import html

from PySide6.QtGui import QBrush, QGuiApplication

from inspector.core.records.frames import TensorStats
from inspector.core.records.kinds import GRAD_OUTPUT, OUTPUT
from inspector.core.run.store import RunStore
from inspector.ui.module_tree.cells import (
    COL_HEALTH,
    COL_MEAN,
    COL_NAME,
    COL_PARAMS,
    COL_SHAPE,
    COL_STD,
    COL_TYPE,
    COL_ZEROS,
    HAZARD_LABELS,
    STALE_BRUSH,
    STATS_COLUMNS,
    WHITE_BRUSH,
    atlas_icon,
    atlas_text,
    compact,
    edit_badge,
    format_count,
    format_shape,
    hazard_icon,
    hazard_text,
    health,
)

STATS_KINDS = (OUTPUT, GRAD_OUTPUT)  # what the statistics columns and the badge show
Row = tuple[list, list, list, list]  # texts, foreground brushes, background brushes, fonts


class RowCells:
    """The cells of the rows of one tree (`reset`), read from `store`."""

    def __init__(self, store: RunStore) -> None:
        self.store = store
        self.tree = None
        self.model_name = ""
        self.edits: dict[str, tuple[str, ...]] = {}  # module -> descriptions of its edits on
        self.atlas_dead: dict[str, tuple[int, int]] = {}  # layer -> (dead, channels) in the atlas
        self.atlas_about = ""  # which atlas: its image count and folder
        self._rows: dict[str, Row] = {}

    def reset(self, tree, model_name: str) -> None:
        self.tree, self.model_name = tree, model_name
        self._rows.clear()

    def forget(self, name: str | None = None) -> None:
        """Make the row of `name` again when next asked (None: every row)."""
        if name is None:
            self._rows.clear()
        else:
            self._rows.pop(name, None)

    # -- the statistics ------------------------------------------------------------------------
    def stats_of(self, name: str) -> TensorStats | None:
        """The newest output statistics of `name` in the store (maybe of an earlier run)."""
        frame = self.store.latest_tensor(name, OUTPUT)
        return frame.stats if frame is not None else None

    def health(self, name: str):
        """(badge text, badge colour or None, explanation) of the module's statistics."""
        grad = self.store.latest_tensor(name, GRAD_OUTPUT)
        return health(self.stats_of(name), grad.stats if grad is not None else None)

    def stale(self, name: str) -> bool:
        """The output statistics shown are not of the newest run with statistics."""
        frame = self.store.latest_tensor(name, OUTPUT)
        return frame is not None and frame.run_id != self.store.latest_run(STATS_KINDS)

    def stale_text(self, name: str) -> str:
        """Which earlier run the statistics shown are of, and why (see stale)."""
        run_id = self.store.latest_tensor(name, OUTPUT).run_id
        started = self.store.started(run_id)
        what = f"run {run_id}" + (f", {started.label}" if started and started.label else "")
        return (f"from an earlier run, the last that captured this module ({what}); the "
                f"newer runs did not capture it (while a video plays, only the selected "
                f"module is)")

    # -- the cells -----------------------------------------------------------------------------
    def row(self, name: str) -> Row:
        """(display texts, foreground brushes, background brushes, fonts) of a row, by column."""
        row = self._rows.get(name)
        if row is None:
            info = self.tree.modules[name]
            texts = [self._display(name, info, col) for col in range(COL_HEALTH + 1)]
            fg: list = [None] * (COL_HEALTH + 1)
            bg: list = [None] * (COL_HEALTH + 1)
            fonts: list = [None] * (COL_HEALTH + 1)
            stale = self.stale(name)
            if stale:
                italic = QGuiApplication.font()
                italic.setItalic(True)
                for col in STATS_COLUMNS:
                    fg[col] = STALE_BRUSH
                    fonts[col] = italic
            badge = self.health(name)[1]
            if badge is not None:
                fg[COL_HEALTH] = WHITE_BRUSH
                bg[COL_HEALTH] = STALE_BRUSH if stale else QBrush(badge)
            if "never_called" in info.hazards:
                fg[COL_NAME] = STALE_BRUSH
            row = self._rows[name] = (texts, fg, bg, fonts)
        return row

    def decoration(self, name: str, col: int):
        if col == COL_NAME:
            return hazard_icon(self.tree.modules[name].hazards)
        if col == COL_HEALTH and name in self.atlas_dead:
            return atlas_icon(self.atlas_dead[name][0])
        return None

    def tooltip(self, name: str, col: int) -> str | None:
        tip = self._tooltip(name, self.tree.modules[name], col)
        if col == COL_HEALTH and name in self.atlas_dead:
            tip += "<br>" + html.escape(atlas_text(*self.atlas_dead[name], self.atlas_about))
        return tip

    def _display(self, name: str, info, col: int):
        if col == COL_NAME:
            text = (self.model_name or "model") if not name else info.short_name
            return edit_badge(len(self.edits.get(name, ()))) + text
        if col == COL_TYPE:
            return info.type_name
        if col == COL_SHAPE:
            shape = info.output_shape
            more = len(info.calls[0].outputs) > 1 if info.calls else False
            return format_shape(shape, batch=False) + (" …" if more else "")
        if col == COL_PARAMS:
            return format_count(info.params_total)
        stats = self.stats_of(name)
        if col == COL_HEALTH:
            return self.health(name)[0]
        if stats is None:
            return ""
        if col == COL_MEAN:
            return compact(stats.mean)
        if col == COL_STD:
            return compact(stats.std)
        if col == COL_ZEROS:
            return f"{100 * stats.zero_fraction:.0f} %"
        return None

    def _tooltip(self, name: str, info, col: int) -> str | None:
        if col == COL_NAME:
            lines = [f"<b>{name or '(the model itself)'}</b> — {info.type_name}, "
                     f"{format_count(info.params_total) or 'no'} parameters"]
            if len(info.calls) > 1:
                lines.append(f"called {len(info.calls)} times per forward; "
                             f"the columns show the first call")
            # core.models.tree's sentence says it all ("modifies its input in place"): a label
            # before it would say it twice.
            lines.extend(f"• {hazard_text(hazard) or HAZARD_LABELS.get(hazard, hazard)}"
                         for hazard in sorted(info.hazards))
            edits = self.edits.get(name, ())
            if edits:
                lines.append("<b>Edited in the next runs:</b>")
                lines.extend(f"✎ {html.escape(d)}" for d in edits)
            return "<br>".join(lines)
        if col == COL_TYPE:  # the whole type where the column is too narrow for it
            return info.type_name
        if col == COL_PARAMS:
            return (f"{info.params_total:,} parameters ({info.params_own:,} in this module, "
                    f"{info.trainable:,} trainable overall)")
        if col == COL_SHAPE and info.calls:
            outs = info.calls[0].outputs
            return "<br>".join(f"{p or 'output'}: {format_shape(s)}" for p, s in outs) or None
        if col in STATS_COLUMNS:
            stats = self.stats_of(name)
            if stats is None:
                return "No statistics yet: this module's output is not captured, or no run yet"
            text = (f"mean {stats.mean:.4g}, std {stats.std:.4g}, min {stats.min:.4g}, "
                    f"max {stats.max:.4g}, zeros {100 * stats.zero_fraction:.1f} % "
                    f"of {stats.numel:,} values")
            explanation = self.health(name)[2]
            if explanation:
                text += f"<br><b>{explanation}</b>"
            if self.stale(name):
                text += "<br><i>" + html.escape(self.stale_text(name)) + "</i>"
            return text
        return None
