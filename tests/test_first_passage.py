"""The mean first-passage time on random slopes: the rimless wheel's Monte Carlo
walks and mesh chain against an independent Markov chain of its closed-form step
map (NumPy/SciPy, no hybrax), and bad input."""

import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import norm

import hybrax as hx
from hybrax import models


G_OVER_L, ALPHA, GAMMA = 9.81, np.pi / 8, 0.08
SIGMA = 0.015  # rad: about 29 steps to the fall from the orbit


def _reference_chain(sigma, low=0.3, high=2.5, cells=1000):
    r"""The wheel's Markov chain on cells of the rate after heel strike, from its
    closed-form step map with exact transition probabilities. On a step of slope
    gamma + d the wheel starts at theta0 = gamma + d - alpha and passes the
    vertical iff omega^2 > 2 (g/l)(1 - cos theta0) (else it stalls: the fall);
    then omega' = c sqrt(omega^2 + K sin(gamma + d)), c = cos 2 alpha,
    K = 4 (g/l) sin alpha, increasing in d, so the chance that omega' lands in a
    cell is a difference of the normal CDF at the d that reach its edges.
    Returns the cells' centres, the expected steps to the fall from each
    ((I - T) m = 1) and 1/(1 - lambda_2)."""
    c = np.cos(2 * ALPHA)
    K = 4 * G_OVER_L * np.sin(ALPHA)
    edges = np.linspace(low, high, cells + 1)
    centres = 0.5 * (edges[1:] + edges[:-1])
    T = np.zeros((cells, cells))
    for i, omega in enumerate(centres):
        argument = 1 - omega**2 / (2 * G_OVER_L)
        d_fall = ALPHA - GAMMA - np.arccos(argument) if argument > -1 else -np.inf
        s = (edges**2 / c**2 - omega**2) / K
        d_edges = np.where(
            s >= 1, np.inf, np.where(s <= -1, -np.inf, np.arcsin(np.clip(s, -1, 1)))
        )
        cdf = norm.cdf(np.maximum(d_edges - GAMMA, d_fall) / sigma)
        T[i] = np.diff(cdf)
        T[i, -1] += 1 - cdf[-1]  # beyond the cells: into the end cells
        T[i, 0] += max(cdf[0] - norm.cdf(d_fall / sigma), 0.0)
    expected = np.linalg.solve(np.eye(cells) - T, np.ones(cells))
    eigenvalue = np.max(np.abs(np.linalg.eigvals(T)))
    return centres, expected, 1 / (1 - eigenvalue)


@pytest.fixture(scope="module")
def wheel():
    model = models.get_model("rimless-wheel")
    form = model.forms[model.default_form]
    system, section = form.system(), form.section()
    params = hx.canonical_params(model.make_params())
    orbit = hx.find_periodic_orbit(system, section, jnp.array([1.5]), params)
    assert bool(orbit.succeeded)
    return system, section, params, orbit, model.disturbances["slope"]


def test_a_stalled_wheel_falls():
    """Too slow to pass over its contact, the wheel stalls: a terminal event
    (the wheel's fall), not a run that rolls back until `t_max`."""
    model = models.get_model("rimless-wheel")
    system = model.forms[model.default_form].system()
    params = hx.canonical_params(model.make_params())
    solution = hx.simulate(
        system, jnp.array([GAMMA - ALPHA, 0.5]), params, n_events=1, mode0="stance"
    )
    assert hx.status_name(solution.result) == ["terminal_event"]
    assert system.transitions[int(solution.cause_transition)].name == "stall"
    # It stalls where the energy runs out: 1/2 omega0^2 = (g/l)(cos theta - cos theta0).
    theta = np.arccos(np.cos(GAMMA - ALPHA) + 0.5**2 / (2 * G_OVER_L))
    np.testing.assert_allclose(float(solution.x_before[0, 0]), -theta, rtol=1e-8)


