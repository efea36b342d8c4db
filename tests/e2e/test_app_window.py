"""The real app in a real X server: launch it as a user would, on the demo model with a sample
image, wait for the first run, take a screenshot, and check that the window is drawn.

The screenshot is kept at artifacts/e2e/app_demo.png (git-ignored) for a person to look at.
Skipped, with the reason, where Xvfb or ImageMagick's `import` is missing (Debian: apt-get
install xvfb imagemagick libxcb-icccm4 libxcb-keysyms1; Qt's error message names
libxcb-cursor0, which is not the one missing).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts" / "e2e"
PROBE = ROOT / "tests" / "app_probe.py"
SCREEN = (1600, 1000)
FIRST_RUN_TIMEOUT = 240.0  # s: a cold start imports torch and torchvision on a busy machine


def free_display() -> int:
    for n in range(90, 140):
        if not Path(f"/tmp/.X11-unix/X{n}").exists() and not Path(f"/tmp/.X{n}-lock").exists():
            return n
    pytest.skip("no free X display number between :90 and :139")


@pytest.fixture
def xvfb():
    if shutil.which("Xvfb") is None:
        pytest.skip("Xvfb is not installed (Debian: apt-get install xvfb)")
    if shutil.which("import") is None:
        pytest.skip("ImageMagick's `import` is not installed (Debian: apt-get install imagemagick)")
    n = free_display()
    proc = subprocess.Popen(
        ["Xvfb", f":{n}", "-screen", "0", f"{SCREEN[0]}x{SCREEN[1]}x24", "-nolisten", "tcp"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 15
    while not Path(f"/tmp/.X11-unix/X{n}").exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.skip(f"Xvfb did not start: {proc.stderr.read().decode(errors='replace')[-300:]}")
        time.sleep(0.1)
    yield f":{n}"
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def read_events(path: Path) -> dict[str, dict]:
    if not path.exists():
        return {}
    return {e["event"]: e for e in map(json.loads, path.read_text().splitlines()) if e}


# What a drawn pane looks like, measured on screenshots of this app: the tree's rows (text,
# icons, badges) and the activation mosaic have hundreds of colours; the same regions empty
# (before a model is loaded) had 100-150 (hint text, the loading overlay) and 1. The image
# pane shows the sample on a grey canvas: a spread of grey levels an empty canvas lacks.
MIN_COLOURS = {"tree": 200, "activation": 200, "images": 2}
MIN_STD = {"tree": 10.0, "activation": 20.0, "images": 15.0}


def region_is_drawn(image: np.ndarray, key: str, box: list[int]) -> tuple[bool, str]:
    """Whether a pane's screen region holds what the pane draws, not an empty state."""
    x, y, w, h = box
    crop = image[max(y, 0): y + h, max(x, 0): x + w]
    if crop.size == 0:
        return False, "empty region"
    colours = len(np.unique(crop.reshape(-1, crop.shape[-1]), axis=0))
    spread = float(crop.std())
    drawn = colours > MIN_COLOURS[key] and spread > MIN_STD[key]
    return drawn, f"{colours} colours, std {spread:.1f}"


def launch_and_shoot(display: str, tmp_path: Path, app_args: list[str], shot_name: str):
    """Start the app as `python -m inspector` does with `app_args`, wait for its first run,
    screenshot the screen into ARTIFACTS/shot_name; returns (events, screenshot, log text)."""
    timing = tmp_path / "timing.jsonl"
    log = tmp_path / "app.log"
    env = {
        **os.environ,
        "DISPLAY": display,
        "QT_QPA_PLATFORM": "xcb",
        "INSPECTOR_SETTINGS_FILE": str(tmp_path / "settings.ini"),
    }
    with open(log, "w") as out:
        # The app as `python -m inspector` runs it, watched from outside (tests/app_probe.py).
        app = subprocess.Popen([sys.executable, str(PROBE), "--events", str(timing), *app_args],
                               cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + FIRST_RUN_TIMEOUT
        while "first_run_finished" not in read_events(timing):
            if app.poll() is not None:
                pytest.fail(f"the app exited ({app.returncode}):\n{log.read_text()[-3000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"no finished run after {FIRST_RUN_TIMEOUT:.0f} s:\n"
                            f"{log.read_text()[-3000:]}")
            time.sleep(0.25)
        time.sleep(2.0)  # the views paint on the next turns of the event loop
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shot = ARTIFACTS / shot_name
        subprocess.run(["import", "-display", display, "-window", "root", str(shot)],
                       check=True, timeout=60)
    finally:
        if app.poll() is None:
            app.send_signal(signal.SIGTERM)  # the app closes its window and saves settings
            try:
                app.wait(20)
            except subprocess.TimeoutExpired:
                app.kill()
                app.wait()
    assert app.returncode == 0, log.read_text()[-3000:]
    image = np.asarray(Image.open(shot).convert("RGB"))
    assert image.shape[:2] == (SCREEN[1], SCREEN[0])
    assert float(image.std()) > 10.0, "the screenshot is blank"
    return read_events(timing), image, log.read_text()


def test_the_app_opens_on_the_demo_model_and_draws_its_panes(xvfb, tmp_path, demo_samples):
    events, image, log = launch_and_shoot(xvfb, tmp_path, [str(demo_samples[0])],
                                          "app_demo.png")
    regions = events["first_run_finished"]["regions"]
    for key in ("tree", "images", "activation"):
        assert key in regions, f"the {key} pane is not visible: {sorted(regions)}"
        drawn, why = region_is_drawn(image, key, regions[key])
        assert drawn, f"the {key} pane looks empty in app_demo.png: {why}"
    # The window was on screen before torch was imported (that takes seconds).
    assert events["window_shown"]["torch_imported"] is False
    assert events["window_shown"]["t"] < events["engine_ready"]["t"]
    assert "Traceback" not in log


def test_the_app_started_with_two_edits_shows_them_and_before_and_after(
    xvfb, tmp_path, demo_samples
):
    """Two edits given at start (`--edit`): the Edits dock lists them, the first run is the
    edited one, compared with the unedited run of the same image (before/after)."""
    edits = ["stage3.1:zero=0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15", "input:occlude=30,30,80,80"]
    args = [a for spec in edits for a in ("--edit", spec)]
    events, image, log = launch_and_shoot(xvfb, tmp_path, [*args, str(demo_samples[0])],
                                          "app_edits.png")
    finished = events["first_run_finished"]
    assert len(finished["edits"]) == 2, finished["edits"]
    assert finished["edited"] is True
    assert finished["reference_run"] is not None, "no unedited run to compare with"
    regions = finished["regions"]
    for key in ("tree", "images", "activation"):
        drawn, why = region_is_drawn(image, key, regions[key])
        assert drawn, f"the {key} pane looks empty in app_edits.png: {why}"
    for key in ("edits", "predictions"):
        assert key in regions, f"the {key} pane is not visible: {sorted(regions)}"
        x, y, w, h = regions[key]
        crop = image[y: y + h, x: x + w]
        assert len(np.unique(crop.reshape(-1, 3), axis=0)) > 20, f"the {key} pane is empty"
    assert "Traceback" not in log
