"""Stick figures of a model's body: frames sampled by simulated time, a strobe
picture and an animation.
"""

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from jaxtyping import Float
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from .._units import Units
from .trajectories import Trajectory


@dataclasses.dataclass(frozen=True)
class StickFrames:
    """Stick-figure drawings of a trajectory at uniform times, in world
    coordinates (see [`hybrax.plot.stick_frames`][]).

    - `times`: the sample times, shape `(F,)`.
    - `polylines`: per frame, the figure's polylines, each an array `(k, 2)` of
      points $(x, y)$ (segments of a body, the ground line), polyline `i` drawn
      in one colour in every frame (with `stick_frames`'s `swaps`, a walker's
      legs are put back in order after each step: one colour per leg).
    - `names`: the legend's names of the polylines after the ground (`names[0]`
      names polyline 1; `None` or left out: not in the legend).
    - `event_times`: the times of the trajectory's events (a walker's steps).
    """

    times: Float[np.ndarray, " F"]
    polylines: tuple[tuple[np.ndarray, ...], ...]
    names: tuple[str | None, ...] = ()
    event_times: Float[np.ndarray, " E"] = dataclasses.field(
        default_factory=lambda: np.zeros(0)
    )


def _state_at(trajectory: Trajectory, t: float) -> tuple[np.ndarray, int]:
    """The state at time `t` (linear interpolation of the phase samples) and the
    number of events before `t`."""
    for k in range(trajectory.t_phase.shape[0]):
        times = trajectory.t_phase[k]
        finite = np.isfinite(times)
        times, states = times[finite], trajectory.x_phase[k][finite]
        if times.size and t <= times[-1] or k == trajectory.t_phase.shape[0] - 1:
            x = np.array(
                [np.interp(t, times, states[:, i]) for i in range(states.shape[1])]
            )
            return x, int(np.sum(trajectory.t_events < t))
    raise ValueError("the trajectory has no phases to draw.")


def stick_frames(
    trajectory: Trajectory,
    skeleton: Callable[[np.ndarray], Sequence[np.ndarray]],
    *,
    frame_shift: Callable[[np.ndarray], np.ndarray] | None = None,
    frames: int = 60,
    fps: float | None = None,
    max_frames: int = 600,
    swaps: Sequence[tuple[int, int]] = (),
    names: Sequence[str | None] = (),
) -> StickFrames:
    r"""Sample a trajectory as stick figures at uniform times: `frames` of them,
    or with `fps` one every `1/fps` of simulated time (at most `max_frames`;
    beyond, evenly spread over the run).

    **Arguments:**

    - `trajectory`: the [`hybrax.plot.Trajectory`][] (minimal coordinates).
    - `skeleton`: `x -> [polyline, ...]`, the figure of a state in the model's
      frame, each polyline an array `(k, 2)`; the first is the ground (a
      segment of it, which the figures extend across their view).
    - `frame_shift`: for models whose coordinates are relative to a contact that
      moves at events (a walker's stance foot), `x_before -> (dx, dy)`: where the
      new frame's origin lies in the old frame at an event (the landing foot).
      The shifts of the events before a frame add up to its origin.
    - `frames`: the number of frames (without `fps`).
    - `fps`, `max_frames`: frames per unit of simulated time, and their most.
    - `swaps`: pairs `(i, j)` of polylines (indices into the skeleton's list,
      the ground 0 left out) that trade roles at every event, as a walker's
      stance and swing legs at heel strike: after an odd number of events the
      two are exchanged, so that polyline `i` of every frame is the same
      physical part (drawn in one colour).
    - `names`: the legend's names of the polylines after the ground (see
      [`hybrax.plot.StickFrames`][]).

    **Returns:** the [`hybrax.plot.StickFrames`][].
    """
    t_start = float(np.nanmin(trajectory.t_phase))
    t_end = float(np.nanmax(trajectory.t_phase))
    if fps is not None:
        if not fps > 0:
            raise ValueError(f"`fps` must be positive; got {fps}.")
        frames = min(int(max_frames), int((t_end - t_start) * fps) + 1)
    if frames < 1:
        raise ValueError(f"`frames` must be >= 1; got {frames}.")
    shifts = np.zeros((len(trajectory.t_events) + 1, 2))
    if frame_shift is not None:
        for e, x_before in enumerate(trajectory.x_before):
            shifts[e + 1] = shifts[e] + np.asarray(frame_shift(x_before), dtype=float)
    swaps = tuple((int(i), int(j)) for i, j in swaps)
    times = np.linspace(t_start, t_end, frames)
    drawings = []
    for t in times:
        x, n_before = _state_at(trajectory, t)
        origin = shifts[n_before]
        lines = [np.asarray(line, dtype=float) + origin for line in skeleton(x)]
        for i, j in swaps:
            if not (0 < i < len(lines) and 0 < j < len(lines)):
                raise ValueError(
                    f"`swaps` must pair polylines 1 to {len(lines) - 1} (0 is the "
                    f"ground); got {(i, j)}."
                )
            if n_before % 2:
                lines[i], lines[j] = lines[j], lines[i]
        drawings.append(tuple(lines))
    return StickFrames(
        times=times,
        polylines=tuple(drawings),
        names=tuple(names),
        event_times=np.asarray(trajectory.t_events, dtype=float),
    )