@pytest.mark.slow
def test_rimless_wheel_mfpt_against_its_closed_form_chain(wheel):
    """Both methods against the independent chain: the walks' 95% interval holds
    its expected steps from the orbit; the mesh chain (221 states, 201
    disturbance intervals) is within 3% of it, as is its metastable estimate of
    1/(1 - lambda_2)."""
    system, section, params, orbit, slope = wheel
    centres, expected, metastable = _reference_chain(SIGMA)
    reference = np.interp(float(orbit.u[0]), centres, expected)
    assert 20 < reference < 40
    walks = hx.first_passage_walks(
        system, section, orbit, params, slope, SIGMA, walkers=1000, max_steps=2000
    )
    assert hx.status_name(walks.result) == ["successful"]
    assert walks.falls == 1000 and walks.ended == 0
    low, high = walks.interval
    assert low < reference < high
    assert low < walks.mfpt < high
    np.testing.assert_allclose(np.mean(walks.steps), walks.mfpt, rtol=1e-12)
    mesh = hx.first_passage_mesh(
        system,
        section,
        params,
        slope,
        SIGMA,
        [np.linspace(0.3, 2.5, 221)],
        start=orbit.u,
    )
    assert mesh.outside == 0.0 and mesh.ended == 0.0
    np.testing.assert_allclose(mesh.mfpt, reference, rtol=0.03)
    np.testing.assert_allclose(mesh.metastable_mfpt, metastable, rtol=0.03)
    # Rows of the chain: probabilities, the missing mass the fall.
    transitions = mesh.transitions.toarray()
    assert np.all(transitions >= 0)
    np.testing.assert_allclose(
        transitions.sum(axis=1) + mesh.fall_probability.ravel(), 1.0, atol=1e-12
    )
    # The states the walks reach, one per cell of 0.05 stationary spreads, each
    # image on its nearest state: within 1% of the exact chain (0.05% measured;
    # the box above, 1.2%). It starts at the orbit and leaves nothing uncovered.
    reachable = hx.first_passage_mesh(
        system, section, params, slope, SIGMA, hx.ReachableMesh(0.05), start=orbit.u
    )
    np.testing.assert_array_equal(reachable.states[0], orbit.u)
    assert reachable.outside == 0.0 and reachable.ended == 0.0
    np.testing.assert_allclose(reachable.mfpt, reference, rtol=0.01)
    np.testing.assert_allclose(reachable.metastable_mfpt, metastable, rtol=0.01)
    np.testing.assert_allclose(
        np.asarray(reachable.transitions.sum(axis=1)).ravel()
        + reachable.fall_probability,
        1.0,
        atol=1e-12,
    )
    # Fewer states than the walks reach: the uncovered share is reported.
    capped = hx.first_passage_mesh(
        system,
        section,
        params,
        slope,
        SIGMA,
        hx.ReachableMesh(0.05, max_states=20),
        start=orbit.u,
    )
    assert capped.states.shape == (20, 1) and capped.outside > 0.01
    # The same seed walks the same walks, in 1000 lanes or 64 that take the
    # next walk as theirs ends.
    again = hx.first_passage_walks(
        system,
        section,
        orbit,
        params,
        slope,
        SIGMA,
        walkers=1000,
        max_steps=2000,
        lanes=64,
    )
    np.testing.assert_array_equal(again.steps, walks.steps)
    assert again.steps_walked == walks.steps_walked


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(sigma=0.0), "sigma"),
        (dict(sigma=float("nan")), "sigma"),
        (dict(walkers=0), "walkers"),
        (dict(max_steps=1.5), "max_steps"),
        (dict(seed=-1), "seed"),
        (dict(seed=0.5), "seed"),
        (dict(disturbance="slope"), "disturbance"),
        (dict(lanes=0), "lanes"),
        (dict(lanes=2.0), "lanes"),
    ],
)
def test_bad_walks_input_names_the_argument(wheel, kwargs, name):
    system, section, params, orbit, slope = wheel
    arguments = dict(disturbance=slope, sigma=SIGMA) | kwargs
    with pytest.raises(ValueError, match=name):
        hx.first_passage_walks(system, section, orbit, params, **arguments)


def test_walks_need_an_orbit(wheel):
    system, section, params, _, slope = wheel
    level = hx.FieldParameter("gamma").set(params, 0.0)
    failed = hx.find_periodic_orbit(system, section, jnp.array([1.5]), level)
    with pytest.raises(ValueError, match="orbit"):
        hx.first_passage_walks(system, section, failed, level, slope, SIGMA)


@pytest.mark.parametrize(
    "mesh, start, name",
    [
        ([np.array([0.3, 0.2, 2.5])], [1.0], "mesh"),
        ([np.array([0.3])], [0.3], "mesh"),
        ([np.linspace(0.3, 2.5, 5), np.linspace(0, 1, 3)], [1.0], "mesh"),
        ([np.linspace(0.3, 2.5, 5)], [3.0], "start"),
        ([np.linspace(0.3, 2.5, 5)], [np.nan], "start"),
        ("reachable", [1.0], "mesh"),
    ],
)
def test_bad_mesh_input_names_the_argument(wheel, mesh, start, name):
    system, section, params, _, slope = wheel
    with pytest.raises(ValueError, match=name):
        hx.first_passage_mesh(
            system, section, params, slope, SIGMA, mesh, start=np.asarray(start)
        )


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(spacing=0.0), "spacing"),
        (dict(spacing=float("inf")), "spacing"),
        (dict(spacing="0.1"), "spacing"),
        (dict(max_states=0), "max_states"),
        (dict(max_states=2.5), "max_states"),
    ],
)
def test_bad_reachable_mesh_names_the_argument(kwargs, name):
    with pytest.raises(ValueError, match=name):
        hx.ReachableMesh(**kwargs)


def test_mfpt_figure_draws_an_estimate_without_a_fall():
    """A roughness level at which no walk fell (estimate inf, interval open
    above) is drawn as an arrow from its interval's low end, beside finite
    estimates with their bars, without a floating-point warning (the test
    session turns warnings into errors)."""
    fig = hx.plot.mfpt_figure(
        sigma=[0.02, 0.05],
        walks=[np.inf, 110.6],
        interval=[[5422.0, np.inf], [92.5, 133.4]],
        mesh=[np.nan, np.nan],
        xlabel="slope sigma [rad]",
    )
    ax = fig.axes[0]
    bars = [c for c in ax.containers if hasattr(c, "has_yerr") and c.has_yerr]
    assert len(bars) == 1
    segments = bars[0].lines[2][0].get_segments()
    np.testing.assert_allclose(segments[0][:, 1], [92.5, 133.4])


