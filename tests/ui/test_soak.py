"""The soak: a thousand runs and twenty model switches through the window, as a user makes them.

The window starts the engine itself (no Session handed in), shows the demo model's sample
images, and is driven only from outside: selecting rows of the image list, and loading
models the way the model dialog does. Afterwards: memory did not grow with the runs, every
run that was submitted finished exactly once, a replaced model is freed once the switch is
done, and closing the window leaves no thread behind.
"""

from __future__ import annotations

import gc
import threading
import weakref
from collections import Counter

import psutil
import pytest

from inspector.ui.shell.app_settings import AppSettings
from inspector.ui.window.main_window import MainWindow

pytestmark = pytest.mark.slow

RUNS = 1000
BASELINE_RUNS = 50  # RSS is measured from here: the first runs fill caches and pools
MAX_RSS_GROWTH = 20 * 10**6  # bytes (20 MB)
SWITCHES = ("resnet18", "vit_b_16", "demo_shapes") * 6 + ("resnet18", "vit_b_16")  # 20
TIMEOUT = 120_000  # ms; vit_b_16 builds and runs slowly on two busy cores


def rss() -> int:
    gc.collect()
    return psutil.Process().memory_info().rss


def who_holds(obj, depth: int = 3) -> str:
    """A short description of what refers to `obj` (for a failure message)."""
    lines, level = [], [obj]
    for _ in range(depth):
        referrers = [r for o in level for r in gc.get_referrers(o)
                     if r is not level and type(r).__name__ != "frame"]
        lines.append(", ".join(sorted({type(r).__qualname__ for r in referrers})[:12]))
        level = referrers[:20]
    return " <- ".join(lines)


def test_a_thousand_runs_and_twenty_model_switches(qtbot, tmp_path, demo_samples):
    from inspector.core.stats import deferred as deferred_stats

    threads_before = set(threading.enumerate())
    window = MainWindow(AppSettings.in_file(str(tmp_path / "settings.ini")))
    qtbot.addWidget(window)
    window.build_views()
    window.show()
    submitted: list[int] = []
    finished: Counter[int] = Counter()
    statuses: Counter[str] = Counter()

    def on_finished(frame) -> None:
        finished[frame.run_id] += 1
        statuses[frame.status] += 1

    window.control.runSubmitted.connect(submitted.append)
    window.router.runFinished.connect(on_finished)
    window.start(demo_samples, {})  # the demo model; the engine is imported as the app does

    def run_done() -> bool:
        return (bool(submitted) and submitted[-1] in finished
                and window.last_run is not None
                and window.last_run.run_id == submitted[-1])

    qtbot.waitUntil(lambda: window.model_name == "demo_shapes" and run_done(), timeout=TIMEOUT)
    rows = window.images.list.count()
    assert rows == len(demo_samples)

    rss_baseline = None
    for i in range(1, RUNS):  # the first run came with the model
        window.images.list.setCurrentRow(i % rows)
        qtbot.waitUntil(run_done, timeout=TIMEOUT)
        if len(submitted) == BASELINE_RUNS:
            rss_baseline = rss()
    rss_end = rss()
    assert len(submitted) == RUNS, "each selection submits one run"
    growth = rss_end - rss_baseline
    print(f"RSS after {BASELINE_RUNS} runs {rss_baseline / 1e6:.1f} MB, after {RUNS} "
          f"{rss_end / 1e6:.1f} MB ({growth / 1e6:+.1f} MB)")
    assert growth <= MAX_RSS_GROWTH, f"RSS grew by {growth / 1e6:.1f} MB over {RUNS} runs"

    for name in SWITCHES:
        old = weakref.ref(window.control.session.loaded.model)
        runs_before = len(submitted)
        window.control.load_model(window.control.make_spec(name=name))
        # A new model runs the current image by itself once it is loaded.
        qtbot.waitUntil(lambda n=name, before=runs_before: window.model_name == n
                        and len(submitted) > before and run_done(), timeout=TIMEOUT)
        gc.collect()
        model = old()
        assert model is None, f"the model replaced by {name} is still alive: {who_holds(model)}"
        assert len(deferred_stats._memory) <= 1, "statistics memory of a replaced model is kept"
    print(f"runs submitted {len(submitted)}, RunFinished received {sum(finished.values())}, "
          f"statuses {dict(statuses)}")

    session = window.control.session
    window.close()
    assert not session.worker.is_alive()
    assert gc.isenabled()  # the collector stopped (the autouse fixture checks its timer)

    # Exactly one RunFinished per submitted run: none lost, none doubled, none unasked for.
    assert Counter(submitted) == finished
    assert len(submitted) == RUNS + len(SWITCHES)
    assert statuses == Counter(ok=len(submitted)), statuses

    def no_new_threads() -> None:
        left = [t.name for t in threading.enumerate() if t not in threads_before]
        assert not left, f"threads left running after the window closed: {left}"

    # Threads that were told to stop get a moment to end (the deferred-statistics thread
    # ends after half a second without work).
    qtbot.waitUntil(no_new_threads, timeout=10_000)
