"""The one mechanism by which hybrax compiles (`hybrax._programs`): one program per
model and routine whatever the run-time options, kept between processes by
`hx.enable_compilation_cache()` in a user's own script, announced as it compiles;
and the fingerprint that keys it."""

import json
import os
import subprocess
import sys
import textwrap

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hybrax as hx
from hybrax import _programs, models
from hybrax._fingerprint import Unfingerprintable, fingerprint


WHEEL = models.rimless_wheel


def _wheel():
    system, params = WHEEL.rimless_wheel()
    return system, WHEEL.section(), hx.canonical_params(params)


class _Compilations:
    """Counts XLA compilations (JAX's own monitoring events) while active."""

    def __init__(self):
        self.count = 0
        self.active = False
        jax.monitoring.register_event_duration_secs_listener(self._listen)

    def _listen(self, event, duration, **kwargs):
        if self.active and event == "/jax/core/compile/backend_compile_duration":
            self.count += 1

    def __enter__(self):
        self.count, self.active = 0, True
        return self

    def __exit__(self, *exc):
        self.active = False


@pytest.fixture(scope="module")
def compilations():
    return _Compilations()


def test_run_time_options_compile_nothing(compilations):
    """A second orbit search with another horizon, tolerance, iteration count,
    residual bound, number of return-map iterations or guard tolerance compiles
    nothing, and each gives the closed-form fixed point of the rimless wheel."""
    system, section, params = _wheel()
    guess = jnp.array([1.0])

    def solve(**options):
        orbit = hx.find_periodic_orbit(
            system, section, guess, params, analyse=False, **options
        )
        assert bool(orbit.succeeded), options
        return orbit

    first = solve()
    c2 = np.cos(2 * params.alpha) ** 2
    u_star = 4 * params.g / params.l * np.sin(params.alpha) * np.sin(params.gamma)
    u_star *= c2 / (1 - c2)
    np.testing.assert_allclose(first.u[0] ** 2, u_star, rtol=1e-8)
    variants = [
        dict(settings=hx.Settings(t_max=7.0)),
        dict(settings=hx.Settings(rtol=1e-9, atol=1e-9)),
        dict(settings=hx.Settings(guard_tol=1e-8, constraint_tol=1e-7, dip_tol=1e-11)),
        dict(shooting=hx.Shooting(max_iterations=17)),
        dict(shooting=hx.Shooting(residual_tol=1e-9)),
        dict(shooting=hx.Shooting(return_map_iterations=3)),
    ]
    with compilations as counted:
        orbits = [solve(**options) for options in variants]
    assert counted.count == 0
    for orbit in orbits:
        np.testing.assert_allclose(orbit.u[0] ** 2, u_star, rtol=1e-7)
    # Return-map iterations count with the root finder's.
    assert int(orbits[-1].n_steps) >= 3 + 1


def test_simulation_horizon_is_a_run_time_value(compilations):
    """`simulate` with another `t_max` compiles nothing; the ball's run that its
    horizon cuts short reports `event_not_reached` and ends at the horizon."""
    system, params = models.bouncing_ball.bouncing_ball()
    params = hx.canonical_params(params)
    x0 = jnp.array([1.0, 0.0])
    full = hx.simulate(system, x0, params, n_events=3)
    assert full.result == hx.RESULTS.successful
    with compilations as counted:
        cut = hx.simulate(
            system, x0, params, n_events=3, settings=hx.Settings(t_max=0.6)
        )
    assert counted.count == 0
    assert cut.result == hx.RESULTS.event_not_reached
    # First impact at sqrt(2 h / g) = 0.4515 s; the horizon cuts the second
    # (at 3 sqrt(2 h / g) e with restitution e).
    np.testing.assert_allclose(cut.t_events[0], np.sqrt(2 / params.g), rtol=1e-10)
    assert int(cut.n_events) == 1 and np.isnan(cut.t_events[1])
    np.testing.assert_allclose(full.t_events[:1], cut.t_events[:1], rtol=1e-12)


