"""Fixtures shared by the test folders."""

from __future__ import annotations

import pytest


@pytest.fixture
def demo_samples():
    """The shipped demo model's sample images. They ship with the repository (resources/demo),
    so a missing file is a failure, not a reason to skip: `make run` opens on them."""
    from inspector import demo

    samples = demo.sample_images()
    weights = demo.DEMO_DIR / demo.WEIGHTS_NAME
    assert samples and weights.is_file(), (
        f"the demo model or its samples are missing from {demo.DEMO_DIR} "
        f"(rebuild them with network-inspector train-demo)"
    )
    return samples
