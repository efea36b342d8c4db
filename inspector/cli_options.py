"""The options of the `network-inspector` commands (argparse), one builder per command,
and the model options turned into a core ModelSpec. inspector.cli builds the parser from
these and runs the command; like it, this module imports neither Qt nor torch."""

from __future__ import annotations

import argparse
from pathlib import Path

from inspector.cli_model_options import model_options
from inspector.core.explain.attention.options import FUSIONS
from inspector.core.explain.catalog import (
    ATTENTION_CAMS,
    ATTRIBUTION_METHODS,
    CAM_METHODS,
    DEFAULT_CAM,
    AttributionOptions,
)
from inspector.core.explain.metrics.names import BASELINES, METRICS, MetricOptions, parse_metrics


def add_analyse(sub) -> argparse.ArgumentParser:
    """`analyse` (alias `analyze`): a model over images, headless."""
    a = sub.add_parser(
        "analyse",
        aliases=["analyze"],
        help="run a model over images and write NPZ, PNG and TensorBoard files",
        description="Run a model over images headless; per image write an NPZ (input, "
        "activations, gradients, CAMs), CAM overlays and activation mosaics as PNG, and "
        "for the run DIR/summary.json and a TensorBoard log.",
    )
    model_options(a)
    a.add_argument("--layers", default="",
                   help="comma-separated modules whose activation and gradient to save "
                        "(default: the CAM layer); see `network-inspector tree`. A "
                        "transformer's attention module (encoder.layers.encoder_layer_3."
                        "self_attention, blocks.3.attn) saves its attention instead: NPZ "
                        "attention/NAME, (heads, tokens, tokens)")
    a.add_argument("--cam", default=DEFAULT_CAM,
                   help=f"comma-separated CAM methods: {', '.join(CAM_METHODS)}; 'none' for "
                        f"none (default: {DEFAULT_CAM}). {', '.join(sorted(ATTENTION_CAMS))} "
                        f"are maps of a ViT's attention over its blocks (NPZ grid/METHOD: "
                        f"the map on the patch grid)")
    a.add_argument("--cam-layer", default=None,
                   help="the layer the CAMs read (default: chosen for the model); for legrad "
                        "its first block (a block, or a module in it; default: the last 4)")
    a.add_argument("--rollout-fusion", choices=FUSIONS, default="mean",
                   help="attention rollout: how each block's heads are fused (default mean)")
    a.add_argument("--rollout-discard", type=float, default=0.0, metavar="F",
                   help="attention rollout: the fraction (0 <= F < 1) of the lowest entries of "
                        "each block's head-fused attention set to 0 first, as vit-explain's "
                        "discard_ratio (default 0)")
    a.add_argument("--logit-lens", action="store_true",
                   help="a ViT's logit lens: each image's entry in summary.json gets "
                        "\"logit_lens\", per block the --topk classes of the model's own "
                        "final norm and head on that block's tokens")
    attribution_options(a)
    a.add_argument("--dff", type=int, default=0, metavar="K",
                   help="deep feature factorisation into K concepts per image (needs the "
                        "[concepts] extra): NPZ dff/concepts (channels x K, as "
                        "pytorch-grad-cam returns them) and dff/heatmaps (K x h x w at the "
                        "layer's resolution)")
    a.add_argument("--dff-layer", default=None,
                   help="the layer --dff factorises (default: the CAM layer)")
    metric_options(a)
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
    a.add_argument("--patch-sweep", default=None, metavar="PATH",
                   help="activation patching: for each module in forward order, run each image "
                        "with that module's output taken from its run on the image PATH, and "
                        "add to its summary.json entry \"patch_sweep\": the explained class's "
                        "logit and probability per patched module")
    a.add_argument("--sweep-depth", type=int, default=None, metavar="N",
                   help="--patch-sweep: patch the modules at depth N (1: the model's "
                        "children) instead of the leaves")
    a.add_argument("--no-tensorboard", action="store_true", help="do not write a TensorBoard log")
    a.add_argument("--emit-script", type=Path, default=None, metavar="PATH",
                   help="also write the run as a standalone Python script (torch, torchvision, "
                        "numpy, Pillow; no inspector): `python PATH IMAGE OUT.json` prints and "
                        "writes the logits and the captured modules' statistics")
    batch_options(a, shard_size=16, workers_help="ray: model actors (default one per GPU, "
                   "else one per CPU); local: not used (one Session runs the images)")
    input_options(a, "analyse")
    return a


