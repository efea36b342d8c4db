"""Write the demo's sample images: ``python -m inspector.demo.samples --out resources/demo/samples``.

Drawn by the same code as the training data, from a seed the model never trained on
(``SAMPLE_SEED``), one file per chosen (seed, index) so the set is reproducible. Names say
what is in them: ``star_01.png``, ``circle_with_square_02.png`` (the main shape first).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from inspector.demo.shapes import CLASSES, render

SAMPLE_SEED = 424242


def pick_samples(count: int = 12, with_distractor: int = 4) -> list[tuple[str, int, bool]]:
    """(file name, index, forced distractor) for ``count`` images covering every class."""
    chosen: list[tuple[str, int, bool]] = []
    used: dict[str, int] = {}
    want_plain = count - with_distractor
    # Plain images: walk the classes in order so all of them appear before any repeats.
    i = 0
    while len(chosen) < want_plain:
        s = render(SAMPLE_SEED, i, distractor=False)
        if s.target.label == len(chosen) % len(CLASSES):
            base = s.target.name
            used[base] = used.get(base, 0) + 1
            chosen.append((f"{base}_{used[base]:02d}.png", i, False))
        i += 1
    seen_main: set[int] = set()
    i = 0
    while len(chosen) < count:
        s = render(SAMPLE_SEED, i, distractor=True)
        # One image per main class, so the distractor images show different shapes too.
        if s.distractor is not None and s.target.label not in seen_main:
            seen_main.add(s.target.label)
            base = f"{s.target.name}_with_{s.distractor.name}"
            used[base] = used.get(base, 0) + 1
            chosen.append((f"{base}_{used[base]:02d}.png", i, True))
        i += 1
    return chosen


def write_samples(out_dir, count: int = 12, with_distractor: int = 4) -> list[Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, index, forced in pick_samples(count, with_distractor):
        path = out / name
        render(SAMPLE_SEED, index, distractor=forced).image.save(path, optimize=True)
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Write the demo model's sample images.")
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--count", type=int, default=12)
    p.add_argument("--with-distractor", type=int, default=4)
    args = p.parse_args(argv)
    for path in write_samples(args.out, args.count, args.with_distractor):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
