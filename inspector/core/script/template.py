"""The fixed parts of the script that Copy as Python writes (core.script.export fills them in).

Each block is the text of the generated script, not code of this package: it may use only
torch, torchvision, numpy and Pillow. The image blocks restate core.inputs.images and
core.inputs.preprocess step for step (tests/core/test_script_export.py holds them to the engine's
numbers); a change there needs the same change here. `$name` fields are filled with
string.Template.

One file on purpose, though it is over 400 lines: its blocks are one program, in the order
the script has them (header, weights, image, capture, run, main), and each uses names the
others define (`run` calls `preprocess` and `capture_output`, `main` calls `run`). Read top
to bottom, this file is the generated script; split, that program would be in pieces.
"""

from __future__ import annotations

from string import Template

HEADER = Template('''\
#!/usr/bin/env python3
"""$title

$summary
Run it:

    python script.py$image_hint [OUT.json]

It prints the top predictions and, per captured module, the mean, std, min and max of its
output$grad_words, and writes them to OUT.json as
{"logits": [...], "target": N,
 "modules": {name: {"mean", "std", "min", "max"}}$grad_json}.
A module called more than once is described by its first call.

Written by Network Inspector (Copy as Python). It needs torch, torchvision, numpy and Pillow,
not Network Inspector. What it does not redo: the run's CAMs and input attributions, input
captures, and the 1/2..1/8-scale decoding of JPEGs over Pillow's pixel limit.
"""

from __future__ import annotations

$imports''')

SAFETENSORS = '''
SAFETENSORS_DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8,
    "U8": torch.uint8, "BOOL": torch.bool,
}


def read_safetensors(path):
    """The tensors of a .safetensors file, without the safetensors package: an 8-byte
    little-endian header length, a JSON header (each tensor's dtype, shape and byte range),
    then the raw little-endian data."""
    with open(path, "rb") as f:
        length = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(length))
        data = f.read()
    state = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        start, end = entry["data_offsets"]
        dtype = SAFETENSORS_DTYPES[entry["dtype"]]
        if start == end:
            state[name] = torch.empty(entry["shape"], dtype=dtype)
        else:  # bytearray: a writable copy, which torch.frombuffer wants
            chunk = torch.frombuffer(bytearray(data[start:end]), dtype=dtype)
            state[name] = chunk.reshape(entry["shape"])
    return state
'''

CHECKPOINT = '''

def read_state_dict(path):
    """A checkpoint as Network Inspector reads one: a .safetensors file, or a torch.save file
    with weights_only=True (only tensors, no code from the file runs), taken out of a
    {"state_dict": ...} wrapper and without a "module." (DataParallel) or "_orig_mod."
    (torch.compile) prefix."""
    with open(path, "rb") as f:
        head = f.read(16)
        if head.startswith(b"PK") or head[:1] == b"\\x80":  # torch.save: zip, or older pickle
            f.seek(0)
            state = torch.load(f, map_location="cpu", weights_only=True)
        else:
            state = read_safetensors(path)
    for key in ("state_dict", "model_state_dict", "model", "net"):
        inner = state.get(key)
        if isinstance(inner, dict) and inner and all(isinstance(k, str) for k in inner):
            state = inner
            break
    for prefix in ("module.", "_orig_mod.", "model."):
        if all(k.startswith(prefix) for k in state):
            state = {k[len(prefix):]: v for k, v in state.items()}
    return state
'''

