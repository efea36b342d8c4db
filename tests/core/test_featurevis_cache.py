"""The feature visualisation cache: hits, misses on anything the picture depends on (the
weights file above all), its folder per platform, pruning."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
import torch

from inspector.core.explain.featurevis import cache as fv_cache
from inspector.core.explain.featurevis.cache import (
    FeatureVisCache,
    cache_key,
    cache_root,
    weights_hash,
)
from inspector.core.explain.featurevis.settings import FeatureVisSettings, Target
from inspector.core.models.base import ModelSpec
from inspector.core.models.load import load_model


@pytest.fixture
def demo():
    return load_model(ModelSpec(device="cpu"))


def test_another_weights_file_gives_another_hash_and_a_miss(demo, tmp_path):
    from inspector import demo as demo_package

    state = {k: v.clone() for k, v in demo.model.state_dict().items()}
    first = next(k for k, v in state.items() if v.is_floating_point())
    state[first].view(-1)[0] += 1e-6
    changed = tmp_path / "changed.pt"
    torch.save(state, changed)
    other = load_model(ModelSpec(checkpoint=str(changed), device="cpu"))
    same = load_model(ModelSpec(checkpoint=str(demo_package.DEMO_DIR / demo_package.WEIGHTS_NAME),
                                device="cpu"))
    assert weights_hash(same.model) == weights_hash(demo.model)
    assert weights_hash(other.model) != weights_hash(demo.model)

    store = FeatureVisCache(tmp_path / "cache")
    settings, target = FeatureVisSettings(steps=4), Target("channel", 3)
    key = cache_key(weights_hash(demo.model), demo.preprocess, "stage3", target, settings)
    pixels = np.random.default_rng(0).integers(0, 255, (128, 128, 3), dtype=np.uint8)
    store.store(weights_hash(demo.model), "stage3", key, pixels, {"objective": 1.5})
    hit = store.load(weights_hash(demo.model), "stage3", key)
    assert hit is not None and np.array_equal(hit.pixels, pixels)
    assert hit.info["objective"] == 1.5
    other_key = cache_key(weights_hash(other.model), other.preprocess, "stage3", target, settings)
    assert other_key != key
    assert store.load(weights_hash(other.model), "stage3", other_key) is None


def test_every_setting_and_the_layer_and_target_change_the_key(demo):
    h = weights_hash(demo.model)
    base = cache_key(h, demo.preprocess, "stage3", Target("channel", 3), FeatureVisSettings())
    others = [
        cache_key(h, demo.preprocess, "stage2", Target("channel", 3), FeatureVisSettings()),
        cache_key(h, demo.preprocess, "stage3", Target("channel", 4), FeatureVisSettings()),
        cache_key(h, demo.preprocess, "stage3", Target("neuron", 3), FeatureVisSettings()),
        cache_key(h, demo.preprocess, "stage3", Target("channel", 3), FeatureVisSettings(steps=8)),
        cache_key(h, demo.preprocess, "stage3", Target("channel", 3), FeatureVisSettings(seed=1)),
        cache_key(h, demo.preprocess, "stage3", Target("channel", 3),
                  FeatureVisSettings(size=160)),
    ]
    assert base not in others and len(set(others)) == len(others)


def _key(i: int) -> str:
    return f"{i:02d}" + "0" * 62


def test_a_picture_without_its_json_is_a_miss_and_prune_keeps_the_newest(tmp_path):
    store = FeatureVisCache(tmp_path, max_bytes=10**9)
    pixels = np.full((64, 64, 3), 7, np.uint8)
    for i in range(4):
        store.store("h" * 64, "layer", _key(i), pixels, {"objective": i})
        png, meta = store.paths("h" * 64, "layer", _key(i))
        old = time.time() - 100 + i
        os.utime(png, (old, old))
    png, meta = store.paths("h" * 64, "layer", _key(0))
    meta.unlink()
    assert store.load("h" * 64, "layer", _key(0)) is None
    one = png.stat().st_size + store.paths("h" * 64, "layer", _key(3))[1].stat().st_size
    store.max_bytes = 2 * one + 10
    store.prune()
    left = sorted(p.name for p in store.root.rglob("*.png"))
    assert left == [f"{_key(2)[:24]}.png", f"{_key(3)[:24]}.png"]


def test_the_cache_folder_per_platform(monkeypatch, tmp_path):
    monkeypatch.setenv("INSPECTOR_CACHE_DIR", str(tmp_path / "mine"))
    assert cache_root() == tmp_path / "mine"
    monkeypatch.delenv("INSPECTOR_CACHE_DIR")
    monkeypatch.setattr(fv_cache.sys, "platform", "linux")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "network-inspector"
    monkeypatch.setattr(fv_cache.sys, "platform", "darwin")
    assert cache_root().parts[-3:] == ("Library", "Caches", "network-inspector")
    monkeypatch.setattr(fv_cache.sys, "platform", "win32")
    monkeypatch.setenv("LOCALAPPDATA", str(tmp_path / "local"))
    assert cache_root() == tmp_path / "local" / "network-inspector" / "Cache"


def test_a_bfloat16_model_hashes():
    model = torch.nn.Linear(4, 3).to(torch.bfloat16)
    a = weights_hash(model)
    with torch.no_grad():
        model.weight[0, 0] += 1
    assert weights_hash(torch.nn.Linear(4, 3).to(torch.bfloat16)) != a
    assert len(a) == 64


def _planted(tmp_path, pixels):
    cache = FeatureVisCache(tmp_path)
    weights, key = "ab" * 32, "cd" * 32
    cache.store(weights, "stage3", key, pixels, {"objective": 1.0})
    return cache, weights, key


def test_a_picture_of_another_size_is_a_miss(tmp_path):
    cache, weights, key = _planted(tmp_path, np.zeros((3, 7, 3), np.uint8))
    assert cache.load(weights, "stage3", key, (3, 7)) is not None
    assert cache.load(weights, "stage3", key, (128, 128)) is None


def test_a_planted_huge_or_odd_png_is_a_miss_not_an_error(tmp_path):
    from PIL import Image

    cache, weights, key = _planted(tmp_path, np.zeros((8, 8, 3), np.uint8))
    png, _ = cache.paths(weights, "stage3", key)
    Image.new("1", (20000, 20000)).save(png)  # small on disk, a bomb to decode
    assert cache.load(weights, "stage3", key) is None
    assert cache.load(weights, "stage3", key, (20000, 20000)) is None
    Image.new("L", (8, 8)).save(png)
    assert cache.load(weights, "stage3", key, (8, 8)) is None


def test_a_picture_of_fewer_steps_than_asked_is_a_miss(tmp_path):
    """An optimisation stopped before its end (a cancel) is no picture of its settings."""
    cache = FeatureVisCache(tmp_path)
    weights, key = "ab" * 32, "cd" * 32
    cache.store(weights, "stage3", key, np.zeros((4, 4, 3), np.uint8),
                {"objective": 1.0, "steps": 32})
    assert cache.load(weights, "stage3", key, (4, 4), steps=32) is not None
    assert cache.load(weights, "stage3", key, (4, 4), steps=128) is None
