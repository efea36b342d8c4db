"""Capture sessions: register hooks for one run, send what they see, remove them always.

`Capture` is a context manager. On entry it registers only what a `CaptureSpec` asks for;
on exit, also when the forward or backward raised, it removes every handle and restores
each module's `training` and `inplace` flags (a `hookset.HookSet` and a `hookset.ModelState`). What a hook sees leaves it as frames (stats,
previews: small copies) through `sink`, or as detached device copies in `Capture.kept` for
the modules a CAM needs; never as a reference to a live tensor.

How each kind is captured:
- input: a forward pre-hook (before the module can modify its input in place).
- output: a forward hook. Previews are computed right then (a later in-place op, like the
  ReLU after a BatchNorm, would otherwise change what we show); so are the statistics of
  tensors the model modifies in place, while the others' are handed to a low-priority
  thread and checked against the tensor's version counter (see deferred_stats).
- grad_output: `Tensor.register_hook` on each output tensor, registered in the forward hook.
  A hook registered before an in-place modification receives the gradient of the value the
  module returned, which is what we want.
- grad_input: the forward pre-hook hands the module `x.view_as(x)` instead of `x` and hooks
  that view. The view is a fresh autograd node used only by this module, so its gradient is
  the gradient w.r.t. the input through this module alone: what `register_full_backward_hook`
  defines as grad_input. We do not use full backward hooks: they wrap outputs in a
  BackwardHookFunction whose views may not be modified in place, which torchvision's resnet
  does (`out += identity`) even with every ReLU(inplace=False). A view keeps in-place
  semantics: a module that modifies its input in place still modifies the caller's tensor.
  One exception: an in-place op on that view re-routes autograd around the view's node
  (CopySlices goes straight to the base), so its hook would never fire. Modules with an
  `inplace` flag (ReLU, Hardswish, Dropout, ...) get `inplace=False` for the run when their
  grad_input is asked for; the flag is restored on exit like `training`.
- the frames themselves (statistics, previews, channels-last maps) are made by
  core.run.frame_maker; the edits' hooks (core.edits.hooks) are registered first, so what
  is captured is what flows on.
- graph_from (a run whose only gradient is a CAM layer's): the forward runs without autograd
  until that module's output, which its forward hook makes the root of the graph (a fresh
  leaf); the backward then stops there instead of going down to the input, and the modules
  before it record nothing (see `Capture._start_graph`).
"""

from __future__ import annotations

import threading
from collections import Counter, defaultdict
from collections.abc import Iterable

import torch
from torch import nn

from inspector.core.edits.hooks import install_cancel_check, install_edits
from inspector.core.edits.interventions import Intervention, InterventionSet
from inspector.core.hookset import (
    HookError,
    HookSet,
    ModelState,
    RunCancelled,
    replace_leaf,
    tensor_leaves,
)
from inspector.core.records.frames import ActivationFrame, GradientFrame
from inspector.core.records.kinds import GRAD_INPUT, GRAD_OUTPUT, INPUT, OUTPUT
from inspector.core.run.capture_spec import CaptureSpec
from inspector.core.run.frame_maker import FrameMaker, Sink
from inspector.core.stats.deferred import Deferred, memory_for


