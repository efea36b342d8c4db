"""A run's whole tensors as analyse's NPZ (core.export.arrays), and a run whose frames go to a
channel of its own (what the window's Save run as NPZ uses)."""

from __future__ import annotations

import numpy as np
import torch
from test_worker import Tiny, session_with

from inspector.core.export.arrays import full_arrays, npz_arrays
from inspector.core.records.frames import RunFinished
from inspector.core.records.kinds import GRAD_OUTPUT, INPUT, OUTPUT
from inspector.core.run.capture_spec import CaptureSpec
from inspector.core.run.channel import FrameChannel
from inspector.core.run.request import RunRequest


def test_a_run_on_its_own_channel_sends_nothing_to_the_sessions_and_gives_whole_tensors():
    torch.manual_seed(0)
    model = Tiny()
    session = session_with(model)
    try:
        x = torch.randn(1, 3, 8, 8)
        spec = CaptureSpec(modules={"conv": {OUTPUT, GRAD_OUTPUT}, "": {INPUT}},
                           full=frozenset({"conv", ""}), stats=False)
        own = FrameChannel(1000)
        _run_id, future = session.submit_request(RunRequest(image=x, capture=spec), channel=own)
        outcome = future.result(timeout=60)
        assert outcome.status == "ok"
        frames = own.drain()
        assert isinstance(frames[-1], RunFinished)
        assert session.channel.drain() == []  # the window's views never see this run
        arrays = full_arrays(frames)
        assert set(arrays) == {("activation", "conv"), ("gradient", "conv")}
        with torch.no_grad():
            conv = model.conv(x.detach()).numpy()
        np.testing.assert_allclose(arrays[("activation", "conv")], conv, rtol=1e-6)
        (given,) = [f.full for f in frames if getattr(f, "kind", None) == INPUT]
        npz = npz_arrays(given, arrays, {"gradcam": np.ones((8, 8))}, outcome.logits)
        assert sorted(npz) == ["activation/conv", "cam/gradcam", "gradient/conv", "input",
                               "logits"]
        np.testing.assert_array_equal(npz["input"], x.detach().numpy())
        assert npz["logits"].shape == (1, 3) and npz["logits"].dtype == np.float32
        # The next run goes to the session's channel as before.
        _run_id, future = session.submit_request(RunRequest(image=x, capture=spec))
        future.result(timeout=60)
        assert any(isinstance(f, RunFinished) for f in session.channel.drain())
        assert own.drain() == []
    finally:
        session.close()


def test_npz_arrays_batch_a_single_input_and_keep_the_last_call():
    from inspector.core.records.frames import ActivationFrame

    def frame(call, value):
        return ActivationFrame(run_id=1, module="m", call=call, kind=OUTPUT, path="",
                               shape=(1, 2), dtype="float32", stats=None,
                               full=np.full((1, 2), value, np.float32))

    arrays = full_arrays([frame(1, 5.0), frame(0, 3.0)])  # the backward order of calls
    np.testing.assert_array_equal(arrays[("activation", "m")], [[5.0, 5.0]])
    npz = npz_arrays(torch.zeros(3, 4, 4), arrays, {})
    assert npz["input"].shape == (1, 3, 4, 4) and "logits" not in npz