IMAGE = Template('''

# -- The input: read and preprocess the image as Network Inspector does ------------------------

CROP_SIZE = $crop_size  # (height, width) of the model input
RESIZE_SIZE = $resize_size  # the shorter side is resized to this first; None: straight to CROP_SIZE
RESAMPLE = Image.Resampling.$resample
MEAN = $mean
STD = $std
# 16-bit, 32-bit and float images: False scales them by their type's range (16-bit / 65535,
# float as 0..1, as torchvision's ToDtype(scale=True)); True maps their own min..max to 0..255.
STRETCH = $stretch
HIGH_DEPTH = {"I", "I;16", "I;16B", "I;16L", "I;16N", "F"}
BACKGROUND = (255, 255, 255)  # transparent images are shown over white
$run_image

def load_image(path):
    """An upright 8-bit RGB image: EXIF orientation applied, transparency over white,
    high-depth images scaled to 8 bits, everything else converted by Pillow."""
    with Image.open(path) as im:
        im.load()
        value_range = type_range(im) if im.mode in HIGH_DEPTH else None  # from the file's tags
        try:
            im = ImageOps.exif_transpose(im)
        except Exception:  # a damaged EXIF block: keep the image as stored
            pass
        if im.mode in HIGH_DEPTH:
            return high_depth_to_rgb(im, *value_range)
        if im.mode == "RGB" and "transparency" not in im.info:
            return im.copy()
        if im.has_transparency_data:
            out = Image.new("RGBA", im.size, (*BACKGROUND, 255))
            out.alpha_composite(im.convert("RGBA"))
            return out.convert("RGB")
        return im.convert("RGB")


def type_range(im):
    """The values a high-depth image's type can hold: float 0..1; 32-bit integers by the
    TIFF's declared sample depth; otherwise 16 bits."""
    if im.mode == "F":
        return 0.0, 1.0
    if im.mode != "I":
        return 0.0, 65535.0
    tags = getattr(im, "tag_v2", None)
    bits = tags.get(258) if tags is not None else None  # BitsPerSample
    bits = bits[0] if isinstance(bits, tuple) and bits else bits
    if not isinstance(bits, int) or not 1 <= bits <= 32:
        return 0.0, 65535.0
    fmt = tags.get(339)  # SampleFormat: 2 signed, 3 float
    fmt = fmt[0] if isinstance(fmt, tuple) and fmt else fmt
    if fmt == 3:
        return 0.0, 1.0
    if fmt == 2:
        return 0.0, float(2 ** (bits - 1) - 1)
    return 0.0, float(2**bits - 1)


def high_depth_to_rgb(im, lo, hi):
    """A gray RGB image of a 16-bit, 32-bit or float one, by lo..hi (or with STRETCH, by its
    own finite min..max); NaN and infinities are black."""
    a = np.array(im, dtype=np.float32)
    finite = np.isfinite(a)
    if STRETCH:
        values = a[finite]
        if values.size and values.max() > values.min():
            lo, hi = float(values.min()), float(values.max())
    a -= lo
    a *= 255.0 / (hi - lo)
    a[~finite] = 0.0
    np.clip(a, 0.0, 255.0, out=a)
    gray = np.rint(a, out=a).astype(np.uint8)
    return Image.fromarray(np.repeat(gray[:, :, None], 3, axis=2))


def crop_start(size, crop):
    """torchvision's center crop: pad (with zeros) by (crop - size) // 2 in front when the
    crop is larger, else start at round((size - crop) / 2), half to even."""
    if crop > size:
        return -((crop - size) // 2)
    return int(round((size - crop) / 2.0))


def preprocess(img):
    """(3, H, W) float32: resize, center-crop, scale to 0..1, normalise (the same tensor as
    torchvision's weights.transforms() on a PIL image)."""
    w, h = img.size
    if RESIZE_SIZE is None:
        new_w, new_h = CROP_SIZE[1], CROP_SIZE[0]
    elif w <= h:
        new_w, new_h = RESIZE_SIZE, int(RESIZE_SIZE * h / w)
    else:
        new_w, new_h = int(RESIZE_SIZE * w / h), RESIZE_SIZE
    if (new_w, new_h) != (w, h):
        img = img.resize((new_w, new_h), RESAMPLE)
    ch, cw = CROP_SIZE
    left, top = crop_start(new_w, cw), crop_start(new_h, ch)
    if (left, top, cw, ch) != (0, 0, new_w, new_h):
        img = img.crop((left, top, left + cw, top + ch))  # outside the image: zeros
    x = torch.from_numpy(np.array(img, dtype=np.uint8)).permute(2, 0, 1).float().div(255)
    mean = torch.tensor(MEAN, dtype=torch.float32)[:, None, None]
    std = torch.tensor(STD, dtype=torch.float32)[:, None, None]
    return x.sub_(mean).div_(std)
''')

