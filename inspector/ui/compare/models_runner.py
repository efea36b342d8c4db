"""Two models compared from the window, on a thread of their own: the CKA of every layer pair
(`network-inspector compare-models`, batch.compare_models.run_compare_models, the same
function and options, local engine) and, for a clicked cell, that pair's matched channels
(batch.compare_models.match.match_layers).

The thread loads its own copy of model A (the window's model stays with the inference
worker, whose hooks must not see these batches) and model B, and keeps the pair loaded for
the clicks that follow while memory allows: after loading, if less than KEEP_FREE is left
free, the pair is released at the end of each job and loaded again by the next one (which
says so). Progress and results reach the GUI thread through queued signals, never through
widgets touched from the thread; `cancel` stops a job after the forward running.
"""

from __future__ import annotations

import gc
import threading
from dataclasses import dataclass, replace
from pathlib import Path

from PySide6.QtCore import QObject, Qt, Signal

KEEP_FREE = 1 << 30  # bytes the machine must still have free for the pair to stay loaded


@dataclass(frozen=True)
class CompareRequest:
    """What File ▸ Compare with model… runs."""

    spec_a: object  # core.models.base.ModelSpec of the window's model, its seed fixed
    spec_b: object | None  # None: B is A
    inputs: tuple[str, ...]  # image files and folders
    out: Path
    estimator: str | None = None
    batch_size: int = 32
    layers: str = "auto"
    atlas_a: Path | None = None  # atlas folders: matched channels get their crops
    atlas_b: Path | None = None


@dataclass(frozen=True)
class CompareResult:
    status: str  # "ok", "failed", "cancelled"
    out: Path
    messages: tuple[str, ...]
    kept: bool  # the pair stays loaded for the clicks

    @property
    def message(self) -> str:
        return self.messages[-1] if self.messages else ""


