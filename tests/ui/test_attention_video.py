"""The attention explorer on a playing video: with the Attention dock shown, each live run
of a ViT reads its frame's attention (on the non-fused path, for that run) and the explorer
shows it, frame after frame, as the other views do."""

from __future__ import annotations

import numpy as np
import pytest
from test_main_window import TIMEOUT, wait_run, write_png  # noqa: F401 (fixture)
from video_clip import write_clip

from tests.attention_models import vit_factory

pytest.importorskip("av", reason="PyAV is the optional extra 'network-inspector[video]'")


def test_a_playing_video_brings_each_frames_attention_to_the_explorer(make_window, qtbot,
                                                                      tmp_path):
    factory = tmp_path / "vit.py"
    factory.write_text(vit_factory())
    window = make_window(model={"name": None, "factory": f"{factory}:build"},
                         images=[write_png(tmp_path / "one.png")])
    wait_run(qtbot, window)
    window.docks["attention"].raise_()
    qtbot.waitUntil(lambda: window.control.last_request.attention is not None, timeout=TIMEOUT)
    wait_run(qtbot, window)
    player, control, view = window.video, window.control, window.views["attention"]
    live = set()  # run ids submitted while playing, with the explorer asked for
    control.runSubmitted.connect(lambda run_id: live.add(run_id) if (
        player.playing and control.last_request.attention is not None
        and control.last_request.attention.explorer) else None)
    window.images.add_paths([write_clip(tmp_path / "clip.mp4")])
    shown = {}  # live run id -> the explorer's attention of its frame

    def two_live_frames_shown() -> bool:
        frame = view.frame
        if frame is not None and frame.run_id in live and frame.probs.size:
            shown.setdefault(frame.run_id, frame.probs.astype(np.float32).copy())
        return len(shown) >= 2

    qtbot.waitUntil(two_live_frames_shown, timeout=TIMEOUT)
    first, second = list(shown.values())[:2]
    assert first.shape == second.shape == (4, 4, 17, 17)
    np.testing.assert_allclose(first.sum(-1), 1, atol=1e-2)  # float16 rows of a softmax
    assert not np.array_equal(first, second)  # two frames, two attentions
    assert view.maps is not None and view.maps.shape == (4, 4, 4)
    if player.playing:
        player.toggle()
    run = wait_run(qtbot, window)
    qtbot.waitUntil(lambda: view.frame is not None and view.frame.run_id == run.run_id,
                    timeout=TIMEOUT)
