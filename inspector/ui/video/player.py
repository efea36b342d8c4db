"""Videos and the camera through the model, live: the window's side of core.inputs.video.

Selecting a listed video (dropped, opened, or named on the command line) plays it in the
image pane: frames come from core.inputs.video.ReadAhead (decoded on its own thread, a few ahead)
and a timer on the UI thread shows one per frame period of the video, so playback follows
the video's frame rate and never waits for the decoder or the model. Each frame shown is
offered to the model through SessionControl.submit_if_idle: run when no run is busy. A frame
shown while a run is busy waits as the frame shown: it runs as soon as that run has reached
the run store, unless the next frame replaces it first; then it is dropped, never run, and
counted in the status bar (stream_counts.StreamCounts: one count of the frames shown, run
and dropped, and the rate while playing). So nothing queues, the views follow the picture as closely as the
model allows, and the model never idles while the picture waits for it. While playing, a
frame runs as a lean
live run (RunBuilder.show(entry, live=True)): the selected module's activations, the
predictions and the CAM follow the video; the gradient view and the other modules'
statistics do not (the "live" mark under the image says so). Pausing, or the video ending,
runs the frame shown again in full, so that a still frame has everything.

Pause, step (one frame back or forward) and seek (the slider) run the frame they land on
even when a run is busy: the user asked for that frame. File ▸ Camera (camera.py) streams
the default camera the same way (no step or seek: it is live).

Each frame is run as a PIL image in a run entry of its own (`frame_entry`, named
"clip.mp4 · frame 12"), so Run again, a new CAM method or target, stretch levels and edits
apply to the frame shown, and the class chosen in the predictions stays from frame to frame.
"""

from __future__ import annotations

import time

from PySide6.QtCore import QObject, Qt, QTimer, Signal

from inspector.core.inputs.video import READ_AHEAD, ReadAhead
from inspector.ui.image.canvas import pil_from_qimage
from inspector.ui.image.filmstrip import ImageEntry
from inspector.ui.image.pane import ORIGINAL_MAX
from inspector.ui.run.frame_router import MIN_DELIVERY_INTERVAL_S
from inspector.ui.video.controls import VideoControls, position_text
from inspector.ui.video.counts import StreamCounts

POLL_MS = 10  # waiting for a frame asked for (a step, a seek) or for the video to open
# The frame router's pace while a stream plays: each finished run at the next display tick
# (the router's timer sets the pace; a minimum gap as long as its period would skip ticks).
STREAM_DELIVERY_INTERVAL_S = 0.0


