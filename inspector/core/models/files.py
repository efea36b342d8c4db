"""Reading checkpoint files, or a sentence why not.

Every fault of a file a user names (missing, a folder, empty, text, cut short, damaged, made
for another architecture, holding more than weights, a factory that does not build a model)
raises `ModelLoadError` whose message names the file and says what is wrong in words a user
can act on. Its `details` keep what the library said (for a bug report), never a traceback
of this program. A checkpoint's format is recognised from its first bytes, not its name:
a safetensors file saved as .pt loads, and a text file named .pt is called text. Models
given as code (factory files, trusted pickles) are read by `model_code`.
"""

from __future__ import annotations

import json
import os
import pickle
import pickletools
import re
import zipfile
from pathlib import Path
from typing import Any

import torch
from torch import nn

SHOWN = 8  # names listed in a message before "and N more"
TRUST_HINT = (
    "If you trust where it came from, open it as a trusted pickle: in the window with Open "
    "model > Pickled model (and tick that you trust it), on the command line with "
    "--weights FILE --trust-pickle."
)


class ModelLoadError(Exception):
    """A model could not be loaded; the message says why in words a user can act on.

    `details` is the longer text behind it (the library's own error, every mismatched key),
    shown on request; it defaults to the message."""

    def __init__(self, message: str, details: str = "") -> None:
        super().__init__(message)
        self.details = details or message


def some(items, fmt=str) -> str:
    """The first few items, then how many more."""
    items = list(items)
    shown = ", ".join(fmt(i) for i in items[:SHOWN])
    return shown + (f" and {len(items) - SHOWN} more" if len(items) > SHOWN else "")


# -- what a file is -------------------------------------------------------------------------

# First bytes of files people pick by mistake.
_SIGNATURES = (
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"\x89HDF", "an HDF5 file (Keras saves .h5 models this way)"),
    (b"\x1f\x8b", "a gzip-compressed file (unpack it first)"),
    (b"%PDF", "a PDF document"),
)


def existing_file(path: str | os.PathLike, what: str) -> Path:
    """`path` as a Path when it is a readable, non-empty file; otherwise ModelLoadError."""
    path = Path(path).expanduser()
    if path.is_dir():
        raise ModelLoadError(f"{path} is a folder, not a {what} file: choose the file inside it")
    if not path.exists():
        raise ModelLoadError(f"{path}: no such file")
    try:
        size = path.stat().st_size
        with open(path, "rb"):
            pass
    except PermissionError:
        raise ModelLoadError(f"{path}: permission denied (the file cannot be read)") from None
    except OSError as e:
        raise ModelLoadError(f"{path}: cannot read the file ({e.strerror or e})") from None
    if size == 0:
        raise ModelLoadError(f"{path.name} is empty (0 bytes)")
    return path


def file_format(path: Path) -> str:
    """"zip" (torch.save), "pickle" (torch.save's older format, or pickle.dump),
    "safetensors", or a phrase for anything else ("a text file", "a PNG image", ...).

    Each format is recognised by its whole signature, not one byte: a safetensors header
    length that is 128 mod 256 starts with 0x80, as a pickle does."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(4096)
    if not head:
        return "an empty file"
    if head.startswith(b"PK\x03\x04"):
        return "zip"
    header_length = int.from_bytes(head[:8], "little") if len(head) >= 9 else 0
    opens_json = head[8:9] == b"{"
    if opens_json and 2 <= header_length <= size - 8:
        return "safetensors"  # an 8-byte little-endian header length, then that much JSON
    if _is_pickle(head):
        return "pickle"
    if opens_json and head[9:10] in (b'"', b"}") and 2 <= header_length <= _MAX_HEADER:
        return "safetensors"  # one whose header is cut short: the reader says so
    for magic, name in _SIGNATURES:
        if head.startswith(magic):
            return name
    if b"\0" not in head:
        try:
            head.decode("utf-8")
            return "a text file"
        except UnicodeDecodeError as e:
            if e.start > len(head) - 4:  # a character cut at the end of what was read
                return "a text file"
    return "a file of an unknown format"


_MAX_HEADER = 100_000_000  # the safetensors library refuses longer headers


def _is_pickle(head: bytes) -> bool:
    """The PROTO opcode, a protocol torch.save or pickle.dump writes (2 to 5), then an opcode."""
    return (len(head) >= 3 and head[0] == 0x80 and 2 <= head[1] <= pickle.HIGHEST_PROTOCOL
            and chr(head[2]) in pickletools.code2op)


def clean_message(text: str) -> str:
    """torch's messages carry terminal colour codes; a window shows them as garbage."""
    return re.sub(r"\x1b\[[0-9;]*m", "", text).strip()