class ModelPairRunner(QObject):
    """One job at a time on a thread: `compare(request)`, then `match(layer_a, layer_b)`."""

    progress = Signal(str, int, int)  # what ("compare", "match"), done, total
    compared = Signal(object)  # CompareResult
    matched = Signal(object)  # batch.compare_models.match.LayerMatch, or a str: why not
    _progressed = Signal(str, int, int)
    _compared = Signal(object)
    _matched = Signal(object)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._thread: threading.Thread | None = None
        self._cancel = threading.Event()
        self._pair: tuple | None = None  # (A, B, tree A, tree B) while it stays loaded
        self._request: CompareRequest | None = None
        self._keep = True
        self._stale = False  # released while a job ran: dropped when it ends
        self._progressed.connect(self.progress, Qt.ConnectionType.QueuedConnection)
        self._compared.connect(self._compare_done, Qt.ConnectionType.QueuedConnection)
        self._matched.connect(self._match_done, Qt.ConnectionType.QueuedConnection)

    @property
    def running(self) -> bool:
        return self._thread is not None

    @property
    def loaded(self) -> bool:
        return self._pair is not None

    def compare(self, request: CompareRequest) -> bool:
        if self._request is None or (request.spec_a, request.spec_b) != (
                self._request.spec_a, self._request.spec_b):
            self.release()
        self._request = request
        return self._start(self._work_compare, request)

    def match(self, layer_a: str, layer_b: str) -> bool:
        """The matched channels of a layer pair over the last comparison's images."""
        if self._request is None:
            return False
        return self._start(self._work_match, layer_a, layer_b)

    def cancel(self) -> None:
        self._cancel.set()

    def wait(self, timeout: float | None = None) -> bool:
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
            return not thread.is_alive()
        return True

    def release(self) -> None:
        """Forget the loaded pair (a new model in the window): now, or when the job running
        ends."""
        if self._thread is None:
            self._pair = None
            gc.collect()
        else:
            self._stale = True

    def _start(self, work, *args) -> bool:
        if self._thread is not None:
            return False
        self._cancel = threading.Event()
        self._thread = threading.Thread(target=work, args=(*args, self._cancel),
                                        name="compare-models", daemon=True)
        self._thread.start()
        return True

    # -- on the thread --------------------------------------------------------------------------
    def _pair_for(self, request: CompareRequest, messages: list[str]):
        from inspector.batch.compare_models.memory import available_bytes
        from inspector.batch.compare_models.setup import load_pair

        if self._pair is None:
            pair = load_pair(request.spec_a, request.spec_b, messages.append)
            if isinstance(pair, int):
                return None
            free = available_bytes()
            self._keep = free is None or free > KEEP_FREE
            self._pair = pair
        return self._pair

    def _work_compare(self, request: CompareRequest, cancel: threading.Event) -> None:
        messages: list[str] = []
        status = "failed"
        try:
            pair = self._pair_for(request, messages)
            if pair is not None:
                status = self._run_compare(request, pair, messages, cancel)
        except Exception as e:  # noqa: BLE001 - a failure the command did not word: say it
            messages.append(f"the comparison failed: {type(e).__name__}: {e}")
        kept = self._keep and self._pair is not None
        if not kept:
            self._pair = None
        self._compared.emit(CompareResult(status, Path(request.out), tuple(messages), kept))

    def _run_compare(self, request, pair, messages, cancel) -> str:
        from inspector.batch.compare_models.command import CompareOptions, run_compare_models

        result = Path(request.out) / "cka.json"
        before = _modified(result)
        opts = CompareOptions(
            spec_a=request.spec_a, spec_b=request.spec_b, out=Path(request.out),
            layers_a=request.layers, estimator=request.estimator,
            batch_size=request.batch_size, workers=0, progress=False, warn=messages.append,
            on_progress=self._progressed.emit,
            cancel=cancel, models=pair)
        code = run_compare_models(opts, list(request.inputs))
        written = _modified(result) not in (None, before)
        if cancel.is_set() and not written:
            return "cancelled"
        return "ok" if written and code in (0, 1) else "failed"

    def _work_match(self, layer_a: str, layer_b: str, cancel: threading.Event) -> None:
        from inspector.batch.compare_models.match import match_layers
        from inspector.batch.engine.progress import JobCancelled, Progress
        from inspector.batch.inputs import list_sources

        request, messages = self._request, []
        try:
            pair = self._pair_for(request, messages)
            if pair is None:
                result = messages[-1] if messages else "the models could not be loaded"
            else:
                sources = [s for s in list_sources(list(request.inputs), on_missing=lambda e: None)
                           if s.frame is None]
                result = match_layers(*pair, sources, layer_a, layer_b,
                                      batch_size=request.batch_size,
                                      progress=Progress(False, self._progressed.emit, cancel))
                result = with_crops(result, request, pair[0], pair[1])
        except JobCancelled:
            result = "cancelled"
        except Exception as e:  # noqa: BLE001 - said under the heatmap, in one line
            result = f"{type(e).__name__}: {e}" if not isinstance(e, ValueError) else str(e)
        if not self._keep:
            self._pair = None
        self._matched.emit(result)

    # -- back on the GUI thread -----------------------------------------------------------------
    def _join(self) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()
        if self._stale:
            self._stale, self._pair = False, None
        if self._pair is None:
            gc.collect()

    def _compare_done(self, result: CompareResult) -> None:
        self._join()
        self.compared.emit(result)

    def _match_done(self, result) -> None:
        self._join()
        self.matched.emit(result)


def with_crops(result, request: CompareRequest, model_a, model_b):
    """A LayerMatch with the crops of its layers' channels from the request's atlases (of
    LoadedModels `model_a` and `model_b`): an atlas of the layer, or of the module around it
    whose output the layer's is (compare.atlas_layers)."""
    import dataclasses

    crops_a, note_a = _layer_crops(request.atlas_a, model_a, result.plan.layer_a)
    crops_b, note_b = _layer_crops(request.atlas_b, model_b, result.plan.layer_b)
    return dataclasses.replace(result, crops_a=crops_a, crops_b=crops_b,
                               crop_notes=tuple(n for n in (note_a, note_b) if n))


def _layer_crops(folder: Path | None, loaded, layer: str) -> tuple[dict, str]:
    import json

    from inspector.batch.compare_models.writers import atlas_crops
    from inspector.ui.compare.atlas_layers import atlas_layer_for

    if folder is None:
        return {}, ""
    try:
        layers = json.loads((Path(folder) / "atlas.json").read_text()).get("layers") or {}
    except (OSError, ValueError, AttributeError):
        layers = {}  # atlas_crops says what is wrong with the file
    if not isinstance(layers, dict) or layer in layers or not layers:
        return atlas_crops(folder, loaded.name, layer)
    outer, why = atlas_layer_for(loaded.model, layer, layers)
    if outer is None:
        return {}, f"no crops from {folder}: {why}"
    crops, note = atlas_crops(folder, loaded.name, outer)
    return crops, note or f"the crops of {layer} are from the atlas's {outer}, whose output it is"


def _modified(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None


def with_seed(spec, seed: int | None):
    """The window's ModelSpec with the seed its random weights were built with."""
    return spec if seed is None or spec.seed is not None else replace(spec, seed=seed)
