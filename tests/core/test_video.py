"""Video files: core.inputs.video_reader (frame count, seeks, every Nth frame), core.inputs.video
(the first frame, the read-ahead thread), `analyse --every N` over a video the test writes,
and the message when PyAV is missing."""

from __future__ import annotations

import builtins
import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from task_models import small_cnn_factory

from inspector import cli
from inspector.core.inputs import video, video_reader
from inspector.core.inputs.preprocess import Preprocess

av = pytest.importorskip("av", reason="PyAV is the optional extra 'network-inspector[video]'")

from video_clip import FPS, FRAMES, next_frame, write_clip  # noqa: E402

FACTORY = small_cnn_factory(classes=("left", "middle", "right"))


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> Path:
    return write_clip(tmp_path_factory.mktemp("video") / "clip.mp4")


@pytest.fixture
def factory(tmp_path: Path) -> str:
    path = tmp_path / "tiny_video_model.py"
    path.write_text(FACTORY)
    return f"{path}:build"


def _all_frames(path: Path) -> list[np.ndarray]:
    with video_reader.VideoReader(path) as reader:
        return [np.asarray(f.image) for f in reader.frames()]


@pytest.mark.parametrize("suffix,codec_name", [(".mp4", None), (".mkv", None),
                                               (".avi", "mpeg4"), (".webm", "libvpx")])
def test_the_reader_counts_every_frame_and_seeks_to_the_one_asked(tmp_path, suffix, codec_name):
    if codec_name == "libvpx":
        try:
            av.codec.Codec("libvpx", "w")
        except Exception:  # noqa: BLE001
            pytest.skip("this PyAV wheel has no VP8 encoder")
    path = write_clip(tmp_path / f"clip{suffix}", codec_name=codec_name)
    frames = _all_frames(path)
    assert len(frames) == FRAMES
    assert not np.array_equal(frames[0], frames[1])  # the shapes move
    with video_reader.VideoReader(path) as reader:
        assert reader.frame_count == FRAMES
        assert reader.info.fps == pytest.approx(FPS)
        assert reader.info.size == (64, 64)
        # Backwards, forwards past a key frame, twice the same, the ends.
        for i in (17, 3, 29, 29, 0, 12, 13, 25):
            assert np.array_equal(np.asarray(reader.read(i)), frames[i]), f"frame {i}"
        assert [f.index for f in reader.frames(every=10)] == [0, 10, 20]
        assert [f.index for f in reader.frames(every=7, start=5)] == [5, 12, 19, 26]
    # The window lists a video from its header alone: the same first frame and count here.
    image, info = video.first_frame(path)
    assert np.array_equal(np.asarray(image), frames[0])
    assert (info.frame_count, info.fps, info.size) == (FRAMES, pytest.approx(FPS), (64, 64))


def _taken(ahead: video.ReadAhead, count: int) -> list[video_reader.VideoFrame]:
    """The next `count` frames ahead gives (fewer when the video ends first)."""
    frames = []
    while len(frames) < count and (frame := next_frame(ahead)) is not None:
        frames.append(frame)
    return frames


def test_read_ahead_gives_frames_in_order_and_restarts_at_a_seek(clip):
    ahead = video.ReadAhead(clip, ahead=3)
    try:
        taken = [f.index for f in _taken(ahead, 4)]
        ahead.seek(21)
        taken += [f.index for f in _taken(ahead, 8)]
        assert ahead.info.frame_count == FRAMES
        assert taken == [0, 1, 2, 3, *range(21, 29)]
    finally:
        ahead.close()
    assert not ahead._thread.is_alive()  # close() stopped and joined the decoder


def test_read_ahead_scales_a_copy_to_show_on_its_thread(clip):
    ahead = video.ReadAhead(clip, display_max=32)
    try:
        frame = next_frame(ahead)
        assert frame.image.size == (64, 64)  # what the model runs
        assert frame.display.size == (32, 32)  # what the window shows
    finally:
        ahead.close()
    ahead = video.ReadAhead(clip, display_max=64)  # not larger: no copy
    try:
        assert next_frame(ahead).display is None
    finally:
        ahead.close()


def test_read_ahead_makes_the_model_input_on_its_thread_and_runs_take_it(clip, factory):
    from inspector.core.inputs.preprocess import PreparedImage
    from inspector.core.models.base import ModelSpec
    from inspector.core.run.session import Session

    session = Session()
    try:
        loaded = session.load_model(ModelSpec(name=None, factory=factory)).result(120)
        ahead = video.ReadAhead(clip)
        ahead.prepare = loaded.preprocess.prepare
        try:
            frame = next_frame(ahead)
        finally:
            ahead.close()
        prepared = frame.prepared
        assert isinstance(prepared, PreparedImage) and prepared.image is frame.image
        from_image = session.run(frame.image, timeout=120)
        from_prepared = session.run(prepared, timeout=120)
        assert from_prepared.status == from_image.status == "ok"
        assert torch.equal(from_prepared.logits, from_image.logits)
        # The run uses the input made ahead as it is: another input gives other logits...
        blank = dataclasses.replace(prepared, x=torch.zeros_like(prepared.x))
        with torch.no_grad():
            expected = loaded.model(torch.zeros_like(prepared.x)[None])
        assert torch.allclose(session.run(blank, timeout=120).logits, expected, atol=1e-6)
        # ... unless it was made for another model's input: then the picture is run.
        other = Preprocess((20, 20), None, (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)).prepare(frame.image)
        assert torch.equal(session.run(other, timeout=120).logits, from_image.logits)
        session.channel.drain()
    finally:
        session.close()