# Slow: the only fast-set test that compiles the walks (5-8 s cold).
@pytest.mark.slow
def test_walks_progress_bar_counts_walks(wheel, capsys):
    """`progress=True` draws a bar on stderr over the walks, advanced after each
    call of `WALK_CHUNK` steps by the walks that ended, with those walking; the
    estimate is the one without it."""
    system, section, params, orbit, slope = wheel
    kwargs = dict(walkers=20, max_steps=100, seed=3, lanes=8)
    quiet = hx.first_passage_walks(
        system, section, orbit, params, slope, 0.012, **kwargs
    )
    assert capsys.readouterr().err == ""
    shown = hx.first_passage_walks(
        system, section, orbit, params, slope, 0.012, progress=True, **kwargs
    )
    lines = capsys.readouterr().err.replace("\r", "\n").split("\n")
    bars = [line for line in lines if line.startswith("walks: ")]
    assert bars[0].startswith("walks: 0/20 (0%)")
    assert bars[-1].startswith("walks: 20/20 (100%)")
    walking = [
        int(line.rsplit(", ", 1)[1].split()[0]) for line in bars if "walking" in line
    ]
    assert max(walking) <= 8 and walking[-1] == 0  # in 8 lanes
    assert shown.mfpt == quiet.mfpt and shown.falls == quiet.falls


@pytest.mark.slow
def test_the_reachable_chain_agrees_with_the_walks():
    """A section of two unknowns (the simplest walker, slopes of sigma = 0.002
    rad): the chain on the reachable mesh falls within the 95% interval of
    Monte Carlo walks, the method that needs no mesh (15.09 steps against
    14.74 [14.11, 15.41] measured). Cells scaled per unknown by one step's
    spread gave 17.3 steps, outside it: the walks' states lie near a thin set,
    which cells in the linearised walk's stationary spread resolve."""
    model = models.get_model("simplest-walker")
    form = model.forms[model.default_form]
    system, section = form.system(), form.section()
    params = hx.canonical_params(model.make_params())
    orbit = hx.find_periodic_orbit(system, section, model.orbit_guess(params), params)
    assert bool(orbit.succeeded)
    slope, sigma = model.disturbances["slope"], 0.002
    walks = hx.first_passage_walks(
        system, section, orbit, params, slope, sigma, walkers=2000, max_steps=400
    )
    assert walks.falls == 2000 and walks.ended == 0
    chain = hx.first_passage_mesh(
        system,
        section,
        params,
        slope,
        sigma,
        hx.ReachableMesh(0.5),
        start=orbit.u,
        bins=101,
    )
    assert chain.outside == 0.0 and chain.ended < 1e-4
    low, high = walks.interval
    assert low < chain.mfpt < high, (chain.mfpt, walks.mfpt, walks.interval)


def _linear_images(jacobian, response, nodes):
    """A linear return map P(u, d) = A u + B d, as `first_passage_mesh`'s
    `images` returns it (every step goes on)."""

    def images(points):
        image = points[:, None, :] @ jacobian.T + nodes[None, :, None] * response
        went = np.ones(image.shape[:2], bool)
        return image, went, ~went

    return images


def test_the_reachable_mesh_cells_whiten_the_stationary_spread():
    """The reachable mesh's units on a linear map with a thin stationary spread:
    W^T Sigma W = I, with Sigma summed as the series sigma^2 sum_k A^k B B^T
    A^kT (not the Lyapunov solver the library uses); an expanding map falls
    back to one step's spread per unknown."""
    from hybrax._first_passage import _whitening

    sigma = 0.01
    nodes = np.linspace(-5, 5, 101) * sigma
    weights = np.diff(norm.cdf(np.linspace(-5.05, 5.05, 102)))
    start = np.zeros(2)
    rotation = np.array([[np.cos(0.3), -np.sin(0.3)], [np.sin(0.3), np.cos(0.3)]])
    jacobian = rotation @ np.diag([0.9, 0.2]) @ rotation.T
    response = np.array([1.0, 0.1])
    images = _linear_images(jacobian, response, nodes)
    image, went, _ = images(start[None])
    whitening = _whitening(images, start, image, went, weights, nodes, sigma)
    covariance, power = np.zeros((2, 2)), np.eye(2)
    for _ in range(400):
        column = power @ response
        covariance += sigma**2 * np.outer(column, column)
        power = jacobian @ power
    np.testing.assert_allclose(
        whitening.T @ covariance @ whitening, np.eye(2), atol=1e-6
    )
    expanding = _linear_images(2.0 * jacobian, response, nodes)
    image, went, _ = expanding(start[None])
    spread = np.sqrt(
        np.sum(weights[:, None] * (image[0] - start) ** 2, 0) / weights.sum()
    )
    np.testing.assert_allclose(
        _whitening(expanding, start, image, went, weights, nodes, sigma),
        np.diag(1 / spread),
    )
