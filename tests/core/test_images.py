"""Image loading, folder expansion and preprocessing (inspector.core.inputs.images).

Every file is built here in tmp_path with Pillow and numpy; nothing is downloaded.
"""

from __future__ import annotations

import io
import os
import pickle
import struct
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch
import torchvision
import torchvision.transforms.functional as F
from PIL import Image

from inspector.core.inputs import images
from inspector.core.inputs.images import (
    IMAGE_EXTENSIONS,
    MAX_PIXELS,
    ImageLoadError,
    expand_paths,
    load_image,
)
from inspector.core.inputs.preprocess import Preprocess

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def pixels(img: Image.Image) -> np.ndarray:
    return np.asarray(img).astype(np.int32)


def load_error(path: Path) -> ImageLoadError:
    with pytest.raises(ImageLoadError) as info:
        load_image(path)
    err = info.value
    assert path.name in str(err), str(err)
    assert str(err) == f"{path}: {err.reason}"
    assert err.path == path
    return err


def noise(w: int, h: int, seed: int = 0) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8))


def open_fds_to(path: Path) -> list[str]:
    fd_dir = Path("/proc/self/fd")
    found = []
    for fd in fd_dir.iterdir():
        try:
            if os.readlink(fd) == str(path.resolve()):
                found.append(fd.name)
        except OSError:
            pass
    return found


# --------------------------------------------------------------------------- decoding


def test_rgb_png_is_returned_unchanged_and_the_file_is_closed(tmp_path):
    src = noise(37, 23)
    path = tmp_path / "photo.png"
    src.save(path)
    img = load_image(path)
    assert img.mode == "RGB" and img.size == (37, 23)
    assert np.array_equal(pixels(img), pixels(src))
    assert img.info["source_format"] == "PNG" and img.info["source_size"] == (37, 23)
    if sys.platform.startswith("linux"):
        assert open_fds_to(path) == []
    path.unlink()  # fully loaded: pixels stay readable without the file
    assert img.getpixel((3, 4)) == src.getpixel((3, 4))


def test_truncated_jpeg(tmp_path):
    good = tmp_path / "good.jpg"
    noise(120, 80).save(good, quality=90)
    data = good.read_bytes()
    path = tmp_path / "cut.jpg"
    path.write_bytes(data[: len(data) // 2])
    err = load_error(path)
    assert "truncated JPEG" in err.reason
    if sys.platform.startswith("linux"):
        assert open_fds_to(path) == []


def test_corrupt_png_data(tmp_path):
    good = tmp_path / "good.png"
    noise(64, 64).save(good)
    data = bytearray(good.read_bytes())
    idat = data.index(b"IDAT")
    data[idat + 40 : idat + 80] = bytes(40)  # damages the zlib stream (the CRC check is off)
    path = tmp_path / "bad.png"
    path.write_bytes(bytes(data))
    err = load_error(path)
    assert "PNG" in err.reason


def test_zero_byte_file(tmp_path):
    path = tmp_path / "empty.jpg"
    path.touch()
    assert load_error(path).reason == "file is empty"


def test_text_file_named_png(tmp_path):
    path = tmp_path / "notes.png"
    path.write_text("These are my notes, not a picture.\nÄhm, really.\n", encoding="utf-8")
    assert load_error(path).reason == "not an image file (looks like text)"


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"%PDF-1.7\n" + bytes(range(256)), "PDF"),
        (b"\0\0\0\x18ftypheic" + bytes(100), "HEIC"),
        (bytes(range(256)) * 4, "unknown format"),
        (b'<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg"/>', "SVG"),
    ],
)
def test_other_files_say_what_they_are(tmp_path, content, expected):
    path = tmp_path / "thing.jpg"
    path.write_bytes(content)
    assert expected in load_error(path).reason


def test_directory_passed_as_a_file(tmp_path):
    path = tmp_path / "album.jpg"
    path.mkdir()
    assert "folder" in load_error(path).reason


