"""`network-inspector analyse`: every image through the model, its arrays and figures on disk.

It drives the same Session as the desktop app: the model lives on the Session's worker
thread, each image is one run whose capture keeps the whole output and output gradient of
the chosen layers, and the CAMs come from core.explain.cam. Per image it writes DIR/<name>/ (see
analyse.writers), and for the run DIR/summary.json, DIR/compare.json (with `compare`) and
DIR/tensorboard/ (when tensorboard is installed). An image that cannot be read or run is
reported and skipped; the others are done.

    options and the model checked (exit 2 before any image is read: unknown layer, ...)
    -> the inputs in fixed shards; per shard, each image's files, then shards/shard-NNNNN.json
       (its summary and compare entries: the shard is finished)
    -> summary.json (and compare.json) from the shards, in input order

`resume` continues a killed run: finished shards are read back, not redone, so the result
equals an uninterrupted run's. The TensorBoard log is the exception: a resumed run adds an
event file, and an image of the shard that was cut short may appear in both.

Detection models (core.tasks): `--target det:K` explains the K-th detection by score, and
each image's summary entry lists "detections" (box x0 y0 x1 y1 in the input image's pixels,
label, index, score, by descending score; Keypoint R-CNN's also "keypoints", [x, y, score]
each, in those pixels too); the NPZ's logits are the detections' scores.
Segmentation models: `--target seg:CLASS` (a name or an index).

A video named among the inputs (core.inputs.video: .mp4 .mkv .mov .avi .webm, with PyAV) stands for
its frames 0, N, 2N, ... (`every`): each is analysed as an image, its files named by frame
(`DIR/<video>_f000010/`), and its entry in summary.json has the video's path and "frame".

Edits (`--edit`, core.edits.spec) apply to every run, so everything written is the edited
run's: what the modules after an edit saw. With `compare`, each image is first run without
the edits (its outputs kept in the Session), then with them, compared with that run:
DIR/compare.json has per image and captured module the relative L2 distance and cosine
between the two, and the top predictions before and after.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from inspector.batch.analyse.image import ImageJob, compared_of, entry_of
from inspector.batch.analyse.metrics import check_metric_options, write_metrics_csv
from inspector.batch.analyse.shards import fix_seed, run_shards, shard_store
from inspector.batch.analyse.sweep import check_sweep_source
from inspector.batch.analyse.writers import (
    comparison_document,
    summary_document,
    write_json,
)
from inspector.batch.engine.command import ENGINES
from inspector.batch.inputs import Source, list_sources
from inspector.batch.metric_boxes import unmatched
from inspector.core.edits.interventions import Intervention
from inspector.core.explain.attention.options import AttentionOptions
from inspector.core.explain.catalog import AttributionOptions, attribution_method, cam_method
from inspector.core.records.kinds import GRAD_OUTPUT, OUTPUT

SHARD_SIZE = 16  # images per shard: a resumed run redoes at most this many


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
        patch_sweep: str | None = None,
        sweep_depth: int | None = None,
        warn: Callable[[str], None] = lambda m: print(m, file=sys.stderr),
        emit_script: Path | None = None,
        every: int = 1,
        resume: bool = False,
        shard_size: int = SHARD_SIZE,
        engine: str = "local",
        ray_address: str | None = None,
        workers: int | None = None,
        verbose: bool = False,
        attention: AttentionOptions | None = None,
        logit_lens: bool = False,
        dff: int = 0,
        dff_layer: str | None = None,
        metrics=None,
        boxes: dict | None = None,
    ) -> None:
        self.spec = spec
        self.dff, self.dff_layer = dff, dff_layer  # analyse/dff.py
        self.seed_given = spec.seed is not None  # --seed (else drawn, or the stored run's)
        self.out = Path(out)
        self.layers = list(dict.fromkeys(layers))
        self.capture = None  # what each run captures, once the model is loaded (see _load)
        self.methods = list(dict.fromkeys(cam_method(m) for m in methods))  # ValueError early
        self.attributions = list(dict.fromkeys(attribution_method(m) for m in attributions))
        self.attribution_options = attribution_options or AttributionOptions()
        # Attention rollout's options, --logit-lens (the lens's top-k: --topk), and, once
        # the model is loaded, the attention modules of --layers and LeGrad's first block
        # (batch.analyse.attention).
        self.attention = attention or AttentionOptions()
        self.logit_lens = logit_lens
        self.legrad_from: str | None = None
        self.cam_layer = cam_layer
        self.target_text = target
        self.topk = topk
        self.want_tensorboard = tensorboard
        self.progress = progress
        self.stretch = stretch  # high-depth images by their data's range (core.inputs.high_depth)
        self.edits = tuple(edits)  # checked against the model (and completed) in _load
        if compare and not self.edits:
            raise ValueError("--compare compares each image with and without the edits: "
                             "give at least one --edit")
        self.compare = compare
        # --patch-sweep: the source image, read now (a bad path is refused before the model
        # loads); --sweep-depth: the modules patched (None: the leaves)
        self.patch_sweep, self.sweep_depth = check_sweep_source(patch_sweep, sweep_depth)
        self.warn = warn
        self.emit_script = emit_script  # where to write the run as a script (--emit-script)
        self.target: Any = None
        if every < 1:
            raise ValueError(f"--every must be 1 or more, not {every}")
        self.every = every  # of a video's frames, analyse 0, every, 2 * every, ...
        _check_engine(shard_size, engine, ray_address, workers)
        self.resume = resume
        self.shard_size = shard_size
        self.engine, self.ray_address, self.workers = engine, ray_address, workers
        self.verbose = verbose  # Ray's own log lines on the terminal (else in DIR/ray.log)
        # core.explain.metrics.names.MetricOptions of every map, and --boxes (batch.metric_boxes)
        self.metrics, self.boxes = metrics, boxes
        check_metric_options(self)
        self.job: ImageJob | None = None  # once the model is loaded and the options checked

    # -- the run ----------------------------------------------------------------------------------

    def run(self, inputs: list[str]) -> int:
        """Analyse every image named (files or folders); the exit code: 0, or 1 if any failed."""
        t0 = time.perf_counter()
        if self.engine == "ray":
            from inspector.batch.engine.command import OptionError, require_ray

            try:
                require_ray()
            except OptionError as e:
                self.warn(str(e))
                return 2
        from inspector.batch.engine.out_dir import OutDirError, claim

        try:  # before any work: a folder that cannot be written, or another run's
            lock = claim(self.out, "analyse", warn=self.warn)
        except OutDirError as e:
            self.warn(str(e))
            return 2
        from inspector.batch.engine.ray_logs import ray_logs_to_file

        with lock, ray_logs_to_file(self.out, self.verbose or self.engine != "ray"):
            return self._run(inputs, t0)

    def _run(self, inputs: list[str], t0: float) -> int:
        from inspector.batch.engine.out_dir import remove_partial, write_failure
        from inspector.batch.engine.shards import JobMismatch
        from inspector.core.inputs.images import ImageLoadError

        missed: list[ImageLoadError] = []
        sources = list_sources(inputs, self.every, on_missing=missed.append)
        if not sources and not missed:
            self.warn(f"no image or video files found in {', '.join(inputs)}")
            return 1
        if self.boxes and len(unmatched(self.boxes, [s.path for s in sources])) == len(self.boxes):
            self.warn(f"--boxes names none of the images given (it names "
                      f"{', '.join(list(self.boxes)[:3])}{', ...' if len(self.boxes) > 3 else ''})")
            return 2
        fix_seed(self)
        session = loaded = tb = None
        started = False  # the shards are this run's: from here on summary.json is written
        entries: list[dict[str, Any]] = []
        comparisons: list[dict[str, Any]] = []
        finished: dict[int, dict] = {}  # shard -> its record: {"images": [...], "compared": [...]}
        partial: dict[str, list] = {"images": [], "compared": []}
        stopped = False
        unwritable = None  # the first failure to write into self.out: the run stops there
        try:
            # The model and the options that need it (layers, target, edits) before any
            # image: options that cannot work are refused without touching the files.
            session, loaded, refused = self._load()
            if session is None:
                return refused
            try:
                store, done = shard_store(self, loaded, sources)
            except JobMismatch as e:
                self.warn(str(e))
                return 2
            started = True
            for err in missed:
                self.warn(f"skipped {err}")
                entries.append(entry_of(Source(err.path), error=str(err)))
                if self.compare:
                    comparisons.append(compared_of(Source(err.path), error=str(err)))
            tb = self._tensorboard()
            run_shards(self, session, loaded, sources, store, done, tb, finished, partial)
        except Exception as e:
            unwritable = write_failure(e, self.out)
            if unwritable is None and (not started or self.engine != "ray"):
                raise
            if unwritable is None:
                # A lost cluster, an actor that cannot load the model: said in one sentence.
                self.warn(f"the run stopped: {type(e).__name__}: {e}; the finished shards "
                          f"are kept in {self.out / 'shards'}: run again with --resume to "
                          f"continue")
            stopped = True
        finally:
            # Also after Ctrl+C: what was done so far is described and the log is complete.
            for shard in sorted(finished):
                entries.extend(finished[shard]["images"])
                comparisons.extend(finished[shard]["compared"])
            entries.extend(partial["images"])
            comparisons.extend(partial["compared"])
            try:
                # Not after a failed write: the disk that refused it would refuse these too.
                failure = self._close_files(loaded, entries, comparisons, tb,
                                            write=started and unwritable is None)
                unwritable = unwritable or failure
            finally:
                if session is not None:
                    session.close()
        if unwritable is not None:
            self.warn(str(unwritable))
            remove_partial(self.out)
            return 1
        failed = sum(1 for e in entries if e["error"])
        elapsed = time.perf_counter() - t0
        print(
            f"{len(entries) - failed} of {len(entries)} images analysed, {failed} failed, "
            f"in {elapsed:.1f} s; results in {self.out}"
        )
        return 1 if failed or stopped else 0

    def _close_files(self, loaded, entries: list[dict], comparisons: list[dict], tb,
                     write: bool):
        """summary.json and compare.json (with `write`) and the TensorBoard log closed; the
        failure to write into DIR (an out_dir.OutDirError) when there is one, else None."""
        from inspector.batch.engine.out_dir import write_failure

        try:
            if write:
                write_json(self.out, "summary.json", summary_document(self, loaded, entries))
                if self.metrics is not None:
                    write_metrics_csv(self.out, entries, self.metrics.metrics)
                if self.compare:
                    write_json(self.out, "compare.json",
                               comparison_document(self, loaded, comparisons))
            if tb is not None:
                tb.close()  # TensorBoard's writer thread reports its failures here
        except Exception as e:
            failure = write_failure(e, self.out)
            if failure is None:
                raise
            return failure
        return None

    def recorded_seed(self, loaded) -> int | None:
        """summary.json's "seed": the seed given, or a drawn one where it made the weights
        (None when every weight came from files), as core.models.load records it."""
        return loaded.seed if self.seed_given or not loaded.pretrained else None

    def _load(self):
        """The Session with the model loaded, the options that need the model checked, and
        the ImageJob every image runs: (session, loaded, 0), or (None, None, exit status)."""
        from inspector.batch.analyse.dff import check_dff
        from inspector.batch.analyse.options import check_options, write_script
        from inspector.core.run.capture_spec import CaptureSpec
        from inspector.core.run.loading import model_notes
        from inspector.core.run.session import Session

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
        given_layer = self.cam_layer  # LeGrad's first block, when given
        try:
            self.target, self.cam_layer, layers, self.edits = check_options(self, session, loaded)
            self.dff_layer, layers = check_dff(self, session, self.cam_layer, layers)
        except ValueError as e:  # options that cannot work with this model: exit status 2
            self.warn(str(e))
            session.close()
            return None, None, 2
        from inspector.batch.analyse.attention import check_attention

        try:
            choice = check_attention(self.methods, self.attention,
                                     self.topk if self.logit_lens else 0, given_layer,
                                     layers, loaded, session.tree, self.warn)
        except ValueError as e:
            self.warn(str(e))
            session.close()
            return None, None, 2
        self.methods, self.attention, self.legrad_from = (choice.methods, choice.options,
                                                          choice.legrad_from)
        layers = choice.layers
        self.layers = layers
        self.capture = CaptureSpec(
            modules={n: frozenset({OUTPUT, GRAD_OUTPUT}) for n in layers},
            full=frozenset(layers),
            stats=False,
        )
        if self.emit_script is not None and not write_script(self, loaded):
            session.close()
            return None, None, 2
        self.job = ImageJob(
            capture=self.capture,
            # The unedited twin only needs the outputs compared: no frames' tensors, no backward.
            baseline_capture=CaptureSpec.for_modules(layers, (OUTPUT,), stats=False),
            target=self.target, methods=self.methods, cam_layer=self.cam_layer,
            attributions=self.attributions, attribution_options=self.attribution_options,
            edits=self.edits, compare=self.compare, topk=self.topk, stretch=self.stretch,
            attention=self.attention, legrad_from=self.legrad_from,
            patch_sweep=self.patch_sweep, sweep_depth=self.sweep_depth,
            dff=self.dff, dff_layer=self.dff_layer,
            metrics=self.metrics, boxes=self.boxes,
        )
        return session, loaded, 0

    def _tensorboard(self):
        if not self.want_tensorboard:
            return None
        from inspector.core.export.files import TensorBoardLog, TensorBoardMissing

        try:
            return TensorBoardLog(self.out / "tensorboard")
        except TensorBoardMissing as e:
            self.warn(f"no TensorBoard log: {e}")
            return None


def _check_engine(shard_size: int, engine: str, ray_address: str | None,
                 workers: int | None) -> None:
    """Options of the engine that cannot work: ValueError (exit status 2)."""
    if shard_size < 1:
        raise ValueError(f"--shard-size must be 1 or more, not {shard_size}")
    if engine not in ENGINES:
        raise ValueError(f"unknown engine '{engine}'; choose {' or '.join(ENGINES)}")
    if ray_address and engine != "ray":
        raise ValueError("--ray-address needs --engine ray")
    if workers is not None and workers < 1:
        raise ValueError("--workers must be 1 or more")
