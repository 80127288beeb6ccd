"""The generic figures of `hybrax.plot` (any model): their content against the
bouncing ball's closed form, drawn from a trajectory built by hand (no JAX run).

Dropped from h = 1 m with e = 0.8 and g = 9.81: y(t) = h - g t^2 / 2 until
t_1 = sqrt(2 h / g), then flights of 2 e^k v_1 / g; each impact removes
T_c = (1 - e^2) m v^2 / 2."""

import dataclasses
import math
import re
import subprocess

import numpy as np
import pytest

import hybrax.plot
from hybrax.models import bouncing_ball


G, E, H, M = 9.81, 0.8, 1.0, 1.0


def _trajectory(n_impacts=3, samples=50):
    """Flights and impacts of the ball in closed form."""
    t0, y0, v0 = 0.0, H, 0.0
    t_phase, x_phase, t_events, before, after, lost, kept = [], [], [], [], [], [], []
    for _ in range(n_impacts):
        # Time to the floor from (y0, v0): y0 + v0 t - g t^2 / 2 = 0.
        t_hit = (v0 + math.sqrt(v0**2 + 2 * G * y0)) / G
        t = np.linspace(0.0, t_hit, samples)
        x_phase.append(np.stack([y0 + v0 * t - G * t**2 / 2, v0 - G * t], axis=1))
        t_phase.append(t0 + t)
        v_minus = v0 - G * t_hit
        t0 += t_hit
        t_events.append(t0)
        before.append([0.0, v_minus])
        after.append([0.0, -E * v_minus])
        lost.append((1 - E**2) * M * v_minus**2 / 2)
        kept.append(E**2 * M * v_minus**2 / 2)
        y0, v0 = 0.0, -E * v_minus
    return hybrax.plot.Trajectory(
        t_phase=np.array(t_phase),
        x_phase=np.array(x_phase),
        phase_modes=("air",) * n_impacts,
        t_events=np.array(t_events),
        event_kinds=("impact",) * n_impacts,
        x_before=np.array(before),
        x_after=np.array(after),
        T_c=np.array(lost),
        T_a=np.array(kept),
    )


def test_time_series_draws_each_phase_and_marks_impacts():
    trajectory = _trajectory()
    fig = hybrax.plot.time_series(trajectory, labels=["y", "v"])
    height, speed = fig.axes
    lines = [line for line in height.get_lines() if line.get_linestyle() != "None"]
    assert len(lines) == 3
    np.testing.assert_allclose(lines[0].get_xdata(), trajectory.t_phase[0])
    np.testing.assert_allclose(lines[0].get_ydata(), trajectory.x_phase[0, :, 0])
    marks = [line for line in height.get_lines() if line.get_label() == "impact"]
    np.testing.assert_allclose(marks[0].get_xdata(), trajectory.t_events)
    assert height.get_ylabel() == "y" and speed.get_ylabel() == "v"
    assert speed.get_xlabel() == "t [s]"
    with pytest.raises(ValueError, match="labels"):
        hybrax.plot.time_series(trajectory, labels=["y"])
    with pytest.raises(ValueError, match="indices"):
        hybrax.plot.time_series(trajectory, indices=[2])


def test_time_series_names_constant_entries_instead_of_flat_panels():
    """An entry that keeps one value over the whole run (a coordinate held by a
    constraint: the jumper drew 8 flat panels of 10) gets no panel: it is named
    with its value above the panels. Asked for by `indices`, it is drawn."""
    ball = _trajectory()
    held = np.full(ball.x_phase.shape[:-1] + (1,), 0.25)
    trajectory = dataclasses.replace(
        ball,
        x_phase=np.concatenate([ball.x_phase, held], axis=-1),
        x_before=np.concatenate([ball.x_before, held[:, 0]], axis=-1),
        x_after=np.concatenate([ball.x_after, held[:, 0]], axis=-1),
    )
    fig = hybrax.plot.time_series(trajectory, labels=["y", "v", "w"])
    shown = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_ylabel() for ax in shown] == ["y", "v"]
    assert "w = 0.25" in shown[0].get_title(loc="left")
    asked = hybrax.plot.time_series(trajectory, [2], labels=["y", "v", "w"])
    assert [ax.get_ylabel() for ax in asked.axes] == ["w"]


def test_phase_portrait_draws_the_switching_surface():
    trajectory = _trajectory()
    fig = hybrax.plot.phase_portrait(
        trajectory, 0, 1, ["y", "v"], surfaces=[("x", 0.0, "ground")]
    )
    (ax,) = fig.axes
    ground = [line for line in ax.get_lines() if line.get_label() == "ground"]
    np.testing.assert_allclose(ground[0].get_xdata(), [0.0, 0.0])
    # Energy conservation in flight: every drawn point obeys v^2 = v_1^2 - 2 g y
    # on the first flight (from rest at h).
    first = [line for line in ax.get_lines() if line.get_label() == "air"][0]
    y, v = first.get_xdata(), first.get_ydata()
    np.testing.assert_allclose(v**2, 2 * G * (H - y), atol=1e-12)
    with pytest.raises(ValueError, match="axis"):
        hybrax.plot.phase_portrait(trajectory, 0, 1, surfaces=[("z", 0.0, "x")])


