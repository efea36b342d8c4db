"""The Dataset dock: an atlas written by `network-inspector atlas` opened in the window, a
channel clicked in the mosaic, its top images with their boxes, a double-click that runs
one; broken atlas files; the module tree's dead-channel badges."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from atlas_models import DEAD
from PIL import Image
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QImage
from test_main_window import wait_run

from inspector import cli
from inspector.ui.atlas.atlas_file import AtlasError, read_atlas
from inspector.ui.atlas.dataset_dock import DatasetView
from inspector.ui.atlas.thumbnails import (
    BOX_COLOR,
    CROP,
    FRAME,
    IMAGE,
    LOADING,
    MISSING,
    THUMB,
    EntryRole,
    SourceRole,
    box_rect,
)
from inspector.ui.module_tree.cells import COL_HEALTH

HERE = Path(__file__).resolve().parent
MODEL = {"name": None, "factory": f"{HERE / 'atlas_models.py'}:build_model"}
LAYERS = ("features.1", "features.3")
TOP = 3
TIMEOUT = 60_000  # ms: the first test also imports torch on a busy machine


def draw(path: Path, k: int) -> Path:
    """A blue picture with a yellow patch that moves with k."""
    array = np.zeros((80, 96, 3), np.uint8)
    array[:] = (40, 80, 160)
    y, x = 6 + (7 * k) % 45, 6 + (11 * k) % 55
    array[y:y + 24, x:x + 30] = (250, 220, (40 + 25 * k) % 256)
    Image.fromarray(array).save(path)
    return path


@pytest.fixture(scope="module")
def atlas_dir(tmp_path_factory) -> Path:
    """An atlas of atlas_models.py written by the real command (in this process)."""
    root = tmp_path_factory.mktemp("dataset_dock")
    folder = root / "images"
    folder.mkdir()
    for k in range(7):
        draw(folder / f"img{k}.png", k)
    out = root / "atlas"
    rc = cli.main(["atlas", "--model", MODEL["factory"], "--device", "cpu",
                   "--layers", ",".join(LAYERS), "--top", str(TOP), "--workers", "0",
                   "--quiet", "--out", str(out), str(folder)])
    assert rc == 0 and (out / "atlas.json").is_file()
    return out


def copy_atlas(atlas_dir: Path, to: Path, edit=None) -> Path:
    """A copy of the atlas folder (crops too), its JSON changed by `edit(doc)`."""
    shutil.copytree(atlas_dir, to)
    if edit is not None:
        doc = json.loads((to / "atlas.json").read_text())
        edit(doc)
        (to / "atlas.json").write_text(json.dumps(doc))
    return to


def wait_thumbs(qtbot, view: DatasetView) -> None:
    qtbot.waitUntil(lambda: all(item.data(SourceRole) != LOADING for item in view.list.items()),
                    timeout=TIMEOUT)


def thumbnail(item) -> QImage:
    """The picture a thumbnail's item shows."""
    icon = item.icon()
    return icon.pixmap(icon.availableSizes()[0]).toImage()


# -- reading atlas.json ------------------------------------------------------------------------------


def test_read_atlas_reads_what_the_command_wrote(atlas_dir):
    from inspector.batch.writers import crop_path

    doc = json.loads((atlas_dir / "atlas.json").read_text())
    atlas = read_atlas(atlas_dir)
    assert (atlas.model, atlas.images, atlas.failed) == (doc["model"], 7, 0)
    assert list(atlas.layers) == list(LAYERS)
    layer = atlas.layers["features.3"]
    assert layer.channels == 8 and layer.dead == DEAD
    assert layer.dead == tuple(doc["layers"]["features.3"]["dead"])
    for c in range(layer.channels):
        raw = doc["layers"]["features.3"]["top"][str(c)]
        assert [e.path for e in layer.top[c]] == [e["path"] for e in raw]
        assert [e.value for e in layer.top[c]] == [e["value"] for e in raw]
        assert [e.box for e in layer.top[c]] == [tuple(e["box"]) if e["box"] else None
                                                 for e in raw]
    # The crop files are where the writer put them, by the writer's own naming.
    assert atlas.crop_path("features.3", 4, 1) == crop_path(atlas_dir, "features.3", 4, 1)
    assert atlas.crop_path("features.3", 4, 1).is_file()
    assert read_atlas(atlas_dir / "atlas.json").layers.keys() == atlas.layers.keys()


