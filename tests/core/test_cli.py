"""The `network-inspector` command: analyse, models, tree, and dispatch to the GUI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from task_models import small_cnn_factory

from inspector import cli

ROOT = Path(__file__).resolve().parents[2]

FACTORY = small_cnn_factory(inplace=True)


@pytest.fixture
def images(tmp_path: Path) -> Path:
    """A folder with two readable images (one in a sub-folder) and a corrupt one."""
    folder = tmp_path / "images"
    (folder / "sub").mkdir(parents=True)
    rng = np.random.default_rng(0)
    Image.fromarray(rng.integers(0, 255, (60, 80, 3), dtype=np.uint8)).save(folder / "a.png")
    Image.fromarray(rng.integers(0, 255, (90, 50, 3), dtype=np.uint8)).save(folder / "sub/b.jpg")
    (folder / "broken.png").write_text("this is not a picture")
    return folder


@pytest.fixture
def factory(tmp_path: Path) -> str:
    path = tmp_path / "tiny_model.py"
    path.write_text(FACTORY)
    return f"{path}:build"


def _summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


@pytest.mark.slow
def test_analyse_writes_the_documented_files(images: Path, tmp_path: Path, capsys):
    pytest.importorskip("tensorboard", reason="tensorboard is an optional extra (in dev)")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from inspector.batch.figures import figure_size

    out = tmp_path / "out"
    rc = cli.main([
        "analyse", "--model", "resnet18", "--device", "cpu", "--layers", "conv1,layer4",
        "--cam", "gradcam,layercam", "--out", str(out), str(images),
    ])
    captured = capsys.readouterr()
    assert rc == 1  # one image failed
    assert "broken.png" in captured.err and "not an image" in captured.err
    assert "RANDOM weights" in captured.err
    assert "2 of 3 images analysed, 1 failed" in captured.out.strip().splitlines()[-1]

    summary = _summary(out)
    assert (summary["model"], summary["weights"], summary["device"]) == ("resnet18", None, "cpu")
    by_name = {Path(e["path"]).name: e for e in summary["images"]}
    assert set(by_name) == {"a.png", "b.jpg", "broken.png"}
    broken = by_name["broken.png"]
    assert "not an image" in broken["error"] and broken["files"] == {} and broken["top"] == []
    for name, size, k in (("a.png", (80, 60), 5), ("b.jpg", (50, 90), 6)):
        entry = by_name[name]
        assert entry["error"] is None
        assert len(entry["top"]) == 5
        assert set(entry["top"][0]) == {"index", "label", "prob"}
        assert entry["top"][0]["prob"] >= entry["top"][1]["prob"]
        assert isinstance(entry["top"][0]["label"], str) and entry["top"][0]["label"]
        files = entry["files"]
        assert {"npz", "cam/gradcam", "cam/layercam", "mosaic/conv1", "mosaic/layer4"} <= set(files)
        with np.load(out / files["npz"]) as npz:
            assert npz["input"].shape == (1, 3, 224, 224)
            assert npz["activation/conv1"].shape == npz["gradient/conv1"].shape == (1, 64, 112, 112)
            assert npz["activation/layer4"].shape == npz["gradient/layer4"].shape == (1, 512, 7, 7)
            assert np.abs(npz["gradient/conv1"]).max() > 0
            for method in ("gradcam", "layercam"):
                cam = npz[f"cam/{method}"]
                assert cam.shape == (224, 224) and cam.dtype == np.float32
                assert cam.min() >= 0 and cam.max() == pytest.approx(1.0)
        with Image.open(out / files["cam/gradcam"]) as overlay:
            # Over the whole original picture, enlarged 5 (6) times to fit a legible legend.
            assert overlay.size == figure_size(size, 2048) == (size[0] * k, size[1] * k)
        with Image.open(out / files["mosaic/conv1"]) as mosaic:
            grid = 8 * 113 + 1  # make_grid: 8 x 8, padding 1
            assert mosaic.size[0] > grid and mosaic.size[1] > grid  # a title and a grey scale

    acc = EventAccumulator(str(out / "tensorboard"), size_guidance={"images": 0, "histograms": 0})
    acc.Reload()
    tags = acc.Tags()
    assert {"input", "cam/gradcam", "cam/layercam", "activation/conv1"} <= set(tags["images"])
    assert {"activation/conv1", "gradient/conv1", "activation/layer4", "gradient/layer4"} <= set(
        tags["histograms"]
    )
    assert len(acc.Images("cam/gradcam")) == 2


def test_analyse_without_tensorboard_says_how_to_install(images, factory, tmp_path, capsys,
                                                         monkeypatch):
    from inspector.core.export import files as export

    def missing(log_dir):
        raise export.TensorBoardMissing()

    monkeypatch.setattr(export, "TensorBoardLog", missing)
    out = tmp_path / "out"
    rc = cli.main(["analyse", "--model", factory, "--target", "square", "--quiet",
                   "--cam", "gradcam,scorecam,eigencam",
                   "--out", str(out), str(images / "a.png"), str(images / "sub")])
    err = capsys.readouterr().err
    assert rc == 0
    assert "pip install" in err and "tensorboard" in err
    assert not (out / "tensorboard").exists()
    entries = _summary(out)["images"]
    assert [e["target"] for e in entries] == [1, 1]  # "square" is class 1
    assert _summary(out)["cam_layer"] == "3"  # the last spatial module of the factory model
    with np.load(out / entries[0]["files"]["npz"]) as npz:
        assert {"cam/gradcam", "cam/scorecam", "cam/eigencam", "activation/3"} <= set(npz.files)
        assert npz["cam/scorecam"].shape == (32, 32)


def test_analyse_reports_bad_options(images, factory, tmp_path, capsys):
    out = tmp_path / "out"
    assert cli.main(["analyse", "--model", factory, "--layers", "nope", "--quiet",
                     "--out", str(out), str(images)]) != 0
    assert "no module named 'nope'" in capsys.readouterr().err
    assert cli.main(["analyse", "--model", factory, "--cam", "magic", "--out", str(out),
                     str(images)]) == 2
    assert "unknown CAM method 'magic'" in capsys.readouterr().err
    assert cli.main(["analyse", "--model", factory, "--target", "triangle", "--quiet",
                     "--out", str(out), str(images)]) != 0
    assert "no class named 'triangle'" in capsys.readouterr().err
    assert cli.main(["analyse", "--model", "no_such_model", "--quiet", "--out", str(out),
                     str(images)]) != 0
    assert "unknown model 'no_such_model'" in capsys.readouterr().err
    rc = cli.main(["analyse", "--model", factory, "--quiet", "--out", str(out),
                   str(tmp_path / "missing.png"), str(images / "a.png")])
    assert rc == 1
    assert "missing.png" in capsys.readouterr().err
    assert [e["error"] is None for e in _summary(out)["images"]] == [False, True]


ATTRIBUTIONS = ["saliency", "gxi", "smoothgrad", "ig"]


def test_analyse_writes_input_attributions(images, factory, tmp_path, capsys):
    import runpy

    def analyse(out, seed):
        return cli.main(["analyse", "--model", factory, "--quiet", "--no-tensorboard",
                         "--cam", "none", "--attr", ",".join(ATTRIBUTIONS), "--ig-steps", "16",
                         "--smoothgrad-samples", "4", "--seed", str(seed), "--out", str(out),
                         str(images / "a.png")])

    assert analyse(tmp_path / "one", seed=3) == 0
    summary = _summary(tmp_path / "one")
    settings = summary["attributions"]
    assert settings["methods"] == ATTRIBUTIONS
    assert (settings["ig_steps"], settings["smoothgrad_samples"], settings["seed"]) == (16, 4, 3)
    assert settings["smoothgrad_sigma"] == 0.15 and "zeros" in settings["ig_baseline"]
    entry = summary["images"][0]
    with np.load(tmp_path / "one" / entry["files"]["npz"]) as npz:
        arrays = {m: npz[f"attr/{m}"] for m in ATTRIBUTIONS}
        x = torch.from_numpy(npz["input"])
    for a in arrays.values():
        assert a.shape == (3, 32, 32) and a.dtype == np.float32 and np.abs(a).max() > 0
    # saliency and gxi against autograd on the same model, input and class
    model = runpy.run_path(factory.rsplit(":", 1)[0])["build"]().eval()
    xin = x.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(model(xin)[0, entry["target"]], xin)
    np.testing.assert_allclose(arrays["saliency"], grad.abs()[0].numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(arrays["gxi"], (grad * x)[0].numpy(), rtol=1e-5, atol=1e-7)

    assert analyse(tmp_path / "again", seed=3) == 0
    assert analyse(tmp_path / "other", seed=4) == 0
    smooth = {}
    for run in ("again", "other"):
        npz_path = tmp_path / run / _summary(tmp_path / run)["images"][0]["files"]["npz"]
        with np.load(npz_path) as npz:
            smooth[run] = npz["attr/smoothgrad"]
    np.testing.assert_array_equal(smooth["again"], arrays["smoothgrad"])
    assert not np.allclose(smooth["other"], arrays["smoothgrad"])


def test_analyse_reports_bad_attribution_options(images, factory, tmp_path, capsys):
    out = tmp_path / "out"
    assert cli.main(["analyse", "--model", factory, "--attr", "saliency,lime",
                     "--out", str(out), str(images)]) == 2
    err = capsys.readouterr().err
    assert "unknown attribution method 'lime'; known: saliency, gxi, smoothgrad, ig, " \
           "occlusion" in err
    assert "Traceback" not in err
    assert cli.main(["analyse", "--model", factory, "--attr", "ig", "--ig-steps", "0",
                     "--out", str(out), str(images)]) == 2
    assert "ig-steps must be at least 1" in capsys.readouterr().err
    assert cli.main(["analyse", "--model", factory, "--attr", "occlusion",
                     "--occlusion-stride", "0", "--out", str(out), str(images)]) == 2
    assert "occlusion-stride must be at least 1" in capsys.readouterr().err
    assert not out.exists()  # nothing was run


def test_models_lists_the_catalog(capsys):
    assert cli.main(["models"]) == 0
    out = capsys.readouterr().out
    assert "demo_shapes" in out and "resnet18" in out and "vit_b_16" in out


def test_tree_prints_shapes_and_hazards(factory, capsys):
    assert cli.main(["tree", "--model", factory]) == 0
    out = capsys.readouterr().out
    assert "1x8x32x32" in out and "1x8x16x16" in out and "1x3" in out
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("1 "))
    assert "ReLU" in line and "inplace" in line
    assert "flags:" in out and "modifies its input in place" in out


def test_no_command_opens_the_gui(monkeypatch):
    seen = []
    fake = types.ModuleType("inspector.app")
    fake.main = lambda argv=None: seen.append(argv) or 0
    monkeypatch.setitem(sys.modules, "inspector.app", fake)
    assert cli.main(["photo.jpg", "--model", "resnet18"]) == 0
    assert cli.main([]) == 0
    assert seen == [["photo.jpg", "--model", "resnet18"], []]


def test_train_demo_is_dispatched(monkeypatch):
    import inspector.demo.train as train

    seen = []
    monkeypatch.setattr(train, "main", lambda argv=None: seen.append(argv) or 0)
    assert cli.main(["train-demo", "--out", "x", "--steps", "3"]) == 0
    assert seen == [["--out", "x", "--steps", "3"]]


@pytest.mark.slow
def test_headless_commands_never_import_qt(images, factory, tmp_path):
    script = textwrap.dedent(f"""
        import sys
        from inspector.cli import main
        assert main(["tree", "--model", {factory!r}]) == 0
        main(["analyse", "--model", {factory!r}, "--quiet", "--no-tensorboard",
              "--out", {str(tmp_path / "out")!r}, {str(images / "a.png")!r}])
        qt = [m for m in sys.modules if m.split(".")[0] in ("PySide6", "pyqtgraph")]
        assert not qt, qt
        assert "inspector.app" not in sys.modules and "inspector.ui" not in sys.modules
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr


