"""The README's pictures are what the window looks like now: docs/screenshots.py (`make
screenshots`) makes them again here, and each must match the one in docs/images.

Two makings of the same picture differ only in the status bar's "last run N ms" (about 0.01%
of the pixels); a changed layout, view or text differs in far more. When this fails after a
change to the window, run `make screenshots` and commit the new pictures.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "docs" / "screenshots.py"
NAMES = ("window.png", "edits.png")
MAX_CHANGED = 0.005  # of the pixels


def test_the_pictures_in_the_repository_are_the_ones_the_window_makes(tmp_path):
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen",
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH"))
                                         if p)}
    done = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    for name in NAMES:
        made = np.asarray(Image.open(tmp_path / name).convert("RGB"), dtype=np.int16)
        kept = np.asarray(Image.open(ROOT / "docs" / "images" / name).convert("RGB"),
                          dtype=np.int16)
        assert made.shape == kept.shape, f"{name}: {made.shape} now, {kept.shape} in docs/images"
        changed = float((np.abs(made - kept).max(axis=2) > 8).mean())
        assert changed < MAX_CHANGED, (
            f"{name}: {changed:.2%} of the pixels differ from docs/images/{name}: run "
            f"`make screenshots` and look at the new pictures")
