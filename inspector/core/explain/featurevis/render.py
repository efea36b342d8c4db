"""The optimisation loop: pictures of a batch of targets, each image its own objective.

    pixels (FourierImage) -> transforms -> the model's normalisation -> the model, stopped at
    the layer -> each image's objective -> Adam on the spectrum (d loss / d spectrum only)

`Optimisation` keeps the spectrum, Adam's state and the draws between calls of `run(n)`, so
the window runs it a few steps per job on its single inference worker (a long run never
holds the worker for minutes) and draws the picture between chunks; `render` runs it whole.
Every chunk puts the model in eval mode with its parameters frozen (no weight gradient is
computed or stored) and hooks it only for its own forwards; all of it is undone on exit
(core.hookset), also after an error or a cancel. Seeded per image (settings.image_seed):
the same seed, targets and batch give the same pixels on the CPU.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from inspector.core.explain.cam.targets import logits_of
from inspector.core.explain.featurevis import objectives
from inspector.core.explain.featurevis.param import FourierImage
from inspector.core.explain.featurevis.relu import redirect_relus
from inspector.core.explain.featurevis.settings import (
    CLASS,
    FeatureVisSettings,
    Target,
    image_seed,
)
from inspector.core.explain.featurevis.transforms import (
    TransformDraws,
    apply_transforms,
    to_input_size,
)
from inspector.core.hookset import HookSet, ModelState, tensor_leaves
from inspector.core.models.base import LoadedModel

DETECTION = "detection"
StepCallback = Callable[[int, int, torch.Tensor], None]  # (steps done, steps, values (B,))


class Cancelled(Exception):
    """The cancel event was set: the optimisation stopped after `steps` steps."""

    def __init__(self, steps: int) -> None:
        super().__init__(f"cancelled after {steps} steps")
        self.steps = steps


class _Reached(Exception):
    """Raised by the layer's hook: nothing above the layer is needed."""


@dataclass
class Visualisation:
    """The pictures of one batch and the objective each reaches on its own picture,
    untransformed, at the model input's size (what visualise.json calls "objective")."""

    layer: str
    targets: tuple[Target, ...]
    pixels: np.ndarray  # (n, h, w, 3) uint8
    objective: np.ndarray  # (n,) float
    steps: int
    settings: FeatureVisSettings
    seconds: float


def picture_size(settings: FeatureVisSettings, crop: tuple[int, int]) -> tuple[int, int]:
    """(h, w) of the parameterised picture: the model input's, or `size` on its longer side."""
    ch, cw = crop
    if settings.size is None:
        return ch, cw
    if settings.size < max(ch, cw):
        raise ValueError(f"the picture's size {settings.size} is below the model input's "
                         f"{max(ch, cw)} pixels: choose {max(ch, cw)} or more")
    f = settings.size / max(ch, cw)
    return max(1, round(ch * f)), max(1, round(cw * f))


def _call(loaded: LoadedModel, layer: str, x: torch.Tensor):
    """The model on a normalised batch, called as its task takes it: a detection model's
    backbone with the model's own normalisation (its transform would resize to 800 px)."""
    if loaded.task != DETECTION:
        return loaded.model(x)
    model = loaded.model
    if not layer.startswith("backbone."):
        raise ValueError(f"a detection model's pictures are made for its backbone's layers "
                         f"(backbone...), not '{layer or 'the output'}'")
    t = model.transform
    mean = torch.tensor(t.image_mean, device=x.device)[:, None, None]
    std = torch.tensor(t.image_std, device=x.device)[:, None, None]
    return model.backbone((x - mean) / std)