def test_missing_file(tmp_path):
    assert load_error(tmp_path / "gone.png").reason == "file not found"


def test_unreadable_file(tmp_path, monkeypatch):
    path = tmp_path / "secret.png"
    noise(4, 4).save(path)

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))

    # Tests may run as root, where chmod 000 does not stop reading: fail the open instead.
    monkeypatch.setattr(images, "open", refuse, raising=False)
    assert "permission denied" in load_error(path).reason


@pytest.mark.parametrize(("top", "expected_max"), [(4000, 255), (65535, 255)])
def test_16bit_grayscale_png_is_stretched_by_its_range(tmp_path, top, expected_max):
    ramp = np.linspace(0, top, 256).round().astype(np.uint16)
    data = np.tile(ramp, (8, 1))
    path = tmp_path / f"depth{top}.png"
    Image.fromarray(data).save(path)
    assert Image.open(path).mode == "I;16"
    img = load_image(path, stretch=True)
    out = pixels(img)
    assert img.mode == "RGB" and img.size == (256, 8)
    assert np.array_equal(out[..., 0], out[..., 1]) and np.array_equal(out[..., 0], out[..., 2])
    row = out[0, :, 0]
    expected = np.rint(ramp.astype(np.float64) * 255 / top)
    assert np.abs(row - expected).max() <= 1
    # Contrast: the full 0..255 range is used and the ramp stays a ramp (no clipping at 255).
    assert row.min() == 0 and row.max() == expected_max
    assert np.all(np.diff(row) >= 0) and len(np.unique(row)) > 200
    assert "stretched" in img.info["load_notes"][0]


def test_16bit_big_endian_and_32bit_tiff_stretched(tmp_path):
    big = Image.frombytes("I;16B", (4, 4), np.arange(0, 1600, 100, dtype=">u2").tobytes())
    big.save(tmp_path / "big.tif")
    out = pixels(load_image(tmp_path / "big.tif", stretch=True))[..., 0]
    assert np.array_equal(out.ravel(), np.rint(np.arange(16) * 17))

    wide = (np.arange(20, dtype=np.int32).reshape(4, 5) - 5) * 100_000
    Image.fromarray(wide).save(tmp_path / "wide.tif")
    out = pixels(load_image(tmp_path / "wide.tif", stretch=True))[..., 0]
    assert out[0, 0] == 0 and out[-1, -1] == 255
    assert abs(out[2, 2] - (12 / 19) * 255) <= 1  # -500000..1400000: 700000 sits at 12/19


@pytest.mark.parametrize("stretch", [False, True])
def test_constant_16bit_image_keeps_its_level(tmp_path, stretch):
    for value, expected in ((0, 0), (65535, 255), (32768, 128)):
        path = tmp_path / f"flat{value}.png"
        Image.fromarray(np.full((4, 4), value, dtype=np.uint16)).save(path)
        assert np.all(pixels(load_image(path, stretch=stretch)) == expected)


def test_float_image_stretched_by_its_range_and_nan_is_black(tmp_path):
    data = np.linspace(-1.0, 3.0, 20, dtype=np.float32).reshape(4, 5)
    data[3, 4] = np.nan
    path = tmp_path / "float.tif"
    Image.fromarray(data).save(path)
    out = pixels(load_image(path, stretch=True))[..., 0]
    finite = data[np.isfinite(data)]
    expected = np.rint((data - finite.min()) / (finite.max() - finite.min()) * 255)
    assert out[0, 0] == 0 and out[3, 3] == 255 and out[3, 4] == 0
    assert np.abs(out[:3] - expected[:3]).max() <= 1


