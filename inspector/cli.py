"""The `network-inspector` command.

    network-inspector [IMAGE...] [--model NAME]      open the desktop app
    network-inspector analyse --model resnet18 --out DIR IMAGE_OR_FOLDER...
    network-inspector atlas --model resnet18 --layers layer4 --out DIR FOLDER...
    network-inspector models                         the model catalog
    network-inspector tree --model NAME              the module tree, shapes, hazards
    network-inspector train-demo --out DIR           train the bundled demo model

Only the GUI path imports Qt: `analyse`, `models` and `tree` use inspector.core alone, so
they run on a headless workstation without a display. torch is imported only once a
command needs it, so `--help` answers at once.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import inspector.core  # noqa: F401  (sets the OpenMP wait policy before torch loads)
from inspector.core.methods import ATTRIBUTION_METHODS, CAM_METHODS, DEFAULT_CAM, AttributionOptions

COMMANDS = ("analyse", "analyze", "atlas", "models", "download", "tree", "train-demo")
RANDOM_WEIGHTS_NOTE = (
    "warning: {name} has RANDOM weights (no pretrained file on this machine): its predictions "
    "and maps show an untrained network"
)

USAGE = """\
usage: network-inspector [IMAGE ...] [--model NAME] [--weights FILE] [--device DEV]
                         [--seed N] [--trust-remote-code] [--reset-settings]
       network-inspector analyse --model NAME --out DIR [options] IMAGE_OR_FOLDER ...
       network-inspector atlas --model NAME --layers L1,L2 --out DIR [options] FOLDER_OR_VIDEO ...
       network-inspector models
       network-inspector download NAME              (pretrained torchvision weights)
       network-inspector tree --model NAME [--weights FILE] [--depth N]
       network-inspector train-demo --out DIR [options]
       network-inspector --install-desktop | --uninstall-desktop