class Capture:
    """`with Capture(model, spec, sink, run_id) as cap: model(x)...` — see the module docstring."""

    def __init__(
        self,
        model: nn.Module,
        spec: CaptureSpec,
        sink: Sink | None = None,
        run_id: int = 0,
        interventions: Iterable[Intervention] = (),
        cancel: threading.Event | None = None,
        graph_from: Iterable[str] = (),
    ) -> None:
        self.model = model
        self.spec = spec
        # Modules at whose output autograd starts recording (see _start_graph): the forward
        # before them runs without a graph, and a backward to `graph_roots` stops there.
        self.graph_from = frozenset(graph_from)
        self.graph_roots: list[torch.Tensor] = []
        self.run_id = run_id
        self.frames = FrameMaker(spec, sink or (lambda frame: None), run_id)
        self.interventions = InterventionSet(tuple(interventions))
        self.cancel = cancel
        self.kept: dict[tuple[str, int, str, str], torch.Tensor] = {}
        # Calls per captured module, as one-item lists the hooks bump without a lock: forward
        # hooks of one run all run on the thread that runs the forward.
        self._counts: dict[str, list[int]] = {}
        self.error_module: str | None = None  # innermost module running when a run failed
        self.stats_dropped = 0  # frames dropped: statistics an in-place op invalidated
        self._hooks = HookSet()
        self._state = ModelState(model)  # training and inplace flags, put back on exit
        self._call_stack: defaultdict[str, list[int]] = defaultdict(list)
        self._lock = threading.Lock()  # backward hooks may run on autograd's device threads
        self._flipped: list[str] = []  # modules given inplace=False for this run

    # -- context manager -----------------------------------------------------------------

    def __enter__(self) -> Capture:
        modules = dict(self.model.named_modules())
        captured = self.spec.names() | self.graph_from
        wanted = captured | self.interventions.modules()
        missing = sorted(wanted - set(modules))
        if missing:
            raise KeyError(f"no module named {', '.join(repr(m) for m in missing)} in the model")
        self._state.__enter__()
        try:
            # Interventions first: forward hooks run in registration order, so the capture
            # hooks below see (and show) the edited output, which is what flows on.
            install_edits(self._hooks, modules, self.interventions, self.run_id)
            if captured:
                self._hooks.forward_pre(self.model, self.frames.read_input_size,
                                        with_kwargs=True)
            for name, mod in modules.items():
                if name in captured:
                    self._install_capture(name, mod)
                elif self.cancel is not None and next(mod.children(), None) is None:
                    install_cancel_check(self._hooks, mod, self.cancel)
        except BaseException:
            self._remove()
            raise
        if self.spec.stats:
            # What is modified in place depends on the inplace flags: learn per setting.
            memory = memory_for(self.model, frozenset(self._flipped))
            self.frames.deferred = Deferred(memory, self.frames.sink)
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            self._settle_deferred(exc)
        finally:
            if exc is not None:
                self.error_module = self._failing_module(tb)
            self._remove()

    def eval(self) -> None:
        """The model in eval mode for the run (its flags are put back on exit)."""
        self._state.eval()

    def _settle_deferred(self, exc: BaseException | None) -> None:
        """Send the frames whose statistics an idle core computed (see deferred_stats)."""
        deferred, self.frames.deferred = self.frames.deferred, None
        if deferred is None:
            return
        if isinstance(exc, RunCancelled):
            deferred.abandon()
        elif exc is None:
            deferred.finish()
        else:
            try:  # the frames before a failure still tell what went in
                deferred.finish()
            except Exception:  # noqa: BLE001 - the run's own error is the one to report
                deferred.abandon()
        self.stats_dropped += deferred.dropped

    def _failing_module(self, tb) -> str | None:
        """The innermost module of the model whose code was running when the run raised.

        Read off the traceback (each module's forward frame holds it as `self`), so that
        no module needs a hook just to keep a stack of running modules: on resnet50 such
        hooks on every module cost more than the leaves' own capture hooks.
        """
        names = {id(m): n for n, m in self.model.named_modules()}
        found = None
        while tb is not None:
            owner = tb.tb_frame.f_locals.get("self")
            if owner is not None and id(owner) in names:
                found = names[id(owner)]
            tb = tb.tb_next
        return found

    def _remove(self) -> None:
        try:
            self._hooks.remove()
        finally:
            self._state.restore()

    # -- results -------------------------------------------------------------------------

    @property
    def calls(self) -> Counter[str]:
        """How many times each captured module was called in the run."""
        return Counter({name: count[0] for name, count in self._counts.items()})

    def never_called(self) -> list[str]:
        calls = self.calls
        return sorted(n for n in self.spec.modules if calls[n] == 0)

    def kept_tensor(self, module: str, kind: str = OUTPUT, call: int = -1, path: str = ""):
        """A kept tensor; call=-1 means the module's last call in the run."""
        if call < 0:
            call = self.calls[module] + call
        return self.kept.get((module, call, kind, path))

    # -- hook installation ---------------------------------------------------------------

    def _install_capture(self, name: str, module: nn.Module) -> None:
        kinds = self.spec.kinds_for(name)
        keep = name in self.spec.keep
        start_graph = name in self.graph_from
        emit_output = OUTPUT in kinds
        watch_grad = GRAD_OUTPUT in kinds or keep
        cancel = self.cancel
        if GRAD_INPUT in kinds and self._state.disable_inplace(module):
            self._flipped.append(name)  # restored on exit: see the module docstring
        # A pre-hook only where one is needed: hooks cost even when they do little, and
        # most captures ask for outputs only.
        needs_pre = bool(kinds & {INPUT, GRAD_INPUT})
        stack = self._call_stack[name]
        count = self._counts.setdefault(name, [0])

        def pre_hook(mod, args, kwargs):
            if cancel is not None and cancel.is_set():
                raise RunCancelled()
            call = count[0]
            count[0] = call + 1
            stack.append(call)
            try:
                if INPUT in kinds:
                    for path, t in tensor_leaves((args, kwargs)):
                        self.frames.emit(ActivationFrame, name, call, INPUT, _input_path(path), t)
                if GRAD_INPUT in kinds and torch.is_grad_enabled():
                    return self._hook_inputs(name, call, args, kwargs)
            except (RunCancelled, HookError):
                raise
            except Exception as e:
                raise HookError(name, INPUT, e) from e
            return None

        def forward_hook(mod, args, output):
            if needs_pre:
                call = stack.pop() if stack else 0
            else:
                # Without a pre-hook a call is numbered when it returns: the same order
                # unless a module calls itself recursively.
                if cancel is not None and cancel.is_set():
                    raise RunCancelled()
                call = count[0]
                count[0] = call + 1
            try:
                if start_graph:
                    output = self._start_graph(output)
                leaves = (("", output),) if type(output) is torch.Tensor else tensor_leaves(output)
                for path, t in leaves:
                    if emit_output:
                        self.frames.emit(ActivationFrame, name, call, OUTPUT, path, t)
                    if keep:
                        self.kept[(name, call, OUTPUT, path)] = t.detach().clone()
                    if watch_grad and t.requires_grad:
                        self._hooks.tensor(t, self._grad_hook(name, call, GRAD_OUTPUT, path, keep))
            except (RunCancelled, HookError):
                raise
            except Exception as e:
                raise HookError(name, OUTPUT, e) from e
            return output if start_graph else None

        if needs_pre:
            self._hooks.forward_pre(module, pre_hook, with_kwargs=True)
        self._hooks.forward(module, forward_hook)

    def _start_graph(self, output):
        """Autograd on from here, and each floating-point tensor of `output` not yet in the
        graph made a root of it: a fresh leaf (kept in `graph_roots`, the inputs of the
        backward), of which the rest of the model gets a copy, since a leaf that requires
        grad may not be modified in place. A tensor already in the graph (downstream of an
        earlier root: a second CAM layer, a second call) stays as it is: its gradient is
        computed on the way to that root, and cutting it would hide the paths through it.

        The gradient a root receives is the gradient of the module's output, the same as
        a full backward's at that output (core.explain.cam reads it from the kept copy below)."""
        torch.set_grad_enabled(True)  # the Session's grad-mode context restores it
        for path, t in list(tensor_leaves(output)):
            if t.requires_grad or not (t.is_floating_point() or t.is_complex()):
                continue
            root = t.detach().requires_grad_(True)
            self.graph_roots.append(root)
            output = replace_leaf(output, path, root.clone())
        return output

    def _hook_inputs(self, name, call, args, kwargs):
        def swap(value, path):
            if isinstance(value, torch.Tensor):
                if not value.requires_grad:
                    return value
                view = value.view_as(value)
                self._hooks.tensor(view, self._grad_hook(name, call, GRAD_INPUT, path, False))
                return view
            if isinstance(value, (tuple, list)):
                items = [swap(v, f"{path}.{i}" if path else str(i)) for i, v in enumerate(value)]
                return type(value)(items) if isinstance(value, list) else tuple(items)
            if isinstance(value, dict):
                return {k: swap(v, f"{path}.{k}" if path else str(k)) for k, v in value.items()}
            return value

        new_args = tuple(swap(a, str(i)) for i, a in enumerate(args))
        new_kwargs = {k: swap(v, k) for k, v in kwargs.items()}
        return new_args, new_kwargs

    def _grad_hook(self, name: str, call: int, kind: str, path: str, keep: bool):
        emit = kind in self.spec.kinds_for(name)

        def hook(grad: torch.Tensor):
            if self.cancel is not None and self.cancel.is_set():
                raise RunCancelled()
            try:
                if emit:
                    self.frames.emit(GradientFrame, name, call, kind, path, grad)
                if keep:
                    with self._lock:
                        self.kept[(name, call, kind, path)] = grad.detach().clone()
            except (RunCancelled, HookError):
                raise
            except Exception as e:
                raise HookError(name, kind, e) from e
            return None

        return hook

def _input_path(path: str) -> str:
    """(args, kwargs) paths "0.1" / "1.name" -> "1" (second positional) / "name" (keyword)."""
    head, _, rest = path.partition(".")
    return rest if head in ("0", "1") else path