def _stick_limits(frames: StickFrames) -> tuple[tuple[float, float], ...]:
    """The box around every frame's body (the ground, the first polyline, left
    out: the figures extend it across their view)."""
    points = np.concatenate(
        [line for lines in frames.polylines for line in (lines[1:] or lines)]
    )
    low, high = points.min(axis=0), points.max(axis=0)
    pad = 0.08 * float(np.max(high - low)) + 1e-9
    return (low[0] - pad, high[0] + pad), (low[1] - pad, high[1] + pad)


def _body_centres(frames: StickFrames) -> np.ndarray:
    """Each frame's mean horizontal position of its body (not the ground)."""
    return np.array(
        [
            np.mean(np.concatenate([line[:, 0] for line in (lines[1:] or lines)]))
            for lines in frames.polylines
        ]
    )


def _body_width(frames: StickFrames) -> float:
    """The widest horizontal extent of the body in one frame, and at least a
    third of its height (a body upright on one line still takes room)."""
    widest = 0.0
    for lines in frames.polylines:
        points = np.concatenate(lines[1:] or lines)
        extent = np.ptp(points, axis=0)
        widest = max(widest, float(extent[0]), float(extent[1]) / 3)
    return widest


def _extended_ground(line: np.ndarray, low: float, high: float) -> np.ndarray:
    """A two-point ground segment extended to span `[low, high]` horizontally
    (one fixed line across the view; a vertical or longer polyline as given)."""
    if line.shape[0] != 2 or line[1, 0] == line[0, 0]:
        return line
    slope = (line[1, 1] - line[0, 1]) / (line[1, 0] - line[0, 0])
    xs = np.array([low, high])
    return np.stack([xs, line[0, 1] + slope * (xs - line[0, 0])], axis=1)


_STICK_COLOURS = ("0.45", "tab:blue", "tab:orange", "tab:green", "tab:red")


def _draw_sticks(ax: Axes, lines, alpha: float = 1.0, ground: bool = True) -> list:
    """The polylines of one frame; the first is the ground (thin, grey) unless
    `ground` is False (a body drawn without its ground)."""
    artists = []
    for i, line in enumerate(lines):
        k = i if ground else i + 1  # 0: the ground's style
        (artist,) = ax.plot(
            line[:, 0],
            line[:, 1],
            "-o" if line.shape[0] > 1 and k else "-",
            color=_STICK_COLOURS[k % len(_STICK_COLOURS)],
            alpha=alpha,
            markersize=3,
            linewidth=2 if k else 1,
        )
        artists.append(artist)
    return artists