def test_a_relative_image_path_is_found_from_the_atlas_folder_up(atlas_dir, tmp_path,
                                                                 monkeypatch):
    # As `network-inspector atlas --out out/atlas photos/` writes it, run from tmp_path.
    shutil.copytree(atlas_dir.parent / "images", tmp_path / "photos")
    copy_atlas(atlas_dir, tmp_path / "out" / "atlas")
    doc_path = tmp_path / "out" / "atlas" / "atlas.json"
    doc = json.loads(doc_path.read_text())
    doc["layers"]["features.3"]["top"]["0"][0]["path"] = "photos/img3.png"
    doc_path.write_text(json.dumps(doc))
    monkeypatch.chdir(atlas_dir)  # the window runs elsewhere
    atlas = read_atlas(tmp_path / "out" / "atlas")
    assert atlas.resolve("photos/img3.png") == tmp_path / "photos" / "img3.png"
    assert atlas.resolve("photos/nothing.png") is None
    assert atlas.resolve(str(tmp_path / "gone.png")) is None


@pytest.mark.parametrize("text, says", [
    ('{"model": "m", "images": 3, "layers": {"a": {"chan', "not a complete atlas (bad JSON"),
    ("[1, 2]", "the file should be an object"),
    ('{"model": "m", "images": -1, "layers": {}}', "images should be a count"),
    ('{"model": "m", "images": 1, "layers": {"a": {"channels": 2, "top": '
     '{"0": [{"path": "x.png", "value": "big", "box": null}]}}}}',
     "layers.a.top.0[0].value should be a number or null"),
    ('{"model": "m", "images": 1, "layers": {"a": {"channels": 2, "top": '
     '{"0": [{"path": "x.png", "value": 1.0, "box": [5, 5, 2, 9]}]}}}}',
     "layers.a.top.0[0].box should be [x0, y0, x1, y1]"),
    ('{"model": "m", "images": 1, "layers": {"a": {"channels": 2, "top": {}, "dead": [7]}}}',
     "layers.a.dead should be a list of channels below 2"),
    ('{"model": "m", "images": 1, "layers": {"a": {"channels": 2, "top": '
     '{"0": [{"path": "v.mp4", "frame": -3, "value": 1.0, "box": null}]}}}}',
     "layers.a.top.0[0].frame should be a frame index"),
    # "²".isdigit() is true and int("²") raises: it read as "Internal error: ..."
    ('{"model": "m", "images": 1, "layers": {"a": {"channels": 2, "top": {"\u00b2": []}}}}',
     "layers.a.top.\u00b2 should be a channel below 2"),
])
def test_a_broken_atlas_json_is_one_sentence_naming_what_is_wrong(tmp_path, text, says):
    (tmp_path / "atlas.json").write_text(text)
    with pytest.raises(AtlasError) as caught:
        read_atlas(tmp_path)
    message = str(caught.value)
    assert says in message and str(tmp_path / "atlas.json") in message
    assert "\n" not in message


def test_a_folder_without_an_atlas_says_how_to_make_one(tmp_path):
    with pytest.raises(AtlasError, match="No atlas.json in .*network-inspector atlas"):
        read_atlas(tmp_path)
    with pytest.raises(AtlasError, match="does not exist"):
        read_atlas(tmp_path / "nowhere")


# -- the dock on its own ---------------------------------------------------------------------------


def test_the_empty_dock_gives_the_command(qtbot):
    view = DatasetView()
    qtbot.addWidget(view)
    assert "network-inspector atlas --model MODEL --layers LAYER --out DIR" in view.hint.text()
    assert "File ▸ Open atlas" in view.hint.text()
    assert view.list.isHidden() and view.choice_bar.isHidden()