def test_announcements_name_the_program(monkeypatch):
    """Inside `announcing`, a compilation reports its start and its seconds."""
    # No kept programs (a command-line test in this process may have enabled
    # them, and an earlier run of the suite kept this one).
    monkeypatch.setattr(_programs, "_CACHE_DIR", None)
    lines = []
    ball, params = models.bouncing_ball.bouncing_ball()
    # A mode of its own: a program no other test has compiled.
    field = ball.modes[0].vector_field
    falling = hx.Mode(lambda t, x, p: field(t, x, p), "air")
    system = hx.HybridSystem([falling], list(ball.transitions), n_states=2)
    with _programs.announcing(lines.append):
        hx.simulate(
            system, jnp.array([1.0, 0.0]), hx.canonical_params(params), n_events=5
        )
    assert lines[0].startswith("compiling the simulation for the system of modes air")
    assert lines[-1].startswith("compiled the simulation")
    assert " s (trace " in lines[-1] and "XLA" in lines[-1]


def test_an_equal_model_built_anew_reuses_the_program():
    """A model built twice (new function objects of the same code, as a script's
    builder function or a second `hx.tune` call makes them) runs the program the
    first one compiled: no second compilation or load, and the same numbers."""
    ball, params = models.bouncing_ball.bouncing_ball()
    params = hx.canonical_params(params)
    field = ball.modes[0].vector_field

    def build():
        # (The code differs from the announcement test's mode, which must compile.)
        falling = hx.Mode(lambda t, x, p: 1.0 * field(t, x, p), "air")
        return hx.HybridSystem([falling], list(ball.transitions), n_states=2)

    x0 = jnp.array([1.0, 0.0])
    first = hx.simulate(build(), x0, params, n_events=4)
    before = len(_programs.COMPILATIONS)
    second = hx.simulate(build(), x0, params, n_events=4)
    assert len(_programs.COMPILATIONS) == before
    np.testing.assert_array_equal(first.t_events, second.t_events)
    # First impact of a drop from 1 m at sqrt(2 h / g).
    np.testing.assert_allclose(first.t_events[0], np.sqrt(2 / params.g), rtol=1e-10)


def test_sweep_progress_starts_with_its_compilation(capsys, monkeypatch):
    """`hx.sweep(..., progress=True)` announces its chunk program's compilation
    (before any element is done) and still returns `fn` on every element."""
    monkeypatch.setattr(_programs, "_CACHE_DIR", None)  # as above

    def fourth_power(x):  # a function of its own: compiled here first
        return jnp.sum(x**4)

    batch = np.linspace(-1.0, 1.0, 12).reshape(6, 2)
    values = hx.sweep(fourth_power, batch, progress=True, chunk_size=4)
    np.testing.assert_allclose(values, np.sum(batch**4, axis=1), rtol=1e-14)
    err = capsys.readouterr().err
    assert "compiling a sweep chunk" in err and "compiled a sweep chunk" in err


# ---------------------------------------------------------------------------
# Fingerprints
# ---------------------------------------------------------------------------

SCALE = 2.0


def _field(t, x, p):
    return jnp.stack([x[1], -SCALE * x[0]])


def _other_field(t, x, p):
    return jnp.stack([x[1], -3.0 * x[0]])


def test_fingerprint_follows_what_functions_compute():
    """Equal models built twice fingerprint alike; another constant in a
    function, another global it reads, or another captured array does not."""
    assert fingerprint(_wheel()) == fingerprint(_wheel())
    assert fingerprint(_field) != fingerprint(_other_field)
    before = fingerprint(_field)
    globals()["SCALE"] = 2.5
    try:
        assert fingerprint(_field) != before
    finally:
        globals()["SCALE"] = 2.0
    assert fingerprint(_field) == before

    def capturing(value):
        table = np.array([value, 1.0])
        return lambda t, x, p: table[0] * x

    assert fingerprint(capturing(1.0)) == fingerprint(capturing(1.0))
    assert fingerprint(capturing(1.0)) != fingerprint(capturing(2.0))
    # Arrays are inputs: only their shapes and dtypes count.
    assert fingerprint(jnp.ones(3)) == fingerprint(jnp.zeros(3))
    assert fingerprint(jnp.ones(3)) != fingerprint(jnp.ones(4))

    class Opaque:
        pass

    with pytest.raises(Unfingerprintable):
        fingerprint(Opaque())