def _stick_legend(
    ax: Axes, body: Sequence, names: Sequence[str | None], outside: bool = False
):
    """A legend of the body's polylines (`body`: their artists, after the ground)
    that `names` names: in the upper left corner, or `outside` the axes on their
    right; `None` where none is named."""
    named = [(artist, name) for artist, name in zip(body, names) if name]
    if not named:
        return None
    handles, labels = zip(*named)
    where = {"bbox_to_anchor": (1.01, 1.0), "borderaxespad": 0.0} if outside else {}
    return ax.legend(
        handles, labels, loc="upper left", fontsize="small", frameon=False, **where
    )


def stick_figure(
    frames: StickFrames,
    *,
    snapshots: int = 8,
    ax: Axes | None = None,
    units: Units | None = None,
):
    """`snapshots` stick figures of `frames` at evenly spaced times, later ones
    darker (a strobe picture of a step or a jump), on one ground line. Where the
    body travels less than its own width times the snapshots (a jump in place),
    the snapshots are set side by side, each labelled with its time, instead of
    on top of each other. The polylines that `frames.names` names are in a
    legend."""
    units = Units() if units is None else units
    own_figure = ax is None
    if ax is None:
        fig = Figure(figsize=(8, 3.8), layout="constrained")
        ax = fig.add_subplot()
    else:
        fig = ax.figure
    picks = np.round(
        np.linspace(0, len(frames.times) - 1, min(snapshots, len(frames.times)))
    ).astype(int)
    centres = _body_centres(frames)[picks]
    width = _body_width(frames)
    spread = float(np.ptp(centres)) < 0.5 * width * len(picks) and len(picks) > 1
    offsets = 1.3 * width * np.arange(len(picks)) if spread else np.zeros(len(picks))
    (x_low, x_high), (y_low, y_high) = _stick_limits(frames)
    x_high += float(offsets[-1])
    for j, (index, offset) in enumerate(zip(picks, offsets)):
        lines = [line + np.array([offset, 0.0]) for line in frames.polylines[index]]
        if j:
            lines = lines[1:]  # the ground once
        else:
            lines[0] = _extended_ground(lines[0], x_low, x_high)
        drawn = _draw_sticks(
            ax, lines, alpha=0.25 + 0.75 * j / len(picks), ground=not j
        )
        body = drawn if j else drawn[1:]  # the last, darkest, names the legend
        if spread:
            ax.annotate(
                f"{frames.times[index]:.2f}",
                (centres[j] + offset, y_low),
                horizontalalignment="center",
                verticalalignment="top",
                fontsize="small",
            )
    ax.set(
        xlim=(x_low, x_high),
        ylim=(y_low - (0.08 * (y_high - y_low) if spread else 0.0), y_high),
        aspect="equal",
        xlabel=(
            f"snapshots set side by side; their times [{units.time}] below"
            if spread
            else f"x [{units.length}]"
        ),
        ylabel=f"y [{units.length}]",
    )
    if spread:  # the horizontal positions are the layout's, not the motion's
        ax.set_xticks([])
    _stick_legend(ax, body, frames.names, outside=True)  # off the snapshots
    ax.set_title(f"t = {frames.times[0]:.2f} to {frames.times[-1]:.2f} {units.time}")
    if own_figure:
        # The figure's height follows the drawing's (equal axes, limited by the
        # width): a sheet of snapshots is wide and low, and a fixed height left
        # about half of the figure blank above and below it. Laid out once,
        # the figure keeps the height its content spans, and 0.4 in more for a
        # title the caller may add above.
        fig.draw_without_rendering()
        used = fig.get_tightbbox().height
        fig.set_size_inches(8, float(np.clip(used + 0.4, 1.5, 8.0)))
    return fig