def _drawn_energy(trajectory):
    params = bouncing_ball.BallParams(g=G, e=E, m=M)
    fig = hybrax.plot.energy_history(
        trajectory, lambda x: bouncing_ball.energies(x, params)
    )
    ax, losses = fig.axes
    # The total is drawn in black, one line per phase.
    totals = [line.get_ydata() for line in ax.get_lines() if line.get_color() == "k"]
    (drops,) = [c for c in ax.collections if c.get_label() == "lost at the event"]
    return fig, ax, losses, totals, drops


def test_energy_history_drops_by_the_energy_lost_at_each_impact():
    """The drawn total is flat over each flight and drops at each impact by
    T_c = (1 - e^2) m v^2 / 2 (a red step, and a stem on the loss panel)."""
    trajectory = _trajectory()
    fig, ax, losses, totals, drops = _drawn_energy(trajectory)
    remaining = M * G * H
    for total, lost in zip(totals, [0.0, *trajectory.T_c]):
        remaining -= lost
        np.testing.assert_allclose(total, remaining, rtol=1e-12)
    for segment, t, lost in zip(
        drops.get_segments(), trajectory.t_events, trajectory.T_c
    ):
        np.testing.assert_allclose(segment[:, 0], t)
        np.testing.assert_allclose(segment[0, 1] - segment[1, 1], -lost, rtol=1e-12)
    (stems,) = [c for c in losses.containers]
    np.testing.assert_allclose(stems.markerline.get_ydata(), trajectory.T_c)
    assert losses.get_xlabel() == "t [s]" and ax.get_ylabel() == "energy [J]"
    # The closed form of the first loss: (1 - e^2) m g h.
    np.testing.assert_allclose(trajectory.T_c[0], (1 - E**2) * M * G * H, rtol=1e-12)


def test_energy_history_keeps_one_datum_when_the_frame_moves():
    """A walker's coordinates move with its stance foot: here the ball's frame
    rises by 0.3 m at every impact (its heights read 0.3 m less per bounce). The
    figure puts every phase on the first one's datum: the same totals and drops
    as in a fixed frame, not a total that the moving datum keeps flat."""
    fixed = _trajectory()
    shift = 0.3 * np.arange(fixed.t_phase.shape[0])
    moved = hybrax.plot.Trajectory(
        **{
            **fixed.__dict__,
            "x_phase": fixed.x_phase
            - np.stack(
                [
                    shift[:, None] * np.ones(fixed.x_phase.shape[1]),
                    0 * fixed.x_phase[..., 1],
                ],
                axis=-1,
            ),
            "x_before": fixed.x_before - np.stack([shift, 0 * shift], axis=-1),
            "x_after": fixed.x_after - np.stack([shift + 0.3, 0 * shift], axis=-1),
        }
    )
    *_, totals_fixed, drops_fixed = _drawn_energy(fixed)
    *_, totals_moved, drops_moved = _drawn_energy(moved)
    for a, b in zip(totals_fixed, totals_moved):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12)
    for a, b in zip(drops_fixed.get_segments(), drops_moved.get_segments()):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12)


def test_an_elastic_event_draws_no_loss():
    """Restitution e = 1: nothing is lost, so nothing is drawn as lost (a
    reported T_c of the reflected motion is no loss) and no loss panel."""
    trajectory = _trajectory()
    elastic = hybrax.plot.Trajectory(
        **{**trajectory.__dict__, "x_after": trajectory.x_before * [1.0, -1.0]}
    )
    fig = hybrax.plot.energy_history(
        elastic, lambda x: bouncing_ball.energies(x, bouncing_ball.BallParams())
    )
    (ax,) = fig.axes
    assert not [c for c in ax.collections if c.get_label() == "lost at the event"]


def test_orbit_portrait_draws_the_orbit_and_the_perturbed_starts():
    cycle = _trajectory(n_impacts=1)
    nudged = _trajectory(n_impacts=1)
    nudged = hybrax.plot.Trajectory(
        **{**nudged.__dict__, "x_phase": nudged.x_phase + np.array([0.0, 0.1])}
    )
    fig = hybrax.plot.orbit_portrait(
        cycle, 0, 1, ["y", "v"], perturbed=[nudged], perturbed_labels=["v + 0.1"]
    )
    (ax,) = fig.axes
    by_label = {line.get_label(): line for line in ax.get_lines()}
    np.testing.assert_allclose(
        by_label["periodic orbit"].get_ydata(), cycle.x_phase[0, :, 1]
    )
    np.testing.assert_allclose(
        by_label["v + 0.1"].get_ydata(), cycle.x_phase[0, :, 1] + 0.1
    )
    with pytest.raises(ValueError, match="perturbed_labels"):
        hybrax.plot.orbit_portrait(cycle, 0, 1, perturbed=[nudged], perturbed_labels=[])