def layer_output(loaded: LoadedModel, layer: str, pixels: torch.Tensor,
                 hooks: HookSet) -> torch.Tensor:
    """The layer's output (its first call) for pictures in [0, 1] at the model input's
    size; the model's output (its logits) for layer "". The forward stops at the layer."""
    pre = loaded.preprocess
    mean = torch.tensor(pre.mean, device=pixels.device)[:, None, None]
    std = torch.tensor(pre.std, device=pixels.device)[:, None, None]
    x = (pixels - mean) / std
    found: list[torch.Tensor] = []
    if layer:
        def hook(_module, _args, output):
            found.extend(t for _, t in tensor_leaves(output))
            raise _Reached

        hooks.forward(loaded.model.get_submodule(layer), hook)
    try:
        output = _call(loaded, layer, x)
    except _Reached:
        if not found:
            raise ValueError(f"'{layer}' returns no tensor") from None
        return found[0]
    if layer:
        raise ValueError(f"'{layer}' is never called in the model's forward")
    return logits_of(output)


class Optimisation:
    """The pictures of `targets` (one image each) at `layer`, optimised `run(n)` steps at a
    time; the targets share a kind (settings.OBJECTIVES)."""

    def __init__(self, loaded: LoadedModel, layer: str, targets: Sequence[Target],
                 settings: FeatureVisSettings) -> None:
        settings.check()
        if not targets:
            raise ValueError("nothing to visualise: no channel was given")
        if loaded.task == DETECTION and targets[0].kind == CLASS:
            raise ValueError("a detection model has no class logit to maximise: choose a "
                             "backbone layer's channel, neuron or direction")
        self.loaded, self.layer, self.settings = loaded, layer, settings
        self.targets = tuple(targets)
        self.crop = tuple(loaded.preprocess.crop_size)
        self.h, self.w = picture_size(settings, self.crop)
        seeds = [image_seed(settings.seed, layer, t) for t in self.targets]
        self.image = FourierImage(seeds, self.h, self.w, settings.sd, settings.decay_power,
                                  loaded.device)
        self.draws = TransformDraws(seeds, settings.steps)
        self.optimizer = torch.optim.Adam([self.image.param], lr=settings.lr)
        self.done = 0
        self.values = torch.zeros(len(self.targets))  # the last step's, transformed
        self.seconds = 0.0
        self.check_targets()

    @property
    def finished(self) -> bool:
        return self.done >= self.settings.steps

    def check_targets(self) -> None:
        """ValueError naming the first index the layer (or the output) does not have."""
        kind = self.targets[0].kind
        size = target_count(self.loaded, self.layer, kind)
        what = "classes" if kind == CLASS else "channels"
        for t in self.targets:
            if t.kind != kind:
                raise ValueError("the images of one batch share one kind of objective")
            if t.vector is None and not 0 <= t.index < size:
                raise ValueError(f"{self.layer or 'the output'} has {size} {what}: "
                                 f"{t.index} is out of range")
            if t.vector is not None and len(t.vector) != size:
                raise ValueError(f"a direction of {len(t.vector)} values for a layer of "
                                 f"{size} channels")

    def run(self, steps: int, on_step: StepCallback | None = None,
            cancel: threading.Event | None = None) -> None:
        """Up to `steps` more steps (fewer at the end). Raises Cancelled after the step in
        which `cancel` was found set, unless that step was the last (the pictures are then
        whole)."""
        loaded, s = self.loaded, self.settings
        began = time.perf_counter()
        try:
            with torch.enable_grad(), ModelState(loaded.model, training=False,
                                                 requires_grad=False) as state:
                for _ in range(min(steps, s.steps - self.done)):
                    self._step(state)
                    if on_step is not None:
                        on_step(self.done, s.steps, self.values)
                    if cancel is not None and cancel.is_set() and not self.finished:
                        raise Cancelled(self.done)
        finally:
            self.seconds += time.perf_counter() - began

    def _step(self, state: ModelState) -> None:
        s, step = self.settings, self.done
        pixels = self.image.pixels()
        if s.transforms == "none":
            x = to_input_size(pixels, self.crop)
        else:
            x = apply_transforms(pixels, self.draws.thetas(step, self.h, self.w), self.crop)
        with HookSet() as hooks:
            if step < s.redirect_relu_steps:
                redirect_relus(self.loaded.model, hooks, state)  # before the layer's hook
            out = layer_output(self.loaded, self.layer, x, hooks)
        values = objectives.values(out, self.targets, self.crop, self.layer, s.cossim_pow)
        loss = -values.sum()
        if s.diversity and self.targets[0].kind != CLASS:
            acts = objectives.as_spatial(out, self.crop, self.layer)
            loss = loss + s.diversity * objectives.diversity_by_group(acts, self.targets)
        (grad,) = torch.autograd.grad(loss, [self.image.param])
        self.image.param.grad = grad
        self.optimizer.step()
        self.image.param.grad = None
        self.values = values.detach().cpu()
        self.done += 1

    def picture(self) -> np.ndarray:
        """(n, h, w, 3) uint8: the pictures as they are now."""
        return self.image.uint8()

    def result(self) -> Visualisation:
        pixels = self.picture()
        value = evaluate(self.loaded, self.layer, pixels, self.targets, self.settings.cossim_pow)
        return Visualisation(self.layer, self.targets, pixels, value, self.done, self.settings,
                             self.seconds)