def run_cli(*args: str) -> subprocess.CompletedProcess:
    """The command in a process of its own, on this checkout's code."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return subprocess.run([sys.executable, "-m", "inspector.cli", *args], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": path})


def test_a_bad_weights_file_is_one_sentence_on_stderr(images, tmp_path):
    notes = tmp_path / "notes.pt"
    notes.write_text("epoch 1: loss 0.31\nepoch 2: loss 0.22\n")
    out = tmp_path / "out"
    done = run_cli("analyse", "--model", "demo_shapes", "--weights", str(notes), "--quiet",
                   "--no-tensorboard", "--out", str(out), str(images / "a.png"))
    assert done.returncode == 1
    assert ("network-inspector: could not load weights for demo_shapes: notes.pt is a text "
            "file, not a PyTorch checkpoint") in done.stderr
    assert "Traceback" not in done.stderr and "Traceback" not in done.stdout
    assert not (out / "summary.json").exists()


class Whole(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.head = torch.nn.Linear(3, 2)

    def forward(self, x):
        return self.head(x.mean((2, 3)))


def test_a_pickled_model_needs_trust_pickle(tmp_path, capsys):
    whole = tmp_path / "whole.pt"
    torch.save(Whole(), whole)
    assert cli.main(["tree", "--weights", str(whole)]) == 1
    err = capsys.readouterr().err
    assert "whole.pt holds pickled Python objects" in err and "--trust-pickle" in err
    assert cli.main(["tree", "--weights", str(whole), "--trust-pickle"]) == 0
    assert "Linear" in capsys.readouterr().out
    assert cli.main(["tree", "--trust-pickle"]) == 2
    assert "--trust-pickle needs --weights" in capsys.readouterr().err


def test_analyse_scales_16bit_images_by_their_type_unless_told_to_stretch(factory, tmp_path):
    from inspector.core.inputs.images import load_image
    from inspector.core.inputs.preprocess import Preprocess

    rng = np.random.default_rng(0)
    u8 = rng.integers(20, 120, (40, 40), dtype=np.uint8)  # a dim image: stretching shows
    Image.fromarray(u8).save(tmp_path / "eight.png")
    Image.fromarray(u8.astype(np.uint16) * 257).save(tmp_path / "sixteen.png")

    def inputs(out: Path, *options: str) -> dict[str, np.ndarray]:
        rc = cli.main(["analyse", "--model", factory, "--cam", "none", "--quiet",
                       "--no-tensorboard", *options, "--out", str(out),
                       str(tmp_path / "eight.png"), str(tmp_path / "sixteen.png")])
        assert rc == 0
        arrays = {}
        for entry in _summary(out)["images"]:
            with np.load(out / entry["files"]["npz"]) as npz:
                arrays[Path(entry["path"]).name] = npz["input"][0]
        return arrays

    level = (1 / 255) / 0.25  # one 8-bit level in the factory model's normalised units
    typed = inputs(tmp_path / "typed")
    assert np.abs(typed["sixteen.png"] - typed["eight.png"]).max() <= level / 2
    assert _summary(tmp_path / "typed")["stretch"] is False

    stretched = inputs(tmp_path / "stretched", "--stretch")
    assert _summary(tmp_path / "stretched")["stretch"] is True
    pre = Preprocess((32, 32), None, (0.5,) * 3, (0.25,) * 3)
    expected = pre(load_image(tmp_path / "sixteen.png", stretch=True)).numpy()
    assert np.abs(stretched["sixteen.png"] - expected).max() < 1e-6
    assert np.abs(stretched["sixteen.png"] - typed["sixteen.png"]).max() > 1.0


@pytest.mark.parametrize("command", ["analyse", "atlas", "tree"])
def test_a_commands_help_names_it_once(command, capsys):
    with pytest.raises(SystemExit) as done:
        cli.main([command, "--help"])
    assert done.value.code == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith(f"usage: network-inspector {command} ")


def test_download_fetches_into_the_hub_cache_or_says_why_not(tmp_path, monkeypatch, capsys):
    # No network here: torchvision's fetch is replaced by one that writes the file where
    # torch.hub puts it, and by one that fails as an offline machine does.
    import os
    import urllib.error

    import torch
    import torchvision

    monkeypatch.setattr(torch.hub, "get_dir", lambda: str(tmp_path / "hub"))
    weights_type = type(torchvision.models.get_model_weights("resnet18").DEFAULT)

    def offline(self, *args, **kwargs):
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(weights_type, "get_state_dict", offline)
    assert cli.main(["download", "resnet18"]) == 1
    err = capsys.readouterr().err
    assert "could not download the weights of resnet18" in err and "name resolution" in err
    assert "Traceback" not in err

    def fetched(self, *args, **kwargs):
        path = tmp_path / "hub" / "checkpoints" / os.path.basename(self.url)
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save({}, path)
        return {}

    monkeypatch.setattr(weights_type, "get_state_dict", fetched)
    assert cli.main(["download", "resnet18"]) == 0
    assert "pretrained weights saved to" in capsys.readouterr().out
    assert cli.main(["download", "resnet18"]) == 0  # once there, nothing is fetched again
    assert "already on this machine" in capsys.readouterr().out
    assert cli.main(["download", "no_such_net"]) == 2
    assert "unknown model 'no_such_net'" in capsys.readouterr().err
    assert cli.main(["download", "demo_shapes"]) == 2
    assert "ships its own weights" in capsys.readouterr().err


@pytest.mark.parametrize("body, says", [
    ("sys.exit(3)", "called sys.exit(3) instead of returning a model"),
    ("raise KeyboardInterrupt", "raised KeyboardInterrupt itself (not a Ctrl+C)"),
])
def test_a_factory_that_exits_or_interrupts_itself_is_one_sentence(body, says, images,
                                                                  tmp_path):
    net = tmp_path / "net.py"
    net.write_text(f"import sys\n\n\ndef build():\n    {body}\n")
    for command in ("tree", "analyse"):
        extra = ["--quiet", "--no-tensorboard", "--out", str(tmp_path / "out"),
                 str(images / "a.png")] if command == "analyse" else []
        done = run_cli(command, "--model", f"{net}:build", *extra)
        assert done.returncode == 1, (command, done.stderr)
        assert says in done.stderr and "net.py:build()" in done.stderr, done.stderr
        assert "interrupted" not in done.stderr and "Traceback" not in done.stderr


def test_tree_of_a_model_that_fails_on_its_input_is_one_sentence(tmp_path):
    """`tree` probed the model outside the loader's check, and a failing forward ended in a
    traceback."""
    net = tmp_path / "flat.py"
    net.write_text("import torch\n\n\ndef build():\n    return torch.nn.Linear(10, 2)\n")
    done = run_cli("tree", "--model", f"{net}:build")
    assert done.returncode == 1, done.stderr
    assert "fails on an input of 1 x 3 x 224 x 224" in done.stderr and "Traceback" not in done.stderr
