"""The walking animations show a gait: the camera follows the walker (in `orbit`'s
animation of a step as in `simulate`'s), the ground carries hatches fixed in the
world that move past, each leg keeps one colour through the gait and a legend
names them, and the compass gait's frames say that its swing foot passes through
the slope (foot scuffing ignored). Checked on the drawn artists of single
frames (`hybrax.plot.sticks._Animation`, what `save_animation` draws and blits),
on a simulated compass gait."""

import jax.numpy as jnp
import numpy as np
import pytest
from matplotlib.colors import to_rgba

import hybrax as hx
from hybrax.models import compass_gait as cg, get_model
from hybrax.plot.sticks import StickFrames, _Animation


FPS = 25.0


# The walk's tests are slow: its simulation compiles for 14 s of the fast set's
# cold run on 2 cores.
@pytest.fixture(scope="module")
def walk():
    """Three steps of the compass gait from its default start, drawn as the
    commands draw them: `(model, params, trajectory, frames)`."""
    model = get_model("compass-gait")
    system, defaults = cg.compass_gait()
    params = hx.canonical_params(defaults)
    solution = hx.simulate(
        system,
        jnp.asarray(cg.default_state(params), dtype=float),
        params,
        n_events=3,
        n_save=40,
    )
    trajectory = hx.plot.Trajectory.from_solution(solution, system)
    assert trajectory.event_kinds == ("heelstrike",) * 3
    shown = model.presentation
    frames = hx.plot.stick_frames(
        trajectory,
        lambda x: shown.stick_figure(x, params),
        frame_shift=lambda x: shown.frame_shift(x, params),
        fps=FPS,
        swaps=shown.stick_swaps,
        names=shown.stick_names,
    )
    return model, params, trajectory, frames


def _animation(model, frames):
    return _Animation(
        frames,
        fps=FPS,
        units=model.presentation.units,
        note=model.presentation.animation_note,
    )


def _hip(lines) -> np.ndarray:
    """The compass gait's hip: the highest point of its legs."""
    points = np.concatenate(lines[1:])
    return points[np.argmax(points[:, 1])]


def _first_step(frames: StickFrames, trajectory) -> StickFrames:
    """The frames before the first heel strike: one step, as `orbit` animates."""
    keep = frames.times < trajectory.t_events[0]
    return StickFrames(
        times=frames.times[keep],
        polylines=tuple(p for p, k in zip(frames.polylines, keep) if k),
        names=frames.names,
        event_times=frames.event_times,
    )


@pytest.mark.slow
def test_the_camera_follows_the_hip_with_a_fixed_width(walk):
    """Far apart frames: the view's centre moves as the hip does (within a tenth
    of the view), the hip stays in the view's middle third in every frame, the
    width never changes, and the camera moves on smoothly (no step in its
    speed above a tenth of its mean). One step alone (an orbit's animation)
    is followed too."""
    model, _, trajectory, frames = walk
    animation = _animation(model, frames)
    assert animation.follow
    last = len(frames.times) - 1
    centres, widths, hips = [], [], []
    for index in range(last + 1):
        animation.draw(index)
        low, high = animation.ax.get_xlim()
        centres.append(0.5 * (low + high))
        widths.append(high - low)
        hips.append(_hip(frames.polylines[index])[0])
        assert abs(hips[-1] - centres[-1]) < (high - low) / 6
    view = widths[0]
    np.testing.assert_allclose(widths, view, rtol=1e-12)
    hip_travel = hips[-1] - hips[0]
    assert hip_travel > 0.3 * view  # the walker crosses much of the view
    assert abs((centres[-1] - centres[0]) - hip_travel) < 0.1 * view
    speed = np.diff(centres)
    assert np.all(speed > 0)
    assert np.max(np.abs(np.diff(speed))) < 0.1 * np.mean(speed)
    step = _animation(model, _first_step(frames, trajectory))
    assert step.follow and step.marks is not None
    step.draw(0)
    first = np.mean(step.ax.get_xlim())
    step.draw(len(step.frames.times) - 1)
    assert np.mean(step.ax.get_xlim()) > first + 0.1 * step.view