def target_count(loaded: LoadedModel, layer: str, kind: str) -> int:
    """How many channels the layer has (classes the output has, for CLASS): one forward of
    a grey picture. ValueError when the layer's output is not a map of channels."""
    crop = tuple(loaded.preprocess.crop_size)
    with torch.no_grad(), ModelState(loaded.model, training=False), HookSet() as hooks:
        x = torch.full((1, 3, *crop), 0.5, device=loaded.device)
        out = layer_output(loaded, layer, x, hooks)
    if kind == CLASS:
        if out.ndim < 2:
            raise ValueError("the model's output has no classes to maximise")
        return int(out.shape[1])
    return int(objectives.as_spatial(out, crop, layer).shape[1])


def render(loaded: LoadedModel, layer: str, targets: Sequence[Target],
           settings: FeatureVisSettings, on_step: StepCallback | None = None,
           cancel: threading.Event | None = None) -> Visualisation:
    """The pictures of `targets`, all steps in one call (the CLI, scripts)."""
    opt = Optimisation(loaded, layer, targets, settings)
    opt.run(settings.steps, on_step, cancel)
    return opt.result()


def as_pixels(pictures: np.ndarray, device: torch.device | str = "cpu") -> torch.Tensor:
    """(n, 3, h, w) float in [0, 1] of (n, h, w, 3) uint8 pictures."""
    x = torch.from_numpy(np.array(pictures, np.uint8)).to(device)
    return x.permute(0, 3, 1, 2).float() / 255.0


def evaluate(loaded: LoadedModel, layer: str, pictures: np.ndarray, targets: Sequence[Target],
             cossim_pow: float = 0.0) -> np.ndarray:
    """(n,) each picture's objective, untransformed, resized to the model input."""
    with torch.no_grad(), ModelState(loaded.model, training=False), HookSet() as hooks:
        x = to_input_size(as_pixels(pictures, loaded.device), tuple(loaded.preprocess.crop_size))
        out = layer_output(loaded, layer, x, hooks)
        return objectives.values(out, targets, tuple(loaded.preprocess.crop_size), layer,
                                 cossim_pow).float().cpu().numpy()


def channel_means(loaded: LoadedModel, layer: str, pictures: np.ndarray) -> np.ndarray:
    """(n, C) every channel's mean of `layer` on each picture (uint8, any size): how much
    each picture excites each channel."""
    crop = tuple(loaded.preprocess.crop_size)
    with torch.no_grad(), ModelState(loaded.model, training=False), HookSet() as hooks:
        x = to_input_size(as_pixels(pictures, loaded.device), crop)
        out = layer_output(loaded, layer, x, hooks)
        return objectives.as_spatial(out, crop, layer).mean(dim=(2, 3)).float().cpu().numpy()