@pytest.mark.slow
def test_a_callers_gradient_embeds_the_kept_derivative(monkeypatch, tmp_path):
    """With the cache on, a caller's `jax.jit(jax.grad(...))` of an orbit quantity
    embeds the orbit's solve and its transposed derivative as kept programs, each
    restricted to the outputs the caller's program uses. The gradient is the
    wheel's closed form d(omega*)/d(gamma) (as without the cache), and the same
    jitted gradient under `jax.vmap` (where an exported module cannot go: the
    functions are traced) agrees element by element."""
    monkeypatch.setattr(_programs, "_CACHE_DIR", str(tmp_path))
    # (A registry of this test's own: the process may hold other tests' programs.)
    monkeypatch.setattr(_programs, "_KEPT", {})
    system, section, params = _wheel()

    def speed(gamma):
        p = eqx.tree_at(lambda q: q.gamma, params, gamma)
        orbit = hx.find_periodic_orbit(
            system, section, jnp.array([1.0]), p, analyse=False
        )
        return orbit.u[0]

    def closed_form(gamma, alpha=float(params.alpha), g=9.81):
        c2 = np.cos(2 * alpha) ** 2
        omega = np.sqrt(4 * g * np.sin(alpha) * np.sin(gamma) * c2 / (1 - c2))
        return omega * np.cos(gamma) / (2 * np.sin(gamma))

    before = len(_programs.COMPILATIONS)
    gradient = jax.jit(jax.grad(speed))
    np.testing.assert_allclose(gradient(0.08), closed_form(0.08), rtol=1e-7)
    kept = {r.what for r in _programs.COMPILATIONS[before:] if not r.cached}
    assert {"the orbit search", "the orbit's transposed derivative"} <= kept
    search = [
        k
        for k in _programs._KEPT.values()
        if k.what == "the orbit search" and k.variants
    ]
    # The caller reads one number: most of the solve's outputs are dropped.
    assert all(len(used) < len(k.out_structs) for k in search for used in k.variants)
    gammas = jnp.array([0.08, 0.1])
    np.testing.assert_allclose(
        jax.vmap(gradient)(gammas), closed_form(np.asarray(gammas)), rtol=1e-7
    )


# ---------------------------------------------------------------------------
# Between processes
# ---------------------------------------------------------------------------

