"""Thread settings for the engine, chosen deliberately (see shared DESIGN.md).

OMP_WAIT_POLICY=PASSIVE is set in inspector/core/__init__.py, before torch is imported.
The intra-op thread count is left to torch (one per core) unless the user or
INSPECTOR_THREADS says otherwise.
"""

from __future__ import annotations

import os

import torch


def configure_threads(threads: int | None = None) -> int:
    """Set torch's intra-op threads from the argument or INSPECTOR_THREADS; return the count."""
    if threads is None and os.environ.get("INSPECTOR_THREADS"):
        threads = int(os.environ["INSPECTOR_THREADS"])
    if threads is not None and threads > 0:
        torch.set_num_threads(threads)
    return torch.get_num_threads()