def test_stick_frames_follow_the_closed_form_and_shift_at_events(tmp_path):
    """The ball as a point drawn at (0, y): each frame's point is the closed-form
    height at its time; a frame shift of (1, 0) per impact moves the drawing one
    metre right per bounce, as a walker's stance foot moves at each step."""
    trajectory = _trajectory()
    frames = hybrax.plot.stick_frames(
        trajectory,
        lambda x: [np.array([[-0.5, 0.0], [0.5, 0.0]]), np.array([[0.0, x[0]]])],
        frame_shift=lambda x_before: np.array([1.0, 0.0]),
        frames=40,
    )
    t_1 = math.sqrt(2 * H / G)
    for t, (ground, ball) in zip(frames.times, frames.polylines):
        bounces = int(np.sum(trajectory.t_events < t))
        assert ground[0, 0] == pytest.approx(bounces - 0.5)
        assert ball[0, 0] == pytest.approx(bounces)
        if t <= t_1:
            # Linear interpolation of 50 samples: error below g dt^2 / 8.
            dt = t_1 / 49
            assert ball[0, 1] == pytest.approx(H - G * t**2 / 2, abs=G * dt**2 / 8)
    figure = hybrax.plot.stick_figure(frames, snapshots=5)
    assert len(figure.axes[0].lines) == 1 + 5  # the ground once, five balls
    path = hybrax.plot.save_animation(frames, tmp_path / "ball.gif", fps=10)
    from PIL import Image

    with Image.open(path) as gif:
        assert gif.n_frames == 40 and gif.size == (800, 450)
    # Frames by simulated time: one every 1/fps from the start to the end.
    timed = hybrax.plot.stick_frames(
        trajectory,
        lambda x: [np.array([[-0.5, 0.0], [0.5, 0.0]]), np.array([[0.0, x[0]]])],
        fps=25.0,
    )
    duration = float(np.max(trajectory.t_phase))
    assert len(timed.times) == int(duration * 25) + 1
    np.testing.assert_allclose(np.diff(timed.times), duration / (len(timed.times) - 1))


def test_an_animation_is_a_gif_or_an_mp4_that_ffmpeg_reads_back(tmp_path):
    """The same frames as an MP4: ffmpeg (an independent reader) finds as many
    frames as drawn, at the size and rate asked, and their pictures are those of
    the GIF (H.264 is lossy: equal to a few grey levels on average). Another
    suffix is refused before any frame is drawn."""
    import imageio_ffmpeg
    from PIL import Image

    trajectory = _trajectory()
    frames = hybrax.plot.stick_frames(
        trajectory,
        lambda x: [np.array([[-0.5, 0.0], [0.5, 0.0]]), np.array([[0.0, x[0]]])],
        frames=12,
    )
    gif = hybrax.plot.save_animation(frames, tmp_path / "ball.gif", fps=8)
    mp4 = hybrax.plot.save_animation(frames, tmp_path / "ball.mp4", fps=8)
    # Decoded by the ffmpeg executable itself, to raw RGB frames; its log gives
    # the stream's size and rate.
    decoded = subprocess.run(
        [imageio_ffmpeg.get_ffmpeg_exe(), "-i", str(mp4), "-f", "rawvideo"]
        + ["-pix_fmt", "rgb24", "-"],
        capture_output=True,
        check=True,
    )
    video = np.frombuffer(decoded.stdout, np.uint8).reshape(-1, 450, 800, 3)
    log = decoded.stderr.decode()
    assert "h264" in log and "800x450" in log and re.search(r"\b8 fps\b", log)
    assert len(video) == 12
    with Image.open(gif) as pictures:
        for index in (0, 5, 11):
            pictures.seek(index)
            picture = np.asarray(pictures.convert("RGB"), dtype=float)
            assert np.mean(np.abs(video[index] - picture)) < 3.0
    # A video ffmpeg cannot encode (H.264 in yuv420p needs even sides) is an
    # error with ffmpeg's own reason, not a broken pipe.
    from PIL import Image as PILImage

    from hybrax.plot.sticks import _write_mp4

    odd = [PILImage.new("RGB", (3, 3))] * 2
    with pytest.raises(OSError, match="ffmpeg could not write .*divisible by 2"):
        _write_mp4(tmp_path / "odd.mp4", odd, 8.0)
    with pytest.raises(ValueError, match="`path` must end in .gif or .mp4"):
        hybrax.plot.save_animation(frames, tmp_path / "ball.avi")
    assert not (tmp_path / "ball.avi").exists()


