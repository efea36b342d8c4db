"""A checkpoint's format is recognised by its whole signature (core.models.files.file_format).

A safetensors file starts with its header's length as a little-endian u64; when that length
is 128 mod 256 its first byte is 0x80, the byte every pickle starts with. Each format is
checked here against files made to collide with the others.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from safetensors.torch import load_file, save_file

from inspector.core.models.files import ModelLoadError, file_format, read_state_dict

ROOT = Path(__file__).resolve().parents[2]
DEMO_WEIGHTS = ROOT / "resources" / "demo" / "shapes_cnn.safetensors"
SMALL = {"w": torch.arange(6, dtype=torch.float32).reshape(2, 3), "b": torch.ones(2)}


def header_length(path: Path) -> int:
    return int.from_bytes(path.read_bytes()[:8], "little")


def safetensors_where(path: Path, tensors, wanted) -> Path:
    """A safetensors file of `tensors` whose header length satisfies `wanted`, found by
    growing a metadata note (the header is padded to 8 bytes, so every residue of 8 comes)."""
    for k in range(2000):
        save_file(tensors, str(path), metadata={"note": "x" * k})
        if wanted(header_length(path)):
            return path
    raise AssertionError("no metadata length gave the wanted header length")


def torch_saved(path: Path, **kwargs) -> Path:
    torch.save(SMALL, path, **kwargs)
    return path


@pytest.fixture
def collisions(tmp_path):
    """name -> (file, the format it must be recognised as)."""
    d = tmp_path
    files = {
        "safetensors": (safetensors_where(d / "plain.safetensors", SMALL, lambda n: True),
                        "safetensors"),
        # First byte 0x80, as a pickle's PROTO opcode.
        "safetensors 0x80": (safetensors_where(d / "x80.safetensors", SMALL,
                                               lambda n: n % 256 == 128), "safetensors"),
        # First bytes 0x80 0x02: PROTO 2, as torch.save's older format starts.
        "safetensors 0x80 0x02": (safetensors_where(d / "x8002.safetensors", SMALL,
                                                    lambda n: n % 65536 == 0x0280), "safetensors"),
        "torch.save zip": (torch_saved(d / "new.pt"), "zip"),
        "legacy torch.save": (torch_saved(d / "old.pt", _use_new_zipfile_serialization=False),
                              "pickle"),
        "text": (d / "notes.pt", "a text file"),
        "text with a brace at byte 8": (d / "brace.pt", "a text file"),
        "json": (d / "config.pth", "a text file"),
        "PNG": (d / "image.pt", "a PNG image"),
        "empty": (d / "empty.pt", "an empty file"),
        "0x80 then noise": (d / "noise.pt", "a file of an unknown format"),
    }
    for protocol in range(2, pickle.HIGHEST_PROTOCOL + 1):
        path = d / f"protocol{protocol}.pkl"
        path.write_bytes(pickle.dumps({"w": [1.0, 2.0]}, protocol=protocol))
        files[f"pickle protocol {protocol}"] = (path, "pickle")
    (d / "notes.pt").write_text("These are my training notes.\nepoch 1: loss 0.3\n")
    (d / "brace.pt").write_text('abcdefgh{"note": "not a header"}\n')
    (d / "config.pth").write_text('{"lr": 0.1, "layers": [1, 2, 3]}\n')
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(d / "image.pt", format="PNG")
    (d / "empty.pt").write_bytes(b"")
    (d / "noise.pt").write_bytes(b"\x80\x0e\x00\x00\x00\x00\x00\x00\x00\xff\xfe")

    # Cut short: each keeps the format it started as, so the reader can say it is cut short.
    for name in ("safetensors", "safetensors 0x80", "legacy torch.save", "torch.save zip",
                 "pickle protocol 2"):
        source, kind = files[name]
        cut = d / f"cut-{source.name}"
        data = source.read_bytes()
        cut.write_bytes(data[: max(len(data) // 2, 9)])
        files[f"{name}, cut in half"] = (cut, kind)
    for name in ("safetensors", "safetensors 0x80"):
        source, _ = files[name]
        cut = d / f"header-cut-{source.name}"
        cut.write_bytes(source.read_bytes()[: 8 + header_length(source) // 2])
        files[f"{name}, cut inside its header"] = (cut, "safetensors")
    return files


def test_every_format_is_told_from_files_made_to_collide(collisions):
    assert header_length(collisions["safetensors 0x80"][0]) % 256 == 128
    assert collisions["safetensors 0x80"][0].read_bytes()[:1] == b"\x80"
    assert collisions["safetensors 0x80 0x02"][0].read_bytes()[:2] == b"\x80\x02"
    found = {name: file_format(path) for name, (path, _) in collisions.items()}
    assert found == {name: kind for name, (_, kind) in collisions.items()}


@pytest.mark.parametrize("name", ["safetensors 0x80", "safetensors 0x80 0x02"])
def test_a_safetensors_file_starting_like_a_pickle_loads(collisions, name):
    state = read_state_dict(collisions[name][0])
    assert set(state) == set(SMALL)
    assert all(torch.equal(state[k], SMALL[k]) for k in SMALL)


@pytest.mark.parametrize("name", ["safetensors, cut inside its header",
                                  "safetensors 0x80, cut inside its header"])
def test_a_safetensors_file_cut_inside_its_header_is_called_cut_short(collisions, name):
    with pytest.raises(ModelLoadError) as info:
        read_state_dict(collisions[name][0])
    assert "is cut short" in str(info.value)


def test_the_cli_loads_demo_weights_whose_header_length_starts_with_0x80(tmp_path):
    # The report's reproduction: the demo weights saved again with a note that makes their
    # header length 128 mod 256 (a 61-character note with safetensors 0.4+).
    path = safetensors_where(tmp_path / "demo.safetensors", load_file(str(DEMO_WEIGHTS)),
                             lambda n: n % 256 == 128)
    assert path.read_bytes()[:1] == b"\x80"
    env_path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    done = subprocess.run(
        [sys.executable, "-m", "inspector.cli", "tree", "--model", "demo_shapes",
         "--weights", str(path)],
        capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": env_path},
    )
    assert done.returncode == 0, done.stderr
    assert "damaged" not in done.stderr
    assert f"demo_shapes ({path.name})" in done.stdout



def test_a_png_write_that_fails_leaves_no_file(tmp_path, monkeypatch):
    """A full disk mid-write (concepts' crops left a 0-byte PNG, written in place): the
    PNG is written through a .part name, so neither it nor a part is left behind."""
    import errno

    import numpy as np
    from PIL import Image

    from inspector.core.export.files import save_png

    def full_disk(self, fp, *args, **kwargs):
        with open(fp, "wb") as f:
            f.write(b"\x89PNG")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Image.Image, "save", full_disk)
    target = tmp_path / "crops" / "stage3" / "4" / "0.png"
    with pytest.raises(OSError):
        save_png(target, np.zeros((8, 8, 3), np.uint8))
    assert list(target.parent.iterdir()) == []
    monkeypatch.undo()
    save_png(target, np.full((8, 8, 3), 7, np.uint8))
    assert np.asarray(Image.open(target)).max() == 7
    assert [p.name for p in target.parent.iterdir()] == ["0.png"]