def short_message(text: str, limit: int = 300) -> str:
    """The first line of a library's message, for a one-line status: whole when it fits,
    else the whole sentences that fit, else cut at a word with an ellipsis (a message cut
    mid-word or mid-path reads as a different one). The full text belongs in `details`."""
    lines = clean_message(text).splitlines()
    line = lines[0].strip() if lines else ""
    if len(line) <= limit:
        return line
    ends = [m.end() for m in re.finditer(r"[.!?](?=\s)", line[: limit + 1])]
    if ends:
        return line[: ends[-1]]
    cut = line[:limit].rsplit(None, 1)[0] if " " in line[:limit] else line[: limit - 1]
    return cut.rstrip(" ,;:") + "…"


# -- checkpoints ----------------------------------------------------------------------------


def read_state_dict(path: str | os.PathLike) -> dict[str, torch.Tensor]:
    """A state_dict from a safetensors file, or from a torch.save file with weights_only=True
    (no code from the file runs)."""
    path = existing_file(path, "checkpoint")
    kind = file_format(path)
    if kind == "safetensors" or (path.suffix == ".safetensors" and kind not in ("zip", "pickle")):
        obj = _read_safetensors(path, kind)
    elif kind in ("zip", "pickle"):
        obj = _torch_load(path, kind)
    else:
        raise ModelLoadError(
            f"{path.name} is {kind}, not a PyTorch checkpoint (a state_dict saved with "
            f"torch.save, or a .safetensors file)"
        )
    return _state_dict_in(obj, path)


def _read_safetensors(path: Path, kind: str) -> dict[str, torch.Tensor]:
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8)
        length = int.from_bytes(head, "little") if len(head) == 8 else 0
        if kind != "safetensors" or length > size - 8:
            if kind == "safetensors":
                raise ModelLoadError(
                    f"{path.name} is cut short: its header alone should be {length:,} bytes, "
                    f"the file has {size:,}"
                )
            raise ModelLoadError(f"{path.name} is {kind}, not a safetensors file")
        try:
            header = json.loads(f.read(length))
        except (UnicodeDecodeError, ValueError) as e:
            raise ModelLoadError(
                f"{path.name} is damaged: its safetensors header is not valid JSON", str(e)
            ) from None
    ends = [
        entry["data_offsets"][1]
        for key, entry in header.items()
        if key != "__metadata__" and isinstance(entry, dict) and "data_offsets" in entry
    ]
    data = size - 8 - length
    if ends and max(ends) > data:
        raise ModelLoadError(
            f"{path.name} is cut short: its header describes {max(ends):,} bytes of tensors, "
            f"the file holds {data:,} (an interrupted download or copy?)"
        )
    try:
        return load_file(str(path))
    except (SafetensorError, OSError, ValueError, RuntimeError) as e:
        raise ModelLoadError(f"{path.name} is a damaged safetensors file ({clean_message(str(e))})",
                             f"{type(e).__name__}: {clean_message(str(e))}") from None


