"""Activation-mosaic updates per second: 64 channels of 64 x 64 -> mosaic -> ImageItem.

Run by hand (or by `make bench`): `python tests/benchmarks/bench_mosaic.py [--updates N]`.
Prints the median rate of several repetitions for each stage; asserts nothing.

Stages, each including the ones before it:
  fill      numpy only: per-channel normalisation into the reused mosaic buffer
  setImage  + ImageItem.setImage(autoLevels=False, levels=...) (lazy: marks a render needed)
  render    + ImageItem.render(): the float -> LUT -> QImage conversion a paint would do
  panel     TensorPanel.show_tensor + a full repaint of the visible widget (grab), end to end
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402


def rate(step, updates: int, repeats: int) -> tuple[float, float]:
    """(median updates/s, median ms per update) over `repeats` runs of `updates` steps."""
    rates = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for i in range(updates):
            step(i)
        rates.append(updates / (time.perf_counter() - t0))
    med = statistics.median(rates)
    return med, 1000.0 / med


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--channels", type=int, default=64)
    parser.add_argument("--size", type=int, default=64)
    args = parser.parse_args(argv)

    app = QApplication.instance() or QApplication([])
    import pyqtgraph as pg

    from inspector.ui.views.mosaic import PER_CHANNEL, Mosaic
    from inspector.ui.views.tensor_panel import TensorPanel

    rng = np.random.default_rng(0)
    # A few distinct frames, cycled, so no stage can cache a result.
    frames = [
        rng.normal(size=(args.channels, args.size, args.size)).astype(np.float32) for _ in range(4)
    ]
    mosaic = Mosaic()
    item = pg.ImageItem(axisOrder="row-major")
    item.setLookupTable(pg.colormap.get("viridis").getLookupTable(nPts=256))

    def fill(i: int) -> None:
        mosaic.fill(frames[i % 4], PER_CHANNEL)

    def set_image(i: int) -> None:
        image = mosaic.fill(frames[i % 4], PER_CHANNEL)
        item.setImage(image, autoLevels=False, levels=mosaic.levels)

    def render(i: int) -> None:
        set_image(i)
        item.render()

    panel = TensorPanel()
    panel.resize(800, 700)
    panel.show()
    app.processEvents()

    def panel_paint(i: int) -> None:
        panel.show_tensor(frames[i % 4])
        panel.grab()  # paints every item of the widget, as the screen would

    shape = f"{args.channels} x {args.size} x {args.size}"
    print(f"mosaic of {shape} float32, {args.updates} updates x {args.repeats} repeats, median:")
    for name, step in [("fill", fill), ("setImage", set_image), ("render", render),
                       ("panel", panel_paint)]:
        ups, ms = rate(step, args.updates, args.repeats)
        print(f"  {name:9s} {ups:8.0f} updates/s  {ms:7.3f} ms/update")
    panel.close()


if __name__ == "__main__":
    main()
