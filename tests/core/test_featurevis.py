"""Feature visualisation (core.explain.featurevis) on the demo model at 128 px: Lucid's
parameterisation written out by hand, the transforms, seeds per image, that a channel's
picture excites it, the redirected ReLU, reproducibility, the objectives, the model left as
it was, cancel and progress."""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest
import torch

from inspector.core.explain.featurevis import objectives
from inspector.core.explain.featurevis.param import FourierImage
from inspector.core.explain.featurevis.render import (
    Cancelled,
    Optimisation,
    channel_means,
    evaluate,
    render,
)
from inspector.core.explain.featurevis.settings import FeatureVisSettings, Target, image_seed
from inspector.core.explain.featurevis.transforms import (
    PAD,
    TransformDraws,
    apply_transforms,
    theta,
)
from inspector.core.hookset import remaining_hooks
from inspector.core.inputs.images import load_image
from inspector.core.models.base import ModelSpec
from inspector.core.models.load import load_model

# stage3 channels alive on the demo samples (checked when the test was written): their
# pictures are compared with the samples and with each other.
LIVE = [0, 5, 11, 17, 23, 31]


@pytest.fixture(scope="module")
def demo():
    torch.set_num_threads(1)
    return load_model(ModelSpec(device="cpu"))


@pytest.fixture(scope="module")
def samples(demo):
    from inspector import demo as demo_package

    x = [np.asarray(load_image(p).convert("RGB").resize(demo.preprocess.crop_size[::-1]))
         for p in demo_package.sample_images()]
    return np.stack(x)


@pytest.fixture(scope="module")
def pictures(demo):
    return render(demo, "stage3", [Target("channel", c) for c in LIVE],
                  FeatureVisSettings(steps=128))