def test_a_prepare_that_fails_leaves_the_frames_to_the_run(clip):
    ahead = video.ReadAhead(clip)
    ahead.prepare = lambda image: 1 / 0
    try:
        frames = _taken(ahead, 3)
        assert [f.index for f in frames] == [0, 1, 2] and ahead.error is None
        assert all(f.prepared is None for f in frames)
    finally:
        ahead.close()


def test_read_ahead_reports_a_file_that_is_not_a_video(tmp_path):
    bad = tmp_path / "notes.mp4"
    bad.write_text("not a video")
    ahead = video.ReadAhead(bad)
    try:
        assert next_frame(ahead) is None
        assert isinstance(ahead.error, video_reader.VideoLoadError)
        assert str(ahead.error).startswith(f"{bad}: ")
        assert ahead.error.reason == "Invalid data found when processing input"
    finally:
        ahead.close()


def test_analyse_every_10th_frame_matches_session_runs_of_the_same_frames(
    clip, factory, tmp_path, capsys
):
    from inspector.core.models.base import ModelSpec
    from inspector.core.run.session import Session

    out = tmp_path / "out"
    rc = cli.main(["analyse", "--model", factory, "--every", "10", "--quiet",
                   "--no-tensorboard", "--out", str(out), str(clip)])
    assert rc == 0, capsys.readouterr().err
    summary = json.loads((out / "summary.json").read_text())
    entries = summary["images"]
    assert [(e["path"], e["frame"]) for e in entries] == [(str(clip), i) for i in (0, 10, 20)]
    assert all(e["error"] is None for e in entries)
    for e in entries:
        folder = out / f"clip_f{e['frame']:06d}"
        assert (folder / f"clip_f{e['frame']:06d}.npz").is_file()
        assert e["files"]["npz"] == f"clip_f{e['frame']:06d}/clip_f{e['frame']:06d}.npz"

    frames = _all_frames(clip)
    session = Session()
    try:
        session.load_model(ModelSpec(name=None, factory=factory, device="cpu")).result(60)
        from PIL import Image

        for e in entries:
            outcome = session.run(Image.fromarray(frames[e["frame"]]), timeout=60)
            probs = outcome.logits[0].softmax(-1)
            top = int(probs.argmax())
            assert e["top"][0]["index"] == top
            assert e["top"][0]["prob"] == pytest.approx(float(probs[top]), abs=1e-5)
            session.channel.drain()
    finally:
        session.close()
    # The frames differ, and so do their results: not one result written three times.
    probs = [e["top"][0]["prob"] for e in entries]
    assert len(set(probs)) > 1


def test_a_video_among_images_and_folders_is_expanded_to_its_frames(
    clip, factory, tmp_path, capsys
):
    from PIL import Image

    folder = tmp_path / "pictures"
    folder.mkdir()
    Image.new("RGB", (40, 40), (200, 30, 30)).save(folder / "red.png")
    out = tmp_path / "out"
    rc = cli.main(["analyse", "--model", factory, "--every", "12", "--quiet",
                   "--no-tensorboard", "--cam", "none", "--out", str(out), str(folder),
                   str(clip)])
    assert rc == 0, capsys.readouterr().err
    entries = json.loads((out / "summary.json").read_text())["images"]
    assert [(Path(e["path"]).name, e.get("frame")) for e in entries] == [
        ("red.png", None), ("clip.mp4", 0), ("clip.mp4", 12), ("clip.mp4", 24)]
    assert "frame" not in entries[0]


def test_every_must_be_positive(clip, factory, tmp_path, capsys):
    rc = cli.main(["analyse", "--model", factory, "--every", "0", "--quiet",
                   "--out", str(tmp_path / "out"), str(clip)])
    assert rc == 2
    assert "--every must be 1 or more" in capsys.readouterr().err


def _without_pyav(monkeypatch):
    real_import = builtins.__import__

    def refuse_av(name, *args, **kwargs):
        if name == "av" or name.startswith("av."):
            raise ImportError("No module named 'av'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", refuse_av)


def test_without_pyav_the_reader_says_what_to_install(clip, monkeypatch):
    _without_pyav(monkeypatch)
    with pytest.raises(video_reader.VideoLoadError) as caught:
        video_reader.VideoReader(clip)
    assert str(caught.value) == f"{clip}: {video_reader.MISSING_PYAV}"
    assert "pip install 'network-inspector[video]'" in str(caught.value)


def test_without_pyav_analyse_says_what_to_install_and_does_the_images(
    clip, factory, tmp_path, capsys, monkeypatch
):
    from PIL import Image

    picture = tmp_path / "red.png"
    Image.new("RGB", (40, 40), (200, 30, 30)).save(picture)
    _without_pyav(monkeypatch)
    out = tmp_path / "out"
    rc = cli.main(["analyse", "--model", factory, "--quiet", "--no-tensorboard",
                   "--out", str(out), str(picture), str(clip)])
    err = capsys.readouterr().err
    assert rc == 1  # something named could not be read
    assert "Traceback" not in err
    assert f"skipped {clip}: video files need PyAV" in err
    assert "pip install 'network-inspector[video]'" in err
    entries = json.loads((out / "summary.json").read_text())["images"]
    errors = {Path(e["path"]).name: e["error"] for e in entries}
    assert errors["red.png"] is None  # the picture was still analysed
    assert "pip install 'network-inspector[video]'" in errors["clip.mp4"]

