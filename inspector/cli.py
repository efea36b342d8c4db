"""The `network-inspector` command.

    network-inspector [IMAGE...] [--model NAME]      open the desktop app
    network-inspector analyse --model resnet18 --out DIR IMAGE_OR_FOLDER...
    network-inspector atlas --model resnet18 --layers layer4 --out DIR FOLDER...
    network-inspector compare-models --model resnet18 --weights-b B.pt --out DIR FOLDER...
    network-inspector models                         the model catalog
    network-inspector tree --model NAME              the module tree, shapes, hazards
    network-inspector train-demo --out DIR           train the bundled demo model

Only the GUI path imports Qt: `analyse`, `models` and `tree` use inspector.core alone, so
they run on a headless workstation without a display. torch is imported only once a
command needs it, so `--help` answers at once. Each command's options are built in
cli_options.py; this module parses them and runs the command.
"""

from __future__ import annotations

import argparse
import os
import sys

import inspector.core  # noqa: F401  (sets the OpenMP wait policy before torch loads)
from inspector import cli_model_options, cli_options
from inspector.core.explain.catalog import AttributionOptions

COMMANDS = ("analyse", "analyze", "atlas", "compare-models", "visualise", "visualize",
            "concepts", "models", "download", "tree", "train-demo")
RANDOM_WEIGHTS_NOTE = (
    "warning: {name} has RANDOM weights (no pretrained file on this machine): its predictions "
    "and maps show an untrained network"
)

USAGE = """\
usage: network-inspector [IMAGE ...] [--model NAME] [--weights FILE] [--device DEV]
                         [--seed N] [--trust-remote-code] [--edit SPEC ...] [--reset-settings]
       network-inspector analyse --model NAME --out DIR [options] IMAGE_OR_FOLDER ...
       network-inspector atlas --model NAME --layers L1,L2 --out DIR [options] FOLDER_OR_VIDEO ...
       network-inspector compare-models --model A [--model-b B] [--weights-b FILE] --out DIR FOLDER ...
       network-inspector visualise --model NAME --layer L --channels 0-63 --out DIR [options]
       network-inspector concepts --model NAME --layer L --k K --out DIR [options] FOLDER ...
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
        status = _main(argv)
    except BrokenPipeError:
        # `network-inspector models | head`: the reader left; say nothing more, like other
        # Unix tools (and keep Python from complaining again while flushing stdout at exit).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    if argv is None and _interrupted and _nothing_left_at_exit():
        # Ctrl+C at the terminal: every file is closed and every lock released by now, and
        # the interpreter's teardown of torch's libraries alone takes about a second.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    return status


_interrupted = False


def _nothing_left_at_exit() -> bool:
    """Whether no exit handler has work left that os._exit would skip (a Ray this process
    started stops its own servers at exit)."""
    ray = sys.modules.get("ray")
    return ray is None or not getattr(ray, "is_initialized", lambda: False)()


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
        from inspector.demo.train_options import parse_args

        parse_args(rest)  # --help and bad options answered before torch and the trainer load
        from inspector.demo.train import main as train_main

        return int(train_main(rest) or 0)
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        global _interrupted
        _interrupted = True
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
    cli_options.add_analyse(sub).set_defaults(func=_analyse)
    cli_options.add_atlas(sub).set_defaults(func=_atlas)
    cli_options.add_compare_models(sub).set_defaults(func=_compare_models)
    cli_options.add_visualise(sub).set_defaults(func=_visualise)
    cli_options.add_concepts(sub).set_defaults(func=_concepts)
    cli_options.add_models(sub).set_defaults(func=_models)
    cli_options.add_download(sub).set_defaults(func=_download)
    cli_options.add_tree(sub).set_defaults(func=_tree)
    return parser


def _error(message: str) -> None:
    print(f"network-inspector: {message}", file=sys.stderr)


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


# -- analyse --------------------------------------------------------------------------------------


def _analyse(args: argparse.Namespace) -> int:
    from inspector.batch.analyse.command import Analysis
    from inspector.core.edits.spec import parse_edit
    from inspector.core.explain.attention.options import AttentionOptions

    try:
        # Read before the model loads: a mistyped spec is refused at once (exit status 2);
        # what needs the model (module names, channel counts) is checked once it is loaded.
        edits = [parse_edit(spec) for spec in args.edit]
        methods = [] if args.cam.strip().lower() == "none" else _split(args.cam)
        metrics = cli_options.metric_request(args)
        boxes = None
        if args.boxes is not None:
            from inspector.batch.metric_boxes import load_boxes

            boxes = load_boxes(args.boxes)
        analysis = Analysis(
            spec=cli_model_options.model_spec(args),
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
            patch_sweep=args.patch_sweep,
            sweep_depth=args.sweep_depth,
            warn=_error,
            emit_script=args.emit_script,
            every=args.every,
            resume=args.resume,
            shard_size=args.shard_size,
            engine=args.engine,
            ray_address=args.ray_address,
            workers=args.workers,
            verbose=args.verbose,
            attention=AttentionOptions(fusion=args.rollout_fusion, discard=args.rollout_discard),
            logit_lens=args.logit_lens,
            dff=args.dff,
            dff_layer=args.dff_layer,
            metrics=metrics,
            boxes=boxes,
        )
    except ValueError as e:
        _error(str(e))
        return 2
    return analysis.run(args.images)


def _atlas(args: argparse.Namespace) -> int:
    from inspector.batch.atlas import AtlasOptions, run_atlas

    try:
        spec = cli_model_options.model_spec(args)
    except ValueError as e:
        _error(str(e))
        return 2
    spec = _with_weights_seed(spec, args)
    return run_atlas(
        AtlasOptions(spec=spec, layers=_split(args.layers), out=args.out, top=args.top,
                     batch_size=args.batch_size, workers=args.workers, engine=args.engine,
                     ray_address=args.ray_address, resume=args.resume,
                     shard_size=args.shard_size, every=args.every,
                     progress=not args.quiet, warn=_error, verbose=args.verbose,
                     seed_drawn=args.seed is None),
        args.images,
    )


def _compare_models(args: argparse.Namespace) -> int:
    from inspector.batch.compare_models.command import CompareOptions, run_compare_models

    try:
        spec_a = cli_model_options.model_spec(args)
        spec_b = cli_model_options.model_b_spec(args)
    except ValueError as e:
        _error(str(e))
        return 2
    layers_b = None if args.layers_b is None else (
        "auto" if args.layers_b.strip() == "auto" else _split(args.layers_b))
    opts = CompareOptions(
        spec_a=spec_a, spec_b=spec_b, out=args.out,
        layers_a="auto" if args.layers.strip() == "auto" else _split(args.layers),
        layers_b=layers_b, estimator=args.estimator, batch_size=args.batch_size,
        order_seed=args.order_seed, shard_size=args.shard_size, match=args.match,
        match_threshold=args.match_threshold, atlas_a=args.atlas_a, atlas_b=args.atlas_b,
        workers=args.workers, engine=args.engine, ray_address=args.ray_address,
        resume=args.resume, progress=not args.quiet, verbose=args.verbose, warn=_error)
    return run_compare_models(opts, args.images)


def _with_weights_seed(spec, args: argparse.Namespace):
    """One seed for every process that builds the model (Ray actors): the same weights.
    Resumed: the stored job's, so that its shards and the new ones share the weights."""
    if spec.seed is not None:
        return spec
    import dataclasses
    import random

    from inspector.batch.engine.shards import stored_seed

    seed = stored_seed(args.out)[0] if args.resume else None
    return dataclasses.replace(spec, seed=random.randrange(2**31) if seed is None else seed)


