"""Memory over model switches: RSS after each of N switches, with and without handing freed
memory back to the OS (core.run.runtime.release_freed_memory, which the Session calls after a
switch). Each mode runs in a process of its own, the same sequence of models and runs.

    python -m tests.benchmarks.bench_model_switch [--switches 20]

Prints RSS (MiB) after each switch for both modes, the last switch's ratio, and whether
the models switched away from were all collected (weak references).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

MODELS = ["demo_shapes", "resnet18", "vit_b_16", "mobilenet_v3_small"]


def child(switches: int, release: bool) -> None:
    import gc
    import weakref

    import psutil

    from inspector import demo
    from inspector.core.run import session

    if not release:  # the Session's call does nothing: what the allocator keeps stays
        session.release_freed_memory = lambda: gc.collect() and False
    s = session.Session()
    image = demo.sample_images()[0]
    proc, rss, refs = psutil.Process(), [], []
    for i in range(switches):
        s.load_model(MODELS[i % len(MODELS)]).result()
        refs.append(weakref.ref(s.loaded.model))
        s.run(image, cams=(("gradcam", None),), timeout=600)
        s.channel.drain()
        rss.append(proc.memory_info().rss / 2**20)
    gc.collect()
    alive = sum(ref() is not None for ref in refs[:-1])
    s.close()
    print(json.dumps({"rss": rss, "alive": alive}))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--switches", type=int, default=20)
    parser.add_argument("--child", choices=("release", "keep"))
    args = parser.parse_args()
    if args.child:
        child(args.switches, args.child == "release")
        return 0
    results = {}
    for mode in ("keep", "release"):
        out = subprocess.run([sys.executable, "-m", "tests.benchmarks.bench_model_switch",
                              "--switches", str(args.switches), "--child", mode],
                             capture_output=True, text=True, check=True).stdout
        results[mode] = json.loads(out.strip().splitlines()[-1])
    print(f"RSS (MiB) after each switch ({', '.join(MODELS)} in turn, a Grad-CAM run each)")
    print(f"{'switch':>6} {'model':<20} {'allocator keeps':>16} {'handed back':>12}")
    for i, (keep, rel) in enumerate(zip(results["keep"]["rss"], results["release"]["rss"])):
        print(f"{i + 1:>6} {MODELS[i % len(MODELS)]:<20} {keep:>16.0f} {rel:>12.0f}")
    keep, rel = results["keep"]["rss"][-1], results["release"]["rss"][-1]
    print(f"last switch: {rel:.0f} / {keep:.0f} MiB = {rel / keep:.2f}x; models switched away "
          f"from still alive: {results['keep']['alive']} and {results['release']['alive']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
