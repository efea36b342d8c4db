"""A run's long step reports its progress as frames on the channel (Score-CAM's masked
forwards), rate-limited, and always with its last step."""

from __future__ import annotations

from pathlib import Path

import torch

from inspector.core.models.base import ModelSpec
from inspector.core.records.frames import ProgressFrame, RunFinished
from inspector.core.run.session import Session

GATED = Path(__file__).resolve().parents[1] / "ui" / "tiny_models.py"


def test_score_cam_reports_its_progress_on_the_channel():
    session = Session()
    try:
        spec = ModelSpec(name=None, factory=f"{GATED}:build_gated_model")
        session.load_model(spec).result(timeout=120)
        outcome = session.run(torch.zeros(1, 3, 64, 64), gradients=False,
                              cams=(("scorecam", None),), timeout=120)
        assert outcome.status == "ok", outcome.error
        frames = session.channel.drain()
        progress = [f for f in frames if isinstance(f, ProgressFrame)]
        assert progress, "no progress frame"
        last = progress[-1]
        assert (last.step, last.done, last.total) == ("Score-CAM", 48, 48)  # 48 channels
        assert all(f.run_id == outcome.run_id and 0 < f.done <= f.total for f in progress)
        assert [f.done for f in progress] == sorted(f.done for f in progress)
        finished = next(i for i, f in enumerate(frames) if isinstance(f, RunFinished))
        assert frames.index(last) < finished
    finally:
        session.close()