@pytest.mark.slow
def test_the_ground_carries_hatches_that_move_past(walk):
    """The hatches' feet lie on the slope, a round distance apart, at the same
    places of the world in two frames far apart (where both see them), and at
    other places of the view: they move past as the walker goes on."""
    model, _, _, frames = walk
    animation = _animation(model, frames)
    spacing = animation.spacing
    assert spacing == pytest.approx(animation.view / 10, rel=1.0)
    feet, offsets = [], []
    for index in (0, len(frames.times) // 2):
        animation.draw(index)
        x, y = animation.marks.get_data()
        foot_x, foot_y = np.asarray(x)[0::3], np.asarray(y)[0::3]
        assert len(foot_x) >= 5
        ground = frames.polylines[index][0]
        slope = (ground[1, 1] - ground[0, 1]) / (ground[1, 0] - ground[0, 0])
        np.testing.assert_allclose(
            foot_y, ground[0, 1] + slope * (foot_x - ground[0, 0]), atol=1e-12
        )
        along = np.hypot(np.diff(foot_x), np.diff(foot_y))
        np.testing.assert_allclose(along, spacing, rtol=1e-9)
        low, high = animation.ax.get_xlim()
        assert low <= foot_x.min() and foot_x.max() <= high
        feet.append(foot_x)
        offsets.append((foot_x[0] - low) / (high - low))
    shared = [x for x in feet[1] if np.min(np.abs(feet[0] - x)) < 1e-9]
    assert shared  # the same marks of the world, seen in both frames
    assert abs(offsets[1] - offsets[0]) > 1e-3  # at another place of the view
    # Animated (drawn in every frame, not baked into the background).
    assert animation.marks.get_animated()


@pytest.mark.slow
def test_each_leg_keeps_its_colour_across_heel_strikes(walk):
    """Just before the first heel strike leg 1 stands on the start's stance
    foot (the origin); just after it, the leg drawn in leg 1's colour is the one
    that leaves that foot (its foot still near the origin) and leg 2's colour
    stands on the new stance foot, where the swing foot landed."""
    model, params, trajectory, frames = walk
    animation = _animation(model, frames)
    leg_1, leg_2 = animation.artists[1], animation.artists[2]
    colours = (to_rgba(leg_1.get_color()), to_rgba(leg_2.get_color()))
    assert colours[0] != colours[1]
    strike = trajectory.t_events[0]
    landing = np.asarray(model.presentation.frame_shift(trajectory.x_before[0], params))
    before = int(np.flatnonzero(frames.times < strike)[-1])
    after = before + 1
    animation.draw(before)
    assert np.min(np.hypot(*leg_1.get_xydata().T)) < 1e-9
    animation.draw(after)
    assert (to_rgba(leg_1.get_color()), to_rgba(leg_2.get_color())) == colours
    near = np.min(np.hypot(*leg_1.get_xydata().T))
    assert near < 0.1 < np.min(np.hypot(*(leg_1.get_xydata() - landing).T))
    assert np.min(np.hypot(*(leg_2.get_xydata() - landing).T)) < 1e-9
    # Leg 1 is the stance leg again after the second strike: on its own foot.
    second = int(np.flatnonzero(frames.times > trajectory.t_events[1])[0])
    animation.draw(second)
    landed = landing + np.asarray(
        model.presentation.frame_shift(trajectory.x_before[1], params)
    )
    assert np.min(np.hypot(*(leg_1.get_xydata() - landed).T)) < 1e-9


@pytest.mark.slow
def test_the_legend_names_the_legs(walk):
    """The animation's and the strobe picture's legends name leg 1 and leg 2
    in their colours; the biped's names its legs and trunk, and its two legs
    (polylines 1 and 3, both from the hip) are the pair that trades at heel
    strike."""
    model, params, _, frames = walk
    animation = _animation(model, frames)
    legend = animation.legend
    assert [text.get_text() for text in legend.get_texts()] == ["leg 1", "leg 2"]
    for handle, artist in zip(legend.legend_handles, animation.artists[1:]):
        assert to_rgba(handle.get_color()) == to_rgba(artist.get_color())
    assert not legend.get_animated()  # drawn once, in the background
    strobe = hx.plot.stick_figure(frames)
    (ax,) = strobe.axes
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["leg 1", "leg 2"]
    biped = get_model("biped5")
    shown = biped.presentation
    assert shown.stick_names == ("leg 1", "trunk", "leg 2")
    assert shown.stick_swaps == ((1, 3),)
    biped_params = biped.make_params()
    ground, stance, trunk, swing = shown.stick_figure(
        np.asarray(biped.default_state(biped_params)), biped_params
    )
    np.testing.assert_allclose(stance[0], [0.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(stance[-1], swing[0], atol=1e-12)
    np.testing.assert_allclose(trunk[0], swing[0], atol=1e-12)
    assert stance.shape == swing.shape


@pytest.mark.slow
def test_the_compass_gait_says_its_swing_foot_passes_through_the_slope(walk):
    """The note is on every frame, below the view (not over the walker), and
    true: some frame has a foot below the slope. The simplest walker says the
    same; the five-link biped (knees) says nothing."""
    model, _, _, frames = walk
    note = model.presentation.animation_note
    assert "foot scuffing ignored" in note and "through the slope" in note
    animation = _animation(model, frames)
    assert animation.note.get_text() == note
    assert not animation.note.get_animated()  # in the background of each frame
    assert animation.note.get_position()[1] < animation.ax.get_position().y0
    depths = []
    for lines in frames.polylines:
        ground = lines[0]
        along = (ground[1] - ground[0]) / np.linalg.norm(ground[1] - ground[0])
        up = np.array([-along[1], along[0]])
        depths.append(np.min((np.concatenate(lines[1:]) - ground[0]) @ up))
    assert min(depths) < -1e-3
    assert get_model("simplest-walker").presentation.animation_note == note
    assert get_model("biped5").presentation.animation_note is None
    bare = _Animation(frames, fps=FPS)
    assert bare.note is None and bare.ax.get_position().y0 < 0.05


@pytest.mark.slow
def test_frames_are_blitted_and_written(walk, tmp_path):
    """Each frame redraws only its animated artists over one background (the
    legend and the note are in it): two frames differ, the same frame drawn
    twice is the same picture; the GIF has every frame."""
    model, _, _, frames = walk
    animation = _animation(model, frames)
    animation.draw(5)
    first = np.asarray(animation.image())
    animation.draw(40)
    other = np.asarray(animation.image())
    animation.draw(5)
    np.testing.assert_array_equal(np.asarray(animation.image()), first)
    assert np.any(first != other)
    path = hx.plot.save_animation(
        frames, tmp_path / "walk.gif", fps=FPS, note=model.presentation.animation_note
    )
    from PIL import Image

    with Image.open(path) as gif:
        assert gif.n_frames == len(frames.times) and gif.size == (800, 450)


def test_swaps_follow_the_parity_of_the_events():
    """A toy two-legged figure whose skeleton draws the stance leg first: with
    the swap, polyline 1 is the stance leg before the first event and after the
    second, the swing leg between; a pair naming the ground is refused."""
    trajectory = hx.plot.Trajectory(
        t_phase=np.array([[0.0, 0.9], [0.9, 1.9], [1.9, 3.0]]),
        x_phase=np.zeros((3, 2, 1)),
        phase_modes=("walk",) * 3,
        t_events=np.array([0.9, 1.9]),
        event_kinds=("strike",) * 2,
        x_before=np.zeros((2, 1)),
        x_after=np.zeros((2, 1)),
        T_c=np.zeros(2),
        T_a=np.zeros(2),
    )
    ground = np.array([[-1.0, 0.0], [1.0, 0.0]])
    stance, swing = np.array([[0.0, 0.0], [0.0, 1.0]]), np.array([[0.0, 1.0]])

    def skeleton(x):
        return [ground, stance, swing]

    frames = hx.plot.stick_frames(
        trajectory, skeleton, frames=31, swaps=((1, 2),), names=("a", "b")
    )
    for t, lines in zip(frames.times, frames.polylines):
        odd = int(np.sum(trajectory.t_events < t)) % 2
        assert len(lines[1]) == (1 if odd else 2)
    assert frames.names == ("a", "b")
    np.testing.assert_array_equal(frames.event_times, [0.9, 1.9])
    with pytest.raises(ValueError, match="`swaps` must pair polylines 1 to 2"):
        hx.plot.stick_frames(trajectory, skeleton, frames=3, swaps=((0, 1),))


def test_a_body_in_place_keeps_a_still_camera_and_a_bare_ground():
    """A body that moves up and down in place (a jumper): the camera stays, no
    hatches; a body in uniform motion is followed without lag at either end."""
    times = np.linspace(0.0, 2.0, 51)
    ground = np.array([[-1.0, 0.0], [1.0, 0.0]])
    still = StickFrames(
        times=times,
        polylines=tuple(
            (ground, np.array([[0.0, h], [0.0, h + 1.0]]))
            for h in 0.2 * np.abs(np.sin(3 * times))
        ),
    )
    animation = _Animation(still, fps=FPS)
    assert not animation.follow and animation.marks is None
    animation.draw(0)
    start = animation.ax.get_xlim()
    animation.draw(30)
    assert animation.ax.get_xlim() == start
    moving = StickFrames(
        times=times,
        polylines=tuple(
            (ground + [v, 0.0], np.array([[v, 0.0], [v + 0.3, 1.0]]))
            for v in 1.5 * times
        ),
    )
    followed = _Animation(moving, fps=FPS)
    assert followed.follow
    np.testing.assert_allclose(followed.centres, 1.5 * times + 0.15, atol=1e-9)


@pytest.mark.slow
def test_the_strobe_picture_has_no_blank_bands(walk):
    """The strobe picture's height follows its drawing (equal axes): a sheet of
    snapshots, wide and low, left about 55% of a fixed-height figure blank.
    Drawn, everything on it (axes, labels, legend, title) spans at least 80%
    of the figure's height."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    *_, frames = walk
    strobe = hx.plot.stick_figure(frames)
    canvas = FigureCanvasAgg(strobe)
    canvas.draw()
    used = strobe.get_tightbbox(canvas.get_renderer())  # inches
    assert used.height >= 0.8 * strobe.get_size_inches()[1]
