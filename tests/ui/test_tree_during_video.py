"""The module tree's statistics while a video plays: each frame is a live run of the selected
module alone, and the other modules keep the statistics of the last full run (the paused
frame), grey and italic, their tooltip naming that frame; the selected module's follow the
frames; pausing runs the frame in full and every row is current again."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

pytest.importorskip("av", reason="PyAV is the optional extra 'network-inspector[video]'")

from test_video_player import make_window, wait_run  # noqa: E402, F401
from video_clip import write_clip  # noqa: E402

from inspector.core.records.frames import RunFinished
from inspector.core.records.kinds import OUTPUT  # noqa: E402
from inspector.ui.module_tree.cells import COL_MEAN, COL_ZEROS, compact  # noqa: E402

TIMEOUT = 60_000
LIVE_RUNS = 7  # more than the run store keeps (4): the full run would have gone


def cell(model, module: str, role=Qt.ItemDataRole.DisplayRole, col: int = COL_MEAN):
    return model.data(model.index_of(module, col), role)


def italic(model, module: str) -> bool:
    font = cell(model, module, Qt.ItemDataRole.FontRole)
    return font is not None and font.italic()


def test_the_tree_keeps_the_last_full_runs_statistics_while_a_video_plays(
    make_window, qtbot, tmp_path  # noqa: F811
):
    window = make_window("build_fast")
    player, control, store = window.video, window.control, window.router.store
    model = window.tree.model
    selected = window.tree.current_module()
    other = "1" if selected != "1" else "3"  # the first convolution (or the second)
    assert selected and other in model.kinds and OUTPUT in model.kinds[other]
    clip = write_clip(tmp_path / "long.mp4", frames=150)  # 15 s: still playing when checked

    window.images.add_paths([clip])
    qtbot.waitUntil(lambda: player.counts.run >= 2, timeout=TIMEOUT)
    if player.playing:  # the frame shown runs in full
        player.toggle()
    paused = player.index
    wait_run(qtbot, window)
    assert window.last_run.status == "ok", window.reporter.last_message
    full = window.last_run.run_id
    assert store.started(full).label == f"long.mp4 · frame {paused}"
    model.flush(force=True)
    before = cell(model, other)
    assert before and before == compact(store.latest_tensor(other, OUTPUT).stats.mean)
    assert cell(model, other, Qt.ItemDataRole.ForegroundRole) is None  # current

    live: set[int] = set()
    done: list[int] = []  # live runs that finished well, as the store heard of them
    control.runSubmitted.connect(lambda run_id: live.add(run_id) if player.playing else None)
    store.subscribe(lambda frame: None, kinds=(), on_run=lambda frame: done.append(
        frame.run_id) if isinstance(frame, RunFinished) and frame.status == "ok"
        and frame.run_id in live else None)
    player.toggle()  # play again from the paused frame
    qtbot.waitUntil(lambda: len(done) >= LIVE_RUNS, timeout=TIMEOUT)
    assert player.playing  # checked while the video plays
    model.flush(force=True)
    # The other module: the paused frame's numbers, marked as older, naming that frame.
    assert full in store.runs()
    assert store.latest_tensor(other, OUTPUT).run_id == full
    assert cell(model, other) == before and cell(model, other, col=COL_ZEROS)
    assert cell(model, other, Qt.ItemDataRole.ForegroundRole) is not None  # grey
    assert italic(model, other)
    tip = cell(model, other, Qt.ItemDataRole.ToolTipRole)
    assert "earlier run" in tip and f"long.mp4 · frame {paused}" in tip
    # The selected module: live, the newest live run's numbers, which follow the frames.
    newest = store.latest_tensor(selected, OUTPUT)
    assert newest.run_id in live and newest.run_id > full
    assert cell(model, selected) == compact(newest.stats.mean)
    assert cell(model, selected, Qt.ItemDataRole.ForegroundRole) is None
    assert not italic(model, selected)
    means = {store.get(("tensor", selected, OUTPUT, 0, ""), r).stats.mean
             for r in done if r in store.runs()}
    assert len(means) >= 2  # the frames differ: so do their statistics

    if player.playing:  # the frame shown runs in full: every row is current again
        player.toggle()
    wait_run(qtbot, window)
    assert window.last_run.status == "ok", window.reporter.last_message
    again = window.last_run.run_id
    model.flush(force=True)
    assert store.latest_tensor(other, OUTPUT).run_id == again
    assert full not in store.runs()  # the old full run went once nothing needed it
    assert cell(model, other, Qt.ItemDataRole.ForegroundRole) is None
    assert not italic(model, other)
    assert "earlier run" not in cell(model, other, Qt.ItemDataRole.ToolTipRole)