def _visualise(args: argparse.Namespace) -> int:
    from inspector.batch.visualise import VisualiseOptions, run_visualise

    try:
        spec = cli_model_options.model_spec(args)
    except ValueError as e:
        _error(str(e))
        return 2
    # --seed seeds the optimisation too (0 without it); the weights' seed is drawn then.
    return run_visualise(VisualiseOptions(
        spec=_with_weights_seed(spec, args), layer=args.layer, channels=args.channels,
        out=args.out, steps=args.steps, size=args.size,
        seed=0 if args.seed is None else args.seed, objective=args.objective,
        directions=args.directions, batch_size=args.batch_size, engine=args.engine,
        ray_address=args.ray_address, workers=args.workers, resume=args.resume,
        progress=not args.quiet, verbose=args.verbose, seed_drawn=args.seed is None,
        warn=_error))


def _concepts(args: argparse.Namespace) -> int:
    from inspector.batch.concepts import ConceptOptions, run_concepts

    try:
        spec = cli_model_options.model_spec(args)
    except ValueError as e:
        _error(str(e))
        return 2
    return run_concepts(ConceptOptions(
        spec=_with_weights_seed(spec, args), layer=args.layer, k=args.k, out=args.out,
        seed=0 if args.seed is None else args.seed, sample=args.sample, top=args.top,
        batch_size=args.batch_size, shard_size=args.shard_size, engine=args.engine,
        ray_address=args.ray_address, workers=args.workers, resume=args.resume,
        every=args.every, progress=not args.quiet, verbose=args.verbose,
        seed_drawn=args.seed is None, warn=_error), args.images)


# -- models and tree ------------------------------------------------------------------------------


def _models(args: argparse.Namespace) -> int:
    from inspector.core.models.load import families
    from inspector.core.models.task_models import task_models
    from inspector.core.models.torchvision_models import cached_weights_path

    tasks = task_models()
    for family in families():
        if family.module is not None:  # a hub's own library lists its catalog (timm:, hf:)
            continue
        for name in family.names():
            source = f"torchvision {tasks[name]}" if name in tasks else "torchvision"
            if not family.name.startswith("torchvision"):
                note = "registered (ships its own weights)"
            elif cached_weights_path(name) is not None:
                note = f"{source}, pretrained weights on this machine"
            else:
                note = f"{source}, random weights (pretrained file not downloaded)"
            print(f"{name:<28} {note}")
    return 0


def _download(args: argparse.Namespace) -> int:
    from inspector.core.models.base import ModelSpec
    from inspector.core.models.load import family_for
    from inspector.core.models.torchvision_models import cached_weights_path, download_weights

    name = args.name
    family = family_for(ModelSpec(name=name))
    if family is not None and family.module is None and not family.name.startswith("torchvision"):
        _error(f"{name} ships its own weights: nothing to download")
        return 2
    if family is None or not family.name.startswith("torchvision"):
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
    from inspector.core.models.files import ModelLoadError
    from inspector.core.models.load import load_model, probe_tree
    from inspector.core.models.tree import HAZARD_TEXT
    from inspector.core.run.runtime import apply_thread_setting

    apply_thread_setting()  # this command runs the model without a Session

    try:
        spec = cli_model_options.model_spec(args)
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
    try:
        tree = probe_tree(loaded)  # the model on its own input size, as the window probes it
    except ModelLoadError as e:  # the model's fault: one sentence, as for a load
        _error(str(e))
        return 1
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