CHANNEL_DIM = '''

def channel_dim(x, dim=None):
    """The channel dimension of an output: `dim` when given (a channels-last output says -1),
    else 1 for (B, C) and (B, C, H, W), the last one for (B, tokens, C)."""
    if x.ndim < 2:
        raise ValueError(f"output of shape {tuple(x.shape)} has no channel dimension")
    if dim is None:
        dim = -1 if x.ndim == 3 else 1
    if not -x.ndim <= dim < x.ndim or dim % x.ndim == 0:
        raise ValueError(f"dim {dim} is not a channel dimension of shape {tuple(x.shape)}")
    return dim % x.ndim


def channel_mask(x, channels, value, dim=None, keep=False):
    """A mask that broadcasts over x: `value` at `channels` (keep: at every other channel),
    1 elsewhere."""
    d = channel_dim(x, dim)
    n = x.shape[d]
    if keep:
        mask = torch.full((n,), value, dtype=x.dtype, device=x.device)
        mask[list(channels)] = 1.0
    else:
        mask = torch.ones(n, dtype=x.dtype, device=x.device)
        mask[list(channels)] = value
    return mask.view([n if i == d else 1 for i in range(x.ndim)])
'''

CAPTURE = Template('''

# -- Hooks: what the run captured -------------------------------------------------------------

CAPTURED = $captured
TARGET = $target  # the class whose score is differentiated; None: the top-1 prediction

# Every handle that register_forward_hook, register_forward_pre_hook and Tensor.register_hook
# return: all removed at the end, so the model is left as it was found.
handles = []
outputs = {}  # module name -> statistics of its output
gradients = {}  # module name -> statistics of the gradient of the score w.r.t. that output
shapes = {}


def statistics(t):
    """mean, std (of the population, as Network Inspector shows it), min and max, in float64."""
    t = t.detach().double()
    if t.numel() == 0:
        return {"mean": float("nan"), "std": float("nan"), "min": float("nan"), "max": float("nan")}
    return {"mean": t.mean().item(), "std": t.std(correction=0).item(),
            "min": t.min().item(), "max": t.max().item()}


def tensors_in(value, path=""):
    """Every tensor in a module's output, with its path: "" for a tensor, "0", "1.logits"
    inside tuples, lists and dicts."""
    if isinstance(value, torch.Tensor):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from tensors_in(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, (tuple, list)):
        for i, v in enumerate(value):
            yield from tensors_in(v, f"{path}.{i}" if path else str(i))


def capture_output(name):
    """A forward hook: called with (module, args, output) after the module's forward."""

    def hook(module, args, output):
        for path, t in tensors_in(output):
            key = f"{name}:{path}" if path else name
            if key in outputs:
                continue  # called again: the first call is the one described
            # Now, not later: an in-place op further on (ReLU(inplace=True)) may overwrite t.
            outputs[key] = statistics(t)
            shapes[key] = tuple(t.shape)$grad_registration
        # Returning None leaves the output as it is.

    return hook
$grad_hook

def logits_of(output):
    """The class scores in a model's output: the tensor, 'logits' or 'out' of a dict, or the
    first tensor inside."""
    if isinstance(output, dict):
        for key in ("logits", "out"):
            if isinstance(output.get(key), torch.Tensor):
                return output[key]
    for _, t in tensors_in(output):
        return t
    raise ValueError(f"the model returned {type(output).__name__} with no tensor in it")
''')

GRAD_REGISTRATION = '''
            if t.requires_grad:
                # Tensor.register_hook: called with d score / d t during backward.
                handles.append(t.register_hook(capture_gradient(key)))'''

GRAD_HOOK = '''

def capture_gradient(key):
    """A tensor hook: called with the gradient of the score w.r.t. the tensor it was
    registered on; returning None leaves the gradient as it is."""

    def hook(grad):
        gradients[key] = statistics(grad)

    return hook
'''

