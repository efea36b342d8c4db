"""Headless analysis of many images: `network-inspector analyse` (see inspector/cli.py).

It drives the same Session as the desktop app: the model lives on the Session's worker
thread, each image is one run whose capture keeps the whole output and output gradient of
the chosen layers, and the CAMs come from core.cam. Per image it writes

    DIR/<name>/<name>.npz             input, logits, activation/<module>, gradient/<module>,
                                      cam/<method>, attr/<method> (the layout: core.run_arrays);
                                      segmentation models: mask, the class per pixel of the
                                      input image (-1 where the crop left it out)
    DIR/<name>/cam_<method>.png       the CAM over the whole original picture, with its
                                      colour bar and the class and probability explained;
                                      what the centre crop left out is hatched
    DIR/<name>/attr_<method>.png      the same for each input attribution
    DIR/<name>/activation_<module>.png  per-channel normalised mosaic, with its grey scale

and for the run DIR/summary.json and DIR/tensorboard/ (when tensorboard is installed).
An image that cannot be read or run is reported and skipped; the others are done.

Detection models (core.tasks): `--target det:K` explains the K-th detection by score, and
each image's summary entry lists "detections" (box x0 y0 x1 y1 in the input image's pixels,
label, index, score, by descending score); the NPZ's logits are the detections' scores.
Segmentation models: `--target seg:CLASS` (a name or an index).

A video named among the inputs (core.video: .mp4 .mkv .mov .avi .webm, with PyAV) stands for
its frames 0, N, 2N, ... (`every`): each is analysed as an image, its files named by frame
(`DIR/<video>_f000010/`), and its entry in summary.json has the video's path and "frame".

Edits (`--edit`, core.edit_spec) apply to every run, so everything written is the edited
run's: what the modules after an edit saw. With `compare`, each image is first run without
the edits (its outputs kept in the Session), then with them, compared with that run:
DIR/compare.json has per image and captured module the relative L2 distance and cosine
between the two, and the top predictions before and after.
"""

from __future__ import annotations