def _torch_load(path: Path, kind: str) -> Any:
    if kind == "zip":
        check_archive(path)
    try:
        # A file object, not the path: torch.load picks its reader by a path's suffix, and
        # this file's content was checked instead.
        with open(path, "rb") as f:
            return torch.load(f, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        text = clean_message(str(e))
        needs = re.search(r"GLOBAL ([\w.]+)", text)
        if needs:
            raise ModelLoadError(
                f"{path.name} holds pickled Python objects, not only tensors (it needs "
                f"{needs.group(1)}; perhaps a whole saved model). weights_only=True refuses to "
                f"load it, because unpickling them runs code from the file. {TRUST_HINT}",
                text,
            ) from None
        raise ModelLoadError(damaged_message(path, kind, e), text) from None
    except Exception as e:  # torch reports damaged files as RuntimeError, EOFError, KeyError...
        text = f"{type(e).__name__}: {clean_message(str(e))}"
        raise ModelLoadError(damaged_message(path, kind, e), text) from None


def check_archive(path: Path) -> None:
    """torch.save's zip archive holds <name>/data.pkl; TorchScript's also <name>/constants.pkl."""
    try:
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
    except (zipfile.BadZipFile, OSError) as e:
        raise ModelLoadError(
            f"{path.name} is cut short or damaged: the zip archive torch.save writes is "
            f"incomplete (an interrupted save, download or copy?)", f"{type(e).__name__}: {e}"
        ) from None
    if any(n.endswith("/constants.pkl") for n in names):
        raise ModelLoadError(
            f"{path.name} is a TorchScript archive (torch.jit.save), not a state_dict: this "
            f"app loads eager nn.Modules"
        )
    if not any(n.endswith("/data.pkl") for n in names):
        raise ModelLoadError(
            f"{path.name} is a zip archive, but not one torch.save wrote (it holds "
            f"{some(names)})"
        )


def damaged_message(path: Path, kind: str, e: BaseException) -> str:
    text = str(e)
    if kind == "zip":  # its directory was readable (check_archive): a member is damaged
        return f"{path.name} is a damaged torch.save archive ({clean_message(text).splitlines()[0][:200]})"
    if isinstance(e, EOFError) or "truncated" in text.lower() or "eof" in text.lower():
        return f"{path.name} is cut short: the file ends in the middle of its data"
    return (f"{path.name} is damaged: it starts like a torch.save file in the older pickle "
            f"format, but cannot be read")


_WRAPPERS = ("state_dict", "model_state_dict", "model", "net")
_PREFIXES = ("module.", "_orig_mod.", "model.")  # DataParallel, torch.compile, Lightning


def _state_dict_in(obj: Any, path: Path) -> dict[str, torch.Tensor]:
    if isinstance(obj, dict):
        for key in _WRAPPERS:
            inner = obj.get(key)
            if isinstance(inner, dict) and inner and all(isinstance(k, str) for k in inner):
                obj = inner
                break
    if not isinstance(obj, dict):
        raise ModelLoadError(
            f"{path.name} holds a {type(obj).__name__}, not a state_dict (a mapping of names "
            f"to tensors)"
        )
    if not obj:
        raise ModelLoadError(f"{path.name} holds an empty state_dict: it has no weights")
    other = [k for k, v in obj.items() if not isinstance(v, torch.Tensor)]
    if other:
        raise ModelLoadError(
            f"{path.name} holds a dict that is not a state_dict: {some(map(str, other))} "
            f"{'is' if len(other) == 1 else 'are'} not tensors (a state_dict maps names to "
            f"tensors; one saved under 'state_dict' or 'model' is found too)"
        )
    keys = list(obj)
    for prefix in _PREFIXES:
        if all(k.startswith(prefix) for k in keys):
            obj = {k[len(prefix) :]: v for k, v in obj.items()}
            keys = list(obj)
    return obj


class CheckpointMismatch(ModelLoadError):
    """A state dict that does not fit the model: the message names the missing, unexpected
    and wrongly shaped keys."""

    def __init__(self, path, arch: str, missing, unexpected, wrong_shape) -> None:
        def shape(w):
            return f"{w[0]} (file {list(w[1])}, model {list(w[2])})"

        parts, full = [], []
        for items, label, fmt in ((missing, "missing", str), (unexpected, "unexpected", str),
                                  (wrong_shape, "with the wrong shape", shape)):
            if items:
                parts.append(f"{len(items)} {label}: {some(items, fmt)}")
                full.append(f"{label} ({len(items)}):\n" + "\n".join(f"  {fmt(i)}" for i in items))
        name = Path(path).name
        head = f"{name} does not fit {arch}"
        if missing and unexpected and not wrong_shape and len(unexpected) >= len(missing):
            head += " (it looks made for another architecture)"
        super().__init__(f"{head}: " + "; ".join(parts), f"{head}.\n\n" + "\n\n".join(full))


def apply_state_dict(model: nn.Module, state: dict[str, torch.Tensor], path, arch="the model"):
    """Load strictly, naming every mismatched key instead of a bare stack trace."""
    own = model.state_dict()
    missing = [k for k in own if k not in state]
    unexpected = [k for k in state if k not in own]
    wrong = [(k, tuple(state[k].shape), tuple(v.shape)) for k, v in own.items()
             if k in state and tuple(state[k].shape) != tuple(v.shape)]
    if missing or unexpected or wrong:
        raise CheckpointMismatch(path, arch, missing, unexpected, wrong)
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as e:
        raise ModelLoadError(f"{Path(path).name} does not fit {arch}: {short_message(str(e))}",
                             clean_message(str(e))) from None
