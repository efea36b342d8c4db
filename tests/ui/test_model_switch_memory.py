"""A model the window switches away from is collected: nothing of the app keeps it.

The window loads the demo model and the tests' tiny model in turn, with a run of each
(activations, gradients and a CAM reach every view, edits are on for one switch), and
after each switch the model before it must be gone once the garbage collector has run:
the tree, the run store, the views, the Session and the edits hold frames and names,
never the module. (The process's RSS over such switches levels off at what the allocator
keeps; that is measured by tests/benchmarks/bench_model_switch.py, not asserted here.)
"""

from __future__ import annotations

import gc
import weakref

from test_main_window import TIMEOUT, TINY, wait_run, write_png  # noqa: F401


def test_a_model_switched_away_from_is_collected(make_window, qtbot, tmp_path):
    window = make_window(images=[write_png(tmp_path / "x.png")])
    wait_run(qtbot, window)
    window.window_edits.add_startup(["input:occlude=4,4,20,20"])  # carried over each switch
    assert len(window.window_edits.edits) == 1
    previous = []
    for spec in ({"name": "demo_shapes"}, TINY, {"name": "demo_shapes"}, TINY):
        previous.append(weakref.ref(window.control.session.loaded.model))
        generation = window._model_generation
        window.control.load_model(window.control.make_spec(**spec))
        qtbot.waitUntil(lambda g=generation: window._model_generation > g, timeout=TIMEOUT)
        wait_run(qtbot, window)
        qtbot.wait(50)  # the views paint the new model's run
        gc.collect()
        alive = [ref for ref in previous if ref() is not None]
        assert not alive, f"{len(alive)} model(s) switched away from are still referenced: " \
                          f"{[type(r()).__name__ for r in alive]}"