Without a command, the desktop app opens (with the images and model given).
Run `network-inspector COMMAND --help` for a command's options.
"""


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        # `network-inspector models | head`: the reader left; say nothing more, like other
        # Unix tools (and keep Python from complaining again while flushing stdout at exit).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


def _main(argv: list[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv in (["--install-desktop"], ["--uninstall-desktop"]):
        # Linux menu entry, icon and "Open with" for images (inspector/desktop.py).
        from inspector.desktop import desktop_command

        return desktop_command(uninstall=argv[0] == "--uninstall-desktop")
    if argv and argv[0] in ("-h", "--help", "help"):
        print(USAGE, end="")
        return 0
    if not argv or argv[0] not in COMMANDS:
        return _gui(argv)
    from inspector import crashlog

    log, crashes = crashlog.start("cli")
    for crash in crashes:
        print(f"network-inspector: an earlier run crashed ({crash.summary()}); "
              f"its crash log is {crash.path}", file=sys.stderr)
    try:
        return _command(argv)
    finally:
        if log is not None:
            log.close()


def _command(argv: list[str]) -> int:
    command, rest = argv[0], argv[1:]
    if command == "train-demo":
        from inspector.demo.train import main as train_main

        return int(train_main(rest) or 0)
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def _gui(argv: list[str]) -> int:
    try:
        from inspector.app import main as gui_main
    except ImportError as e:
        print(
            f"network-inspector: the desktop app cannot start ({e}). Headless commands still "
            f"work: network-inspector analyse --help",
            file=sys.stderr,
        )
        return 1
    return int(gui_main(argv) or 0)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="network-inspector", usage=USAGE)
    # prog: else argparse builds the sub-commands' from USAGE ("usage: usage: ...").
    sub = parser.add_subparsers(dest="command", required=True, prog="network-inspector")

    a = sub.add_parser(
        "analyse",
        aliases=["analyze"],
        help="run a model over images and write NPZ, PNG and TensorBoard files",
        description="Run a model over images headless; per image write an NPZ (input, "
        "activations, gradients, CAMs), CAM overlays and activation mosaics as PNG, and "
        "for the run DIR/summary.json and a TensorBoard log.",
    )
    _model_options(a)
    a.add_argument("--layers", default="",
                   help="comma-separated modules whose activation and gradient to save "
                        "(default: the CAM layer); see `network-inspector tree`")
    a.add_argument("--cam", default=DEFAULT_CAM,
                   help=f"comma-separated CAM methods: {', '.join(CAM_METHODS)}; 'none' for "
                        f"none (default: {DEFAULT_CAM})")
    a.add_argument("--cam-layer", default=None,
                   help="the layer the CAMs read (default: chosen for the model)")
    _attribution_options(a)
    a.add_argument("--target", default="top1",
                   help="what to explain: top1 (default), a class index or a class name; "
                        "det:K for a detection model (the K-th detection by score, default "
                        "0); seg:CLASS for a segmentation model (a name or an index)")
    a.add_argument("--topk", type=int, default=5, help="predictions listed per image")
    a.add_argument("--out", required=True, type=Path, help="output folder (created)")
    a.add_argument("--stretch", action="store_true",
                   help="16-bit, 32-bit and float images: stretch each image's own min..max to "
                        "the full range (default: scale by the type's range, as "
                        "torchvision's ToDtype(scale=True) does)")
    a.add_argument("--edit", action="append", default=[], metavar="SPEC",
                   help="edit every run, MODULE:OP[=ARGS] (repeatable): zero=3,17 | keep=3 | "
                        "scale=0.5[,CHANNELS] | clamp=-1,1 | noise=STD[,SEED] | mean | "
                        "grad-scale=0.5 | input:occlude=X0,Y0,X1,Y1. Everything written is "
                        "the edited run's; the NPZ's logits too")
    a.add_argument("--compare", action="store_true",
                   help="also run each image without the edits and write DIR/compare.json: "
                        "per image and captured module the relative L2 distance and cosine "
                        "between the two runs' outputs, and the top predictions before and after")
    a.add_argument("--no-tensorboard", action="store_true", help="do not write a TensorBoard log")
    a.add_argument("--emit-script", type=Path, default=None, metavar="PATH",
                   help="also write the run as a standalone Python script (torch, torchvision, "
                        "numpy, Pillow; no inspector): `python PATH IMAGE OUT.json` prints and "
                        "writes the logits and the captured modules' statistics")
    a.add_argument("--every", type=int, default=1, metavar="N",
                   help="videos named (.mp4 .mkv .mov .avi .webm; needs "
                        "'network-inspector[video]'): analyse every Nth frame, counting from "
                        "frame 0 (default 1: every frame)")
    _batch_options(a, shard_size=16, workers_help="ray: model actors (default one per GPU, "
                   "else one per CPU); local: not used (one Session runs the images)")
    a.add_argument("--quiet", action="store_true", help="no progress bar")
    a.add_argument("images", nargs="+",
                   help="image files or folders (searched recursively for images), and videos")
    a.set_defaults(func=_analyse)

    at = sub.add_parser(
        "atlas",
        help="per channel, the images of a folder that excite it most (atlas.json, crops)",
        description="Run a model over a folder and write DIR/atlas.json: per layer and "
        "channel the --top images with the largest activation, their receptive-field boxes "
        "and crops, each channel's mean and active fraction, the dead channels; and the mean "
        "Grad-CAM per predicted class. Resumable (--resume), on one machine or on Ray.",
    )
    _model_options(at)
    at.add_argument("--layers", required=True,
                    help="comma-separated modules whose channels to rank; see "
                         "`network-inspector tree`")
    at.add_argument("--top", type=int, default=9, help="images kept per channel (default 9)")
    at.add_argument("--out", required=True, type=Path, help="output folder (created)")
    at.add_argument("--batch-size", type=int, default=32, help="images per forward (default 32)")
    _batch_options(at, shard_size=256, workers_help="local: processes decoding images "
                   "(default min(4, CPUs)); ray: model actors (default one per GPU, else one "
                   "per CPU)")
    at.add_argument("--every", type=int, default=1, metavar="N",
                    help="videos named (.mp4 .mkv .mov .avi .webm; needs "
                         "'network-inspector[video]'): rank every Nth frame, counting from "
                         "frame 0 (default 1: every frame)")
    at.add_argument("--quiet", action="store_true", help="no progress bar")
    at.add_argument("images", nargs="+",
                    help="image files or folders (searched recursively for images), and videos")
    at.set_defaults(func=_atlas)

    m = sub.add_parser("models", help="list the model catalog")
    m.set_defaults(func=_models)

    d = sub.add_parser(
        "download", help="fetch a torchvision model's pretrained weights into torch hub's cache",
        description="Fetch a torchvision model's default pretrained weights into torch hub's "
        "cache (TORCH_HOME), where the app and the commands find them. The only command that "
        "uses the network.",
    )
    d.add_argument("name", help="a torchvision model name, as `network-inspector models` lists")
    d.set_defaults(func=_download)

    t = sub.add_parser("tree", help="print a model's module tree with output shapes and hazards")
    _model_options(t)
    t.add_argument("--depth", type=int, default=None, help="show modules down to this depth")
    t.set_defaults(func=_tree)
    return parser


def _batch_options(p: argparse.ArgumentParser, shard_size: int, workers_help: str) -> None:
    """What analyse and atlas share (inspector.batch): engines, shards and --resume."""
    p.add_argument("--workers", type=int, default=None, help=workers_help)
    p.add_argument("--engine", choices=("local", "ray"), default="local",
                   help="local (default) or ray (needs the [cluster] extra)")
    p.add_argument("--ray-address", default=None,
                   help="'auto' or ray://HOST:PORT to join a running Ray cluster (default: "
                        "start a Ray on this machine, without its dashboard)")
    p.add_argument("--resume", action="store_true",
                   help="continue a killed run in DIR: finished shards are not redone; "
                        "without --seed, the stored run's seed is used")
    p.add_argument("--shard-size", type=int, default=shard_size,
                   help=f"images per shard, the unit of --resume (default {shard_size})")


def _attribution_options(p: argparse.ArgumentParser) -> None:
    d = AttributionOptions()
    p.add_argument("--attr", default="",
                   help=f"comma-separated input attributions: {', '.join(ATTRIBUTION_METHODS)} "
                        f"(default: none). Each adds attr/METHOD to the NPZ: the signed "
                        f"attribution per input channel (saliency: absolute), 3 x H x W at the "
                        f"model input's resolution, for the class the CAMs explain")
    p.add_argument("--ig-steps", type=int, default=d.ig_steps,
                   help=f"Integrated Gradients: steps from the all-zero input (default {d.ig_steps})")
    p.add_argument("--smoothgrad-samples", type=int, default=d.smoothgrad_samples,
                   help=f"SmoothGrad: noisy copies averaged (default {d.smoothgrad_samples})")
    p.add_argument("--smoothgrad-sigma", type=float, default=d.smoothgrad_sigma,
                   help="SmoothGrad: the noise's standard deviation as a fraction of each "
                        f"image's value range (default {d.smoothgrad_sigma})")
    p.add_argument("--occlusion-patch", type=int, default=d.occlusion_patch,
                   help="occlusion: the side of the square patch, filled with the data set's "
                        "mean colour (0 after normalisation), in model-input pixels "
                        f"(default {d.occlusion_patch})")
    p.add_argument("--occlusion-stride", type=int, default=d.occlusion_stride,
                   help="occlusion: the step between patch positions, in model-input pixels "
                        f"(default {d.occlusion_stride})")


def _model_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="demo_shapes",
                   help="a catalog name (see `network-inspector models`; default demo_shapes), "
                        "path/to/file.py:function returning an nn.Module, timm:NAME (a timm "
                        "model; --weights or the local HF cache) or hf:PATH (a Hugging Face "
                        "save_pretrained folder)")
    p.add_argument("--weights", default=None,
                   help="a checkpoint for --model: a state_dict (.pt/.pth, loaded with "
                        "weights_only) or .safetensors")
    p.add_argument("--trust-pickle", action="store_true",
                   help="--weights is a whole model saved with torch.save(model): unpickle it. "
                        "This runs code from the file: only for files you trust")
    p.add_argument("--trust-remote-code", action="store_true",
                   help="--model hf:PATH whose folder holds its own model code (auto_map): run "
                        "that code. Only for folders you trust")
    p.add_argument("--seed", type=int, default=None,
                   help="seed torch's generator right before the model is built: random "
                        "weights are the same for the same seed (default: a new seed, "
                        "recorded in summary.json). analyse: also SmoothGrad's noise seed "
                        f"(default {AttributionOptions().seed})")
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:1 or mps (default: a GPU if any)")


def _model_spec(args: argparse.Namespace):
    """The ModelSpec of the model options; ValueError (exit status 2) for options that cannot
    work, a missing optional extra (timm:, hf:) among them."""
    from inspector.core import model_hub
    from inspector.core.models import ModelSpec

    common = {"device": args.device, "seed": args.seed}
    if args.trust_pickle:
        if not args.weights:
            raise ValueError("--trust-pickle needs --weights FILE (the pickled model)")
        return ModelSpec(name=None, pickle=args.weights, trust_pickle=True, **common)
    if args.model and ".py:" in args.model:
        return ModelSpec(name=None, factory=args.model, checkpoint=args.weights, **common)
    family = model_hub.family_of(args.model)
    if family is not None and not model_hub.has_extra(family):
        raise ValueError(str(model_hub.MissingExtra(family)))
    if args.trust_remote_code and family != "hf":
        raise ValueError("--trust-remote-code is for --model hf:PATH (a Hugging Face folder)")
    if family == "hf" and args.weights:
        raise ValueError("--weights is not used with hf:PATH: the weights are in the folder")
    return ModelSpec(name=args.model, checkpoint=args.weights,
                     trust_remote_code=args.trust_remote_code, **common)


def _error(message: str) -> None:
    print(f"network-inspector: {message}", file=sys.stderr)


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


# -- analyse --------------------------------------------------------------------------------------


def _analyse(args: argparse.Namespace) -> int:
    from inspector.batch.analyse import Analysis
    from inspector.core.edit_spec import parse_edit

    try:
        # Read before the model loads: a mistyped spec is refused at once (exit status 2);
        # what needs the model (module names, channel counts) is checked once it is loaded.
        edits = [parse_edit(spec) for spec in args.edit]
        methods = [] if args.cam.strip().lower() == "none" else _split(args.cam)
        analysis = Analysis(
            spec=_model_spec(args),
            out=args.out,
            layers=_split(args.layers),
            methods=methods,
            cam_layer=args.cam_layer,
            target=args.target,
            topk=args.topk,
            tensorboard=not args.no_tensorboard,
            progress=not args.quiet,
            stretch=args.stretch,
            attributions=_split(args.attr),
            attribution_options=AttributionOptions(
                ig_steps=args.ig_steps,
                smoothgrad_samples=args.smoothgrad_samples,
                smoothgrad_sigma=args.smoothgrad_sigma,
                seed=AttributionOptions().seed if args.seed is None else args.seed,
                occlusion_patch=args.occlusion_patch,
                occlusion_stride=args.occlusion_stride,
            ),
            edits=edits,
            compare=args.compare,
            warn=_error,
            emit_script=args.emit_script,
            every=args.every,
            resume=args.resume,
            shard_size=args.shard_size,
            engine=args.engine,
            ray_address=args.ray_address,
            workers=args.workers,
        )
    except ValueError as e:
        _error(str(e))
        return 2
    return analysis.run(args.images)


def _atlas(args: argparse.Namespace) -> int:
    from inspector.batch.atlas import AtlasOptions, run_atlas

    try:
        spec = _model_spec(args)
    except ValueError as e:
        _error(str(e))
        return 2
    if spec.seed is None:
        # One seed for every process that builds the model (Ray actors): the same weights.
        # Resumed: the stored job's, so that its shards and the new ones share the weights.
        import dataclasses
        import random

        from inspector.batch.shards import stored_seed

        seed = stored_seed(args.out) if args.resume else None
        spec = dataclasses.replace(spec, seed=random.randrange(2**31) if seed is None else seed)
    return run_atlas(
        AtlasOptions(spec=spec, layers=_split(args.layers), out=args.out, top=args.top,
                     batch_size=args.batch_size, workers=args.workers, engine=args.engine,
                     ray_address=args.ray_address, resume=args.resume,
                     shard_size=args.shard_size, every=args.every,
                     progress=not args.quiet, warn=_error,
                     seed_drawn=args.seed is None),
        args.images,
    )


# -- models and tree ------------------------------------------------------------------------------


def _models(args: argparse.Namespace) -> int:
    from inspector.core.models import _REGISTRY, cached_weights_path, list_models
    from inspector.core.tasks.catalog import task_models

    tasks = task_models()
    for name in list_models():
        source = f"torchvision {tasks[name]}" if name in tasks else "torchvision"
        if name in _REGISTRY:
            note = "registered (ships its own weights)"
        elif cached_weights_path(name) is not None:
            note = f"{source}, pretrained weights on this machine"
        else:
            note = f"{source}, random weights (pretrained file not downloaded)"
        print(f"{name:<28} {note}")
    return 0


def _download(args: argparse.Namespace) -> int:
    from inspector.core.models import _REGISTRY, cached_weights_path, download_weights, list_models

    name = args.name
    if name in _REGISTRY:
        _error(f"{name} ships its own weights: nothing to download")
        return 2
    if name not in list_models():
        _error(f"unknown model '{name}': see `network-inspector models`")
        return 2
    cached = cached_weights_path(name)
    if cached is not None:
        print(f"{name}: already on this machine: {cached}")
        return 0
    try:
        path = download_weights(name)
    except Exception as e:  # no network, a proxy, a full disk: one sentence, not a traceback
        _error(f"could not download the weights of {name}: {type(e).__name__}: {e}")
        return 1
    print(f"{name}: pretrained weights saved to {path}")
    return 0


def _tree(args: argparse.Namespace) -> int:
    import torch

    from inspector.core.models import load_model
    from inspector.core.runtime import apply_thread_setting
    from inspector.core.tree import HAZARD_TEXT, build_tree

    apply_thread_setting()  # this command runs the model without a Session

    try:
        spec = _model_spec(args)
    except ValueError as e:
        _error(str(e))
        return 2
    try:
        loaded = load_model(spec)
    except Exception as e:  # every loader failure is reported in words, not a traceback
        _error(f"could not load {spec.what()}: {e}")
        return 1
    if not loaded.pretrained:
        _error(RANDOM_WEIGHTS_NOTE.format(name=loaded.name))
    h, w = loaded.preprocess.crop_size
    tree = build_tree(loaded.model, torch.zeros(1, 3, h, w, device=loaded.device))
    print(f"{loaded.description}; input 1 x 3 x {h} x {w}; "
          f"{tree.root.params_total:,} parameters")
    seen: set[str] = set()
    for name, info in tree.modules.items():
        if args.depth is not None and info.depth > args.depth:
            continue
        shape = info.output_shape
        shown = "x".join(str(s) for s in shape) if shape else "-"
        if len(info.calls) > 1:
            shown += f" (x{len(info.calls)} calls)"
        flags = ", ".join(sorted(info.hazards))
        seen |= info.hazards
        label = ("  " * info.depth) + (info.short_name if name else "(model)")
        params = f"{info.params_total:,}" if info.params_total else ""
        line = f"{label:<44} {info.type_name:<26} {shown:<22} {params:>12}"
        print(line + (f"  ! {flags}" if flags else ""))
    if seen:
        print("\nflags:")
        for flag in sorted(seen):
            print(f"  {flag}: {HAZARD_TEXT.get(flag, flag)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