RUN = Template('''

# -- The run ----------------------------------------------------------------------------------
$device_choice

def run(image_path, device=DEVICE):
    device = torch.device(device)
    model = load_model().to(device).eval()
    modules = dict(model.named_modules())  # "" is the model itself
    x = preprocess(load_image(image_path))[None].to(device)
    try:$edits
        for name in CAPTURED:
            handles.append(modules[name].register_forward_hook(capture_output(name)))
$forward
    finally:
        for handle in handles:
            handle.remove()
        handles.clear()
    return device, logits.detach().float().cpu()[0], target
''')

# Where the script runs, by where the run ran: the same kind of device gives the same figures
# (a GPU's cuDNN and TF32 convolutions differ from the CPU's in the last digits).
DEVICE_CPU = '''
# Network Inspector ran this on the CPU; --device cuda runs it on a GPU, where the figures
# may differ in the last digits (cuDNN and TF32 convolutions).
DEVICE = "cpu"
'''

DEVICE_CUDA = '''
# Network Inspector ran this on a CUDA GPU: so does the script, where there is one.
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
'''

DEVICE_MPS = '''
# Network Inspector ran this on Apple's GPU (MPS): so does the script, where there is one.
DEVICE = "mps" if torch.backends.mps.is_available() else "cpu"
'''

FORWARD_WITH_GRAD = '''\
        x.requires_grad_(True)
        logits = logits_of(model(x))
        target = TARGET if TARGET is not None else int(logits[0].argmax())
        # Gradients w.r.t. the input only: autograd passes through every hooked output on the
        # way, so their tensor hooks fire, and it skips the parameters' .grad.
        torch.autograd.grad(logits[0, target], x)'''

FORWARD_NO_GRAD = '''\
        with torch.no_grad():
            logits = logits_of(model(x))
        target = TARGET if TARGET is not None else int(logits[0].argmax())'''

MAIN = Template('''

# The model itself is "" in named_modules(); printed by the name Network Inspector's module
# tree gives it, so that its row is not a blank one.
MODEL_NAME = $model_name


def shown_name(key):
    """A captured output's name as printed: "" (the model) and ":0" (a tensor in the model's
    tuple output) get MODEL_NAME before them."""
    return MODEL_NAME + key if key == "" or key.startswith(":") else key


def show(title, table):
    print(f"\\n{title}")
    print(f"{'module':<32} {'shape':<18} {'mean':>11} {'std':>11} {'min':>11} {'max':>11}")
    for name, s in table.items():
        shape = "x".join(str(n) for n in shapes[name])
        print(f"{shown_name(name):<32} {shape:<18} {s['mean']:>11.4g} {s['std']:>11.4g} "
              f"{s['min']:>11.4g} {s['max']:>11.4g}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("image"$image_default)
    parser.add_argument("out", nargs="?", help="write the figures to this JSON file")
    parser.add_argument("--device", default=DEVICE, help=f"cpu, cuda, ... (default {DEVICE})")
    args = parser.parse_args()
    device, logits, target = run(args.image, args.device)
    probs = logits.softmax(-1)
    print(f"{args.image} on {device}; top predictions:")
    for p, i in zip(*probs.topk(min(5, probs.numel())), strict=True):
        print(f"  {p.item():8.4f}  {label(int(i))} ({int(i)})")
    show("output statistics:", outputs)
    missed = [n for n in CAPTURED if not any(k == n or k.startswith(n + ":") for k in outputs)]
    if missed:
        print(f"never called: {', '.join(shown_name(n) for n in missed)}")$show_gradients
    if args.out:
        result = {"logits": logits.tolist(), "target": target, "modules": outputs}$json_gradients
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
        print(f"\\nwritten to {args.out}")


def label(index):
    return LABELS[index] if LABELS and 0 <= index < len(LABELS) else f"class {index}"


if __name__ == "__main__":
    main()
''')

SHOW_GRADIENTS = '''
    gradients_in_order = {k: gradients[k] for k in outputs if k in gradients}
    show(f"gradient of the score of {label(target)} ({target}) w.r.t. each output:",
         gradients_in_order)'''

JSON_GRADIENTS = '''
        result["gradients"] = gradients'''
