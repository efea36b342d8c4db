"""Run a command in a network namespace that has only the loopback interface: how the Ray
tests keep a local Ray, which serves on the machine's address (Ray 2.60), off the network."""

from __future__ import annotations

import os
import subprocess

import pytest

LOOPBACK_ONLY = ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "sh"]


def require_loopback_namespace() -> None:
    """Skip when no such namespace can be made here; fail in CI, which installs what it
    needs (.ci/run): there a skip would hide the only check that Ray equals the local
    engine."""
    try:
        probe = subprocess.run([*LOOPBACK_ONLY, "true"], capture_output=True, text=True,
                               timeout=30)
        why = (None if probe.returncode == 0
               else f"cannot make a network namespace: {probe.stderr.strip()}")
    except OSError as e:
        why = f"no unshare here ({e})"
    if why:
        (pytest.fail if os.environ.get("CI") else pytest.skip)(why)
