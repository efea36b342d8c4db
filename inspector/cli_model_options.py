"""How a command names its model: --model, --weights, --seed, --device and the trust
options, read into a ModelSpec (compare-models' model B too). The window's command line
(inspector.app) takes the same --model, --weights and --device; like the CLI, this module
imports neither Qt nor torch."""

from __future__ import annotations

import argparse

from inspector.core.explain.catalog import AttributionOptions

MODEL_HELP = ("a catalog name (see `network-inspector models`; default demo_shapes), "
              "path/to/file.py:function returning an nn.Module, timm:NAME (a timm model; "
              "--weights or the local HF cache) or hf:PATH (a Hugging Face save_pretrained "
              "folder)")
WEIGHTS_HELP = ("a checkpoint for --model: a state_dict (.pt/.pth, loaded with weights_only) "
                "or .safetensors")
DEVICE_HELP = "cpu, cuda, cuda:1 or mps (default: a GPU if any)"


def model_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="demo_shapes", help=MODEL_HELP)
    p.add_argument("--weights", default=None, help=WEIGHTS_HELP)
    p.add_argument("--trust-pickle", action="store_true",
                   help="--weights is a whole model saved with torch.save(model): unpickle it. "
                        "This runs code from the file: only for files you trust")
    p.add_argument("--trust-remote-code", action="store_true",
                   help="--model hf:PATH whose folder holds its own model code (auto_map): run "
                        "that code. Only for folders you trust")
    p.add_argument("--seed", type=int, default=None,
                   help="seed torch's generator right before the model is built: random "
                        "weights are the same for the same seed (default: a new seed, "
                        "recorded in summary.json). analyse: also SmoothGrad's noise seed, "
                        "ROAD's and the sanity check's "
                        f"(default {AttributionOptions().seed})")
    p.add_argument("--device", default=None, help=DEVICE_HELP)


def model_spec(args: argparse.Namespace):
    """The ModelSpec of the model options; ValueError (exit status 2) for options that cannot
    work, a missing optional extra (timm:, hf:) among them."""
    from inspector.core.models.base import MissingExtra, ModelSpec, has_module
    from inspector.core.models.load import family_for

    common = {"device": args.device, "seed": args.seed}
    if args.trust_pickle:
        if not args.weights:
            raise ValueError("--trust-pickle needs --weights FILE (the pickled model)")
        return ModelSpec(name=None, pickle=args.weights, trust_pickle=True, **common)
    if args.model and ".py:" in args.model:
        return ModelSpec(name=None, factory=args.model, checkpoint=args.weights, **common)
    spec = ModelSpec(name=args.model, checkpoint=args.weights,
                     trust_remote_code=args.trust_remote_code, **common)
    row = family_for(spec)  # None: an unknown name, which loading says in its own words
    family = row.name if row is not None else None
    if row is not None and row.module is not None and not has_module(row.module):
        raise ValueError(str(MissingExtra(row.module, row.extra or row.name)))
    if args.trust_remote_code and family != "hf":
        raise ValueError("--trust-remote-code is for --model hf:PATH (a Hugging Face folder)")
    if family == "hf" and args.weights:
        raise ValueError("--weights is not used with hf:PATH: the weights are in the folder")
    return spec


def model_b_spec(args: argparse.Namespace):
    """compare-models' model B: --model-b (default A's --model) with --weights-b; None when
    neither is given (B is A itself). ValueError (exit status 2) for options that cannot work."""
    if not args.model_b and not args.weights_b:
        return None
    if args.trust_pickle and not args.model_b:
        raise ValueError("--trust-pickle loads model A from a pickle: name model B with "
                         "--model-b (its --weights-b are a state_dict or .safetensors)")
    b = argparse.Namespace(**{**vars(args), "model": args.model_b or args.model,
                              "weights": args.weights_b, "trust_pickle": False})
    return model_spec(b)
