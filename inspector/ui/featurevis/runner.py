"""Feature visualisations for the window, run on the session's inference worker in chunks.

A visualisation of a few hundred steps takes seconds to minutes on a CPU, and the worker is
the one thread that runs the model: so each job runs CHUNK_STEPS steps
(core.explain.featurevis.render.Optimisation keeps the picture, Adam and the draws between
them) and the next chunk is queued from the UI thread when it is done. An image dropped
meanwhile runs between two chunks. Each chunk's pictures are shown (`updated`), and the
finished ones are written to the on-disk cache (core.explain.featurevis.cache), which is
looked at first: a picture made before with the same weights, layer, channel and settings
is shown at once. A new model cancels the job; so does a new request. A cancelled job's
unfinished pictures are never cached, and are no channel's visualisation afterwards.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field

import numpy as np
from PySide6.QtCore import QObject, Signal

CHUNK_STEPS = 8


@dataclass(eq=False)
class FeatureVisJob:
    """One request: the pictures of `channels` of `layer` (the UI reads it, the worker fills
    it in; a chunk's results are read on the UI thread only after the chunk ended)."""

    layer: str
    channels: list[int]
    settings: object  # core.explain.featurevis.settings.FeatureVisSettings
    cancel: threading.Event = field(default_factory=threading.Event)
    pictures: dict[int, np.ndarray] = field(default_factory=dict)
    objective: dict[int, float] = field(default_factory=dict)  # finished channels only
    cached: set[int] = field(default_factory=set)
    done: int = 0  # steps done of the channels still optimised
    error: str | None = None
    finished: bool = False
    cancelled: bool = False  # finished before its optimisation ended (no error)
    loaded: object = None
    weights: str = ""
    optimisation: object = None

    @property
    def steps(self) -> int:
        return self.settings.steps

    def caption(self, channel: int) -> str:
        """What the picture of `channel` is, for its title and tooltip."""
        s = self.settings
        if channel in self.objective:
            where = " (from the cache)" if channel in self.cached else ""
            return (f"channel {channel}: its mean {self.objective[channel]:.4g} on this picture"
                    f" after {s.steps} steps, seed {s.seed}{where}")
        if self.cancelled:
            return f"channel {channel}: cancelled at step {self.done} of {s.steps} (not kept)"
        return f"channel {channel}: step {self.done} of {s.steps}"

    def visualisation(self, channel: int) -> np.ndarray | None:
        """The picture of `channel` to show as its visualisation: a finished one, or one
        forming; None for one a cancel left half-optimised."""
        if channel in self.objective or (not self.finished and channel in self.pictures):
            return self.pictures[channel]
        return None


class FeatureVisRunner(QObject):
    updated = Signal(object)  # a FeatureVisJob whose pictures changed
    finished = Signal(object)  # a FeatureVisJob done, failed or cancelled

    def __init__(self, control, parent: QObject | None = None, cache=None) -> None:
        super().__init__(parent)
        self.control = control
        self._cache = cache
        self.job: FeatureVisJob | None = None
        # (a weak reference to the model, its weights hash): weak, so that a model replaced
        # by the next one is not kept alive here until that one's hash is known.
        self.weights: tuple[weakref.ref, str] | None = None

    @property
    def cache(self):
        if self._cache is None:
            from inspector.core.explain.featurevis.cache import FeatureVisCache

            self._cache = FeatureVisCache()
        return self._cache

    @property
    def running(self) -> bool:
        return self.job is not None and not self.job.finished

    def start(self, layer: str, channels: list[int], settings) -> FeatureVisJob | None:
        """Visualise `channels` of `layer` (cancelling a job running); None without a model."""
        session = self.control.session
        if session is None or self.control.loaded is None:
            return None
        self.cancel()
        job = FeatureVisJob(layer, list(channels), settings)
        self.job = job
        self._submit(job, self._begin)
        return job

    def cancel(self) -> None:
        if self.job is not None and not self.job.finished:
            self.job.cancel.set()

    def cached_picture(self, layer: str, channel: int, settings):
        """The cached picture of `channel` (core.explain.featurevis.cache.CachedPicture) for
        the loaded model, or None (also before its weights' hash is known)."""
        loaded = self.control.loaded
        if loaded is None or self.weights is None or self.weights[0]() is not loaded.model:
            return None
        from inspector.core.explain.featurevis.cache import cache_key
        from inspector.core.explain.featurevis.settings import Target

        key = cache_key(self.weights[1], loaded.preprocess, layer, Target("channel", channel),
                        settings)
        return self.cache.load(self.weights[1], layer, key, _expected_size(settings, loaded),
                               settings.steps)

    def model_loaded(self) -> None:
        """A model was loaded: cancel the job, and hash the weights on the worker."""
        self.cancel()
        self.weights = None  # the replaced model's
        session = self.control.session
        if session is None:
            return

        def hash_weights(_cancel) -> tuple[object, str] | None:
            from inspector.core.explain.featurevis.cache import weights_hash

            loaded = session.loaded
            return None if loaded is None else (weakref.ref(loaded.model),
                                                weights_hash(loaded.model))

        future = session.worker.submit(hash_weights, tag="featurevis")
        self.control.router.watch(future, self._hashed)

    def _hashed(self, future) -> None:
        if future.exception() is None and future.result() is not None:
            self.weights = future.result()

    # -- on the worker -------------------------------------------------------------------------
    def _submit(self, job: FeatureVisJob, fn) -> None:
        future = self.control.session.worker.submit(lambda _cancel: fn(job), tag="featurevis")
        self.control.router.watch(future, lambda f: self._chunk_done(job, f))

    def _begin(self, job: FeatureVisJob) -> None:
        """The cache first; an Optimisation of the channels it does not have."""
        from inspector.core.explain.featurevis.cache import cache_key, weights_hash
        from inspector.core.explain.featurevis.render import Optimisation
        from inspector.core.explain.featurevis.settings import Target

        loaded = self.control.session.loaded
        job.loaded, job.weights = loaded, weights_hash(loaded.model)
        missing = []
        for c in job.channels:
            key = cache_key(job.weights, loaded.preprocess, job.layer, Target("channel", c),
                            job.settings)
            hit = self.cache.load(job.weights, job.layer, key,
                                  _expected_size(job.settings, loaded), job.settings.steps)
            if hit is None:
                missing.append(c)
            else:
                job.pictures[c], job.objective[c] = hit.pixels, float(hit.info["objective"])
                job.cached.add(c)
        if missing:
            job.optimisation = Optimisation(loaded, job.layer,
                                            [Target("channel", c) for c in missing], job.settings)

    def _chunk(self, job: FeatureVisJob) -> None:
        from inspector.core.explain.featurevis.render import Cancelled

        opt = job.optimisation
        if self.control.session.loaded is not job.loaded:
            job.cancel.set()
            return
        try:
            opt.run(CHUNK_STEPS, cancel=job.cancel)
        except Cancelled:
            job.done = opt.done
            return
        channels = [t.index for t in opt.targets]
        job.done = opt.done
        if not opt.finished:
            job.pictures.update(zip(channels, opt.picture()))
            return
        result = opt.result()
        job.pictures.update(zip(channels, result.pixels))
        job.objective.update(zip(channels, (float(v) for v in result.objective)))
        self._store(job, result)

    def _store(self, job: FeatureVisJob, result) -> None:
        import torch

        from inspector.core.explain.featurevis.cache import cache_key

        if result.steps < job.settings.steps:
            return  # stopped early: not the picture these settings make
        loaded = job.loaded
        for target, pixels, value in zip(result.targets, result.pixels, result.objective):
            key = cache_key(job.weights, loaded.preprocess, job.layer, target, job.settings)
            self.cache.store(job.weights, job.layer, key, pixels, {
                "objective": float(value), "layer": job.layer, "channel": target.index,
                "model": loaded.name, "steps": result.steps, "seed": job.settings.seed,
                "settings": job.settings.key(), "seconds": result.seconds,
                "device": str(loaded.device), "torch": torch.__version__})

    # -- on the UI thread ----------------------------------------------------------------------
    def _chunk_done(self, job: FeatureVisJob, future) -> None:
        error = None if future.cancelled() else future.exception()  # withdrawn: closing
        if error is not None:
            job.error = f"{type(error).__name__}: {error}" if not isinstance(
                error, ValueError) else str(error)
        opt = job.optimisation
        more = error is None and not future.cancelled() and not job.cancel.is_set() \
            and opt is not None and not opt.finished
        if not more:
            # Finished before `updated`, so that its listeners never show a stopped job
            # as running ("step 32 of 128").
            job.cancelled = error is None and opt is not None and not opt.finished
            job.finished = True
            job.optimisation = None  # its graph-free state: the spectrum, Adam's moments
        self.updated.emit(job)
        if more:
            self._submit(job, self._chunk)
            return
        self.finished.emit(job)


def _expected_size(settings, loaded) -> tuple[int, int] | None:
    """(h, w) a finished picture of these settings has: a cached file of another size is a
    miss. None where the settings cannot make a picture (the optimisation says why)."""
    from inspector.core.explain.featurevis.render import picture_size

    try:
        return picture_size(settings, tuple(loaded.preprocess.crop_size))
    except ValueError:
        return None
