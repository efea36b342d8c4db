"""The one compiled part: the statistics kernel (inspector/core/stats/_cstats.c).

Everything else is in pyproject.toml. The extension is optional: where no C compiler is
found, `pip install .` still succeeds and inspector.core.stats.tensor_stats falls back to torch
reductions (slower on the CPU), saying so once on stderr or in the status bar.
"""

import sys

from setuptools import Extension, setup

# -O3 vectorises the kernel's lane loops. Never -ffast-math: the kernel relies on NaN and
# inf propagating through its sums (it reports them so that torch recounts).
args = ["/O2"] if sys.platform == "win32" else ["-O3", "-std=c99"]

setup(
    ext_modules=[
        Extension(
            "inspector.core.stats._cstats",
            sources=["inspector/core/stats/_cstats.c"],
            extra_compile_args=args,
            optional=True,
        )
    ]
)
