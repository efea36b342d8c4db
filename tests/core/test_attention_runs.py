"""Attention in Session runs and in `analyse`: the same maps as the lean path, gradient
rollout beside Grad-CAM, the explorer's frame, the logit lens, refusals as notes, the fused
path untouched by runs that ask nothing of attention, and the NPZ and summary.json."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from inspector.core.explain.attention.capture import AttentionCapture
from inspector.core.explain.attention.explorer import mean_attention_distance
from inspector.core.explain.attention.find import NO_ATTENTION, find_attention
from inspector.core.explain.attention.lens import lens_logits_by_block
from inspector.core.explain.attention.maps import attention_maps
from inspector.core.explain.attention.options import AttentionOptions
from inspector.core.explain.cam.methods import normalize_maps
from inspector.core.hookset import remaining_hooks
from inspector.core.models.base import ModelSpec
from inspector.core.records.frames import AttentionFrame, CamFrame, LensFrame
from inspector.core.run.session import Session
from tests.attention_models import hf_vit, logits, timm_vit, tv_vit, vit_factory

MAPS = (("rollout", None), ("gradrollout", None), ("legrad", None))


@pytest.fixture(scope="module")
def vit_session(tmp_path_factory):
    path = tmp_path_factory.mktemp("vit") / "vit.py"
    path.write_text(vit_factory())
    session = Session()
    session.load_model(ModelSpec(name=None, factory=f"{path}:build", device="cpu")).result()
    yield session
    session.close()


def _x():
    torch.manual_seed(5)
    return torch.randn(1, 3, 64, 64)


def test_session_maps_equal_the_lean_path_with_and_without_gradients(vit_session):
    x, model = _x(), vit_session.loaded.model
    lean = attention_maps(model, x, ["rollout", "gradrollout", "legrad"],
                          options=AttentionOptions("min", 0.3))
    for gradients in (True, False):
        out = vit_session.run(x, gradients=gradients, cams=MAPS, target=lean.targets[0],
                              attention=AttentionOptions("min", 0.3))
        frames = vit_session.channel.drain()
        assert out.status == "ok", out.error
        for method, _ in MAPS:
            np.testing.assert_allclose(out.grids[method], lean.grids[method][0].numpy(),
                                       rtol=1e-5, atol=1e-7)
            np.testing.assert_allclose(out.cams[(method, None)], lean.cams[method][0],
                                       atol=1e-5)
        cams = {f.method: f for f in frames if isinstance(f, CamFrame)}
        assert set(cams) == {"rollout", "gradrollout", "legrad"}
        assert "min over heads, lowest 30% discarded" in cams["rollout"].layer
        assert cams["legrad"].layer.endswith("(4 blocks)")
        assert remaining_hooks(model) == []


def test_the_attention_maps_are_scored_as_every_map_is(vit_session):
    """Faithfulness (issue 24) of the attention maps (issue 25): each has its curves, equal to
    the metric computed by hand on the map the run made."""
    from inspector.core.explain.metrics.curves import deletion_insertion
    from inspector.core.explain.metrics.forwards import Forwarder
    from inspector.core.explain.metrics.names import MetricOptions
    from inspector.core.explain.metrics.scores import class_probability

    x, model = _x(), vit_session.loaded.model
    options = MetricOptions(metrics=("deletion", "insertion", "avgdrop"), steps=8)
    out = vit_session.run(x, gradients=False, target=3, cams=MAPS, metrics=options)
    vit_session.channel.drain()
    assert out.status == "ok", out.error
    assert {method for method, _ in out.metrics} == {m for m, _ in MAPS}
    for key, scores in out.metrics.items():
        with torch.no_grad():
            forwarder = Forwarder(class_probability(model, 3), x)
            (d, i), = deletion_insertion(forwarder, x, out.cams[key], steps=8)
        assert np.allclose(d.scores, scores.deletion.scores, atol=1e-5), key
        assert np.allclose(i.scores, scores.insertion.scores, atol=1e-5), key
        assert 0.0 <= scores.deletion.auc <= 1.0 and scores.avg_drop is not None, key
    assert remaining_hooks(model) == []


def test_gradrollout_beside_gradcam_in_one_run_is_the_same_map(vit_session):
    """The run's graph starts at the first attention, so Grad-CAM's layer (the last block's
    first norm) does not cut the paths of the earlier blocks' attention gradients."""
    x = _x()
    layer = "encoder.layers.encoder_layer_3.ln_1"
    alone = vit_session.run(x, gradients=False, target=2, cams=(("gradrollout", None),))
    both = vit_session.run(x, gradients=False, target=2,
                           cams=(("gradrollout", None), ("gradcam", layer)))
    gradcam = vit_session.run(x, gradients=False, target=2, cams=(("gradcam", layer),))
    vit_session.channel.drain()
    np.testing.assert_allclose(both.grids["gradrollout"], alone.grids["gradrollout"],
                               rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(both.cams[("gradcam", layer)], gradcam.cams[("gradcam", layer)],
                               atol=1e-6)


def test_the_explorer_frame_holds_every_block_of_the_first_image(vit_session):
    x, model = _x(), vit_session.loaded.model
    out = vit_session.run(x, gradients=False, attention=AttentionOptions(explorer=True))
    frames = vit_session.channel.drain()
    (frame,) = [f for f in frames if isinstance(f, AttentionFrame)]
    assert out.status == "ok" and frame.all_queries and not out.cams
    assert frame.probs.dtype == np.float16 and frame.probs.shape == (4, 4, 17, 17)
    assert (frame.prefix, frame.grid, frame.class_token) == (1, (4, 4), True)
    found = find_attention(model)
    with torch.no_grad(), AttentionCapture(model, found) as cap:
        model(x)
    for i, c in enumerate(cap.captured):
        np.testing.assert_allclose(frame.probs[i].astype(np.float32), c.probs[0].numpy(),
                                   atol=1e-3)
        np.testing.assert_allclose(frame.distance[i],
                                   mean_attention_distance(c.probs[0].numpy(), 1, (4, 4)),
                                   rtol=1e-5)
    assert frame.modules == found.attention


def test_the_logit_lens_in_a_run_ends_at_the_prediction(vit_session):
    x = _x()
    out = vit_session.run(x, gradients=False, attention=AttentionOptions(lens=3))
    frames = vit_session.channel.drain()
    (lens,) = [f for f in frames if isinstance(f, LensFrame)]
    probs = out.logits.softmax(-1)[0]
    assert [e["layer"] for e in out.logit_lens] == list(lens.blocks) == [
        f"encoder.layers.encoder_layer_{i}" for i in range(4)]
    last = out.logit_lens[-1]["top"]
    assert [t["index"] for t in last] == probs.topk(3).indices.tolist()
    assert last[0]["prob"] == pytest.approx(float(probs.max()), abs=1e-6)
    assert lens.target == int(probs.argmax())
    assert lens.target_probs[-1] == pytest.approx(float(probs.max()), abs=1e-6)
    assert all(len(top) == 3 for top in lens.top)


@pytest.mark.parametrize("family", ["torchvision", "timm-distilled", "timm-avg", "hf-vit",
                                    "hf-deit"])
def test_the_last_block_of_the_lens_is_the_models_output(family):
    if family == "torchvision":
        model, side = tv_vit(), 64
    elif family.startswith("timm"):
        model, side = timm_vit("deit_tiny_distilled_patch16_224" if family == "timm-distilled"
                               else "vit_little_patch16_reg4_gap_256")
    else:
        model, side = hf_vit(family[3:]), 64
    x = torch.randn(2, 3, side, side)
    found = find_attention(model)
    with torch.no_grad(), AttentionCapture(model, found, keep_blocks=found.blocks) as cap:
        out = logits(model(x))
    blocks, lens = lens_logits_by_block(model, found, cap.block_outputs, out)
    assert blocks == list(found.blocks)
    torch.testing.assert_close(lens[-1], out, rtol=0, atol=1e-6)
    if family != "timm-avg":  # its layer scale starts at 1e-5: its blocks start as identities
        assert float((lens[0] - out).abs().max()) > 1e-3  # the first block: not the answer yet


def test_a_model_without_attention_gets_a_note_and_no_map(demo_session, demo_samples):
    out = demo_session.run(demo_samples[0], cams=(("rollout", None), ("gradcam", None)),
                           attention=AttentionOptions(explorer=True, lens=3))
    demo_session.channel.drain()
    assert out.status == "ok"
    assert out.notes == [NO_ATTENTION]
    assert [m for m, _ in out.cams] == ["gradcam"] and not out.grids and out.logit_lens is None


def test_a_run_that_asks_nothing_of_attention_keeps_the_fused_path(tmp_path, monkeypatch):
    pytest.importorskip("timm")
    path = tmp_path / "deit.py"
    path.write_text('''
import timm
import torch

PREPROCESS = {"crop_size": (64, 64), "resize_size": 72,
              "mean": (0.5, 0.5, 0.5), "std": (0.25, 0.25, 0.25)}


def build():
    torch.manual_seed(0)
    return timm.create_model("deit_tiny_patch16_224", pretrained=False, img_size=64,
                             embed_dim=64, depth=3, num_heads=4, num_classes=10)
''')
    calls = [0]
    real = torch.nn.functional.scaled_dot_product_attention

    def counted(*args, **kwargs):
        calls[0] += 1
        return real(*args, **kwargs)

    session = Session()
    try:
        session.load_model(ModelSpec(name=None, factory=f"{path}:build", device="cpu")).result()
        monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", counted)
        x = torch.randn(1, 3, 64, 64)
        for cams, attention, fused in (((("gradcam", None),), None, 3), (MAPS, None, 0),
                                       ((), AttentionOptions(lens=2), 3),
                                       ((), AttentionOptions(explorer=True), 0),
                                       ((), None, 3)):
            calls[0] = 0
            out = session.run(x, cams=cams, attention=attention)
            assert out.status == "ok", out.error
            assert calls[0] == fused, (cams, attention)
        session.channel.drain()
        model = session.loaded.model
        assert all(m.fused_attn for m in model.modules() if hasattr(m, "fused_attn"))
        assert remaining_hooks(model) == []
    finally:
        session.close()


def test_analyse_writes_grids_attention_and_the_logit_lens(tmp_path, demo_samples):
    from inspector.cli import main

    factory = tmp_path / "vit.py"
    factory.write_text(vit_factory())
    out = tmp_path / "out"
    attention = "encoder.layers.encoder_layer_1.self_attention"
    code = main(["analyse", "--model", f"{factory}:build", "--cam",
                 "rollout,gradrollout,legrad,gradcam", "--rollout-fusion", "max",
                 "--rollout-discard", "0.5", "--layers",
                 f"{attention},encoder.layers.encoder_layer_3.ln_1", "--logit-lens",
                 "--topk", "2", "--cam-layer", "encoder.layers.encoder_layer_2",
                 "--out", str(out), "--quiet", "--no-tensorboard", str(demo_samples[0])])
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    image = summary["images"][0]
    npz = np.load(out / image["files"]["npz"])
    for method in ("rollout", "gradrollout", "legrad"):
        grid = npz[f"grid/{method}"]
        assert grid.shape == (4, 4) and grid.dtype == np.float32
        np.testing.assert_allclose(npz[f"cam/{method}"],
                                   normalize_maps(torch.from_numpy(grid)[None], (64, 64))[0],
                                   atol=1e-6)
        assert f"cam/{method}" in image["files"]
    assert npz[f"attention/{attention}"].shape == (4, 17, 17)
    assert f"activation/{attention}" not in npz  # an attention module is not a layer here
    assert "activation/encoder.layers.encoder_layer_3.ln_1" in npz
    assert [e["layer"] for e in image["logit_lens"]] == [
        f"encoder.layers.encoder_layer_{i}" for i in range(4)]
    assert image["logit_lens"][-1]["top"] == image["top"][:2]
    assert summary["attention"]["rollout"]["fusion"] == "max"
    assert summary["attention"]["legrad_blocks"].startswith("from encoder.layers.encoder_layer_2")
    # The same image through the lean path: the same rollout and LeGrad (from block 2).
    lean = attention_maps(
        find_model(factory), torch.from_numpy(npz["input"]), ["rollout", "legrad"],
        target=image["target"], options=AttentionOptions("max", 0.5),
        legrad_from="encoder.layers.encoder_layer_2")
    np.testing.assert_allclose(npz["grid/rollout"], lean.grids["rollout"][0], rtol=1e-5)
    np.testing.assert_allclose(npz["grid/legrad"], lean.grids["legrad"][0], rtol=1e-5,
                               atol=1e-9)


def find_model(factory):
    from inspector.core.models.load import load_model

    return load_model(ModelSpec(name=None, factory=f"{factory}:build", device="cpu")).model


def test_analyse_notes_a_model_without_attention_and_goes_on(tmp_path, demo_samples, capsys):
    from inspector.cli import main

    out = tmp_path / "out"
    code = main(["analyse", "--cam", "rollout,gradcam", "--out", str(out), "--quiet",
                 "--no-tensorboard", str(demo_samples[0])])
    err = capsys.readouterr().err
    assert code == 0
    assert err.count("note: rollout: This model has no self-attention") == 1
    summary = json.loads((out / "summary.json").read_text())
    npz = np.load(out / summary["images"][0]["files"]["npz"])
    assert "cam/gradcam" in npz and "cam/rollout" not in npz and summary["attention"] is None


def test_analyse_refuses_bad_attention_options(tmp_path, demo_samples, capsys):
    from inspector.cli import main

    factory = tmp_path / "vit.py"
    factory.write_text(vit_factory())
    for options, said in ((["--rollout-discard", "1"], "under 1"),
                          (["--rollout-fusion", "median"], "invalid choice"),
                          (["--cam", "legrad", "--cam-layer", "conv_proj"],
                           "not in a transformer block")):
        with pytest.raises(SystemExit) if "invalid" in said else _no_raise():
            code = main(["analyse", "--model", f"{factory}:build", *options, "--out",
                         str(tmp_path / "o"), "--quiet", str(demo_samples[0])])
            assert code == 2
        assert said in capsys.readouterr().err


class _no_raise:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_the_sanity_check_remakes_the_attention_maps(vit_session):
    """Issue 32: the attention maps read no layer (key (method, None)); the sanity cascade
    remakes them with the run's attention options, and their other metrics stay."""
    from inspector.core.explain.metrics.names import MetricOptions

    options = MetricOptions(metrics=("deletion", "sanity"), steps=4)
    out = vit_session.run(_x(), gradients=False, target=3, cams=MAPS, metrics=options,
                          attention=AttentionOptions("min", 0.3))
    vit_session.channel.drain()
    assert out.status == "ok", out.error
    assert set(out.metrics) == set(MAPS)
    for key, scores in out.metrics.items():
        assert scores.deletion is not None, key
        assert scores.sanity, (key, scores.notes)
        assert all(step.ssim is not None for step in scores.sanity), key
    assert remaining_hooks(vit_session.loaded.model) == []


def test_a_sanity_check_that_fails_keeps_the_other_metrics(vit_session, monkeypatch):
    """One metric failing never discards the others: the failing one says why in its note."""
    from inspector.core.explain.metrics.names import SANITY, MetricOptions
    from inspector.core.run import metrics_stage

    def broken(*args, **kwargs):
        raise RuntimeError("the remade map is broken")

    monkeypatch.setattr(metrics_stage, "sanity_check", broken)
    options = MetricOptions(metrics=("deletion", "sanity"), steps=4)
    out = vit_session.run(_x(), gradients=False, target=3, cams=MAPS[:1], metrics=options)
    vit_session.channel.drain()
    assert out.status == "ok", out.error
    scores = out.metrics[("rollout", None)]
    assert scores.deletion is not None
    assert "RuntimeError: the remade map is broken" in scores.notes[SANITY]
    assert "\n" not in scores.notes[SANITY]