def test_a_channel_shows_its_top_images_whole_with_the_box_drawn(qtbot, tmp_path):
    # A hand-made atlas with a box large enough to find on the thumbnail.
    image = tmp_path / "wide.png"
    Image.new("RGB", (400, 200), (0, 120, 0)).save(image)
    doc = {"model": "m", "images": 1, "failed": [], "layers": {"conv": {
        "channels": 2,
        "top": {"0": [{"path": str(image), "value": 2.5, "box": [100, 50, 300, 150]}],
                "1": []},
        "mean": [0.5, 0.0], "active_fraction": [1.0, 0.0], "dead": [1]}}}
    (tmp_path / "atlas.json").write_text(json.dumps(doc))
    view = DatasetView()
    qtbot.addWidget(view)
    view.set_atlas(read_atlas(tmp_path))
    view.select("conv", 0)
    wait_thumbs(qtbot, view)
    (item,) = view.list.items()
    assert item.data(SourceRole) == IMAGE and item.text().startswith("#1  2.5")
    thumb: QImage = thumbnail(item)
    assert (thumb.width(), thumb.height()) == (THUMB, THUMB // 2)  # the whole image
    rect = box_rect((100, 50, 300, 150), (400, 200), thumb)
    assert (rect.x(), rect.y(), rect.width(), rect.height()) == (32, 16, 64, 32)
    edge = QColor(thumb.pixel(int(rect.center().x()), int(rect.top()) + 1))
    inside = QColor(thumb.pixel(int(rect.center().x()), int(rect.center().y())))
    outside = QColor(thumb.pixel(4, 4))
    assert edge.name() == BOX_COLOR.name()
    assert inside.getRgb()[:3] == (0, 120, 0)  # the box's pixels as they are
    assert outside.green() < 100  # the rest darkened
    assert "channel 0" in view.header.text() and "active on 100 %" in view.header.text()
    view.select("conv", 1)
    assert "dead" in view.header.text() and "no images for this channel" in view.hint.text()


def test_a_gone_original_shows_the_saved_crop_and_another_model_is_said(
    qtbot, atlas_dir, tmp_path
):
    def gone(doc):
        top = doc["layers"]["features.3"]["top"]["0"]
        top[1]["path"] = str(tmp_path / "moved-away.png")

    folder = copy_atlas(atlas_dir, tmp_path / "atlas", gone)
    shutil.rmtree(folder / "crops" / "features.3" / "0")  # and rank 2 has no crop either...
    (folder / "crops" / "features.3" / "0").mkdir()
    shutil.copy(atlas_dir / "crops" / "features.3" / "0" / "1.png",
                folder / "crops" / "features.3" / "0" / "1.png")  # ...but rank 1 has one
    view = DatasetView()
    qtbot.addWidget(view)
    view.set_loaded_model("resnet18")
    view.set_atlas(read_atlas(folder))
    view.select("features.3", 0)
    wait_thumbs(qtbot, view)
    sources = [item.data(SourceRole) for item in view.list.items()]
    assert sources == [IMAGE, CROP, IMAGE]
    assert "crop" in view.list.items()[1].text()
    note = view.note.text()
    assert "made with build_model; the loaded model is resnet18" in note
    assert "1 of 3 original images are gone" in note
    with qtbot.waitSignal(view.failed) as failed:
        view.list.itemActivated.emit(view.list.items()[1])  # a double-click
    assert "moved-away.png is gone" in failed.args[0]

    def gone_too(doc):
        doc["layers"]["features.3"]["top"]["0"][2]["path"] = "/nowhere/else.png"

    folder2 = copy_atlas(atlas_dir, tmp_path / "atlas2", gone_too)
    shutil.rmtree(folder2 / "crops")
    view.set_atlas(read_atlas(folder2))
    view.select("features.3", 0)
    wait_thumbs(qtbot, view)
    assert view.list.items()[2].data(SourceRole) == MISSING


def test_a_video_frame_entry_shows_its_crop_and_says_it_cannot_be_opened(
    qtbot, atlas_dir, tmp_path
):
    clip = tmp_path / "clip.mp4"
    clip.write_bytes(b"not decoded by the dock")

    def a_frame(doc):  # rank 1 of channel 0: a video's frame, as `atlas --every N` writes it
        entry = doc["layers"]["features.3"]["top"]["0"][1]
        entry.update(path=str(clip), frame=20)

    folder = copy_atlas(atlas_dir, tmp_path / "atlas", a_frame)
    atlas = read_atlas(folder)
    entry = atlas.layers["features.3"].top[0][1]
    assert (entry.frame, entry.describe()) == (20, f"frame 20 of {clip}")
    assert atlas.layers["features.3"].top[0][0].frame is None
    view = DatasetView()
    qtbot.addWidget(view)
    view.set_atlas(atlas)
    view.select("features.3", 0)
    wait_thumbs(qtbot, view)
    items = view.list.items()
    assert [item.data(SourceRole) for item in items] == [IMAGE, FRAME, IMAGE]
    crop = QImage(str(folder / "crops" / "features.3" / "0" / "1.png"))
    thumb: QImage = thumbnail(items[1])
    assert max(thumb.width(), thumb.height()) == THUMB
    assert thumb.width() / thumb.height() == pytest.approx(crop.width() / crop.height(), rel=0.05)
    assert "frame 20" in items[1].text()
    assert f"frame 20 of {clip}" in items[1].toolTip()
    assert not view.note.isVisible()  # a frame's crop is not a gone original
    requested = []
    view.imageRequested.connect(requested.append)
    with qtbot.waitSignal(view.failed) as failed:
        view.list.itemActivated.emit(items[1])  # a double-click
    assert f"frame 20 of {clip}" in failed.args[0] and "open the video" in failed.args[0]
    assert requested == []


# -- in the window ----------------------------------------------------------------------------------


@pytest.fixture
def window(make_window):
    return make_window(MODEL)


def click_tile(qtbot, mosaic_view, channel: int) -> None:
    """A real left click on `channel`'s tile of the mosaic."""
    rect = mosaic_view.tile_rect(channel)
    scene = mosaic_view.item.mapToScene(rect.center())
    pos = mosaic_view.mapFromScene(scene)
    qtbot.mouseClick(mosaic_view.viewport(), Qt.MouseButton.LeftButton, pos=pos)


def test_open_atlas_click_a_channel_and_double_click_an_image_to_run_it(
    window, qtbot, atlas_dir, monkeypatch
):
    from PySide6.QtWidgets import QFileDialog

    file_menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&File")
    texts = [a.text() for a in file_menu.actions()]
    assert texts.index("Open &atlas…") == texts.index("Open &model…") + 1
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", lambda *a: str(atlas_dir))
    window.atlas.open_action.trigger()
    dock = window.atlas.view
    assert dock.atlas is not None and dock.atlas.folder == atlas_dir
    assert window.settings.value("atlas_dir", "") == str(atlas_dir)
    assert "build_model, 7 images" in dock.header.text() and dock.note.isHidden()

    # The tree: each atlas layer's dead channels, as a badge and in the Health tooltip.
    model = window.tree.model
    health = model.index_of("features.3", COL_HEALTH)
    assert model.data(health, Qt.ItemDataRole.DecorationRole) is not None
    assert "Dead in the atlas: 2/8 channels" in model.data(health, Qt.ItemDataRole.ToolTipRole)
    assert "Dead in the atlas: 0/6" in model.data(model.index_of("features.1", COL_HEALTH),
                                                  Qt.ItemDataRole.ToolTipRole)
    assert model.data(model.index_of("head", COL_HEALTH), Qt.ItemDataRole.DecorationRole) is None

    # An image, then the module picked in the tree and a channel clicked in its mosaic.
    draw(atlas_dir.parent / "first.png", 9)
    window.images.add_paths([atlas_dir.parent / "first.png"])
    wait_run(qtbot, window)
    assert window.tree.select_module("features.3")
    assert dock.layer == "features.3" and dock.channel is None
    activation = window.views["activation"]
    qtbot.waitUntil(lambda: activation.current_frame() is not None
                    and activation.current_frame().module == "features.3"
                    and activation.panel.mosaic_view.tile_rect(4) is not None, timeout=TIMEOUT)
    click_tile(qtbot, activation.panel.mosaic_view, 4)
    assert activation.panel.zoomed == 4  # the mosaic's own zoom still happens
    assert (dock.layer, dock.channel) == ("features.3", 4)
    wait_thumbs(qtbot, dock)
    items = dock.list.items()
    top = dock.atlas.layers["features.3"].top[4]
    assert len(items) == TOP == len(top)
    values = [item.data(EntryRole).value for item in items]
    assert values == sorted(values, reverse=True)
    assert [item.data(EntryRole).box for item in items] == [e.box for e in top]
    assert all(item.data(SourceRole) == IMAGE for item in items)
    assert not items[0].icon().isNull()
    assert "channel 4" in dock.header.text()

    # Double-click the second image: listed in the image pane, current, and run.
    item = items[1]
    path = Path(item.data(EntryRole).path)
    before = window.control.current_run
    assert dock.list.isVisible()  # the click raised the dock (a tab behind Predictions)
    rect = dock.list.visualItemRect(item)
    # What a double-click sends: a click, then the second press as a double-click.
    qtbot.mouseClick(dock.list.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    qtbot.mouseDClick(dock.list.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    qtbot.waitUntil(lambda: window.images.current() is not None
                    and window.images.current().path == path, timeout=TIMEOUT)
    wait_run(qtbot, window)
    assert window.control.current_run != before
    assert window.control.last_request.image == str(path)

    # Again on the image shown: it runs again.
    before = window.control.current_run
    dock.imageRequested.emit(str(path))
    wait_run(qtbot, window)
    assert window.control.current_run != before and window.images.list.count() == 2


def test_a_broken_atlas_is_a_message_and_the_dock_keeps_working(
    window, qtbot, atlas_dir, tmp_path
):
    atlas = window.atlas
    assert atlas.open(atlas_dir)
    text = (atlas_dir / "atlas.json").read_text()
    (tmp_path / "atlas.json").write_text(text[: len(text) // 2])  # cut off mid-write
    errors = window.reporter.count
    assert not atlas.open(tmp_path)
    assert window.reporter.count == errors + 1
    message = window.reporter.last_message
    assert "is not a complete atlas" in message and "\n" not in message
    # The atlas shown before is still there and answers clicks.
    assert atlas.view.atlas.folder == atlas_dir
    atlas.channel_clicked("features.1", 2)
    wait_thumbs(qtbot, atlas.view)
    assert len(atlas.view.list.items()) == TOP
    # A module the atlas does not have says so.
    atlas.channel_clicked("head", 0)
    assert "head</b> is not in this atlas" in atlas.view.hint.text()
    assert not atlas.view.list.items()


def test_an_atlas_of_another_model_is_shown_without_tree_badges(window, qtbot, atlas_dir,
                                                                tmp_path):
    def other(doc):
        doc["model"] = "resnet18"

    folder = copy_atlas(atlas_dir, tmp_path / "other", other)
    assert window.atlas.open(folder)
    view = window.atlas.view
    assert "made with resnet18; the loaded model is build_model" in view.note.text()
    assert window.tree.model.cells.atlas_dead == {}
    view.select("features.3", 1)
    wait_thumbs(qtbot, view)
    assert len(view.list.items()) == TOP
    # The right atlas again: the badges come back.
    assert window.atlas.open(atlas_dir)
    assert window.tree.model.cells.atlas_dead["features.3"] == (len(DEAD), 8)
    assert view.note.isHidden()


def test_the_mosaic_signal_is_the_one_the_dock_follows(window, atlas_dir):
    """Guards the wiring: the Activations mosaic's channelClicked reaches the dock."""
    window.atlas.open(atlas_dir)
    window.tree.select_module("features.1")
    window.views["activation"].panel.mosaic_view.channelClicked.emit(3)
    assert (window.atlas.view.layer, window.atlas.view.channel) == ("features.1", 3)