def add_atlas(sub) -> argparse.ArgumentParser:
    """`atlas`: the images of a folder that excite each channel most."""
    at = sub.add_parser(
        "atlas",
        help="per channel, the images of a folder that excite it most (atlas.json, crops)",
        description="Run a model over a folder and write DIR/atlas.json: per layer and "
        "channel the --top images with the largest activation, their receptive-field boxes "
        "and crops, each channel's mean and active fraction, the dead channels; and the mean "
        "Grad-CAM per predicted class. Resumable (--resume), on one machine or on Ray.",
    )
    model_options(at)
    at.add_argument("--layers", required=True,
                    help="comma-separated modules whose channels to rank; see "
                         "`network-inspector tree`")
    at.add_argument("--top", type=int, default=9, help="images kept per channel (default 9)")
    at.add_argument("--out", required=True, type=Path, help="output folder (created)")
    at.add_argument("--batch-size", type=int, default=32, help="images per forward (default 32)")
    batch_options(at, shard_size=256, workers_help="local: processes decoding images "
                   "(default min(4, CPUs)); ray: model actors (default one per GPU, else one "
                   "per CPU)")
    input_options(at, "rank")
    return at


def add_compare_models(sub) -> argparse.ArgumentParser:
    """`compare-models`: layer-by-layer similarity of two models over a folder (CKA)."""
    c = sub.add_parser(
        "compare-models",
        help="how similar every layer of model A is to every layer of model B over a folder "
             "(linear CKA: cka.json, cka.png; --match: matched channels)",
        description="Run two models (or one with two weights files) over the same images and "
        "write DIR/cka.json and DIR/cka.png: the linear CKA of every captured layer of A with "
        "every one of B, rows A's layers and columns B's in forward order; with --match "
        "LAYER_A:LAYER_B, DIR/matches.json: that pair's channels matched one to one by "
        "correlation, and the lost and new ones. Resumable (--resume), on one machine or Ray.",
    )
    model_options(c)
    c.add_argument("--model-b", default=None,
                   help="model B, as --model (default: A's architecture, with --weights-b; "
                        "without either, B is A itself)")
    c.add_argument("--weights-b", default=None, help="a checkpoint for model B, as --weights")
    c.add_argument("--layers", default="auto",
                   help="A's layers: auto (default: every leaf module with one output tensor, "
                        "but pass-through ones) or a comma-separated list")
    c.add_argument("--layers-b", default=None,
                   help="B's layers, as --layers (default: A's names where B has them all, "
                        "else auto)")
    c.add_argument("--estimator", choices=("exact", "minibatch"), default=None,
                   help="exact: the biased CKA over all images (in blocks when they do not "
                        "fit one forward); minibatch: Nguyen et al. 2021's unbiased estimator "
                        "over minibatches of a seeded random order (default: exact up to 4 "
                        "blocks, else minibatch). Their values differ: compare like with like")
    c.add_argument("--batch-size", type=int, default=64,
                   help="images per forward, and the minibatch size (default 64)")
    c.add_argument("--order-seed", type=int, default=0,
                   help="minibatch: the seed of the images' random order (default 0)")
    c.add_argument("--match", default=None, metavar="LAYER_A:LAYER_B",
                   help="also match that pair's channels by correlation: DIR/matches.json")
    c.add_argument("--match-threshold", type=float, default=0.5,
                   help="--match: a channel whose best correlation is below this is lost (A) "
                        "or new (B) (default 0.5)")
    c.add_argument("--atlas-a", type=Path, default=None,
                   help="--match: an atlas folder of model A (`network-inspector atlas`): its "
                        "crops are listed beside each channel")
    c.add_argument("--atlas-b", type=Path, default=None, help="--match: the same for model B")
    c.add_argument("--out", required=True, type=Path, help="output folder (created)")
    batch_options(c, shard_size=256, workers_help="local: processes decoding images "
                  "(default min(4, CPUs)); ray: model actors (default one per GPU, else one "
                  "per CPU)")
    c.add_argument("--quiet", action="store_true", help="no progress bar")
    c.add_argument("images", nargs="+", help="image files or folders (searched recursively)")
    return c


