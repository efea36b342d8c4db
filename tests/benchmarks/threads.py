"""The intra-op thread count a benchmark runs with, which it chooses itself (the engine applies
INSPECTOR_THREADS once, when the first Session is made: core.run.runtime)."""

from __future__ import annotations

import torch

from inspector.core.run.runtime import threads_from_env


def configure_threads(threads: int | None = None) -> int:
    """Set torch's intra-op threads from the argument or INSPECTOR_THREADS; return the count."""
    if threads is None:
        threads = threads_from_env()
    if threads is not None and threads > 0:
        torch.set_num_threads(threads)
    return torch.get_num_threads()