def test_cmyk_jpeg(tmp_path):
    cmyk = Image.new("CMYK", (48, 16))
    for i, ink in enumerate([(255, 0, 0, 0), (0, 0, 0, 255), (0, 0, 0, 0)]):
        cmyk.paste(ink, (i * 16, 0, i * 16 + 16, 16))
    path = tmp_path / "print.jpg"
    cmyk.save(path, quality=95)
    img = load_image(path)
    assert img.mode == "RGB" and img.info["source_mode"] == "CMYK"
    out = pixels(img)
    for x, rgb in ((8, (0, 255, 255)), (24, (0, 0, 0)), (40, (255, 255, 255))):
        assert np.abs(out[8, x] - rgb).max() <= 8, (x, out[8, x])


def test_palette_png_with_and_without_transparency(tmp_path):
    pal = Image.new("P", (20, 10))
    pal.putpalette([0, 0, 0, 255, 0, 0, 0, 0, 255] + [0] * (253 * 3))
    pal.paste(1, (10, 0, 20, 5))
    pal.paste(2, (10, 5, 20, 10))  # left half index 0, right half red over blue
    opaque = tmp_path / "opaque.png"
    pal.save(opaque)
    clear = tmp_path / "clear.png"
    pal.save(clear, transparency=0)  # index 0 fully transparent (tRNS)
    gif = tmp_path / "clear.gif"
    pal.save(gif, transparency=0)

    out = pixels(load_image(opaque))
    assert tuple(out[2, 2]) == (0, 0, 0) and tuple(out[2, 15]) == (255, 0, 0)
    for path in (clear, gif):
        img = load_image(path)
        out = pixels(img)
        assert tuple(out[2, 2]) == images.BACKGROUND, path.name
        assert tuple(out[2, 15]) == (255, 0, 0) and tuple(out[7, 15]) == (0, 0, 255)
        assert any("transparency" in note for note in img.info["load_notes"])


def test_rgba_and_la_are_composited_over_the_background(tmp_path):
    rgba = np.zeros((2, 3, 4), dtype=np.uint8)
    rgba[..., :3] = (200, 40, 10)
    rgba[..., 3] = [[0, 128, 255], [255, 255, 255]]
    Image.fromarray(rgba, "RGBA").save(tmp_path / "logo.png")
    out = pixels(load_image(tmp_path / "logo.png"))
    assert tuple(out[0, 0]) == (255, 255, 255)  # fully transparent: background
    assert tuple(out[0, 2]) == (200, 40, 10)  # opaque: the pixel itself
    half = [round((c * 128 + 255 * 127) / 255) for c in (200, 40, 10)]
    assert np.abs(out[0, 1] - half).max() <= 1

    la = Image.fromarray(np.array([[[50, 0], [50, 255], [50, 64]]], dtype=np.uint8), "LA")
    la.save(tmp_path / "mask.png")
    out = pixels(load_image(tmp_path / "mask.png"))
    assert tuple(out[0, 0]) == (255,) * 3 and tuple(out[0, 1]) == (50,) * 3
    assert abs(out[0, 2, 0] - round((50 * 64 + 255 * 191) / 255)) <= 1

    black = load_image(tmp_path / "logo.png", background=(0, 0, 0))
    assert tuple(pixels(black)[0, 0]) == (0, 0, 0)


def test_bilevel_and_grayscale(tmp_path):
    bits = Image.fromarray(np.indices((6, 6)).sum(0) % 2 == 0)
    assert bits.mode == "1"
    bits.save(tmp_path / "checker.png")
    out = pixels(load_image(tmp_path / "checker.png"))
    assert set(np.unique(out)) == {0, 255}
    assert tuple(out[0, 0]) == (255,) * 3 and tuple(out[0, 1]) == (0,) * 3

    gray = np.arange(64, dtype=np.uint8).reshape(8, 8) * 4
    Image.fromarray(gray).save(tmp_path / "gray.png")
    out = pixels(load_image(tmp_path / "gray.png"))
    assert np.array_equal(out, np.repeat(gray[..., None], 3, axis=2))