def add_visualise(sub) -> argparse.ArgumentParser:
    """`visualise`: the picture each channel of a layer would draw (feature visualisation)."""
    v = sub.add_parser(
        "visualise",
        aliases=["visualize"],
        help="per channel, the picture that excites it most, by optimisation (PNG, JSON)",
        description="Optimise a picture per channel of a layer as Lucid does (a Fourier "
        "image with a 1/f spectrum and decorrelated colour, random jitter, scale and "
        "rotation, Adam 0.05) and write DIR/<layer>/channel_NNNN.png and DIR/visualise.json "
        "(per channel the objective its own picture reaches, untransformed). Many channels "
        "go as one batch; resumable (--resume), on one machine or on Ray. --seed seeds the "
        "optimisation (default 0) and the model's random weights.",
    )
    model_options(v)
    v.add_argument("--layer", default="",
                   help="the module whose channels to draw (see `network-inspector tree`); "
                        "may be omitted with --objective class (the model's output)")
    v.add_argument("--channels", required=True, metavar="SPEC",
                   help="channels as 0-63, 3,17 or 0-7,12; the classes with --objective class, "
                        "the directions' numbers with --objective direction. Each is written "
                        "as channel_NNNN.png, NNNN this number")
    v.add_argument("--out", required=True, type=Path, help="output folder (created)")
    v.add_argument("--steps", type=int, default=512, help="optimisation steps (default 512)")
    v.add_argument("--size", type=int, default=None, metavar="PX",
                   help="the picture's side in pixels, at least the model input's (default: "
                        "the model input's)")
    v.add_argument("--objective", choices=("channel", "neuron", "class", "direction"),
                   default="channel",
                   help="channel: its mean (default); neuron: its centre position; class: a "
                        "class logit; direction: a concept's vector (--directions)")
    v.add_argument("--directions", type=Path, default=None, metavar="NPZ",
                   help="--objective direction: concepts.npz of `network-inspector concepts`, "
                        "or an NPZ of `analyse --dff K` (its dff/concepts)")
    v.add_argument("--batch-size", type=int, default=8,
                   help="channels optimised as one batch, the unit of --resume (default 8; "
                        "64 suits a GPU)")
    v.add_argument("--workers", type=int, default=None,
                   help="--engine ray: model actors (default one per GPU, else one per CPU)")
    v.add_argument("--engine", choices=("local", "ray"), default="local",
                   help="local (default) or ray (needs the [cluster] extra)")
    v.add_argument("--ray-address", default=None,
                   help="'auto' or ray://HOST:PORT to join a running Ray cluster")
    v.add_argument("--resume", action="store_true",
                   help="continue a killed run in DIR: finished batches are not redone")
    v.add_argument("--verbose", action="store_true", help="--engine ray: Ray's log lines here")
    v.add_argument("--quiet", action="store_true", help="no progress bar")
    return v


def add_concepts(sub) -> argparse.ArgumentParser:
    """`concepts`: K concepts shared by a folder's images (deep feature factorisation)."""
    c = sub.add_parser(
        "concepts",
        help="K concepts of a layer shared by a folder's images (NMF; concepts.json, crops)",
        description="Factorise a layer's activations over a folder into K concepts (non-"
        "negative matrix factorisation, scikit-learn's MiniBatchNMF fitted on a sample, then "
        "every image coded): DIR/concepts.json (per concept its top images with boxes, as "
        "`atlas` writes them, its top classes, its share of the layer's activation; the "
        "reconstruction error over all positions), crops and DIR/concepts.npz (the concept "
        "vectors). Needs the [concepts] extra. --seed seeds the fit (default 0) and the "
        "model's random weights.",
    )
    model_options(c)
    c.add_argument("--layer", required=True, help="the module to factorise")
    c.add_argument("--k", type=int, required=True, help="the number of concepts")
    c.add_argument("--out", required=True, type=Path, help="output folder (created)")
    c.add_argument("--top", type=int, default=9, help="images kept per concept (default 9)")
    c.add_argument("--sample", type=int, default=2000,
                   help="images the concepts are fitted on, a seeded sample (default 2000)")
    c.add_argument("--batch-size", type=int, default=32, help="images per forward (default 32)")
    batch_options(c, shard_size=256, workers_help="local: processes decoding images; ray: "
                  "model actors (default one per GPU, else one per CPU)")
    input_options(c, "factorise")
    return c


