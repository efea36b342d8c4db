"""Models given as code, two families: a factory file ("path/to/file.py:function") or a
whole pickled module. Both run the user's code, so they are only called for files the user
chose (and, for pickles, said they trust). Every fault is a `ModelLoadError` sentence naming the file;
its details show where the user's own code failed, not this program's frames.
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import os
import signal
import sys
import threading
import traceback
from pathlib import Path
from types import ModuleType

import torch
from torch import nn

from inspector.core.inputs.preprocess import Preprocess
from inspector.core.models.base import Family, LoadedModel, ModelSpec, wrap_module
from inspector.core.models.files import (
    TRUST_HINT,
    ModelLoadError,
    check_archive,
    clean_message,
    damaged_message,
    existing_file,
    file_format,
    some,
)
from inspector.core.models.script_code import ModelCode, absolute, labels_literal, own_classes

# -- the user's own code -------------------------------------------------------------------------


class _Interrupt:
    """Whether a KeyboardInterrupt came from Ctrl+C (a SIGINT while the user's code ran) or
    was raised by that code itself. On the main thread the SIGINT handler is wrapped to
    note the signal; elsewhere no signal is ever delivered, so any KeyboardInterrupt is the
    code's own."""

    def __init__(self) -> None:
        self.from_signal = False


@contextlib.contextmanager
def _watching_sigint():
    seen = _Interrupt()
    if threading.current_thread() is not threading.main_thread():
        yield seen
        return
    previous = signal.getsignal(signal.SIGINT)
    if not callable(previous):  # SIG_IGN, SIG_DFL or None: not Python's handler, leave it
        yield seen
        return

    def handler(signum, frame):
        seen.from_signal = True
        previous(signum, frame)

    signal.signal(signal.SIGINT, handler)
    try:
        yield seen
    finally:
        signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def user_code(what: str, path: Path):
    """Run a model file's own code (`what`: "net.py:build()", "net.py while it was imported")
    and turn its exits into a ModelLoadError sentence: sys.exit() (SystemExit, which would
    end the CLI without a word and leave the window waiting) and a KeyboardInterrupt the
    code raised itself. A real Ctrl+C goes on as KeyboardInterrupt."""
    with _watching_sigint() as seen:
        try:
            yield
        except SystemExit as e:
            code = "" if e.code is None else repr(e.code)
            raise ModelLoadError(
                f"{what} called sys.exit({code}) instead of returning a model",
                _user_traceback(e, path),
            ) from None
        except KeyboardInterrupt as e:
            if seen.from_signal:
                raise
            raise ModelLoadError(
                f"{what} raised KeyboardInterrupt itself (not a Ctrl+C): a model file must "
                f"return the model",
                _user_traceback(e, path),
            ) from None


# -- trusted pickles ----------------------------------------------------------------------------


def unpickle_module(path: str | os.PathLike) -> nn.Module:
    """A whole nn.Module saved with torch.save(model). Runs code from the file: only call
    this when the user said they trust it."""
    path = existing_file(path, "model")
    kind = file_format(path)
    if kind not in ("zip", "pickle"):
        raise ModelLoadError(f"{path.name} is {kind}, not a model saved with torch.save")
    if kind == "zip":
        check_archive(path)
    try:
        with open(path, "rb") as f, user_code(f"{path.name} while it was unpickled", path):
            obj = torch.load(f, map_location="cpu", weights_only=False)
    except ModelLoadError:
        raise
    except (ModuleNotFoundError, AttributeError) as e:
        raise ModelLoadError(
            f"{path.name} needs Python code that is not importable here ({e}): import or "
            f"install the code that defined the model, or save and load a state_dict instead",
            f"{type(e).__name__}: {e}",
        ) from None
    except Exception as e:  # anything can happen while unpickling foreign code
        if isinstance(e, EOFError) or "eof" in str(e).lower():
            raise ModelLoadError(damaged_message(path, kind, e), f"{type(e).__name__}: {e}") from None
        text = f"{type(e).__name__}: {clean_message(str(e))}"
        raise ModelLoadError(f"{path.name} could not be unpickled ({text[:200]})", text) from None
    if not isinstance(obj, nn.Module):
        raise ModelLoadError(
            f"{path.name} holds a {type(obj).__name__}, not an nn.Module; if it is a "
            f"state_dict, open it as a checkpoint for its architecture"
        )
    return obj


# -- factory files ------------------------------------------------------------------------------


def run_factory(factory: str) -> tuple[nn.Module, ModuleType, Path, str]:
    """Import "path/to/file.py:function" and call the function with no arguments.

    Returns (model, the imported module, the file, the function's name). Runs the file's code:
    the user chose it."""
    file, _, func = factory.rpartition(":")
    if not file or not func:
        raise ModelLoadError(f"'{factory}': expected path/to/file.py:function_name")
    path = existing_file(file, "Python")
    name = path.name
    try:
        source = path.read_text(encoding="utf-8")
        code = compile(source, str(path), "exec")
    except UnicodeDecodeError:
        raise ModelLoadError(f"{name} is not a Python file (it is not text)") from None
    except SyntaxError as e:
        raise ModelLoadError(
            f"{name} has a syntax error on line {e.lineno}: {e.msg}",
            f"{path}, line {e.lineno}: {e.msg}\n{(e.text or '').rstrip()}",
        ) from None
    mod_name = f"_inspector_factory_{path.stem}"
    module_spec = importlib.util.spec_from_file_location(mod_name, path)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[mod_name] = module  # dataclasses and pickling look their module up here
    try:
        with user_code(f"{name} while it was imported", path):
            exec(code, module.__dict__)
    except ModelLoadError:
        sys.modules.pop(mod_name, None)
        raise
    except ImportError as e:
        sys.modules.pop(mod_name, None)
        raise ModelLoadError(f"{name} imports something not installed here: {e}",
                             _user_traceback(e, path)) from None
    except Exception as e:
        sys.modules.pop(mod_name, None)
        raise ModelLoadError(f"{name} failed while it was imported: {type(e).__name__}: {e}",
                             _user_traceback(e, path)) from None
    try:
        model = _call_factory(module, mod_name, name, func, path)
    except ModelLoadError:
        sys.modules.pop(mod_name, None)
        raise
    return model, module, path, func


def _call_factory(module: ModuleType, mod_name: str, name: str, func: str, path: Path):
    fn = getattr(module, func, None)
    if fn is None:
        defined = [k for k, v in vars(module).items()
                   if inspect.isfunction(v) and v.__module__ == mod_name]
        listed = f" (it defines {some(defined)})" if defined else " (it defines no functions)"
        raise ModelLoadError(f"{name} has no function '{func}'{listed}")
    if not callable(fn):
        raise ModelLoadError(f"'{func}' in {name} is a {type(fn).__name__}, not a function")
    try:
        inspect.signature(fn).bind()
    except TypeError:
        raise ModelLoadError(
            f"{name}:{func}() needs arguments, but the factory is called with none: give them "
            f"defaults, or add a function that takes none"
        ) from None
    except ValueError:
        pass  # no signature to read (a builtin): just call it
    try:
        with user_code(f"{name}:{func}()", path):
            model = fn()
    except ModelLoadError:
        raise
    except Exception as e:
        raise ModelLoadError(f"{name}:{func}() raised {type(e).__name__}: {e}",
                             _user_traceback(e, path)) from None
    if not isinstance(model, nn.Module):
        raise ModelLoadError(
            f"{name}:{func}() returned an object of type {type(model).__name__}, not an "
            f"nn.Module: the factory must return the model itself"
        )
    return model


def _user_traceback(e: BaseException, path: Path) -> str:
    """Where the user's own file failed (the frames of this program say nothing to them)."""
    frames = traceback.extract_tb(e.__traceback__)
    theirs = [i for i, f in enumerate(frames) if Path(f.filename) == path]
    start = theirs[0] if theirs else 0
    lines = traceback.format_list(frames[start:]) + traceback.format_exception_only(e)
    return f"Where it failed, from {path.name} on:\n" + "".join(lines)


# -- the two families: factory files and trusted pickles ----------------------------------------


def load_pickle(spec: ModelSpec, device: torch.device) -> LoadedModel:
    path = Path(spec.pickle)
    if path.exists() and not spec.trust_pickle:
        raise ModelLoadError(
            f"{path.name} is a pickled model: unpickling it runs any code inside it, so it is "
            f"opened only with your explicit trust. {TRUST_HINT}"
        )
    obj = unpickle_module(path)
    return wrap_module(obj, path.stem, f"{path.stem} (trusted pickle {path.name})", device, path)


def load_factory(spec: ModelSpec, device: torch.device) -> LoadedModel:
    model, module, path, func = run_factory(spec.factory)
    loaded = wrap_module(model, func, f"{func} (from {path.name})", device, path)
    classes = getattr(module, "CLASSES", None)
    if classes:
        loaded.categories = list(classes)
    if getattr(module, "PREPROCESS", None):
        try:
            loaded.preprocess = Preprocess(**dict(module.PREPROCESS))
        except (TypeError, ValueError) as e:
            raise ModelLoadError(f"{path.name}: PREPROCESS is not usable: {e}") from None
    return loaded


def factory_script(loaded: LoadedModel) -> ModelCode:
    own_classes(loaded.model, "the factory's model")
    func = (loaded.spec.factory or "").rpartition(":")[2]
    path = absolute(loaded.source)
    call = f"module.{func}" if func.isidentifier() else f"getattr(module, {func!r})"
    code = (
        f"# -- The model: {func}() of {Path(path).name} --\n\n"
        f"LABELS = {labels_literal(loaded.categories)}\n"
        f"FACTORY_FILE = {path!r}\n\n\n"
        f"def load_model():\n"
        f"    # Import the file as a module and call its factory with no arguments, as\n"
        f"    # Network Inspector did. This runs the file's code.\n"
        f'    spec = importlib.util.spec_from_file_location("model_factory", FACTORY_FILE)\n'
        f"    module = importlib.util.module_from_spec(spec)\n"
        f"    sys.modules[spec.name] = module  # dataclasses and pickling look it up here\n"
        f"    spec.loader.exec_module(module)\n"
        f"    return {call}()\n"
    )
    return ModelCode(code, path, {"import importlib.util", "import sys"})


def pickle_script(loaded: LoadedModel) -> ModelCode:
    own_classes(loaded.model, "the pickled model")
    path = absolute(loaded.spec.pickle or loaded.source)
    code = (
        f"# -- The model: a whole module saved with torch.save(model) --\n\n"
        f"LABELS = {labels_literal(loaded.categories)}\n"
        f"PICKLED_MODEL = {path!r}\n\n\n"
        f"def load_model():\n"
        f"    # weights_only=False unpickles the whole module, and unpickling runs code from the\n"
        f"    # file (its classes must be importable here). Network Inspector opened it because\n"
        f"    # you said you trust the file; do the same here.\n"
        f'    with open(PICKLED_MODEL, "rb") as f:\n'
        f'        return torch.load(f, map_location="cpu", weights_only=False)\n'
    )
    return ModelCode(code, path)


PICKLE = Family(name="pickle", claims=lambda spec: bool(spec.pickle), load=load_pickle,
                script=pickle_script)
FACTORY = Family(name="factory", claims=lambda spec: bool(spec.factory), load=load_factory,
                 script=factory_script)
