"""16-bit, 32-bit and float images: scaled by their type's range unless the user asks for a
stretch (core.inputs.high_depth, through load_image, the Session and `analyse --stretch`)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision.transforms import v2

from inspector.core.inputs.high_depth import type_range
from inspector.core.inputs.images import as_rgb, load_image
from inspector.core.inputs.preprocess import Preprocess

LEVEL = 1 / 255  # one 8-bit level, in the 0..1 units the model input is made from


def unit_input(img: Image.Image) -> torch.Tensor:
    """The model input before normalisation: (3, H, W) in 0..1, no resize or crop."""
    w, h = img.size
    pre = Preprocess((h, w), None, (0.0, 0.0, 0.0), (1.0, 1.0, 1.0))
    return pre(img)


def test_a_16bit_png_gives_the_input_of_its_8bit_twin(tmp_path):
    rng = np.random.default_rng(0)
    u8 = rng.integers(0, 256, (24, 32), dtype=np.uint8)
    Image.fromarray(u8).save(tmp_path / "eight.png")
    Image.fromarray(u8.astype(np.uint16) * 257).save(tmp_path / "sixteen.png")
    assert Image.open(tmp_path / "sixteen.png").mode == "I;16"
    eight = unit_input(load_image(tmp_path / "eight.png"))
    sixteen = unit_input(load_image(tmp_path / "sixteen.png"))
    assert (sixteen - eight).abs().max() <= LEVEL / 2


def test_any_16bit_image_is_within_half_a_level_of_torchvisions_to_dtype(tmp_path):
    rng = np.random.default_rng(1)
    u16 = rng.integers(0, 65536, (24, 32), dtype=np.uint16)
    u16[0, :3] = (0, 4000, 65535)
    Image.fromarray(u16).save(tmp_path / "raw.png")
    ours = unit_input(load_image(tmp_path / "raw.png"))[0]
    expected = v2.ToDtype(torch.float32, scale=True)(torch.from_numpy(u16.astype(np.int32))
                                                      .to(torch.uint16))
    assert (ours - expected).abs().max() <= LEVEL / 2 + 1e-6
    # Dark data stays dark: 4000 of 65535 is 16 of 255, not stretched to white.
    assert round(float(ours[0, 1]) * 255) == 16


def test_stretch_maps_the_data_range_to_the_full_range(tmp_path):
    ramp = np.linspace(1000, 4000, 64).round().astype(np.uint16).reshape(8, 8)
    Image.fromarray(ramp).save(tmp_path / "sensor.png")
    default = np.asarray(load_image(tmp_path / "sensor.png"))[..., 0]
    stretched = load_image(tmp_path / "sensor.png", stretch=True)
    s = np.asarray(stretched)[..., 0]
    assert (s.min(), s.max()) == (0, 255)
    assert np.abs(s.astype(int) - np.rint((ramp - 1000) / 3000 * 255)).max() <= 1
    assert (default.min(), default.max()) == (4, 16)  # 1000/257, 4000/257
    assert "stretched" in stretched.info["load_notes"][0]


def test_32bit_tiff_uses_its_declared_depth_and_pgm_its_16_bits(tmp_path):
    signed = np.array([[0, 2**30, 2**31 - 1, -5]], dtype=np.int32)
    Image.fromarray(signed).save(tmp_path / "counts.tif")
    with Image.open(tmp_path / "counts.tif") as im:
        assert im.mode == "I" and type_range(im) == (0.0, 2**31 - 1)
    out = np.asarray(load_image(tmp_path / "counts.tif"))[0, :, 0]
    assert out.tolist() == [0, 128, 255, 0]  # negative values are below the range: black
    # Pillow opens 16-bit PGM as "I", its maxval scaled to 65535.
    (tmp_path / "depth.pgm").write_bytes(
        b"P5\n3 1\n65535\n" + np.array([0, 32896, 65535], ">u2").tobytes())
    with Image.open(tmp_path / "depth.pgm") as im:
        assert im.mode == "I" and type_range(im) == (0.0, 65535.0)
    assert np.asarray(load_image(tmp_path / "depth.pgm"))[0, :, 0].tolist() == [0, 128, 255]


def test_float_tiff_is_taken_as_0_to_1_and_clipped(tmp_path):
    data = np.array([[-0.5, 0.0, 0.5, 1.0, 2.0, np.nan]], dtype=np.float32)
    Image.fromarray(data).save(tmp_path / "float.tif")
    out = np.asarray(load_image(tmp_path / "float.tif"))[0, :, 0]
    assert out.tolist() == [0, 0, 128, 255, 255, 0]
    stretched = np.asarray(load_image(tmp_path / "float.tif", stretch=True))[0, :, 0]
    assert stretched.tolist() == [0, 51, 102, 153, 255, 0]  # -0.5..2.0 over 0..255


@pytest.mark.parametrize("stretch", [False, True])
def test_an_image_in_memory_is_scaled_as_a_file_is(tmp_path, stretch):
    ramp = np.linspace(0, 4000, 32).round().astype(np.uint16).reshape(4, 8)
    Image.fromarray(ramp).save(tmp_path / "ramp.png")
    from_file = np.asarray(load_image(tmp_path / "ramp.png", stretch=stretch))
    in_memory = np.asarray(as_rgb(Image.fromarray(ramp), stretch=stretch))
    assert np.array_equal(from_file, in_memory)
