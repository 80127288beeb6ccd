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
      points $(x, y)$ (segments of a body, the ground line).
    """

    times: Float[np.ndarray, " F"]
    polylines: tuple[tuple[np.ndarray, ...], ...]


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
    times = np.linspace(t_start, t_end, frames)
    drawings = []
    for t in times:
        x, n_before = _state_at(trajectory, t)
        origin = shifts[n_before]
        drawings.append(
            tuple(np.asarray(line, dtype=float) + origin for line in skeleton(x))
        )
    return StickFrames(times=times, polylines=tuple(drawings))


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
    on top of each other."""
    units = Units() if units is None else units
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
        _draw_sticks(ax, lines, alpha=0.25 + 0.75 * j / len(picks), ground=not j)
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
    ax.set_title(f"t = {frames.times[0]:.2f} to {frames.times[-1]:.2f} {units.time}")
    return fig


def save_animation(
    frames: StickFrames,
    path,
    *,
    fps: float = 20,
    units: Units | None = None,
    follow: bool | None = None,
) -> Any:
    """Write `frames` as an animation at `path`, 800 x 450 pixels, `fps` frames
    per second: an animated GIF (Pillow) where `path` ends in `.gif`, an MP4
    video (H.264, through the ffmpeg of the optional dependency `imageio-ffmpeg`:
    `pip install "hybrax[video]"`) where it ends in `.mp4`. Returns the path
    written (see [`hybrax.plot.save_figures`][] for where it goes if that
    fails). Another suffix is a `ValueError`; `.mp4` without `imageio-ffmpeg` an
    `ImportError` saying how to install it, both before any frame is drawn.

    The view keeps the body's scale. With `follow` (default: where the body
    travels further than the view is wide, as a walker does) the camera moves
    with the body's mean position, smoothed over half a second of frames, and
    the ground (the first polyline) is drawn as one line across the view, so it
    stays in place under the moving body; the title gives the time and the
    camera's position, and a line below it their units. Frames are drawn without
    axes: each restores an empty background and draws only the ground, the sticks
    and the title (as matplotlib's blitting does on screen)."""
    import pathlib

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from PIL import Image

    units = Units() if units is None else units
    path = pathlib.Path(path)
    write_video = _video_writer(path.suffix.lower())
    path.parent.mkdir(parents=True, exist_ok=True)
    fig = Figure(figsize=(8, 4.5), dpi=100)
    canvas = FigureCanvasAgg(fig)
    box = (0.02, 0.02, 0.96, 0.86)
    ax = fig.add_axes(box)
    ax.set_axis_off()
    (x_low, x_high), (y_low, y_high) = _stick_limits(frames)
    ratio = (box[2] * 8) / (box[3] * 4.5)  # the axes' width over their height
    height = y_high - y_low
    view = max(height * ratio, min(x_high - x_low, 3.0 * _body_width(frames)))
    if follow is None:
        follow = x_high - x_low > view
    if not follow:
        view = max(view, x_high - x_low)
    height = view / ratio
    middle = 0.5 * (y_low + y_high)
    ax.set_ylim(middle - 0.5 * height, middle + 0.5 * height)
    centres = _body_centres(frames)
    if follow:
        window = max(1, int(round(0.5 * fps)))
        padded = np.pad(centres, window, mode="edge")
        centres = np.convolve(padded, np.ones(2 * window + 1), "valid") / (
            2 * window + 1
        )
    else:
        centres = np.full(len(frames.times), 0.5 * (x_low + x_high))
    ax.set_xlim(centres[0] - 0.5 * view, centres[0] + 0.5 * view)
    title = fig.text(0.5, 0.95, "", horizontalalignment="center")
    # The units in a line of the background, drawn once: units in mathtext (the
    # simplest walker's sqrt(l/g)) in the title were parsed again in every frame.
    named = f"t in {units.time}" + (f", x in {units.length}" if follow else "")
    fig.text(0.5, 0.905, f"({named})", horizontalalignment="center", fontsize="small")
    artists = _draw_sticks(ax, frames.polylines[0])
    for artist in (*artists, title):
        artist.set_animated(True)  # left out of the background
    canvas.draw()
    background = canvas.copy_from_bbox(fig.bbox)
    images = []
    for index, time in enumerate(frames.times):
        canvas.restore_region(background)
        low, high = centres[index] - 0.5 * view, centres[index] + 0.5 * view
        ax.set_xlim(low, high)
        for k, (artist, line) in enumerate(zip(artists, frames.polylines[index])):
            if k == 0:
                line = _extended_ground(line, low - view, high + view)
            artist.set_data(line[:, 0], line[:, 1])
            ax.draw_artist(artist)
        where = f",  x = {centres[index]:.2f}" if follow else ""
        title.set_text(f"t = {time:.2f}{where}")
        fig.draw_artist(title)
        images.append(Image.fromarray(np.asarray(canvas.buffer_rgba())).convert("RGB"))
    from .._io import write_file

    return write_file(path, lambda temporary: write_video(temporary, images, fps))


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
