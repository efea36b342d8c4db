"""The hook kinds a run can capture of a module, in the order a module sees them, and how
the window presents each. No torch here: the module tree's columns exist before it loads.
"""

from __future__ import annotations

from dataclasses import dataclass

INPUT = "input"  # forward pre-hook: what the module receives
OUTPUT = "output"  # forward hook: what it returns
GRAD_OUTPUT = "grad_output"  # gradient of the score w.r.t. the module's output
GRAD_INPUT = "grad_input"  # gradient w.r.t. its input, through this module only
KINDS = (INPUT, OUTPUT, GRAD_OUTPUT, GRAD_INPUT)
GRADIENT_KINDS = (GRAD_OUTPUT, GRAD_INPUT)
# What a module shows until the user picks: grad_input costs a view per input and turns
# in-place modules off for the run, so it is asked for explicitly.
DEFAULT_KINDS = (INPUT, OUTPUT, GRAD_OUTPUT)


@dataclass(frozen=True)
class KindInfo:
    column: str  # the module tree's checkbox column
    words: str  # in sentences: "the input gradient of conv1"
    tip: str  # the column's tooltip
    symbol: str = ""  # a gradient view's choice: "∂score/∂output"


# How the window presents each kind: a kind added above and here (and hooked in
# core.run.capture) gets its tree column, its tooltip and, for a gradient, its gradient-view choice.
KIND_INFO: dict[str, KindInfo] = {
    INPUT: KindInfo("In", "input",
                    "Capture the module's input (forward pre-hook): the input statistics view"),
    OUTPUT: KindInfo("Out", "output", "Capture the module's output (forward hook): statistics "
                     "and the activation view"),
    GRAD_OUTPUT: KindInfo("\u2207Out", "output gradient", "Capture the gradient of the score "
                          "w.r.t. the output: the gradient views", "\u2202score/\u2202output"),
    GRAD_INPUT: KindInfo("\u2207In", "input gradient", "Capture the gradient w.r.t. the module's "
                         "input, through this module only", "\u2202score/\u2202input"),
}
