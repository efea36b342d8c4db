"""Headless analysis of many images: `network-inspector analyse` (see inspector/cli.py).

It drives the same Session as the desktop app: the model lives on the Session's worker
thread, each image is one run whose capture keeps the whole output and output gradient of
the chosen layers, and the CAMs come from core.cam. Per image it writes

    DIR/<name>/<name>.npz             input, logits, activation/<module>, gradient/<module>,
                                      cam/<method>, attr/<method> (core.run_arrays says how)
    DIR/<name>/cam_<method>.png       the CAM over the original picture
    DIR/<name>/activation_<module>.png  per-channel normalised mosaic

and for the run DIR/summary.json and DIR/tensorboard/ (when tensorboard is installed).
An image that cannot be read or run is reported and skipped; the others are done.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from inspector.core.frames import GRAD_OUTPUT, OUTPUT, ErrorFrame, PredictionFrame
from inspector.core.methods import AttributionOptions, attribution_method, cam_method
from inspector.core.run_arrays import full_arrays, npz_arrays

MAX_OVERLAY_SIDE = 2048  # overlays of huge photos are written at most this large


class Analysis:
    def __init__(
        self,
        spec,
        out: Path,
        layers: list[str],
        methods: list[str],
        cam_layer: str | None = None,
        target: str | int | None = "top1",
        topk: int = 5,
        tensorboard: bool = True,
        progress: bool = True,
        stretch: bool = False,
        attributions: list[str] = (),
        attribution_options: AttributionOptions | None = None,
        warn: Callable[[str], None] = lambda m: print(m, file=sys.stderr),
    ) -> None:
        self.spec = spec
        self.out = Path(out)
        self.layers = list(dict.fromkeys(layers))
        self.capture = None  # what each run captures, once the model is loaded (see _load)
        self.methods = list(dict.fromkeys(cam_method(m) for m in methods))  # ValueError early
        self.attributions = list(dict.fromkeys(attribution_method(m) for m in attributions))
        self.attribution_options = attribution_options or AttributionOptions()
        self.cam_layer = cam_layer
        self.target_text = target
        self.topk = topk
        self.want_tensorboard = tensorboard
        self.progress = progress
        self.stretch = stretch  # high-depth images by their data's range (core.high_depth)
        self.warn = warn
        self._names: set[str] = set()
        self.target: Any = None

    # -- the run ----------------------------------------------------------------------------------

    def run(self, inputs: list[str]) -> int:
        """Analyse every image named (files or folders); the exit code: 0, or 1 if any failed."""
        from tqdm import tqdm

        from inspector.core.images import ImageLoadError, expand_paths

        t0 = time.perf_counter()
        entries: list[dict[str, Any]] = []

        def missing(err: ImageLoadError) -> None:
            self.warn(f"skipped {err}")
            entries.append(_entry(err.path, error=str(err)))

        paths = expand_paths(inputs, on_missing=missing)
        if not paths and not entries:
            self.warn(f"no image files found in {', '.join(inputs)}")
            return 1
        self.out.mkdir(parents=True, exist_ok=True)
        session = loaded = tb = None
        try:
            session, loaded = self._load()
            if session is None:
                return 1
            tb = self._tensorboard()
            bar = tqdm(paths, unit="img", desc="analysing", file=sys.stderr,
                       disable=not self.progress, dynamic_ncols=True)
            for step, path in enumerate(bar):
                try:
                    entry = self._one(session, loaded, path, step, tb)
                except Exception as e:  # one image's failure must not lose the others
                    entry = _entry(path, error=f"{path}: {type(e).__name__}: {e}")
                if entry["error"]:
                    bar.write(f"skipped {entry['error']}", file=sys.stderr)
                entries.append(entry)
            bar.close()
        finally:
            # Also after Ctrl+C: what was done so far is described and the log is complete.
            if loaded is not None:
                self._summary(loaded, entries)
            if tb is not None:
                tb.close()
            if session is not None:
                session.close()
        failed = sum(1 for e in entries if e["error"])
        elapsed = time.perf_counter() - t0
        print(
            f"{len(entries) - failed} of {len(entries)} images analysed, {failed} failed, "
            f"in {elapsed:.1f} s; results in {self.out}"
        )
        return 1 if failed else 0

    def _load(self):
        from inspector.core.cam import resolve_target
        from inspector.core.hooks import CaptureSpec
        from inspector.core.session import Session, model_notes

        session = Session()
        try:
            loaded = session.load_model(self.spec).result()
        except Exception as e:  # every loader failure is reported in words, not a traceback
            self.warn(f"could not load {self.spec.what()}: {e}")
            session.close()
            return None, None
        if not loaded.pretrained:
            self.warn(f"warning: {loaded.description}: predictions and maps show an "
                      f"untrained network")
        for note in model_notes(loaded):  # what the window's status bar says too
            if not note.startswith("No pretrained weights"):  # said just above
                self.warn(f"note: {note}")
        tree = session.tree
        try:
            self.target = resolve_target(self.target_text, loaded.categories)
            if self.methods:
                self.cam_layer = self.cam_layer or session.default_cam_layer()
                if self.cam_layer is None:
                    raise ValueError(f"{loaded.name} has no layer a CAM can be computed from: "
                                     f"name one with --cam-layer, or --cam none")
            layers = self.layers or ([self.cam_layer] if self.cam_layer else [])
            unknown = [n for n in [*layers, self.cam_layer] if n and n not in tree.modules]
            if unknown:
                raise ValueError(_unknown(unknown, tree))
        except ValueError as e:
            self.warn(str(e))
            session.close()
            return None, None
        self.layers = layers
        self.capture = CaptureSpec(
            modules={n: frozenset({OUTPUT, GRAD_OUTPUT}) for n in layers},
            full=frozenset(layers),
            stats=False,
        )
        return session, loaded

    def _tensorboard(self):
        if not self.want_tensorboard:
            return None
        from inspector.core.export import TensorBoardLog, TensorBoardMissing

        try:
            return TensorBoardLog(self.out / "tensorboard")
        except TensorBoardMissing as e:
            self.warn(f"no TensorBoard log: {e}")
            return None

    # -- one image --------------------------------------------------------------------------------

    def _one(self, session, loaded, path: Path, step: int, tb) -> dict[str, Any]:
        from inspector.core.images import ImageLoadError, load_image

        entry = _entry(path)
        try:
            image = load_image(path, stretch=self.stretch)
            x = loaded.preprocess(image)
        except ImageLoadError as e:
            entry["error"] = str(e)
            return entry
        except Exception as e:  # an image Pillow reads but the preprocessing cannot use
            entry["error"] = f"{path}: cannot preprocess ({type(e).__name__}: {e})"
            return entry
        # Every CAM in the run itself, Score-CAM's masked forwards too (the Session's path).
        wanted = tuple((m, self.cam_layer) for m in self.methods)
        outcome = session.run(
            x, capture=self.capture, target=self.target, cams=wanted, topk=self.topk,
            label=path.name, attributions=tuple(self.attributions),
            attribution_options=self.attribution_options,
        )
        frames = session.channel.drain()
        if outcome.status != "ok":
            errors = [f.message for f in frames if isinstance(f, ErrorFrame)]
            # The error frame's sentence names the module that failed; the bare exception not.
            entry["error"] = f"{path}: {errors[0] if errors else outcome.error or outcome.status}"
            return entry
        cams = {m: outcome.cams[(m, layer)] for m, layer in wanted}
        entry["target"] = outcome.target
        for f in frames:
            if isinstance(f, PredictionFrame):
                entry["top"] = [
                    {"index": p.index, "label": p.label, "prob": round(p.prob, 6)} for p in f.top
                ]
        arrays = full_arrays(frames)
        arrays.update({("attr", m): a for m, a in outcome.attributions.items()})
        entry["files"] = self._write(loaded, path, image, x, arrays, cams, step, tb,
                                     outcome.logits)
        return entry

    def _write(self, loaded, path, image, x, arrays, cams, step, tb, logits) -> dict[str, str]:
        from inspector.core.export import (
            as_channels,
            fit_size,
            mosaic,
            overlay,
            save_npz,
            save_png,
        )

        name = self._unique(path)
        folder = self.out / name
        files: dict[str, str] = {}
        input_hw = tuple(x.shape[-2:])
        npz = npz_arrays(x, arrays, cams, logits)  # the layout the window saves too
        files["npz"] = self._rel(save_npz(folder / f"{name}.npz", npz))

        size = fit_size(image.size, MAX_OVERLAY_SIDE)
        shown = np.asarray(image if size == image.size else image.resize(size))
        display = loaded.preprocess.to_display(x)
        seen = loaded.preprocess.to_original(np.ones(input_hw, np.float32), size)
        for method, cam in cams.items():
            over = overlay(shown, loaded.preprocess.to_original(cam, size), coverage=seen)
            files[f"cam/{method}"] = self._rel(save_png(folder / f"cam_{_safe(method)}.png", over))
            if tb is not None:
                tb.image(f"cam/{method}", overlay(display, cam), step)
        for (kind, module), array in arrays.items():
            if tb is not None:
                tb.histogram(f"{kind}/{module}", array, step)
            if kind != "activation":
                continue  # gradients and attributions: in the NPZ and TensorBoard only
            channels = as_channels(array, input_hw)
            if channels is None:
                continue
            grid = mosaic(channels)
            key = f"mosaic/{module}"
            files[key] = self._rel(save_png(folder / f"activation_{_safe(module)}.png", grid))
            if tb is not None:
                tb.image(f"activation/{module}", grid, step)
        if tb is not None:
            tb.image("input", display, step)
            tb.text("image", f"{step}: {path}", step)
        return files

    # -- names and the summary --------------------------------------------------------------------

    def _unique(self, path: Path) -> str:
        base = _safe(path.stem) or "image"
        name, n = base, 2
        while name in self._names:
            name, n = f"{base}_{n}", n + 1
        self._names.add(name)
        return name

    def _rel(self, path: Path) -> str:
        return path.relative_to(self.out).as_posix()

    def _summary(self, loaded, entries: list[dict[str, Any]]) -> None:
        summary = {
            "model": loaded.name,
            "weights": loaded.source or None,
            "pretrained": loaded.pretrained,
            "device": str(loaded.device),
            "cam_layer": self.cam_layer,
            "cam_methods": self.methods,
            # What attr/<method> in each NPZ holds, and with which settings.
            "attributions": None if not self.attributions else {
                "methods": self.attributions,
                "target": "the class the CAMs explain (see 'target' per image)",
                "values": "signed, per input channel, at the model input's resolution, not "
                          "scaled; saliency is |d score / d input|",
                "ig_baseline": "zeros (the all-zero model input, after normalisation)",
                **self.attribution_options.as_dict(),
            },
            "layers": self.layers,
            "target": self.target_text,
            # How 16-bit, 32-bit and float images became the input: their type's range
            # (false), or their own min..max stretched to the full range (true).
            "stretch": self.stretch,
            "images": entries,
        }
        tmp = self.out / "summary.json.part"
        tmp.write_text(json.dumps(summary, indent=2) + "\n")
        tmp.replace(self.out / "summary.json")


def _entry(path, error: str | None = None) -> dict[str, Any]:
    return {"path": str(path), "top": [], "files": {}, "error": error}


def _safe(text: str) -> str:
    """A file-name-safe version of a module or method name ("layer4.1" stays readable)."""
    return re.sub(r"[^A-Za-z0-9._+-]+", "_", text).strip("_")


def _unknown(names: list[str], tree) -> str:
    import difflib

    parts = []
    for name in names:
        close = difflib.get_close_matches(name, list(tree.modules), n=3)
        parts.append(f"'{name}'" + (f" (did you mean {', '.join(close)}?)" if close else ""))
    return f"no module named {', '.join(parts)} in this model; see `network-inspector tree`"