def _lucid_pixels(spectrum: torch.Tensor, h: int, w: int) -> torch.Tensor:
    """Lucid's fft_image + to_valid_rgb(decorrelate, sigmoid), written out from its source."""
    fy = np.fft.fftfreq(h)[:, None]
    fx = np.fft.fftfreq(w)[: w // 2 + 2] if w % 2 else np.fft.fftfreq(w)[: w // 2 + 1]
    freqs = np.sqrt(fx * fx + fy * fy)
    scale = 1.0 / np.maximum(freqs, 1.0 / max(w, h))
    scale = torch.tensor(scale, dtype=torch.float32)[None, None, ..., None]
    spec = torch.view_as_complex((scale * spectrum).contiguous())
    img = torch.fft.irfftn(spec, s=(h, w), norm="ortho") / 4.0
    c = np.array([[0.26, 0.09, 0.02], [0.27, 0.00, -0.05], [0.27, -0.09, 0.03]], np.float32)
    c = c / np.max(np.linalg.norm(c, axis=0))
    flat = img.permute(0, 2, 3, 1).reshape(-1, 3) @ torch.from_numpy(c).T
    return torch.sigmoid(flat.reshape(img.shape[0], h, w, 3).permute(0, 3, 1, 2))


@pytest.mark.parametrize("h, w", [(128, 128), (127, 129)])
def test_the_parameterisation_is_lucids(h, w):
    image = FourierImage([1, 2], h, w)
    with torch.no_grad():
        ours = image.pixels()
        theirs = _lucid_pixels(image.param.detach(), h, w)
    assert ours.shape == (2, 3, h, w)
    assert torch.allclose(ours, theirs, atol=1e-7)
    assert float((ours - 0.5).abs().max()) < 0.1  # it starts near grey


def test_an_identity_transform_keeps_the_picture_and_moves_a_pixel_by_the_jitter():
    h = w = 32
    hp, wp = h + 2 * PAD, w + 2 * PAD
    grey = torch.full((1, 3, h, w), 0.5)
    t = torch.tensor(theta(hp, wp, 4, 4, 1.0, 0.0, 2, 2), dtype=torch.float32)[None]
    out = apply_transforms(grey, t, (hp - 12, wp - 12))
    assert torch.allclose(out, torch.full_like(out, 0.5), atol=1e-6)
    dot = torch.zeros(1, 3, h, w)
    dot[..., 10, 20] = 1.0
    for ax, ay in ((4, 4), (7, 2)):
        t = torch.tensor(theta(hp, wp, ax, ay, 1.0, 0.0, 2, 2), dtype=torch.float32)[None]
        moved = apply_transforms(dot, t, (hp - 12, wp - 12))[0, 0]
        y, x = divmod(int(moved.argmax()), moved.shape[1])
        # In the padded picture the dot is at (10 + 12, 20 + 12); the crops start at a + b.
        assert (y, x) == (10 + PAD - ay - 2, 20 + PAD - ax - 2)


def _table(draws: TransformDraws) -> np.ndarray:
    return np.stack([draws.row(step) for step in range(draws.steps)], axis=1)


def test_each_images_draws_depend_on_its_own_seed_only():
    alone = _table(TransformDraws([7], 20))
    batch = _table(TransformDraws([3, 7, 11, 5, 1, 2, 8, 9], 20))
    assert np.array_equal(alone[0], batch[1])
    assert not np.array_equal(batch[0], batch[1])
    target = Target("channel", 4)
    assert image_seed(0, "stage3", target) == image_seed(0, "stage3", Target("channel", 4))
    assert image_seed(0, "stage3", target) != image_seed(1, "stage3", target)


def test_the_draws_come_a_chunk_at_a_time_and_equal_drawing_every_step_at_once():
    """A billion steps once drew every transform before the first step (12 GB)."""
    from inspector.core.explain.featurevis.transforms import BOUNDS, DRAW_CHUNK

    steps = 2 * DRAW_CHUNK + 37
    draws = TransformDraws([3, 7], steps)
    assert draws._rows.size == 0  # nothing drawn before the first step
    table = _table(draws)
    assert draws._rows.shape[1] <= DRAW_CHUNK
    for i, seed in enumerate([3, 7]):  # every step's draws at once, quantity by quantity
        g = torch.Generator().manual_seed(seed ^ 0x5DEECE66D)
        whole = torch.stack([torch.randint(0, b, (steps,), generator=g) for b in BOUNDS], 1)
        assert np.array_equal(table[i], whole.numpy())
    with pytest.raises(ValueError, match="go forward"):
        draws.row(0)
    from inspector.core.explain.featurevis.settings import MAX_STEPS

    most = TransformDraws([1], MAX_STEPS)
    most.row(MAX_STEPS - 1 - DRAW_CHUNK)  # far ahead: the chunks before it drawn, let go
    assert most._rows.shape == (1, DRAW_CHUNK, 6)


def test_a_channels_picture_excites_it_more_than_the_samples_and_the_other_pictures(
        demo, samples, pictures):
    on_pictures = channel_means(demo, "stage3", pictures.pixels)[:, LIVE]  # (picture, channel)
    on_samples = channel_means(demo, "stage3", samples)[:, LIVE]
    start = FourierImage([image_seed(0, "stage3", Target("channel", c)) for c in LIVE], 128, 128)
    on_start = channel_means(demo, "stage3", start.uint8())[:, LIVE]
    for k, c in enumerate(LIVE):
        own = on_pictures[k, k]
        assert own >= 3 * on_samples[:, k].max(), (c, own, on_samples[:, k].max())
        others = np.delete(on_pictures[:, k], k)
        assert own > 1.1 * others.max(), (c, own, others)
        assert own >= 20 * max(on_start[k, k], 1e-3)
    # The objective visualise.json reports is that evaluation.
    assert np.allclose(pictures.objective, np.diag(on_pictures), rtol=1e-4)


def test_a_channel_dead_on_its_first_picture_comes_alive_with_the_redirected_relu(demo):
    seeds = {c: image_seed(0, "stage3", Target("channel", c)) for c in range(96)}
    first = FourierImage(list(seeds.values()), 128, 128).uint8()
    dead = [c for c in range(96) if channel_means(demo, "stage3", first[c:c + 1])[0, c] == 0]
    assert dead, "no stage3 channel is 0 on its first picture: pick another seed"
    chosen = [Target("channel", c) for c in dead[:2]]
    flags = {name: m.inplace for name, m in demo.model.named_modules() if hasattr(m, "inplace")}
    plain = render(demo, "stage3", chosen, FeatureVisSettings(steps=48, redirect_relu_steps=0))
    redirected = render(demo, "stage3", chosen, FeatureVisSettings(steps=48))
    assert np.all(plain.objective == 0)
    assert np.all(redirected.objective > 1.0), redirected.objective
    assert flags == {n: m.inplace for n, m in demo.model.named_modules() if hasattr(m, "inplace")}


def test_the_same_seed_gives_the_same_picture(demo):
    targets = [Target("channel", c) for c in (3, 5, 7)]
    settings = FeatureVisSettings(steps=12)
    a = render(demo, "stage3", targets, settings).pixels
    b = render(demo, "stage3", targets, settings).pixels
    assert np.array_equal(a, b)
    alone = render(demo, "stage3", targets[1:2], settings).pixels
    assert np.abs(alone[0].astype(int) - a[1].astype(int)).max() <= 1
    other = render(demo, "stage3", targets, FeatureVisSettings(steps=12, seed=1)).pixels
    assert not np.array_equal(a, other)


def test_the_objectives_on_a_made_up_tensor():
    acts = torch.arange(2 * 3 * 4 * 4, dtype=torch.float32).reshape(2, 3, 4, 4)
    assert torch.allclose(objectives.channel(acts, torch.tensor([1, 2])),
                          torch.stack([acts[0, 1].mean(), acts[1, 2].mean()]))
    assert torch.equal(objectives.neuron(acts, torch.tensor([0, 1])),
                       torch.stack([acts[0, 0, 2, 2], acts[1, 1, 2, 2]]))
    v = torch.tensor([[3.0, 0.0, 4.0], [0.0, 1.0, 0.0]])
    expected = torch.stack([(0.6 * acts[0, 0] + 0.8 * acts[0, 2]).mean(), acts[1, 1].mean()])
    assert torch.allclose(objectives.direction(acts, v), expected)
    assert torch.allclose(objectives.direction(acts, 10 * v), expected)  # scale-free in v
    assert torch.allclose(objectives.direction(acts, v, cossim_pow=0.0), expected)
    same = acts[:1].repeat(3, 1, 1, 1)
    assert float(objectives.diversity(same)) == pytest.approx(2.0, abs=1e-5)
    ortho = torch.zeros(2, 2, 1, 1)
    ortho[0, 0], ortho[1, 1] = 1.0, 1.0
    assert float(objectives.diversity(ortho)) == pytest.approx(0.0, abs=1e-7)
    tokens = torch.randn(2, 1 + 14 * 14, 8)
    grid = objectives.as_spatial(tokens, (224, 224))
    assert grid.shape == (2, 8, 14, 14)
    assert torch.allclose(objectives.channel(grid, torch.tensor([3, 5])),
                          torch.stack([tokens[0, 1:, 3].mean(), tokens[1, 1:, 5].mean()]))


def test_the_model_is_left_as_it_was_also_after_an_error_and_a_cancel(demo):
    model = demo.model
    before = {n: (m.training, m.__dict__.get("inplace")) for n, m in model.named_modules()}
    grads = {n: p.requires_grad for n, p in model.named_parameters()}
    model.train()
    trained = {n: m.training for n, m in model.named_modules()}
    render(demo, "stage3", [Target("channel", 1)], FeatureVisSettings(steps=3))
    assert {n: m.training for n, m in model.named_modules()} == trained
    model.eval()
    with pytest.raises(ValueError, match="out of range"):
        render(demo, "stage3", [Target("channel", 500)], FeatureVisSettings(steps=3))
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(Cancelled):
        render(demo, "stage3", [Target("channel", 1)], FeatureVisSettings(steps=3), cancel=cancel)
    opt = Optimisation(demo, "stage3", [Target("channel", 2)], FeatureVisSettings(steps=4))

    def failing(*_):
        raise RuntimeError("the callback failed")

    with pytest.raises(RuntimeError):
        opt.run(2, on_step=failing)
    assert remaining_hooks(model) == []
    assert {n: (m.training, m.__dict__.get("inplace")) for n, m in model.named_modules()} == before
    assert {n: p.requires_grad for n, p in model.named_parameters()} == grads
    assert all(p.grad is None for p in model.parameters())


def test_cancel_from_progress_stops_after_that_step_and_chunks_add_up(demo):
    cancel = threading.Event()
    seen = []

    def on_step(done, total, values):
        seen.append((done, total, tuple(values.shape)))
        if done == 5:
            cancel.set()

    with pytest.raises(Cancelled) as stopped:
        render(demo, "stage3", [Target("channel", 1), Target("channel", 2)],
               FeatureVisSettings(steps=20), on_step=on_step, cancel=cancel)
    assert stopped.value.steps == 5
    assert seen == [(i, 20, (2,)) for i in range(1, 6)]
    # In chunks (the window's way) the pictures are the whole run's.
    settings = FeatureVisSettings(steps=10)
    opt = Optimisation(demo, "stage3", [Target("channel", 4)], settings)
    while not opt.finished:
        opt.run(3)
    whole = render(demo, "stage3", [Target("channel", 4)], settings)
    assert opt.done == 10
    assert np.array_equal(opt.result().pixels, whole.pixels)


def test_neuron_class_and_direction_objectives_rise(demo):
    settings = FeatureVisSettings(steps=24)
    for layer, target in (("stage3", Target("neuron", 5)), ("", Target("class", 2)),
                          ("stage3", Target("direction", 0, tuple([1.0] * 96)))):
        start = evaluate(demo, layer, FourierImage(
            [image_seed(0, layer, target)], 128, 128).uint8(), [target])
        vis = render(demo, layer, [target], settings)
        assert vis.objective[0] > start[0] + 0.5, (target, start, vis.objective)
        assert math.isfinite(float(vis.objective[0]))


def test_a_larger_picture_than_the_input_and_a_smaller_one_refused(demo):
    vis = render(demo, "stage3", [Target("channel", 0)], FeatureVisSettings(steps=2, size=160))
    assert vis.pixels.shape == (1, 160, 160, 3)
    with pytest.raises(ValueError, match="below the model input"):
        render(demo, "stage3", [Target("channel", 0)], FeatureVisSettings(steps=2, size=100))


def test_diversity_pushes_copies_of_one_objective_apart(demo):
    targets = [Target("channel", 5, copy=i) for i in range(3)]

    def gram_similarity(pixels):
        from inspector.core.explain.featurevis.render import as_pixels, layer_output
        from inspector.core.hookset import HookSet

        with torch.no_grad(), HookSet() as hooks:
            acts = layer_output(demo, "stage3", as_pixels(pixels), hooks)
        return float(objectives.diversity(acts))

    plain = render(demo, "stage3", targets, FeatureVisSettings(steps=32))
    diverse = render(demo, "stage3", targets, FeatureVisSettings(steps=32, diversity=100.0))
    assert gram_similarity(diverse.pixels) < gram_similarity(plain.pixels)
