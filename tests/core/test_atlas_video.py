"""`network-inspector atlas --every N` over a folder and a video: frame entries against a
brute-force loop over the same decoded frames, crops of frames, resume mid-video, and a
video that cannot be read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from atlas_images import draw_folder
from PIL import Image
from video_clip import write_clip

from inspector import cli
from inspector.batch.engine.shards import ShardStore
from inspector.batch.inputs import Source
from inspector.batch.reduce import Reduction
from inspector.batch.writers import atlas_document
from inspector.core.inputs.images import expand_paths, load_image
from inspector.core.models.base import ModelSpec
from inspector.core.models.load import load_model

pytest.importorskip("av")

LAYERS = ["stage2", "stage3"]
EVERY = 5
IMAGES = 8  # drawn, plus the two broken files of atlas_images
FRAMES = 30  # of the clip: frames 0, 5, ..., 25 are ranked
TOP = IMAGES + FRAMES // EVERY  # every readable input is in every channel's list


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("atlas_video")
    return draw_folder(root / "images", count=IMAGES), write_clip(root / "clip.mp4", size=64)


def _argv(out: Path, inputs, *extra: str) -> list[str]:
    folder, clip = inputs
    return ["atlas", "--model", "demo_shapes", "--device", "cpu", "--layers", ",".join(LAYERS),
            "--top", str(TOP), "--batch-size", "3", "--shard-size", "4", "--workers", "1",
            "--every", str(EVERY), "--quiet", "--seed", "7", "--out", str(out), *extra,
            str(folder), str(clip)]


@pytest.fixture(scope="module")
def atlas(inputs, tmp_path_factory):
    out = tmp_path_factory.mktemp("atlas_video_out")
    rc = cli.main(_argv(out, inputs))
    return rc, out, json.loads((out / "atlas.json").read_text())


@pytest.fixture(scope="module")
def brute(inputs):
    """One image at a time, a plain forward hook per layer: the drawn files, then the clip's
    frames 0, 5, ... decoded with PyAV directly."""
    import av

    folder, clip = inputs
    loaded = load_model(ModelSpec(name="demo_shapes", device="cpu", seed=7))
    modules = dict(loaded.model.named_modules())
    images = []
    for path in expand_paths([folder]):
        try:
            images.append(((str(path), None), load_image(path)))
        except Exception:
            continue
    with av.open(str(clip)) as container:
        decoded = [f.to_image() for f in container.decode(video=0)]
    # Presentation order: PyAV's decode gives frames in that order.
    assert len(decoded) == FRAMES
    images += [((str(clip), i), decoded[i]) for i in range(0, FRAMES, EVERY)]
    maxima: dict[str, dict] = {n: {} for n in LAYERS}
    seen: dict[str, torch.Tensor] = {}
    for key, image in images:
        handles = [modules[n].register_forward_hook(
            lambda m, a, out, n=n: seen.__setitem__(n, out.detach().clone())) for n in LAYERS]
        try:
            with torch.no_grad():
                loaded.model(loaded.preprocess(image)[None])
        finally:
            for h in handles:
                h.remove()
        for n in LAYERS:
            maxima[n][key] = seen[n][0].flatten(1).amax(dim=1).numpy()
    return maxima


def test_frame_entries_match_a_brute_force_loop_over_the_decoded_frames(atlas, brute, inputs):
    rc, out, doc = atlas
    folder, clip = inputs
    assert doc["images"] == TOP
    frames_seen = 0
    for name in LAYERS:
        layer = doc["layers"][name]
        for c, entries in layer["top"].items():
            assert len(entries) == TOP
            keys = [(e["path"], e.get("frame")) for e in entries]
            assert set(keys) == set(brute[name])  # every image and ranked frame, once
            values = [e["value"] for e in entries]
            assert values == sorted(values, reverse=True)
            for e, key in zip(entries, keys):
                assert e["value"] == pytest.approx(float(brute[name][key][int(c)]), abs=1e-5)
                if key[1] is not None:
                    assert e["path"] == str(clip) and key[1] % EVERY == 0
                    frames_seen += 1
    channels = sum(doc["layers"][n]["channels"] for n in LAYERS)
    assert frames_seen == channels * (FRAMES // EVERY)  # each ranked frame, in every list


def test_frame_crops_and_boxes_are_in_the_frame(atlas, inputs):
    rc, out, doc = atlas
    assert rc == 1  # the two broken files
    checked = 0
    for c, entries in doc["layers"]["stage3"]["top"].items():
        for r, entry in enumerate(entries):
            if "frame" not in entry:
                continue
            x0, y0, x1, y1 = entry["box"]
            assert 0 <= x0 < x1 <= 64 and 0 <= y0 < y1 <= 64
            crop = Image.open(out / "crops" / "stage3" / c / f"{r}.png")
            assert max(crop.size) == 96
            checked += 1
    assert checked == FRAMES // EVERY * len(doc["layers"]["stage3"]["top"])


def test_resume_mid_video_gives_the_uninterrupted_result(atlas, inputs, tmp_path, monkeypatch):
    rc, whole, doc = atlas
    cut = tmp_path / "cut"
    real = ShardStore.save

    def save(self, shard, reduction):  # the run dies after its third shard (mid-video)
        if len(self.finished()) == 3:
            raise OSError("disk gone")
        real(self, shard, reduction)

    monkeypatch.setattr(ShardStore, "save", save)
    assert cli.main(_argv(cut, inputs)) == 1
    finished = {p.name: p.stat().st_mtime_ns for p in (cut / "shards").glob("shard-*.pt")}
    assert len(finished) == 3 and not (cut / "atlas.json").exists()
    monkeypatch.setattr(ShardStore, "save", real)
    assert cli.main(_argv(cut, inputs, "--resume")) == 1
    for name, mtime in finished.items():  # not redone
        assert (cut / "shards" / name).stat().st_mtime_ns == mtime
    assert (cut / "atlas.json").read_bytes() == (whole / "atlas.json").read_bytes()


def test_another_every_is_another_job(atlas, inputs, capsys):
    rc, whole, doc = atlas
    argv = _argv(whole, inputs, "--resume")
    argv[argv.index("--every") + 1] = "10"
    assert cli.main(argv) == 2
    assert "different atlas job" in capsys.readouterr().err


def test_every_below_1_is_refused(inputs, tmp_path, capsys):
    argv = _argv(tmp_path / "out", inputs)
    argv[argv.index("--every") + 1] = "0"
    assert cli.main(argv) == 2
    assert "--every must be 1 or more" in capsys.readouterr().err


def test_without_pyav_the_video_is_failed_with_the_install_line(inputs, tmp_path, monkeypatch):
    import inspector.core.inputs.video_reader as video_reader

    def no_av():
        raise ImportError("No module named 'av'")

    monkeypatch.setattr(video_reader, "_import_av", no_av)
    out = tmp_path / "out"
    assert cli.main(_argv(out, inputs)) == 1
    doc = json.loads((out / "atlas.json").read_text())
    assert doc["images"] == IMAGES
    video_failed = [f for f in doc["failed"] if f["path"].endswith("clip.mp4")]
    assert len(video_failed) == 1 and "frame" not in video_failed[0]
    assert "network-inspector[video]" in video_failed[0]["error"]


def test_a_failed_frame_names_its_frame():
    sources = [Source(Path("a.png")), Source(Path("v.mp4"), 10)]
    total = Reduction.empty(1, {"l": 2})
    total.failed = [(1, "cannot decode"), (0, "not an image")]
    doc = atlas_document("m", None, sources, total, {}, [])
    assert doc["failed"] == [{"path": "a.png", "error": "not an image"},
                             {"path": "v.mp4", "frame": 10, "error": "cannot decode"}]