def save_animation(
    frames: StickFrames,
    path,
    *,
    fps: float = 20,
    units: Units | None = None,
    follow: bool | None = None,
    note: str | None = None,
) -> Any:
    """Write `frames` as an animation at `path`, 800 x 450 pixels, `fps` frames
    per second: an animated GIF (Pillow) where `path` ends in `.gif`, an MP4
    video (H.264, through the ffmpeg of the optional dependency `imageio-ffmpeg`:
    `pip install "hybrax[video]"`) where it ends in `.mp4`. Returns the path
    written (see [`hybrax.plot.save_figures`][] for where it goes if that
    fails). Another suffix is a `ValueError`; `.mp4` without `imageio-ffmpeg` an
    `ImportError` saying how to install it, both before any frame is drawn.

    The view keeps the body's scale. With `follow` (default: where the body
    travels, over the run, more than a quarter of its own width, as a walker
    does) the camera moves with the body's mean position, smoothed over half a
    step (the median time between events) and at least 0.3 s of frames, with a
    fixed width; the ground (the first polyline) is drawn as one line across the
    view with short hatches under it at fixed places along it, which move past
    as the body walks on; the title gives the time and the camera's position,
    and a line below it their units. The polylines that `frames.names` names
    are in a legend (one colour each in every frame). `note`: a line of text at
    the foot of every frame (a simplification of the model that shows, e.g.
    a swing foot passing through the ground). Frames are drawn without axes:
    each restores an empty background and draws only the ground, its hatches,
    the sticks and the title (as matplotlib's blitting does on screen)."""
    import pathlib

    path = pathlib.Path(path)
    write_video = _video_writer(path.suffix.lower())
    path.parent.mkdir(parents=True, exist_ok=True)
    animation = _Animation(frames, fps=fps, units=units, follow=follow, note=note)
    images = []
    for index in range(len(frames.times)):
        animation.draw(index)
        images.append(animation.image())
    from .._io import write_file

    return write_file(path, lambda temporary: write_video(temporary, images, fps))


def _camera_centres(frames: StickFrames, fps: float) -> np.ndarray:
    """A following camera's horizontal centre in each frame: the body's mean
    position smoothed by a Gaussian of half a step (the median time between the
    events) and at least `0.3 * fps` frames, so that a swinging leg does not
    rock the view. The ends are extended by odd reflection, which keeps a
    uniform motion as it is (the camera does not lag at the first and last
    frames)."""
    centres = _body_centres(frames)
    if len(centres) < 3:
        return centres
    sigma = 0.3 * fps
    events = np.asarray(frames.event_times, dtype=float)
    events = events[(events > frames.times[0]) & (events < frames.times[-1])]
    if events.size:
        steps = np.diff(np.concatenate([[frames.times[0]], events]))
        dt = (frames.times[-1] - frames.times[0]) / (len(frames.times) - 1)
        sigma = max(sigma, 0.5 * float(np.median(steps)) / dt)
    reach = max(1, int(np.ceil(3 * sigma)))
    kernel = np.exp(-0.5 * (np.arange(-reach, reach + 1) / sigma) ** 2)
    padded = np.pad(centres, reach, mode="reflect", reflect_type="odd")
    return np.convolve(padded, kernel / kernel.sum(), "valid")


def _mark_spacing(view: float) -> float:
    """A round distance (1, 2 or 5 times a power of ten) near a tenth of `view`:
    the spacing of the ground's hatches."""
    target = view / 10
    power = 10.0 ** np.floor(np.log10(target))
    steps = np.array([1.0, 2.0, 5.0, 10.0]) * power
    return float(steps[np.argmin(np.abs(np.log(steps / target)))])