import json
import math
import re
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from inspector.core.edit_spec import format_edit
from inspector.core.frames import GRAD_OUTPUT, OUTPUT, ErrorFrame, PredictionFrame
from inspector.core.interventions import Intervention
from inspector.core.methods import (
    ATTRIBUTION_METHODS,
    CAM_METHODS,
    AttributionOptions,
    attribution_method,
    cam_method,
)
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
        edits: Sequence[Intervention] = (),
        compare: bool = False,
        warn: Callable[[str], None] = lambda m: print(m, file=sys.stderr),
        emit_script: Path | None = None,
        every: int = 1,
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
        self.edits = tuple(edits)  # checked against the model (and completed) in _load
        if compare and not self.edits:
            raise ValueError("--compare compares each image with and without the edits: "
                             "give at least one --edit")
        self.compare = compare
        self._baseline_capture = None  # the unedited run's capture (compare only)
        self.warn = warn
        self.emit_script = emit_script  # where to write the run as a script (--emit-script)
        self._names: set[str] = set()
        self.target: Any = None
        if every < 1:
            raise ValueError(f"--every must be 1 or more, not {every}")
        self.every = every  # of a video's frames, analyse 0, every, 2 * every, ...
        self._videos: dict[Path, Any] = {}  # path -> core.video.VideoReader, while running
        self._video_frames: dict[Path, Any] = {}  # path -> its frames still to analyse

    # -- the run ----------------------------------------------------------------------------------

    def run(self, inputs: list[str]) -> int:
        """Analyse every image named (files or folders); the exit code: 0, or 1 if any failed."""
        from tqdm import tqdm

        from inspector.core.images import ImageLoadError

        t0 = time.perf_counter()
        entries: list[dict[str, Any]] = []

        def missing(err: ImageLoadError) -> None:
            self.warn(f"skipped {err}")
            entries.append(_entry(err.path, error=str(err)))

        missed: list[ImageLoadError] = []
        try:
            paths = self._inputs(inputs, missed)
        except BaseException:
            self._close_videos()
            raise
        if not paths and not missed:
            self.warn(f"no image or video files found in {', '.join(inputs)}")
            return 1
        session = loaded = tb = None
        comparisons: list[dict[str, Any]] = []
        try:
            # The model and the options that need it (layers, target, edits) before any
            # image: options that cannot work are refused without touching the files.
            session, loaded, refused = self._load()
            if session is None:
                return refused
            self.out.mkdir(parents=True, exist_ok=True)
            for err in missed:
                missing(err)
            comparisons.extend(_compared(e.path, error=str(e)) for e in missed if self.compare)
            tb = self._tensorboard()
            bar = tqdm(paths, unit="img", desc="analysing", file=sys.stderr,
                       disable=not self.progress, dynamic_ncols=True)
            for step, (path, frame) in enumerate(bar):
                compared = _compared(path, frame=frame) if self.compare else None
                try:
                    entry = self._one(session, loaded, path, step, tb, compared, frame)
                except Exception as e:  # one image's failure must not lose the others
                    entry = _entry(path, error=f"{_where(path, frame)}: {type(e).__name__}: "
                                               f"{e}", frame=frame)
                if entry["error"]:
                    bar.write(f"skipped {entry['error']}", file=sys.stderr)
                entries.append(entry)
                if compared is not None:
                    compared["error"] = compared["error"] or entry["error"]
                    comparisons.append(compared)
            bar.close()
        finally:
            # Also after Ctrl+C: what was done so far is described and the log is complete.
            if loaded is not None:
                self._summary(loaded, entries)
                if self.compare:
                    self._write_json("compare.json", self._comparison(loaded, comparisons))
            if tb is not None:
                tb.close()
            if session is not None:
                session.close()
            self._close_videos()
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
            return None, None, 1
        if not loaded.pretrained:
            self.warn(f"warning: {loaded.description}: predictions and maps show an "
                      f"untrained network")
        for note in model_notes(loaded):  # what the window's status bar says too
            if not note.startswith("No pretrained weights"):  # said just above
                self.warn(f"note: {note}")
        tree = session.tree
        try:
            if loaded.task == "classification":
                self.target = resolve_target(self.target_text, loaded.categories)
            else:  # det:K, seg:CLASS (core.tasks)
                from inspector.core.tasks import parse_target

                self.target = parse_target(str(self.target_text), loaded.task,
                                           loaded.categories, loaded.model)
            if self.methods:
                self.cam_layer = self.cam_layer or session.default_cam_layer()
                if self.cam_layer is None:
                    raise ValueError(f"{loaded.name} has no layer a CAM can be computed from: "
                                     f"name one with --cam-layer, or --cam none")
            layers = self.layers or ([self.cam_layer] if self.cam_layer else [])
            unknown = [n for n in [*layers, self.cam_layer] if n and n not in tree.modules]
            if unknown:
                raise ValueError(_unknown(unknown, tree))
            self.edits = session.check_edits(self.edits)
        except ValueError as e:  # options that cannot work with this model: exit status 2
            self.warn(str(e))
            session.close()
            return None, None, 2
        self.layers = layers
        self.capture = CaptureSpec(
            modules={n: frozenset({OUTPUT, GRAD_OUTPUT}) for n in layers},
            full=frozenset(layers),
            stats=False,
        )
        # The unedited twin only needs the outputs compared: no frames' tensors, no backward.
        self._baseline_capture = CaptureSpec.for_modules(layers, (OUTPUT,), stats=False)
        if self.emit_script is not None and not self._write_script(loaded):
            session.close()
            return None, None, 2
        return session, loaded, 0

    def _write_script(self, loaded) -> bool:
        """--emit-script: the standalone script of these runs (core.script_export), before any
        image is read; False (said on stderr) when it cannot be written."""
        from inspector.core.run import RunRequest
        from inspector.core.script_export import ScriptExportError, script_for

        request = RunRequest(image=None, capture=self.capture, target=self.target,
                             interventions=self.edits, stretch=self.stretch)
        try:
            text = script_for(loaded, request)
            self.emit_script.write_text(text, encoding="utf-8")
        except ScriptExportError as e:
            self.warn(f"cannot write the run as a script: {e}")
            return False
        except OSError as e:
            self.warn(f"cannot write {self.emit_script}: {e.strerror or e}")
            return False
        return True

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

    def _one(self, session, loaded, path: Path, step: int, tb,
             compared: dict[str, Any] | None = None,
             frame: int | None = None) -> dict[str, Any]:
        from inspector.core.images import ImageLoadError, load_image

        entry = _entry(path, frame=frame)
        try:
            image = (load_image(path, stretch=self.stretch) if frame is None
                     else self._video_frame(path, frame))
            x = loaded.preprocess(image)
        except ImageLoadError as e:  # core.video.VideoLoadError too
            entry["error"] = str(e)
            return entry
        except Exception as e:  # an image Pillow reads but the preprocessing cannot use
            entry["error"] = f"{_where(path, frame)}: cannot preprocess ({type(e).__name__}: {e})"
            return entry
        label = path.name if frame is None else f"{path.name} frame {frame}"
        reference = None
        if compared is not None:
            # The same image without the edits first; the Session keeps its outputs.
            before = session.run(x, capture=self._baseline_capture, backward=False,
                                 topk=self.topk, label=label, keep_outputs=True)
            frames = session.channel.drain()
            if before.status != "ok":
                entry["error"] = (f"{_where(path, frame)} (without the edits): "
                                  f"{_failure(before, frames)}")
                return entry
            compared["top_before"] = _top(frames)
            reference = before.run_id
        # Every CAM in the run itself, Score-CAM's masked forwards too (the Session's path).
        wanted = tuple((m, self.cam_layer) for m in self.methods)
        outcome = session.run(
            x, capture=self.capture, target=self.target, cams=wanted, topk=self.topk,
            label=label, attributions=tuple(self.attributions),
            attribution_options=self.attribution_options, interventions=self.edits,
            compare_with=reference,
        )
        frames = session.channel.drain()
        if reference is not None:
            session.forget_outputs(reference)  # one image's twin is not needed by the next
        if outcome.status != "ok":
            entry["error"] = f"{_where(path, frame)}: {_failure(outcome, frames)}"
            return entry
        # A detection model that found nothing (and was asked for no detection) has none.
        cams = {m: outcome.cams[(m, layer)] for m, layer in wanted if (m, layer) in outcome.cams}
        entry["target"] = outcome.target
        if outcome.notes:
            entry["notes"] = list(outcome.notes)
        entry["top"] = _top(frames)
        if loaded.task == "detection":
            entry["detections"] = _detections(outcome, loaded.preprocess, image.size)
        if compared is not None:
            compared["top_after"] = entry["top"]
            compared["modules"] = _divergence(outcome)
            compared["notes"] = outcome.notes
        arrays = full_arrays(frames)
        arrays.update({("attr", m): a for m, a in outcome.attributions.items()})
        entry["files"] = self._write(loaded, path, image, x, arrays, cams, step, tb, outcome,
                                     frame)
        return entry

    def _write(self, loaded, path, image, x, arrays, cams, step, tb, outcome,
               frame: int | None = None) -> dict[str, str]:
        import torch

        from inspector.core.export import (
            as_channels,
            mosaic,
            mosaic_channels,
            overlay,
            save_npz,
            save_png,
        )
        from inspector.core.figures import figure_size, map_figure, mosaic_figure
        from inspector.core.saliency import display_map

        name = self._unique(path, frame)
        folder = self.out / name
        files: dict[str, str] = {}
        input_hw = tuple(x.shape[-2:])
        npz = npz_arrays(x, arrays, cams, outcome.logits)  # the layout the window saves too
        if outcome.mask is not None:
            from inspector.core.tasks.segmentation import to_original

            npz["mask"] = to_original(outcome.mask, loaded.preprocess, image.size)
        files["npz"] = self._rel(save_npz(folder / f"{name}.npz", npz))

        # The maps over the whole original picture (at most MAX_OVERLAY_SIDE, small ones
        # enlarged so that their legend is legible), what the centre crop left out hatched.
        pre = loaded.preprocess
        size = figure_size(image.size, MAX_OVERLAY_SIDE)
        shown = np.asarray(_picture_at(image, size))
        display = pre.to_display(x)
        seen = pre.to_original(np.ones(input_hw, np.float32), size)
        label = _class_caption(loaded, outcome)
        for method, cam in cams.items():
            caption = [*label, f"{CAM_METHODS[method].title} at {self.cam_layer}"]
            fig = map_figure(shown, pre.to_original(cam, size), seen, caption)
            files[f"cam/{method}"] = self._rel(
                save_png(folder / f"cam_{_safe(method)}.png", fig.image))
            if tb is not None:
                tb.image(f"cam/{method}", overlay(display, cam), step)
        for (kind, method), signed in arrays.items():
            if kind != "attr":
                continue
            shown_map = display_map(method, torch.from_numpy(signed)[None])[0]
            caption = [*label, f"{ATTRIBUTION_METHODS[method].title} (input attribution)"]
            fig = map_figure(shown, pre.to_original(shown_map, size), seen, caption)
            files[f"attr/{method}"] = self._rel(
                save_png(folder / f"attr_{_safe(method)}.png", fig.image))
        for (kind, module), array in arrays.items():
            if tb is not None:
                tb.histogram(f"{kind}/{module}", array, step)
            if kind != "activation":
                continue  # gradients: in the NPZ and TensorBoard only
            channels = as_channels(array, input_hw)
            if channels is None:
                continue
            grid = mosaic(channels)
            count, shown_count = channels.shape[0], mosaic_channels(tuple(channels.shape))
            which = (f"{count} channels" if shown_count == count
                     else f"the first {shown_count} of {count} channels")
            title = f"{module}: {which}, each from its min (black) to its max (white)"
            key = f"mosaic/{module}"
            files[key] = self._rel(save_png(folder / f"activation_{_safe(module)}.png",
                                            mosaic_figure(grid, title).image))
            if tb is not None:
                tb.image(f"activation/{module}", grid, step)
        if tb is not None:
            tb.image("input", display, step)
            tb.text("image", f"{step}: {_where(path, frame)}", step)
        return files

    # -- names and the summary --------------------------------------------------------------------

    def _unique(self, path: Path, frame: int | None = None) -> str:
        base = _safe(path.stem) or "image"
        if frame is not None:
            base = f"{base}_f{frame:06d}"  # sorts in frame order
        name, n = base, 2
        while name in self._names:
            name, n = f"{base}_{n}", n + 1
        self._names.add(name)
        return name

    # -- inputs: images, and videos as their frames --------------------------------------------------

    def _inputs(self, inputs, missed: list) -> list[tuple[Path, int | None]]:
        """(path, None) per image file (folders expanded, as images.expand_paths does), then
        (video, frame) per frame to analyse of each video named, in the order given. A video
        that cannot be opened (or PyAV missing) goes to `missed`, said once."""
        from inspector.core.images import expand_paths
        from inspector.core.video import VideoLoadError, VideoReader, is_video

        videos = [Path(p) for p in inputs if is_video(p) and Path(p).is_file()]
        listed = {str(v) for v in videos}
        images = expand_paths([p for p in inputs if str(Path(p)) not in listed],
                               on_missing=missed.append)
        items: list[tuple[Path, int | None]] = [(p, None) for p in images]
        for video in dict.fromkeys(videos):
            try:
                reader = VideoReader(video)
            except VideoLoadError as e:
                missed.append(e)
                continue
            self._videos[video] = reader
            items.extend((video, i) for i in range(0, reader.frame_count, self.every))
        return items

    def _video_frame(self, path: Path, frame: int):
        """Frame `frame` of a video opened by _inputs: the frames are asked for in order,
        so the video is decoded once, front to back."""
        from inspector.core.video import VideoLoadError

        frames = self._video_frames.get(path)
        if frames is None:
            frames = self._video_frames[path] = self._videos[path].frames(self.every)
        for got in frames:
            if got.index == frame:
                return got.image
            if got.index > frame:
                break
        raise VideoLoadError(path, f"frame {frame} could not be decoded")

    def _close_videos(self) -> None:
        self._video_frames.clear()
        for reader in self._videos.values():
            reader.close()
        self._videos.clear()

    def _rel(self, path: Path) -> str:
        return path.relative_to(self.out).as_posix()

    def _summary(self, loaded, entries: list[dict[str, Any]]) -> None:
        summary = {
            "model": loaded.name,
            "weights": loaded.source or None,
            "pretrained": loaded.pretrained,
            # The seed torch's generator had when the model was built (--seed): the same
            # seed gives the same random weights. None when every weight came from files.
            "seed": loaded.seed,
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
            # Applied to every image: the NPZs, maps and predictions are the edited runs'.
            "edits": self._edits(),
            "compare": "compare.json" if self.compare else None,
            "images": entries,
        }
        self._write_json("summary.json", summary)

    def _edits(self) -> list[dict[str, str]]:
        return [{"spec": format_edit(e), "description": e.describe()} for e in self.edits]

    def _comparison(self, loaded, images: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "model": loaded.name,
            "edits": self._edits(),
            "reference": "each image without the edits",
            "measures": {
                "rel_l2": "||after - before|| / ||before|| over the module's whole output "
                          "(its first call); null where before is all zero and after not",
                "cosine": "cosine similarity of the two outputs; null where one is all zero",
            },
            "layers": self.layers,
            "images": images,
        }

    def _write_json(self, name: str, value: Any) -> None:
        tmp = self.out / f"{name}.part"
        tmp.write_text(json.dumps(value, indent=2) + "\n")
        tmp.replace(self.out / name)