def add_models(sub) -> argparse.ArgumentParser:
    """`models`: the model catalog."""
    m = sub.add_parser("models", help="list the model catalog")
    return m


def add_download(sub) -> argparse.ArgumentParser:
    """`download`: a torchvision model's pretrained weights."""
    d = sub.add_parser(
        "download", help="fetch a torchvision model's pretrained weights into torch hub's cache",
        description="Fetch a torchvision model's default pretrained weights into torch hub's "
        "cache (TORCH_HOME), where the app and the commands find them. The only command that "
        "uses the network.",
    )
    d.add_argument("name", help="a torchvision model name, as `network-inspector models` lists")
    return d


def add_tree(sub) -> argparse.ArgumentParser:
    """`tree`: a model's module tree."""
    t = sub.add_parser("tree", help="print a model's module tree with output shapes and hazards")
    model_options(t)
    t.add_argument("--depth", type=int, default=None, help="show modules down to this depth")
    return t


def batch_options(p: argparse.ArgumentParser, shard_size: int, workers_help: str) -> None:
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
    p.add_argument("--verbose", action="store_true",
                   help="--engine ray: show Ray's own log lines and its workers' output here "
                        "(default: Ray's log lines go to DIR/ray.log)")


def input_options(p: argparse.ArgumentParser, verb: str) -> None:
    """The inputs of analyse and atlas (inspector.batch.inputs) and the progress bar."""
    p.add_argument("--every", type=int, default=1, metavar="N",
                   help=f"videos named (.mp4 .mkv .mov .avi .webm; needs "
                        f"'network-inspector[video]'): {verb} every Nth frame, counting from "
                        f"frame 0 (default 1: every frame)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("images", nargs="+",
                   help="image files or folders (searched recursively for images), and videos")


def attribution_options(p: argparse.ArgumentParser) -> None:
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


def metric_options(p: argparse.ArgumentParser) -> None:
    """analyse's faithfulness metrics (core.explain.metrics)."""
    d = MetricOptions()
    p.add_argument("--metrics", default="",
                   help=f"comma-separated faithfulness metrics of every map (--cam and "
                        f"--attr): {', '.join(METRICS)} (default: none). summary.json gains "
                        f"each image's 'metrics' and the run's 'metrics_summary'; DIR/"
                        f"metrics.csv has a row per image and method (docs/faithfulness.md)")
    p.add_argument("--metric-steps", type=int, default=d.steps, metavar="N",
                   help=f"deletion and insertion: perturb ceil(P / N) of the P pixels a step "
                        f"(default {d.steps})")
    p.add_argument("--metric-baseline", choices=BASELINES, default=None,
                   help="what deletion puts in and insertion starts from, for both curves "
                        "(default: RISE's protocol, deletion to zero, the data set's mean "
                        "colour, and insertion from a blur of the input)")
    p.add_argument("--boxes", type=Path, default=None, metavar="FILE.json",
                   help='the pointing game\'s object boxes: {"IMAGE FILE NAME": [[x0, y0, '
                        'x1, y1], ...]} in the picture\'s own pixels, or instead of the boxes '
                        '"MASK IMAGE FILE" (nonzero: the object; relative to the JSON file)')


def metric_request(args: argparse.Namespace) -> MetricOptions | None:
    """The MetricOptions analyse's options ask for, None without --metrics; ValueError (exit
    status 2) for a metric that does not exist or a bad number of steps."""
    if not args.metrics.strip():
        if args.metric_baseline is not None or args.metric_steps != MetricOptions().steps:
            raise ValueError("--metric-steps and --metric-baseline set the metrics: give "
                             "--metrics too")
        return None
    seed = MetricOptions().seed if args.seed is None else args.seed
    return MetricOptions(metrics=parse_metrics(args.metrics), steps=args.metric_steps,
                         baseline=args.metric_baseline, seed=seed)