def test_exif_orientation_6_is_applied(tmp_path):
    # Stored 40 wide x 20 high with a red marker at the stored top-left; orientation 6 says
    # "rotate 90 degrees clockwise to display", which puts that corner at the top right.
    arr = np.zeros((20, 40, 3), dtype=np.uint8)
    arr[...] = (0, 0, 255)
    arr[:6, :6] = (255, 0, 0)
    exif = Image.Exif()
    exif[0x0112] = 6
    path = tmp_path / "phone.jpg"
    Image.fromarray(arr).save(path, quality=95, exif=exif.tobytes())
    img = load_image(path)
    assert img.size == (20, 40)
    out = pixels(img)
    assert out[2, 17, 0] > 200 and out[2, 17, 2] < 60  # marker: top right, red
    assert out[2, 2, 0] < 60 and out[37, 2, 2] > 200 and out[37, 17, 2] > 200


def _png_claiming(width: int, height: int) -> bytes:
    buf = io.BytesIO()
    Image.new("L", (8, 8)).save(buf, "PNG")
    data = bytearray(buf.getvalue())
    assert data[12:16] == b"IHDR"
    data[16:24] = struct.pack(">II", width, height)
    data[29:33] = struct.pack(">I", zlib.crc32(bytes(data[12:29])))
    return bytes(data)


@pytest.mark.parametrize("pillow_limit", ["default", None])
def test_png_claiming_30000_by_30000_is_refused_before_decoding(
    tmp_path, monkeypatch, pillow_limit
):
    # Also with Pillow's own limit switched off (a process-wide setting other code may change).
    if pillow_limit is None:
        monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", None)
    path = tmp_path / "huge.png"
    path.write_bytes(_png_claiming(30000, 30000))
    err = load_error(path)
    assert "30000 x 30000 (900 megapixels)" in err.reason
    assert f"{round(MAX_PIXELS / 1e6)}-megapixel limit" in err.reason


def test_png_under_the_limit_still_decodes_when_header_is_honest(tmp_path):
    path = tmp_path / "small.png"
    path.write_bytes(_png_claiming(8, 8))
    assert load_image(path).size == (8, 8)