def _entry(path, error: str | None = None, frame: int | None = None) -> dict[str, Any]:
    entry = {"path": str(path), "top": [], "files": {}, "error": error}
    if frame is not None:
        entry["frame"] = frame  # a video's frame (its index, from 0)
    return entry


def _compared(path, error: str | None = None, frame: int | None = None) -> dict[str, Any]:
    """One image's entry in compare.json."""
    entry = {"path": str(path), "modules": {}, "top_before": [], "top_after": [], "notes": [],
             "error": error}
    if frame is not None:
        entry["frame"] = frame
    return entry


def _where(path, frame: int | None) -> str:
    """How messages name an input: the path, and a video's frame."""
    return str(path) if frame is None else f"{path} frame {frame}"


def _failure(outcome, frames) -> str:
    """Why a run failed, in one sentence: the error frame's names the module that failed;
    the bare exception does not."""
    errors = [f.message for f in frames if isinstance(f, ErrorFrame)]
    return errors[0] if errors else outcome.error or outcome.status


def _top(frames) -> list[dict[str, Any]]:
    for f in frames:
        if isinstance(f, PredictionFrame):
            return [{"index": p.index, "label": p.label, "prob": round(p.prob, 6)} for p in f.top]
    return []


def _divergence(outcome) -> dict[str, dict[str, float | None]]:
    """module -> {rel_l2, cosine}, in forward order; non-finite values as null (JSON has
    no infinity)."""
    d = outcome.divergence
    if d is None:
        return {}

    def finite(v: float) -> float | None:
        return float(v) if math.isfinite(v) else None

    return {m: {"rel_l2": finite(r), "cosine": finite(c)}
            for m, r, c in zip(d.modules, d.rel_l2.tolist(), d.cosine.tolist(), strict=True)}


