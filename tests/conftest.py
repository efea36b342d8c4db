"""Fixtures shared by the test folders."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True, scope="session")
def crash_logs_in_a_temporary_folder(tmp_path_factory):
    """The app and the CLI keep a crash log in the user's state directory (inspector/crashlog):
    tests, and the processes they start, keep theirs in a folder of the test run instead."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("INSPECTOR_STATE_DIR", str(tmp_path_factory.mktemp("state")))
        # The feature visualisation cache too (core.explain.featurevis.cache).
        patch.setenv("INSPECTOR_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        yield


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


@pytest.fixture(scope="module")
def demo_session():
    """A Session with the shipped demo model loaded, shared by a test module's tests."""
    from inspector.core.run.session import Session

    session = Session()
    session.load_model("demo_shapes").result()
    yield session
    session.close()