@pytest.mark.parametrize("pillow_refuses_too", [False, True])
def test_jpeg_over_the_limit_is_decoded_at_reduced_scale(tmp_path, monkeypatch, pillow_refuses_too):
    # A real 20000 x 20000 JPEG needs over a gigabyte to build; lower the limits instead.
    monkeypatch.setattr(images, "MAX_PIXELS", 10_000)
    if pillow_refuses_too:  # Image.open raises DecompressionBombError above 2 x this
        monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 4_000)
    yy, xx = np.mgrid[0:160, 0:200]
    arr = np.stack([xx * 255 // 199, yy * 255 // 159, np.full_like(xx, 90)], -1).astype(np.uint8)
    path = tmp_path / "panorama.jpg"
    Image.fromarray(arr).save(path, quality=95)

    img = load_image(path)
    assert img.size == (100, 80)  # 1/2 scale: 8000 pixels, under 10000
    assert img.info["source_size"] == (200, 160)
    assert "1/2 scale" in img.info["load_notes"][0]
    expected = pixels(Image.fromarray(arr).resize((100, 80), Image.Resampling.BOX))
    assert np.abs(pixels(img) - expected).mean() < 3


def test_jpeg_too_large_even_at_one_eighth_and_other_formats_are_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(images, "MAX_PIXELS", 100)
    noise(200, 160).save(tmp_path / "big.jpg")
    noise(20, 20).save(tmp_path / "big.png")
    assert "200 x 160" in load_error(tmp_path / "big.jpg").reason
    assert "20 x 20" in load_error(tmp_path / "big.png").reason


def test_error_is_picklable_and_readable():
    err = ImageLoadError("/photos/cat.png", "file is empty")
    again = pickle.loads(pickle.dumps(err))
    assert str(again) == str(err) == f"{Path('/photos/cat.png')}: file is empty"
    assert again.path == Path("/photos/cat.png") and again.reason == "file is empty"


# --------------------------------------------------------------------------- paths


def test_expand_paths_on_a_nested_folder(tmp_path):
    root = tmp_path / "shots"
    (root / "b" / "deep").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "a").mkdir()
    for rel in ["img10.png", "img2.png", "IMG1.JPG", "a/x.webp", "b/deep/y.tiff", "b/z.bmp"]:
        (root / rel).write_bytes(b"x")
    for rel in ["notes.txt", "b/readme.md", ".hidden.png", ".git/objects.png", "a/noext"]:
        (root / rel).write_bytes(b"x")
    (root / "b" / "loop").symlink_to(root, target_is_directory=True)  # must not recurse
    (root / "link.png").symlink_to(root / "img2.png")  # same file twice
    explicit_text = tmp_path / "readme.txt"
    explicit_text.write_text("x")

    got = expand_paths([root, root / "img2.png", str(explicit_text)])
    rel = [p.relative_to(root).as_posix() for p in got]
    assert rel == ["a/x.webp", "b/deep/y.tiff", "b/z.bmp", "IMG1.JPG", "img2.png", "img10.png"]
    assert all(isinstance(p, Path) for p in got)


def test_expand_paths_reports_missing_paths(tmp_path):
    (tmp_path / "ok.png").write_bytes(b"x")
    with pytest.raises(ImageLoadError) as info:
        expand_paths([tmp_path / "ok.png", tmp_path / "gone.png"])
    assert "gone.png" in str(info.value)

    reported: list[ImageLoadError] = []
    got = expand_paths(
        [tmp_path / "gone.png", tmp_path / "ok.png", tmp_path / "lost"], on_missing=reported.append
    )
    assert got == [tmp_path / "ok.png"]
    assert [e.path.name for e in reported] == ["gone.png", "lost"]


def test_image_extensions_are_lowercase_with_a_dot_and_readable_by_pillow():
    assert ".jpg" in IMAGE_EXTENSIONS and ".png" in IMAGE_EXTENSIONS
    registered = Image.registered_extensions()
    for ext in IMAGE_EXTENSIONS:
        assert ext.startswith(".") and ext == ext.lower()
        assert registered.get(ext) in Image.OPEN, ext


# --------------------------------------------------------------------------- preprocessing

SIZES = [(300, 200), (180, 260), (224, 224), (100, 80), (641, 479), (37, 511)]


@pytest.mark.parametrize("arch", ["resnet18", "vit_b_16", "efficientnet_b0", "inception_v3"])
def test_preprocess_matches_torchvision_presets(arch):
    t = torchvision.models.get_model_weights(arch).DEFAULT.transforms()
    pre = Preprocess.from_transforms(t)
    assert pre.crop_size == (t.crop_size[0],) * 2 and pre.resize_size == t.resize_size[0]
    assert pre.mean == tuple(t.mean) and pre.std == tuple(t.std)
    assert pre.interpolation == t.interpolation.value
    for i, (w, h) in enumerate(SIZES):
        img = noise(w, h, seed=i)
        ours, theirs = pre(img), t(img)
        assert ours.dtype == torch.float32 and ours.shape == theirs.shape
        assert torch.allclose(ours, theirs, atol=1e-5, rtol=0), (arch, w, h)


def test_resnet18_v1_preset_fields():
    t = torchvision.models.ResNet18_Weights.IMAGENET1K_V1.transforms()
    pre = Preprocess.from_transforms(t)
    assert pre == Preprocess((224, 224), 256, IMAGENET_MEAN, IMAGENET_STD, "bilinear")
    assert hash(pre) == hash(Preprocess([224, 224], 256, list(IMAGENET_MEAN), IMAGENET_STD))


def test_preprocess_geometry_matches_torchvision():
    pres = [
        Preprocess((224, 224), 256, IMAGENET_MEAN, IMAGENET_STD),
        Preprocess((224, 224), 200, IMAGENET_MEAN, IMAGENET_STD),  # crop larger: padded
        Preprocess((120, 160), 130, IMAGENET_MEAN, IMAGENET_STD),
    ]
    for pre in pres:
        for i, (w, h) in enumerate(SIZES):
            img = noise(w, h, seed=i)
            resized = F.resize(img, [pre.resize_size])
            assert resized.size == pre.resized_size((w, h))
            left, top = pre.crop_offset((w, h))
            ch, cw = pre.crop_size
            cropped = F.center_crop(resized, list(pre.crop_size))
            # PIL's crop fills outside the image with 0, as center_crop's padding does.
            assert np.array_equal(
                np.asarray(cropped), np.asarray(resized.crop((left, top, left + cw, top + ch)))
            ), (pre.crop_size, pre.resize_size, w, h)


def test_preprocess_without_resize_size_resizes_straight_to_the_crop():
    pre = Preprocess((200, 300), None, IMAGENET_MEAN, IMAGENET_STD, "bicubic")
    img = noise(150, 170)
    x = pre(img)
    assert x.shape == (3, 200, 300)
    ref = F.resize(img, [200, 300], interpolation=F.InterpolationMode.BICUBIC)
    assert np.array_equal(pre.to_display(x), np.asarray(ref))
    assert pre.crop_offset((150, 170)) == (0, 0)


@pytest.mark.parametrize("size,resize", [((300, 200), 256), ((150, 400), 200)])
def test_prepare_gives_the_model_input_and_the_picture_it_is_of(size, resize):
    pre = Preprocess((224, 224), resize, IMAGENET_MEAN, IMAGENET_STD)
    img = noise(*size)
    prepared = pre.prepare(img)
    assert torch.equal(prepared.x, pre(img))
    # The crop's own pixels (padding included: the 150-wide picture is narrower than the
    # crop) are what un-normalizing the input gives back.
    assert np.array_equal(prepared.display, pre.to_display(prepared.x))
    assert not prepared.display.flags.writeable  # shared by every run of the frame
    assert prepared.image is img and prepared.size == size and prepared.preprocess is pre


def test_to_display_inverts_the_normalization_exactly():
    pre = Preprocess((224, 224), 256, IMAGENET_MEAN, IMAGENET_STD)
    img = noise(300, 200)
    x = pre(img)
    expected = np.asarray(F.center_crop(F.resize(img, [256]), [224, 224]))
    shown = pre.to_display(x)
    assert shown.dtype == np.uint8 and shown.shape == (224, 224, 3)
    assert np.array_equal(shown, expected)
    batched = x[None].clone().requires_grad_(True)
    assert np.array_equal(pre.to_display(batched), expected)
    assert np.all(pre.to_display(torch.full((3, 2, 2), 100.0)) == 255)  # clipped, not wrapped
    with pytest.raises(ValueError):
        pre.to_display(torch.zeros(2, 3, 4, 4))


def test_to_original_puts_a_region_where_it_came_from():
    pre = Preprocess((224, 224), 256, IMAGENET_MEAN, IMAGENET_STD)
    # 400 x 300: the short side 300 -> 256, width int(256 * 400 / 300) = 341; the crop starts
    # at round((341 - 224) / 2) = round(58.5) = 58 (half to even) and round(16) = 16.
    m = np.zeros((224, 224), dtype=np.float32)
    m[50:100, 120:180] = 1.0
    out = pre.to_original(m, (400, 300))
    assert out.shape == (300, 400) and out.dtype == np.float32
    # Crop x 120..180 -> resized 178..238 -> original x 208.8..279.2 (x 400/341);
    # crop y 50..100 -> resized 66..116 -> original y 77.3..135.9 (x 300/256).
    assert out[80:134, 211:277].min() > 0.99
    outside = np.ones_like(out, dtype=bool)
    outside[75:139, 206:282] = False
    assert out[outside].max() == 0.0
    # A constant map (of any size) covers exactly the crop: pixel centers over resized
    # x 58..282 are original x 68..330, over resized y 16..240 original y 19..280.
    full = pre.to_original(np.ones((7, 7)), (400, 300))
    assert np.all(full[19:281, 68:331] == 1.0)
    assert full.sum() == 262 * 263


@pytest.mark.parametrize(
    ("crop", "resize", "size"),
    [
        ((224, 224), 256, (120, 100)),  # upsampled, landscape
        ((224, 224), 256, (500, 600)),  # downsampled, portrait
        ((224, 224), 200, (130, 110)),  # the crop is taller than the resized image: padded
        ((150, 200), None, (310, 170)),  # straight resize, non-square
    ],
)
def test_to_original_round_trips_a_ramp_through_preprocessing(crop, resize, size):
    # Red encodes x (0.79 levels per resized pixel), green encodes y. Pushed through the real
    # preprocessing and mapped back, each must land where it was: a crop offset wrong by one
    # resized pixel shifts the mean difference by 0.76 to 0.86 levels (measured), the right
    # one by under 0.05. (Sizes avoid an exact 2x upscale, where PIL's uint8 rounding alone
    # biases the ramp by 0.3 levels.)
    w, h = size
    pre = Preprocess(crop, resize, IMAGENET_MEAN, IMAGENET_STD)
    rw, rh = pre.resized_size(size)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    red = (xx + 0.5) * (rw / w) * 0.7931  # a slope that is not a simple fraction, so the
    green = (yy + 0.5) * (rh / h) * 0.7931  # uint8 rounding errors average out
    arr = np.stack([red, green, np.zeros_like(red)], -1)
    assert arr.max() < 255
    img = Image.fromarray(np.rint(arr).astype(np.uint8))
    x = pre(img)
    for channel, truth in ((0, red), (1, green)):
        level = (x[channel] * IMAGENET_STD[channel] + IMAGENET_MEAN[channel]) * 255
        back = pre.to_original(level.numpy(), size)
        inside = _interior(pre, size, margin=3)
        diff = back[inside] - truth[inside]
        assert inside.sum() > 0.3 * w * h
        assert abs(diff.mean()) < 0.25 and np.abs(diff).max() < 1.0, (channel, diff.mean())
        assert np.all(back[~_interior(pre, size, margin=-1)] == 0)


def _interior(pre: Preprocess, size: tuple[int, int], margin: int) -> np.ndarray:
    """Original pixels whose centers are over the crop and over the resized image, by margin
    resized pixels (negative: a looser mask that contains every pixel over the crop)."""
    w, h = size
    rw, rh = pre.resized_size(size)
    left, top = pre.crop_offset(size)
    ch, cw = pre.crop_size
    xs = (np.arange(w) + 0.5) * rw / w
    ys = (np.arange(h) + 0.5) * rh / h
    x_ok = (xs >= max(left, 0) + margin) & (xs <= min(left + cw, rw) - margin)
    y_ok = (ys >= max(top, 0) + margin) & (ys <= min(top + ch, rh) - margin)
    return y_ok[:, None] & x_ok[None, :]


def test_images_of_any_size_preprocess_to_one_shape_a_batch_stacks():
    pre = Preprocess((32, 32), 40, IMAGENET_MEAN, IMAGENET_STD)
    imgs = [noise(50, 40, seed=1), noise(33, 70, seed=2)]
    assert [tuple(pre(img).shape) for img in imgs] == [(3, 32, 32)] * 2


def test_preprocess_converts_other_modes_and_validates():
    pre = Preprocess((16, 16), 20, IMAGENET_MEAN, IMAGENET_STD)
    gray = Image.fromarray(np.full((30, 30), 128, dtype=np.uint8))
    assert pre(gray).shape == (3, 16, 16)
    with pytest.raises(ValueError):
        Preprocess((16, 16), 20, IMAGENET_MEAN, IMAGENET_STD, "trilinear")
    with pytest.raises(ValueError):
        Preprocess((16,), 20, IMAGENET_MEAN, IMAGENET_STD)
    with pytest.raises(ValueError):
        Preprocess((16, 16), 20, IMAGENET_MEAN, (0.2, 0.0, 0.2))