def _picture_at(image, size: tuple[int, int]):
    """The original picture at a figure's size: each pixel repeated when it is enlarged by a
    whole factor (a 64-pixel image stays sharp), resampled when it is shrunk."""
    if size == image.size:
        return image
    enlarged = size[0] % image.size[0] == 0 and size[1] % image.size[1] == 0
    return image.resize(size, Image.Resampling.NEAREST if enlarged else Image.Resampling.BICUBIC)


def _detections(outcome, pre, size: tuple[int, int]) -> list[dict[str, Any]]:
    """The run's detections for summary.json: boxes in the input image's pixels."""
    from inspector.core.tasks.detection import to_original

    return [{"box": [round(v, 2) for v in to_original(d.box, pre, size)], "label": d.label,
             "index": d.class_index, "score": round(d.score, 6)} for d in outcome.detections]


def _class_caption(loaded, outcome) -> list[str]:
    """["circle 93.1%"]: the class the maps explain and the model's probability for it."""
    if outcome is None or outcome.target is None or outcome.logits is None:
        return []
    if loaded.task == "detection":
        d = outcome.detections[outcome.target]
        return [f"detection {outcome.target}: {d.label} {d.score:.1%}"]
    if loaded.task == "segmentation":
        return [f"{loaded.label(outcome.target)}, summed over its predicted pixels"]
    probs = outcome.logits.detach().float().reshape(-1).softmax(0)
    return [f"{loaded.label(outcome.target)} {float(probs[outcome.target]):.1%}"]


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
