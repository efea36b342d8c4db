"""The bundled demo model: a small CNN trained on drawn shapes, with sample images.

Importing this package is cheap (torch is imported only when the model is loaded), so the
app can list the demo before torch is ready. Nothing here touches the network.

Where the files are: ``demo/`` in the resources folder that ``inspector.resources`` finds
(``$INSPECTOR_RESOURCES`` when set, a PyInstaller bundle, the source tree, an install).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

# Set before torch is first imported (see inspector/core/__init__.py): idle
# OpenMP threads that spin for a core collapse throughput on a busy machine.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from inspector.resources import resources_dir

if TYPE_CHECKING:
    from torch import nn

WEIGHTS_NAME = "shapes_cnn.safetensors"
CONFIG_NAME = "shapes_cnn.json"


DEMO_DIR = resources_dir() / "demo"


class DemoModelError(RuntimeError):
    """The demo model's files are missing or do not match the code."""


def demo_config(demo_dir: Path | None = None) -> dict[str, Any]:
    """The shipped JSON: name, classes, preprocess, arch, how it was trained."""
    path = Path(demo_dir or DEMO_DIR) / CONFIG_NAME
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise DemoModelError(
            f"demo model: {path} not found; set INSPECTOR_RESOURCES to the folder that "
            "holds demo/, or run `network-inspector train-demo --out DIR`"
        ) from None
    except (OSError, ValueError) as e:
        raise DemoModelError(f"demo model: cannot read {path}: {e}") from e


def load_demo_model(device="cpu", demo_dir: Path | None = None) -> tuple[nn.Module, dict[str, Any]]:
    """The trained demo CNN in eval mode on ``device``, and its JSON config (plus
    ``weights_path``, the file the weights came from)."""
    from safetensors.torch import load_file

    from inspector.demo.model import build_model

    folder = Path(demo_dir or DEMO_DIR)
    config = demo_config(folder)
    path = folder / WEIGHTS_NAME
    try:
        state = load_file(str(path), device="cpu")
    except FileNotFoundError:
        raise DemoModelError(f"demo model: {path} not found") from None
    except Exception as e:  # safetensors raises its own error types for a damaged file
        raise DemoModelError(f"demo model: cannot read {path}: {e}") from e
    model = build_model(len(config["classes"]), config["arch"]["widths"])
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as e:
        raise DemoModelError(f"demo model: {path} does not fit the demo architecture: {e}") from e
    config["weights_path"] = str(path)
    return model.to(device).eval(), config


def sample_images(demo_dir: Path | None = None) -> list[Path]:
    """The shipped sample PNGs, sorted by name."""
    return sorted((Path(demo_dir or DEMO_DIR) / "samples").glob("*.png"))
