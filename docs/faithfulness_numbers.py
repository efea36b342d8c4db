"""The demo model's numbers in docs/faithfulness.md, made again: `python docs/faithfulness_numbers.py`.

1. Grad-CAM against two maps that mean nothing, a per-pixel random map (seed 0) and a
   centred Gaussian (sigma a quarter of the side), on the 12 sample images and on 24
   held-out renders (data set seed 7; the model trained on seed 0): mean deletion and
   insertion AUCs (RISE's protocol, 20 steps) and Average Drop, and per image how often
   Grad-CAM beats each.
2. Every method on the renders, whose main shape's box is known: deletion, insertion,
   the pointing game and its energy, through the Session as a script would.

Per method on the samples with ROAD and the sanity check too, see the analyse command in
docs/faithfulness.md (its metrics_summary). CPU, one intra-op thread.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import torch  # noqa: E402


def centred_gaussian(h: int, w: int) -> torch.Tensor:
    yy, xx = torch.meshgrid(torch.arange(h) + 0.5, torch.arange(w) + 0.5, indexing="ij")
    s = 0.25 * min(h, w)
    return torch.exp(-((yy - h / 2) ** 2 + (xx - w / 2) ** 2) / (2 * s * s))


def against_meaningless_maps(loaded, sets) -> None:
    from inspector.core.explain.cam.compute import compute_cams
    from inspector.core.explain.metrics.confidence import confidence_change
    from inspector.core.explain.metrics.curves import deletion_insertion
    from inspector.core.explain.metrics.forwards import Forwarder
    from inspector.core.explain.metrics.scores import class_probability

    print("| images | map | deletion AUC | insertion AUC | Average Drop | Grad-CAM better "
          "(deletion / insertion) |")
    print("|---|---|---|---|---|---|")
    for name, images in sets:
        xs = torch.stack([loaded.preprocess(im) for im in images])
        cams = compute_cams(loaded.model, xs, ["gradcam"], "stage3")
        h, w = xs.shape[-2:]
        g = torch.Generator().manual_seed(0)
        rows = {"Grad-CAM": [], "random": [], "Gaussian": []}
        for i in range(len(xs)):
            x = xs[i : i + 1]
            maps = torch.stack([torch.from_numpy(cams.cams["gradcam"][i]),
                                torch.rand(h, w, generator=g), centred_gaussian(h, w)])
            forwarder = Forwarder(class_probability(loaded.model, cams.targets[i]), x)
            curves = deletion_insertion(forwarder, x, maps)
            drops = confidence_change(forwarder, x, maps)
            for key, (d, ins), (drop, _) in zip(rows, curves, drops, strict=True):
                rows[key].append((d.auc, ins.auc, drop))
        ours = np.array(rows["Grad-CAM"])
        for key, values in rows.items():
            v = np.array(values)
            wins = ("" if key == "Grad-CAM" else
                    f"{int((ours[:, 0] < v[:, 0]).sum())} / {int((ours[:, 1] > v[:, 1]).sum())}"
                    f" of {len(v)}")
            print(f"| {name} | {key} | {v[:, 0].mean():.3f} | {v[:, 1].mean():.3f} | "
                  f"{v[:, 2].mean():.3f} | {wins} |")


def every_method_with_boxes(renders) -> None:
    from inspector.core.explain.catalog import ATTRIBUTION_METHODS, CAM_METHODS, METHODS
    from inspector.core.explain.metrics.names import MetricOptions
    from inspector.core.run.session import Session

    options = MetricOptions(metrics=("deletion", "insertion", "pointing"))
    session = Session()
    session.load_model("demo_shapes").result()
    values: dict[str, list] = {}
    for sample in renders:
        out = session.run(sample.image, cams=tuple((m, None) for m in CAM_METHODS),
                          attributions=tuple(ATTRIBUTION_METHODS), metrics=options,
                          metric_boxes=(sample.target.box,))
        session.channel.drain()
        for (method, _layer), s in out.metrics.items():
            values.setdefault(method, []).append(
                (s.deletion.auc, s.insertion.auc, float(s.pointing), s.energy_pointing))
    session.close()
    print(f"\n{len(renders)} renders of seed 7, the main shape's box:\n")
    print("| method | deletion AUC | insertion AUC | pointing | energy |")
    print("|---|---|---|---|---|")
    for method, v in values.items():
        m = np.array(v).mean(axis=0)
        print(f"| {METHODS[method].title} | {m[0]:.3f} | {m[1]:.3f} | {m[2]:.2f} | "
              f"{m[3]:.3f} |")


def main() -> int:
    torch.set_num_threads(1)
    from inspector import demo
    from inspector.core.inputs.images import load_image
    from inspector.core.models.base import ModelSpec
    from inspector.core.models.load import load_model
    from inspector.demo.shapes import render

    loaded = load_model(ModelSpec("demo_shapes", device="cpu"))
    samples = [load_image(f) for f in demo.sample_images()]
    renders = [render(7, i) for i in range(24)]
    against_meaningless_maps(loaded, [("12 samples", samples),
                                      ("24 renders", [r.image for r in renders])])
    every_method_with_boxes(renders)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
