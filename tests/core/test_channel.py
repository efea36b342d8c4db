"""FrameChannel: bounded, thread-safe, keeps the newest frame per key, counts drops exactly."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from inspector.core.records.frames import ActivationFrame, RunFinished, RunStarted, TensorStats
from inspector.core.records.kinds import OUTPUT
from inspector.core.run.channel import FrameChannel

_STATS = TensorStats(0, 0, 0, 0, 0, 1, *(np.zeros(1, np.float32),) * 5)


def frame(run, module, call=0, value=0):
    return ActivationFrame(run, module, call, OUTPUT, "", (1,), "float32", _STATS,
                           preview=np.full(1, value, np.float32))


def test_fifo_when_not_full():
    ch = FrameChannel(capacity=10)
    frames = [frame(1, f"m{i}") for i in range(5)]
    for f in frames:
        ch.put(f)
    assert ch.drain() == frames
    assert ch.dropped == 0


def test_newest_frame_per_key_replaces_older_run_when_full():
    ch = FrameChannel(capacity=3)
    for m in ("a", "b", "c"):
        ch.put(frame(1, m))
    ch.put(frame(2, "b", value=2))  # full: replaces run 1's "b", not the oldest ("a")
    got = ch.drain()
    assert [(f.run_id, f.module) for f in got] == [(1, "a"), (1, "c"), (2, "b")]
    assert ch.dropped == 1
    ch.put(RunFinished(1, "ok"))
    assert ch.drain()[-1].frames_dropped == 1  # run 1's drop, told with its end


def test_oldest_evicted_when_no_same_key():
    ch = FrameChannel(capacity=2)
    for m in ("a", "b", "c"):
        ch.put(frame(1, m))
    assert [f.module for f in ch.drain()] == ["b", "c"]
    assert ch.dropped == 1


def test_control_frames_never_dropped_and_carry_drop_count():
    ch = FrameChannel(capacity=1)
    ch.put(RunStarted(1, "x", "m", "cpu"))
    for i in range(10):
        ch.put(frame(1, f"m{i}"))
    ch.put(RunFinished(1, "ok"))
    got = ch.drain()
    assert isinstance(got[0], RunStarted) and isinstance(got[-1], RunFinished)
    assert got[-1].frames_dropped == 9 == ch.dropped
    assert len(got) == 3


def test_run_finished_adds_the_channels_drops_to_the_senders():
    # The session counts frames whose deferred statistics an in-place op invalidated; the
    # channel adds the frames it dropped itself.
    ch = FrameChannel(capacity=1)
    for i in range(4):
        ch.put(frame(1, f"m{i}"))
    ch.put(RunFinished(1, "ok", frames_dropped=2))
    assert ch.drain()[-1].frames_dropped == 2 + 3


def test_cancelled_run_frames_discarded_but_finish_arrives():
    ch = FrameChannel()
    ch.put(frame(1, "a"))
    ch.put(frame(2, "a"))
    ch.cancel_run(1)
    ch.put(frame(1, "b"))
    ch.put(RunFinished(1, "cancelled"))
    got = ch.drain()
    assert [(type(f).__name__, f.run_id) for f in got] == [
        ("ActivationFrame", 2),
        ("RunFinished", 1),
    ]


def test_get_waits_and_times_out():
    ch = FrameChannel()
    assert ch.get(timeout=0.05) is None
    threading.Timer(0.05, lambda: ch.put(frame(1, "late"))).start()
    assert ch.get(timeout=5).module == "late"


def test_many_producers_slow_consumer():
    capacity, producers, per_producer, modules = 64, 4, 3000, 10
    ch = FrameChannel(capacity=capacity)
    sent = [0] * producers
    max_pending = [0]
    done = threading.Event()

    def produce(p):
        for i in range(per_producer):
            # Producer p owns runs p*1000.. so keys of different producers never collide.
            run = p * 1000 + i // modules
            ch.put(frame(run, f"p{p}.m{i % modules}", value=i))
            sent[p] += 1
            if i % modules == modules - 1:
                ch.put(RunFinished(run, "ok"))

    received = []

    def consume():
        while not done.is_set() or len(ch):
            max_pending[0] = max(max_pending[0], len(ch))
            received.extend(ch.drain(max_frames=16))
            time.sleep(0.001)  # slower than the producers

    consumer = threading.Thread(target=consume)
    consumer.start()
    threads = [threading.Thread(target=produce, args=(p,)) for p in range(producers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done.set()
    consumer.join()

    data = [f for f in received if isinstance(f, ActivationFrame)]
    finished = [f for f in received if isinstance(f, RunFinished)]
    runs = producers * per_producer // modules
    assert len(finished) == runs  # every RunFinished arrives
    assert len(data) + ch.dropped == producers * per_producer  # exact accounting
    assert ch.dropped > 0  # the consumer did fall behind
    # Bounded: data frames never exceed capacity; control frames are few per run.
    assert max_pending[0] <= capacity + runs
    # With no more keys (producers x modules = 40) than capacity, the newest frame of every
    # key is delivered: each producer's last run arrives whole.
    for p in range(producers):
        last_run = p * 1000 + (per_producer - 1) // modules
        assert {f.module for f in data if f.run_id == last_run} == {
            f"p{p}.m{m}" for m in range(modules)
        }
    # Frames of one producer and module arrive in the order they were sent.
    for p in range(producers):
        values = [int(f.preview[0]) for f in data if f.module == f"p{p}.m0"]
        assert values == sorted(values)


def test_a_finished_run_is_announced_on_the_producers_thread():
    ch = FrameChannel()
    heard = []
    ch.on_finished = lambda run_id: heard.append((run_id, threading.current_thread().name))
    producer = threading.Thread(target=lambda: [ch.put(RunStarted(4, "x", "m", "cpu")),
                                                ch.put(RunFinished(4, "ok"))], name="worker")
    producer.start()
    producer.join()
    assert heard == [(4, "worker")]  # once, for the RunFinished only
    assert [type(f).__name__ for f in ch.drain()] == ["RunStarted", "RunFinished"]


def test_bad_capacity():
    with pytest.raises(ValueError):
        FrameChannel(0)


def test_a_consumer_that_cannot_be_woken_does_not_fail_the_producer():
    ch = FrameChannel()

    def gone(run_id):
        raise RuntimeError("Internal C++ object (FrameRouter) already deleted.")

    ch.on_finished = gone
    ch.put(RunFinished(1, "ok"))  # the worker's put returns: the run is over all the same
    assert ch.on_finished is None
    assert [f.run_id for f in ch.drain()] == [1]