class VideoPlayer(QObject):
    """Plays one video (or the camera) through the window's RunBuilder."""

    frameShown = Signal(int)  # the index of the frame now shown (-1: a camera frame)

    def __init__(self, images, runs, control, status, reporter, parent=None) -> None:
        super().__init__(parent)
        self.images = images  # ImagePane: shows the frames, lists the videos
        self.runs = runs  # RunBuilder: makes and submits each frame's run
        self.control = control  # SessionControl: drops a frame while a run is busy
        self.status = status  # StatusPanel: the stream's figures (self.counts)
        self.reporter = reporter
        self.controls = VideoControls()
        self.controls.hide()
        images.add_below_canvas(self.controls)
        self.video: ImageEntry | None = None  # the listed video playing
        self.frame_entry: ImageEntry | None = None  # what the runs run: the frame shown
        self.index = -1  # the frame shown
        self._playing = False
        self.counts = StreamCounts()  # shown, run, dropped and the rate: the one count
        self._ahead: ReadAhead | None = None
        self._info = None  # core.inputs.video_reader.VideoInfo: the listing's, then the exact one (_tick)
        self._camera = None  # camera.CameraStream while the camera streams
        self._awaiting: int | None = None  # a frame asked for by a step or seek
        self._unrun = False  # the frame shown was not run (yet)
        # The frame shown waits for the model: a run was busy when it came (see _catch_up);
        # replaced before it ran, it was dropped.
        self._waiting = False
        self._ran_live = False  # the frame shown ran as a live run only
        self._timer = QTimer(self)
        self._timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._timer.timeout.connect(self._tick)
        c = self.controls
        c.play.clicked.connect(self.toggle)
        c.back.clicked.connect(lambda: self.step(-1))
        c.forward.clicked.connect(lambda: self.step(1))
        c.slider.valueChanged.connect(self.seek)
        images.videoSelected.connect(self.play_video)
        images.imageSelected.connect(lambda _entry: self.stop())
        images.list.currentRowChanged.connect(self._row_changed)
        # Told once the run's frames are stored and before the views paint them: the next
        # frame runs meanwhile.
        control.router.runStored.connect(self._catch_up)

    # -- what the user does -----------------------------------------------------------------
    @property
    def playing(self) -> bool:
        return self._playing

    @playing.setter
    def playing(self, on: bool) -> None:
        changed = on != self._playing
        self._playing = on
        if changed:
            self.counts.playing_changed()  # paused: no rate; playing: measured afresh
            self._show_figures()
        # A stream's live runs are small: the router hands each finished one to the views
        # at the next display tick instead of one every 0.2 s, which would show five frames
        # a second of a model that runs thirty (tests/benchmarks/bench_video.py --window).
        self.control.router.min_interval_s = (
            STREAM_DELIVERY_INTERVAL_S if on else MIN_DELIVERY_INTERVAL_S)
        # The last full run stays while live runs of one module follow it (core.run.store).
        self.control.router.store.streaming = on

    def play_video(self, entry: ImageEntry) -> None:
        """Play a listed video from its first frame."""
        self.stop()
        self.video = entry
        self.frame_entry = ImageEntry(entry.name, entry.path, None, entry.size)
        self._ahead = ReadAhead(entry.path, READ_AHEAD, display_max=ORIGINAL_MAX)
        self._info = entry.video  # the header's count until the decoder has listed the frames
        self.controls.set_seekable(True, self._info.frame_count)
        self.controls.show()
        self._start_stream()
        self._set_playing(True)

    def open_camera(self, camera=None) -> None:
        """File ▸ Camera: stream the default camera (or `camera`: anything with
        camera.CameraStream's signals and methods) through the model."""
        from inspector.ui.video.camera import CameraStream

        self.stop()
        camera = camera if camera is not None else CameraStream(self)
        camera.failed.connect(self._camera_failed)
        camera.frame.connect(self._camera_frame)
        if not camera.start():
            camera.deleteLater()
            return
        self._camera = camera
        self.frame_entry = ImageEntry(f"Camera ({camera.name})", None, None)
        self.controls.set_seekable(False)
        self.controls.counter.setText("")
        self.controls.show()
        self._start_stream()
        self.playing = True
        self.controls.show_playing(True)

    def toggle(self) -> None:
        if self._camera is not None:
            self.playing = not self.playing
            self._camera.pause(not self.playing)
            self.controls.show_playing(self.playing)
            if not self.playing:
                self._run_in_full()
            return
        if self._ahead is None:
            return
        if not self.playing and self._ahead.ended and self.index >= self.frame_count - 1:
            self.seek(0)  # at the end: play again from the start
        self._set_playing(not self.playing)

    def step(self, delta: int) -> None:
        """One frame back (-1) or forward (+1), paused; it is run."""
        if self._ahead is None:
            return
        base = self._awaiting if self._awaiting is not None else self.index
        target = max(0, min(base + delta, self.frame_count - 1))
        staying = target == self.index and self._awaiting is None
        # The frame shown is run in full only when the step stays on it: else the frame
        # stepped to runs (in full: paused) instead.
        self._set_playing(False, run_shown=staying)
        if staying:
            return
        if target != self.index + 1 or self._awaiting is not None:
            self._ahead.seek(target)  # one forward needs none: it is the next one decoded
        self._await(target)

    def seek(self, index: int) -> None:
        """Show frame `index` (and run it); playing goes on from there."""
        if self._ahead is None:
            return
        index = max(0, min(index, self.frame_count - 1))
        self._ahead.seek(index)
        self._await(index)

    def stop(self) -> None:
        """No video or camera any more (another image was chosen, or the window closes)."""
        self._timer.stop()
        if self._ahead is not None:
            self._ahead.close()
            self._ahead = None
        if self._camera is not None:
            self._camera.stop()
            self._camera.deleteLater()
            self._camera = None
        self.video = None
        self.playing = False
        self.controls.counter.setText("")
        self._awaiting = None
        self._unrun = self._ran_live = self._waiting = False
        # What runs next (Run again) is a still image's full run.
        self.runs.settings.update(quiet=True, live=False)
        self.index = -1
        self.controls.hide()
        self.status.show_stream(None)

    def _row_changed(self, row: int) -> None:
        if row < 0 and self.video is not None:  # the list was emptied: the video went too
            self.stop()

    # -- state -----------------------------------------------------------------------------
    @property
    def frame_count(self) -> int:
        return self._info.frame_count if self.video is not None else 0

    @property
    def fps(self) -> float:
        return self._info.fps if self.video is not None else 0.0

    def _start_stream(self) -> None:
        self.counts.reset()
        self._show_figures()

    def _set_playing(self, playing: bool, run_shown: bool = True) -> None:
        self.playing = playing
        self.controls.show_playing(playing)
        if playing:
            self._awaiting = None
            self._timer.start(max(1, round(1000 / self.fps)))
        elif self._awaiting is None:
            self._timer.stop()
            if run_shown:
                self._run_in_full()

    def _run_in_full(self) -> None:
        """Paused on the frame shown: run it with everything, when it was dropped or ran as
        a live run only (a still frame gets the gradient view and every statistic)."""
        if self.frame_entry is not None and self.frame_entry.image is not None \
                and (self._unrun or self._ran_live):
            self._run(explicit=True)

    def _await(self, index: int) -> None:
        """Show frame `index` as soon as it is decoded, and run it."""
        self._awaiting = index
        if not self.playing:
            self._timer.start(POLL_MS)

    # -- frames ------------------------------------------------------------------------------
    def _tick(self) -> None:
        ahead = self._ahead
        if ahead is None:
            return
        if ahead.error is not None:
            error = ahead.error
            self.stop()
            self.reporter.report(f"Could not play {error.path.name}: {error.reason}", str(error))
            return
        if ahead.info is not None and ahead.info is not self._info:
            self._info = ahead.info  # every frame listed: the exact count for the slider
            self.controls.set_seekable(True, self._info.frame_count)
        ahead.prepare = self._prepare_input()
        frame = ahead.take()
        if frame is None:
            if ahead.ended and self._awaiting is None and self.playing:
                self._set_playing(False)  # the last frame stays, paused
            return  # the decoder is behind: the frame shown stays a little longer
        explicit = self._awaiting is not None
        self._awaiting = None
        if explicit and not self.playing:
            self._timer.stop()
        self._show(frame.index, frame.image, explicit, frame.display, frame.prepared)

    def _prepare_input(self):
        """What makes a frame's model input on the decoding thread: the loaded model's."""
        session = self.control.session
        loaded = session.loaded if session is not None else None
        return loaded.preprocess.prepare if loaded is not None else None

    def _camera_frame(self, qimage) -> None:
        if self._camera is None or not self.playing:
            return
        self._show(-1, pil_from_qimage(qimage), explicit=False)

    def _camera_failed(self, message: str) -> None:
        self.stop()
        self.reporter.report(message)

    def _show(self, index: int, image, explicit: bool, display=None, prepared=None) -> None:
        entry = self.frame_entry
        self.index = index
        if self.video is not None:
            entry.name = f"{self.video.name} · frame {index}"
            position = position_text(index, self.frame_count - 1)
            caption = f"{self.video.name} · frame {position}  ·  {image.width} × {image.height}"
            tip = f"{self.video.path}\nFrames are numbered from 0 to {self.frame_count - 1}"
            self.controls.show_position(index)
        else:
            caption = tip = entry.name
        if self._waiting:
            self.counts.dropped += 1  # replaced before the model was free to run it
            self._waiting = False
        entry.image, entry.prepared, entry.size = image, prepared, image.size
        self.images.show_frame(display if display is not None else image, caption, tip)
        self.counts.frame_shown(time.perf_counter(), self.playing)
        self._unrun, self._ran_live = True, False  # a new frame: not run yet
        self._run(explicit)
        self.frameShown.emit(index)

    def _catch_up(self, _run_id: int) -> None:
        """A run reached the store: the frame shown while it was busy runs now."""
        if self.playing and self._waiting and self.frame_entry is not None \
                and self.frame_entry.image is not None:
            self._run(explicit=False)

    def _run(self, explicit: bool) -> None:
        """Run the frame shown: at once when the user asked for it (a run going on is
        cancelled), else only when no run is busy (it waits: see _catch_up). A live run
        while playing, else a full one."""
        entry, before, live = self.frame_entry, self.control.current_run, self.playing
        submitted = True
        if explicit:
            self.runs.show(entry, live)
        else:
            submitted = self.control.submit_if_idle(lambda: self.runs.show(entry, live))
        ran = self.control.current_run != before  # not without a model, nor when busy
        if ran:
            self.counts.run += self._unrun  # a frame run again in full counts once
            self._unrun, self._ran_live, self._waiting = False, live, False
        elif not submitted:
            self._waiting = True
        self._show_figures()

    def _show_figures(self) -> None:
        if self.video is None and self._camera is None:
            return
        self.status.show_stream(self.counts, "camera" if self._camera is not None else "video")


def install(ctx) -> VideoPlayer:
    """The window's video player (ctx: ui.shell.context.WindowContext): under the image
    pane, fed by its video entries."""
    return VideoPlayer(ctx.images, ctx.runs, ctx.control, ctx.status, ctx.reporter, ctx.parent)