def _ground_marks(
    line: np.ndarray,
    anchor: np.ndarray,
    spacing: float,
    low: float,
    high: float,
    size: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Short slanted hatches under a straight ground `line` (two points), one
    every `spacing` along it, at the same places of the world in every frame
    (counted along the line from `anchor`), between `x = low` and `x = high`:
    their x and y, NaN between hatches (one line artist). None for a vertical
    or bent ground."""
    if line.shape[0] != 2 or line[1, 0] == line[0, 0]:
        return np.zeros(0), np.zeros(0)
    along = (line[1] - line[0]) / np.linalg.norm(line[1] - line[0])
    along = along if along[0] > 0 else -along
    up = np.array([-along[1], along[0]])
    start = line[0] + float(np.dot(anchor - line[0], along)) * along
    first = np.ceil((low - start[0]) / along[0] / spacing)
    last = np.floor((high - start[0]) / along[0] / spacing)
    s = np.arange(first, last + 1) * spacing
    feet = start + s[:, None] * along
    tips = feet - size * (along + up) / np.sqrt(2)
    gaps = np.full_like(feet, np.nan)
    points = np.stack([feet, tips, gaps], axis=1).reshape(-1, 2)
    return points[:, 0], points[:, 1]


class _Animation:
    """The figure of [`hybrax.plot.save_animation`][] and the drawing of one
    frame at a time by blitting (`draw(index)`, then `image()`): the background
    (the units, the legend, the note) is drawn once; each frame restores it and
    draws the animated artists, the ground (`artists[0]`), its hatches (`marks`,
    where the camera follows), the sticks (`artists[1:]`) and the title."""

    def __init__(
        self,
        frames: StickFrames,
        *,
        fps: float = 20,
        units: Units | None = None,
        follow: bool | None = None,
        note: str | None = None,
    ):
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        units = Units() if units is None else units
        self.frames = frames
        self.fig = fig = Figure(figsize=(8, 4.5), dpi=100)
        self.canvas = FigureCanvasAgg(fig)
        # A note takes a line below the view.
        box = (0.02, 0.02, 0.96, 0.86) if note is None else (0.02, 0.07, 0.96, 0.81)
        self.ax = ax = fig.add_axes(box)
        ax.set_axis_off()
        (x_low, x_high), (y_low, y_high) = _stick_limits(frames)
        ratio = (box[2] * 8) / (box[3] * 4.5)  # the axes' width over their height
        height = y_high - y_low
        width = _body_width(frames)
        view = max(height * ratio, min(x_high - x_low, 3.0 * width))
        if follow is None:
            body = _body_centres(frames)
            follow = bool(abs(body[-1] - body[0]) > 0.25 * width)
        if not follow:
            view = max(view, x_high - x_low)
        self.follow, self.view = follow, view
        height = view / ratio
        middle = 0.5 * (y_low + y_high)
        ax.set_ylim(middle - 0.5 * height, middle + 0.5 * height)
        if follow:
            self.centres = _camera_centres(frames, fps)
        else:
            self.centres = np.full(len(frames.times), 0.5 * (x_low + x_high))
        ax.set_xlim(self.centres[0] - 0.5 * view, self.centres[0] + 0.5 * view)
        self.title = fig.text(0.5, 0.95, "", horizontalalignment="center")
        # The units in a line of the background, drawn once: units in mathtext
        # (the simplest walker's sqrt(l/g)) in the title were parsed again in
        # every frame.
        named = f"t in {units.time}" + (f", x in {units.length}" if follow else "")
        fig.text(
            0.5, 0.905, f"({named})", horizontalalignment="center", fontsize="small"
        )
        self.note = None
        if note is not None:
            self.note = fig.text(
                0.5,
                0.025,
                note,
                horizontalalignment="center",
                fontsize="small",
                color="0.3",
            )
        self.artists = _draw_sticks(ax, frames.polylines[0])
        self.marks = None
        animated = [*self.artists, self.title]
        if follow:
            (self.marks,) = ax.plot([], [], "-", color="0.45", linewidth=0.8)
            self.spacing = _mark_spacing(view)
            self.anchor = frames.polylines[0][0][0]
            animated.append(self.marks)
        self.legend = _stick_legend(ax, self.artists[1:], frames.names)
        for artist in animated:
            artist.set_animated(True)  # left out of the background
        self.canvas.draw()
        self.background = self.canvas.copy_from_bbox(fig.bbox)

    def draw(self, index: int) -> None:
        """Draw frame `index` over the background."""
        ax, view = self.ax, self.view
        self.canvas.restore_region(self.background)
        centre = self.centres[index]
        low, high = centre - 0.5 * view, centre + 0.5 * view
        ax.set_xlim(low, high)
        lines = self.frames.polylines[index]
        ground = _extended_ground(lines[0], low - view, high + view)
        self.artists[0].set_data(ground[:, 0], ground[:, 1])
        ax.draw_artist(self.artists[0])
        if self.marks is not None:
            self.marks.set_data(
                *_ground_marks(
                    lines[0], self.anchor, self.spacing, low, high, view / 50
                )
            )
            ax.draw_artist(self.marks)
        for artist, line in zip(self.artists[1:], lines[1:]):
            artist.set_data(line[:, 0], line[:, 1])
            ax.draw_artist(artist)
        where = f",  x = {centre:.2f}" if self.follow else ""
        self.title.set_text(f"t = {self.frames.times[index]:.2f}{where}")
        self.fig.draw_artist(self.title)

    def image(self):
        """The frame drawn last, as an RGB picture (Pillow)."""
        from PIL import Image

        return Image.fromarray(np.asarray(self.canvas.buffer_rgba())).convert("RGB")


#: The animation formats of `save_animation`, by file suffix.
ANIMATION_FORMATS = ("gif", "mp4")


def _video_writer(suffix: str):
    """`write(path, images, fps)` for an animation file with this suffix; a
    `ValueError` for an unknown suffix, an `ImportError` for `.mp4` without
    `imageio-ffmpeg`."""
    if suffix == ".gif":
        return _write_gif
    if suffix == ".mp4":
        check_video_support()
        return _write_mp4
    raise ValueError(
        f"`path` must end in .gif or .mp4 (the animation's format); got {suffix!r}."
    )


def check_video_support() -> None:
    """An `ImportError` saying how to install MP4 support where the optional
    dependency `imageio-ffmpeg` (which brings its own ffmpeg) is missing."""
    import importlib.util

    if importlib.util.find_spec("imageio_ffmpeg") is None:
        raise ImportError(
            "MP4 animations need the optional dependency imageio-ffmpeg: "
            'pip install "hybrax[video]"'
        )


def _write_gif(path, images, fps: float) -> None:
    from PIL import Image

    # A GIF frame holds 256 colours. Pillow picks them by median cut unless told
    # otherwise, which took most of a long animation's writing time. Its fast
    # octree is several times faster and stays within a grey level of the drawn
    # frame on average (the anti-aliased edges have ~700 colours).
    images = [
        image.quantize(colors=256, method=Image.Quantize.FASTOCTREE) for image in images
    ]
    images[0].save(
        path,
        save_all=True,
        append_images=images[1:],
        duration=int(round(1000 / fps)),
        loop=0,
    )


def _write_mp4(path, images, fps: float) -> None:
    # The ffmpeg executable of imageio-ffmpeg, fed raw RGB frames on its stdin.
    # Started without a `preexec_fn` (imageio-ffmpeg's own writer sets one, which
    # makes Python fork through its fork handlers, where JAX warns that forking a
    # multithreaded process may deadlock). H.264 in yuv420p needs even sides
    # (800 x 450 is); the format is named, not read from the file's suffix.
    import contextlib
    import subprocess
    import tempfile

    import imageio_ffmpeg

    width, height = images[0].size
    command = [
        imageio_ffmpeg.get_ffmpeg_exe(),
        "-y",
        "-loglevel",
        "error",
        "-f",
        "rawvideo",
        "-pix_fmt",
        "rgb24",
        "-s",
        f"{width}x{height}",
        "-r",
        f"{fps:g}",
        "-i",
        "-",
        "-c:v",
        "libx264",
        "-pix_fmt",
        "yuv420p",
        "-f",
        "mp4",
        str(path),
    ]
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=log
        )
        try:
            for image in images:
                process.stdin.write(np.asarray(image, dtype=np.uint8).tobytes())
        except BrokenPipeError:
            pass  # ffmpeg stopped early: its log, read below, says why
        finally:
            # Closed whatever happened, or ffmpeg would wait for more frames.
            with contextlib.suppress(BrokenPipeError):
                process.stdin.close()
            code = process.wait()
        if code != 0:
            log.seek(0)
            message = log.read().decode(errors="replace").strip()
            raise OSError(f"ffmpeg could not write {path}: {message}")