def test_a_strobe_of_a_motion_in_place_sets_its_snapshots_apart():
    """A body that only moves up and down (the ball, 0.2 m wide): the strobe
    draws its snapshots side by side, each labelled with its time, on one
    ground line across the figure."""
    trajectory = _trajectory()
    frames = hybrax.plot.stick_frames(
        trajectory,
        lambda x: [
            np.array([[-0.5, 0.0], [0.5, 0.0]]),
            np.array([[-0.1, x[0]], [0.1, x[0]]]),
        ],
        frames=30,
    )
    fig = hybrax.plot.stick_figure(frames, snapshots=4)
    (ax,) = fig.axes
    ground, *balls = ax.lines
    assert len(balls) == 4
    centres = [float(np.mean(line.get_xdata())) for line in balls]
    assert np.all(np.diff(centres) > 0.2)  # apart, not on top of each other
    assert ground.get_xdata()[0] <= ax.get_xlim()[0] + 1e-9
    assert ground.get_xdata()[-1] >= centres[-1]
    times = [float(text.get_text()) for text in ax.texts]
    np.testing.assert_allclose(times, frames.times[[0, 10, 19, 29]], atol=5e-3)


def test_many_entries_in_two_columns_with_one_legend():
    """Ten state entries (a multibody's angles and rates): five rows in two
    columns, the first five entries on the left; one legend for the figure,
    with readable names, and none in the panels."""
    ball = _trajectory()
    wide = hybrax.plot.Trajectory(
        **{
            **ball.__dict__,
            "x_phase": np.tile(ball.x_phase, 5),
            "x_before": np.tile(ball.x_before, 5),
            "x_after": np.tile(ball.x_after, 5),
            "phase_modes": ("in_the_air",) * len(ball.phase_modes),
        }
    )
    fig = hybrax.plot.time_series(wide, labels=[f"x{i}" for i in range(10)])
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert len(panels) == 10
    left = [ax.get_ylabel() for ax in panels if ax.get_subplotspec().colspan.start == 0]
    assert left == [f"x{i}" for i in range(5)]
    assert all(ax.get_legend() is None for ax in panels)
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == ["in the air", "impact"]


def test_the_rimless_wheel_is_drawn_as_one_wheel_with_its_contact_spoke():
    """The wheel's figure: the slope, every spoke as one line out of the hub and
    back (one colour; each tip one spoke length from the hub, the tips 2 alpha
    apart), and the contact spoke on its own, ending on the slope at the origin."""
    from hybrax.models import rimless_wheel

    params = rimless_wheel.RimlessWheelParams()
    ground, wheel, marked = rimless_wheel._stick_figure(np.array([0.05, -1.0]), params)
    n = int(round(np.pi / params.alpha))
    hub = wheel[0]
    assert wheel.shape == (2 * n + 1, 2)
    np.testing.assert_allclose(wheel[0::2], np.broadcast_to(hub, (n + 1, 2)))
    tips = wheel[1::2] - hub
    np.testing.assert_allclose(np.hypot(*tips.T), params.l, rtol=1e-12)
    angles = np.sort(np.mod(np.arctan2(tips[:, 1], tips[:, 0]), 2 * np.pi))
    np.testing.assert_allclose(np.diff(angles), 2 * params.alpha, rtol=1e-9)
    np.testing.assert_allclose(marked, [hub, [0.0, 0.0]], atol=1e-12)
    slope = ground[1] - ground[0]
    assert abs(slope[1] / slope[0] + np.tan(params.gamma)) < 1e-12


def test_portrait_tick_labels_do_not_run_into_each_other():
    """A narrow range of long tick labels (the five-link biped's trunk angle,
    -0.175 to 0.025 rad) ran together on the orbit figure's horizontal axis:
    the portraits keep about six ticks, and no two labels overlap."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    ball = _trajectory()

    def narrow(x):
        return np.concatenate([0.2 * x[..., :1] - 0.175, x[..., 1:]], axis=-1)

    trajectory = dataclasses.replace(
        ball,
        x_phase=narrow(ball.x_phase),
        x_before=narrow(ball.x_before),
        x_after=narrow(ball.x_after),
    )
    for fig in (
        hybrax.plot.orbit_portrait(trajectory, 0, 1, ["angle [rad]", "rate"]),
        hybrax.plot.phase_portrait(trajectory, 0, 1, ["angle [rad]", "rate"]),
    ):
        FigureCanvasAgg(fig).draw()
        labels = [t for t in fig.axes[0].get_xticklabels() if t.get_text()]
        assert len(labels) <= 7
        boxes = [t.get_window_extent() for t in labels]
        assert not any(a.overlaps(b) for a, b in zip(boxes, boxes[1:]))