# A user's script: a rimless wheel written with the public API alone, through
# every routine that compiles. It prints the compilations' records as JSON.
_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import jax
    import jax.numpy as jnp
    import equinox as eqx
    jax.config.update("jax_enable_x64", True)
    import hybrax as hx
    from hybrax import _programs

    hx.enable_compilation_cache(sys.argv[1])
    events = {}

    def count(event, **kwargs):
        events[event] = events.get(event, 0) + 1

    jax.monitoring.register_event_listener(count)

    class Wheel(eqx.Module):
        g: float = 9.81
        alpha: float = 0.39269908169872414
        gamma: float = 0.08

    def stance(t, x, p):
        return jnp.stack([x[1], p.g * jnp.sin(x[0])])

    def strike(t, x, p):
        return p.gamma + p.alpha - x[0]

    class Swap(hx.AbstractReset):
        def __call__(self, t, x, p):
            return jnp.stack([x[0] - 2 * p.alpha, jnp.cos(2 * p.alpha) * x[1]])

        def observables(self, t, x_minus, x_plus, p):
            return {}

    system = hx.HybridSystem(
        [hx.Mode(stance, "stance")],
        [hx.Transition("stance", "stance", strike, False, Swap(), "strike")],
        n_states=2,
    )
    section = hx.PoincareSection(
        ("strike",),
        lambda u, p: jnp.stack([p.gamma - p.alpha, u[0]]),
        lambda x, p: x[1:],
    )
    params = hx.canonical_params(Wheel())
    x0 = jnp.array([params.gamma - params.alpha, 1.0])
    sol = hx.simulate(system, x0, params, n_events=4)
    orbit = hx.find_periodic_orbit(system, section, jnp.array([1.0]), params)
    batch = hx.canonical_params(Wheel(gamma=jnp.linspace(0.06, 0.1, 8)))
    sweep = hx.sweep_orbits(system, section, jnp.ones((8, 1)), batch)
    tuned = hx.tune(
        system, section, jnp.array([1.0]), params,
        vary=["gamma"],
        constraints=[(hx.QuantityTarget(lambda o, p: o.u[0], jnp.asarray(1.2)), 1e-6)],
        tune_settings=hx.TuneSettings(max_steps=8),
    )
    branch = hx.continue_branch(
        system, section, jnp.array([1.0]), params, "gamma",
        start=0.08, stop=0.09,
        continuation_settings=hx.ContinuationSettings(max_points=3),
    )
    # The user's own transformation of an orbit quantity.
    def speed(gamma):
        p = eqx.tree_at(lambda q: q.gamma, params, gamma)
        return hx.find_periodic_orbit(
            system, section, jnp.array([1.0]), p, analyse=False
        ).u[0]

    slope = jax.jit(jax.grad(speed))(jnp.asarray(0.08))
    print(json.dumps({
        "records": [[r.what, r.cached, r.trace, r.xla] for r in _programs.COMPILATIONS],
        "multiplier": float(abs(orbit.multipliers[0])),
        "slope": float(slope),
        "requests": events.get("/jax/compilation_cache/compile_requests_use_cache", 0),
        "hits": events.get("/jax/compilation_cache/cache_hits", 0),
    }))
    """
)


@pytest.mark.slow
def test_second_process_loads_every_program(tmp_path):
    """A user's script run twice with `hx.enable_compilation_cache()`: the second
    process traces nothing of hybrax's and compiles nothing with XLA (JAX's
    persistent cache has every executable: the programs hold no host callbacks,
    whatever `EQX_ON_ERROR` is), the user's own `jax.jit(jax.grad(...))` of an
    orbit quantity included (it embeds the kept solve and transposed
    derivative), and computes the same numbers: the gradient is the wheel's
    closed form d(omega*)/d(gamma)."""
    script = tmp_path / "wheel.py"
    script.write_text(_SCRIPT)
    cache = tmp_path / "cache"
    environment = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("JAX_COMPILATION_CACHE") and k != "EQX_ON_ERROR"
    }

    def run():
        done = subprocess.run(
            [sys.executable, str(script), str(cache)],
            capture_output=True,
            text=True,
            timeout=900,
            env=environment,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    first, second = run(), run()
    whats = sorted(r[0] for r in first["records"])
    assert {"the simulation", "a sweep chunk", "the tuning step"} <= {
        w.split(" for ")[0] for w in whats
    }
    assert {"the orbit search", "the orbit's transposed derivative"} <= set(whats)
    assert sorted(r[0] for r in second["records"]) == whats
    assert all(not cached for _, cached, _, _ in first["records"])
    assert all(cached for _, cached, _, _ in second["records"])
    # No tracing, and every XLA compilation of the second process (the library's
    # programs and JAX's own small ones alike) is a hit in JAX's persistent cache.
    assert all(trace == 0.0 for _, _, trace, _ in second["records"])
    assert first["hits"] < first["requests"]
    assert second["requests"] > 0 and second["hits"] == second["requests"]
    assert second["multiplier"] == first["multiplier"]
    assert abs(first["multiplier"] - np.cos(2 * 0.39269908169872414) ** 2) < 1e-8
    assert second["slope"] == first["slope"]
    alpha, gamma, g = 0.39269908169872414, 0.08, 9.81
    c2 = np.cos(2 * alpha) ** 2
    omega = np.sqrt(4 * g * np.sin(alpha) * np.sin(gamma) * c2 / (1 - c2))
    slope = omega * np.cos(gamma) / (2 * np.sin(gamma))
    np.testing.assert_allclose(first["slope"], slope, rtol=1e-7)


def test_second_derivatives_of_a_linear_solve_hold_no_callback():
    """`jax.jacfwd` inside `jax.jacfwd` of a lineax linear solve (as a
    two-parameter curve's corrector differentiates the cycle's event times)
    batches its primitive twice; its runtime check must still become a NaN
    branch, or the program holds a host callback and cannot be kept between
    processes. The kept program's derivatives equal the closed form."""
    import lineax as lx

    from hybrax._callback_free import callback_free

    def solve(x):
        matrix = jnp.array([[2.0 + x[0], x[1]], [0.5, 3.0 - x[1]]])
        return lx.linear_solve(
            lx.MatrixLinearOperator(matrix), jnp.array([1.0, x[0]])
        ).value

    def second(x):
        return [jax.jacfwd(jax.jacfwd(solve))(x)]

    x = jnp.array([0.3, -0.2])
    structs = [jax.ShapeDtypeStruct(x.shape, x.dtype)]
    program = callback_free(second, structs)
    assert program is not None
    exported = jax.export.export(jax.jit(program))(*structs)
    (kept,) = exported.call(x)

    def closed_form(x):
        matrix = jnp.array([[2.0 + x[0], x[1]], [0.5, 3.0 - x[1]]])
        return jnp.linalg.solve(matrix, jnp.array([1.0, x[0]]))

    np.testing.assert_allclose(
        kept, jax.jacfwd(jax.jacfwd(closed_form))(x), rtol=1e-12, atol=1e-14
    )
