"""Lucid's redirected ReLU (lucid/misc/redirected_relu_grad.py), for the first steps.

A channel that is 0 everywhere on an image's first random picture gets no gradient through
the ReLUs below it and stays grey for ever. For the images where a ReLU's true gradient is
zero everywhere, the redirected gradient passes the incoming gradient except where the input
is negative and the gradient would push it lower still; images with a true gradient keep it.
It is put in place by a forward hook on each `nn.ReLU` module (with inplace off, or the hook
would see the input already overwritten): functional `F.relu` calls are not reached, and
torchvision's and timm's CNNs use the modules.
"""

from __future__ import annotations

import torch
from torch import nn

from inspector.core.hookset import HookSet, ModelState


class RedirectedReLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return x.clamp(min=0)

    @staticmethod
    def backward(ctx, g: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        zero = torch.zeros_like(g)
        relu_grad = torch.where(x < 0, zero, g)
        redirected = torch.where((x < 0) & (g > 0), zero, g)
        alive = relu_grad.flatten(1).abs().amax(dim=1) > 0
        return torch.where(alive.view(-1, *[1] * (x.ndim - 1)), relu_grad, redirected)


def _redirect(_module: nn.Module, args: tuple, _output: torch.Tensor) -> torch.Tensor:
    return RedirectedReLU.apply(args[0])


def redirect_relus(model: nn.Module, hooks: HookSet, state: ModelState) -> int:
    """Every nn.ReLU of `model` computes through RedirectedReLU while `hooks` hold; `state`
    restores their inplace flags. Returns how many ReLUs were redirected."""
    n = 0
    for module in model.modules():
        if isinstance(module, nn.ReLU):
            state.disable_inplace(module)
            hooks.forward(module, _redirect)
            n += 1
    return n
