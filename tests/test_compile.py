"""How hybrax compiles (`hybrax._compile`): one program per model and routine
whatever the run-time options (`equinox.filter_jit`), executables kept between
processes by JAX's persistent cache (`hx.enable_compilation_cache()`) in a user's
own script, announced as it compiles; public mechanisms only."""

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
from helpers import run_user_script
from hybrax import _compile, models


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
    lines = []
    ball, params = models.bouncing_ball.bouncing_ball()
    # A mode of its own: a program no other test has compiled.
    field = ball.modes[0].vector_field
    falling = hx.Mode(lambda t, x, p: field(t, x, p), "air")
    system = hx.HybridSystem([falling], list(ball.transitions), n_states=2)
    with _compile.announcing(lines.append):
        hx.simulate(
            system, jnp.array([1.0, 0.0]), hx.canonical_params(params), n_events=5
        )
    assert lines[0].startswith("compiling the simulation for the system of modes air")
    assert lines[-1].startswith("compiled the simulation")
    # (Its executable may come from JAX's persistent cache of an earlier run.)
    assert "(trace " in lines[-1] and ("XLA" in lines[-1] or "loading" in lines[-1])


def test_sweep_progress_starts_with_its_compilation(capsys, monkeypatch):
    """`hx.sweep(..., progress=True)` announces its chunk program's compilation
    (before any element is done) and still returns `fn` on every element."""

    def fourth_power(x):  # a function of its own: compiled here first
        return jnp.sum(x**4)

    batch = np.linspace(-1.0, 1.0, 12).reshape(6, 2)
    values = hx.sweep(fourth_power, batch, progress=True, chunk_size=4)
    np.testing.assert_allclose(values, np.sum(batch**4, axis=1), rtol=1e-14)
    err = capsys.readouterr().err
    assert "compiling a sweep chunk" in err and "compiled a sweep chunk" in err


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
    from hybrax import _compile

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
    branch = hx.continue_orbits(
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
        "records": [[r.what, r.cached, r.trace, r.xla] for r in _compile.COMPILATIONS],
        "multiplier": float(abs(orbit.multipliers[0])),
        "slope": float(slope),
        "requests": events.get("/jax/compilation_cache/compile_requests_use_cache", 0),
        "hits": events.get("/jax/compilation_cache/cache_hits", 0),
    }))
    """
)


@pytest.mark.slow
def test_second_process_loads_every_program(tmp_path):
    """A user's script run twice with `hx.enable_compilation_cache()` and
    `EQX_ON_ERROR=nan` (as the compilation how-to says): the second process
    compiles nothing with XLA (every executable it asks for, the library's
    programs, JAX's own small ones and the user's `jax.jit(jax.grad(...))` of an
    orbit quantity alike, is a hit in JAX's persistent cache), and computes the
    same numbers: the multiplier and gradient are the wheel's closed forms."""
    script = tmp_path / "wheel.py"
    script.write_text(_SCRIPT)
    cache = tmp_path / "cache"
    first = run_user_script(script, cache)
    second = run_user_script(script, cache)
    whats = sorted(r[0] for r in first["records"])
    assert {"the simulation", "a sweep chunk", "the tuning step"} <= {
        w.split(" for ")[0] for w in whats
    }
    assert sorted(r[0] for r in second["records"]) == whats
    assert all(not cached for _, cached, _, _ in first["records"]), first["records"]
    assert all(cached for _, cached, _, _ in second["records"]), second["records"]
    # Every XLA compilation of the second process is a hit in JAX's cache.
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


# ---------------------------------------------------------------------------
# Public mechanisms only, no hidden state
# ---------------------------------------------------------------------------

_FORBIDDEN = (
    "jax.interpreters",
    "jax._src",
    "jax.extend",
    "equinox._",
    "lineax._",
    "diffrax._",
    "optimistix._",
)


def test_source_uses_public_mechanisms_only():
    """No module of hybrax imports JAX's internals or a private module of an
    anchor, registers primitives of its own through JAX, reads an anchor's
    private configuration or rebuilds objects with `object.__new__`; the one
    exception, the orbit-derivative primitive, goes through `equinox.internal`."""
    import ast
    import pathlib

    root = pathlib.Path(hx.__file__).parent
    offences = []
    for path in sorted(root.rglob("*.py")):
        source = path.read_text()
        tree = ast.parse(source)
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
                names += [f"{node.module}.{alias.name}" for alias in node.names]
            for name in names:
                if name.startswith(_FORBIDDEN):
                    offences.append(f"{path.name}: import {name}")
        for construction in (
            "object.__new__",
            "Primitive(",
            "eqx._config",
            "equinox._config",
        ):
            if construction in source:
                offences.append(f"{path.name}: {construction}")
    assert offences == []


def test_import_changes_only_the_documented_xla_option(tmp_path):
    """In a fresh process, `import hybrax` (and loading its routines) leaves the
    environment as it was but for the XLA CPU option it documents, and
    `jax.config` untouched; `HYBRAX_XLA_CPU_OPTIONS=0` keeps even that."""
    script = textwrap.dedent(
        """
        import json, os, sys
        before = dict(os.environ)
        import jax
        config = {k: repr(v) for k, v in jax.config.values.items()}
        import hybrax as hx
        hx.find_periodic_orbit, hx.simulate, hx.sweep_orbits, hx.tune
        after = dict(os.environ)
        changed = sorted(k for k in set(before) | set(after)
                         if before.get(k) != after.get(k))
        config_changed = sorted(
            k for k, v in jax.config.values.items() if config.get(k) != repr(v)
        )
        import threading
        print(json.dumps({"env": changed, "config": config_changed,
                          "threads": threading.active_count()}))
        """
    )
    environment = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    environment.pop("HYBRAX_XLA_CPU_OPTIONS", None)

    def run(**extra):
        done = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            env={**environment, **extra},
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    default = run()
    assert default == {"env": ["XLA_FLAGS"], "config": [], "threads": 1}
    assert run(HYBRAX_XLA_CPU_OPTIONS="0") == {"env": [], "config": [], "threads": 1}


def test_clear_caches_compiles_again(compilations):
    """After `hx.clear_caches()` a routine compiles its program again (nothing
    is kept in the process beyond JAX's caches), with the same numbers."""
    system, params = models.bouncing_ball.bouncing_ball()
    params = hx.canonical_params(params)
    x0 = jnp.array([1.0, 0.0])
    first = hx.simulate(system, x0, params, n_events=2)
    with compilations as counted:
        again = hx.simulate(system, x0, params, n_events=2)
    assert counted.count == 0
    hx.clear_caches()
    assert len(_compile.COMPILATIONS) == 0
    with compilations as counted:
        cleared = hx.simulate(system, x0, params, n_events=2)
    assert counted.count > 0
    np.testing.assert_array_equal(first.t_events, again.t_events)
    np.testing.assert_array_equal(first.t_events, cleared.t_events)
    np.testing.assert_allclose(first.t_events[0], np.sqrt(2 / params.g), rtol=1e-10)


def test_canonical_parameters_are_remembered_by_identity_bounded_and_cleared():
    """`hx.canonical_params` returns a canonical Module itself and remembers it
    (the next call skips the walk), converts a Module of Python floats into a
    new one without remembering the original, holds at most
    `CANONICAL_MEMO_SIZE` Modules, and `hx.clear_caches()` empties it."""
    from hybrax import _misc

    hx.clear_caches()
    loose = models.bouncing_ball.BallParams(e=0.5)
    converted = hx.canonical_params(loose)
    assert converted is not loose and id(loose) not in _misc._CANONICAL
    assert all(
        isinstance(leaf, jax.Array) and leaf.dtype == jnp.float64
        for leaf in jax.tree.leaves(converted)
    )
    assert hx.canonical_params(converted) is converted
    assert _misc._CANONICAL[id(converted)][0] is converted
    # A remembered Module is returned as it is; a plain dict is never kept.
    assert hx.canonical_params(converted) is converted
    plain = {"g": jnp.asarray(9.81, dtype=jnp.float64)}
    assert hx.canonical_params(plain) is plain and id(plain) not in _misc._CANONICAL
    fresh = [
        hx.canonical_params(models.bouncing_ball.BallParams(e=0.01 * k))
        for k in range(_misc.CANONICAL_MEMO_SIZE + 1)
    ]
    kept = [hx.canonical_params(params) for params in fresh]
    assert all(again is params for again, params in zip(kept, fresh))
    assert len(_misc._CANONICAL) == _misc.CANONICAL_MEMO_SIZE
    assert id(converted) not in _misc._CANONICAL
    assert _misc._CANONICAL[id(kept[-1])][0] is kept[-1]
    hx.clear_caches()
    assert len(_misc._CANONICAL) == 0


def test_a_target_value_is_a_run_time_value_whatever_its_type(compilations):
    """`hx.QuantityTarget(f, 0.955)` with a Python float holds its value as an
    array, so that a program taking the target (as the tuning programs do)
    compiles once for every value: 0.955, 0.96 (Python), NumPy and JAX numbers."""
    target = hx.QuantityTarget(lambda orbit, params: orbit, 0.955)
    assert eqx.is_array(target.value)

    @eqx.filter_jit
    def residual(target, x):
        return target(x, None)

    np.testing.assert_allclose(residual(target, 1.0), 1.0 - 0.955, rtol=1e-15)
    values = (0.96, np.float64(0.97), jnp.asarray(0.98, dtype=float))
    with compilations as counted:
        out = [residual(hx.QuantityTarget(target.quantity, v), 1.0) for v in values]
    assert counted.count == 0
    np.testing.assert_allclose(out, 1.0 - np.array([0.96, 0.97, 0.98]), rtol=1e-15)
    # Traced, it stays traced: a gradient with respect to the target.
    slope = jax.grad(lambda v: residual(hx.QuantityTarget(target.quantity, v), 1.0))
    assert float(slope(0.9)) == -1.0


def test_device_constants_are_kept_by_value_bounded_and_cleared():
    """`device_constant` keeps a built value under its key (a second call builds
    nothing and gives the same array), holds at most `DEVICE_CONSTANTS_SIZE`
    values (the oldest go first), gives device arrays even while a caller's
    trace is active, and `hx.clear_caches()` empties it."""
    hx.clear_caches()
    built = []

    def build(value):
        built.append(value)
        return np.full((2,), value)

    first = _compile.device_constant(("test", 1.5), lambda: build(1.5))
    again = _compile.device_constant(("test", 1.5), lambda: build(1.5))
    assert again is first and built == [1.5]
    assert isinstance(first, jax.Array)
    np.testing.assert_array_equal(first, [1.5, 1.5])
    size = _compile.DEVICE_CONSTANTS_SIZE
    for k in range(size):
        _compile.device_constant(("fill", k), lambda: np.zeros(1))
    assert len(_compile._CONSTANTS) == size
    assert ("test", 1.5) not in _compile._CONSTANTS

    @jax.jit
    def inside(x):
        kept = _compile.device_constant(("inside", 2.0), lambda: np.asarray(2.0))
        assert not isinstance(kept, jax.core.Tracer)
        return x * kept

    assert float(inside(3.0)) == 6.0
    hx.clear_caches()
    assert len(_compile._CONSTANTS) == 0


def test_a_public_orbit_call_copies_only_its_guess_and_parameters():
    """An orbit call with the shooting's defaults, repeated, hands its program
    device arrays only, but for what the caller passes as NumPy (here the
    guess): its settings' and root finder's numbers and the packed run-time
    values are kept on the device. The orbit is the one the first call found."""
    system, section, params = _wheel()
    guess = np.array([1.0])
    seen = []
    search = _compile.Compiled.__call__

    def spy(self, *args, **kwargs):
        seen.append(self._inputs(args, kwargs)[1])
        return search(self, *args, **kwargs)

    first = hx.find_periodic_orbit(system, section, guess, params, analyse=False)
    try:
        _compile.Compiled.__call__ = spy
        again = hx.find_periodic_orbit(system, section, guess, params, analyse=False)
    finally:
        _compile.Compiled.__call__ = search
    (arrays,) = seen
    leaves = [leaf for part in arrays for leaf in part if leaf is not None]
    copied = [leaf for leaf in leaves if not isinstance(leaf, jax.Array)]
    assert len(copied) == 1 and copied[0] is guess
    np.testing.assert_array_equal(again.u, first.u)
    assert bool(again.succeeded)


@pytest.mark.parametrize("analyse", [False, True])
def test_a_safeguard_of_another_guess_is_refused(analyse):
    """A resumed solve whose safeguard belongs to a guess of another size is a
    `ValueError` naming it (the run-time values travel packed, so a size that
    does not fit would otherwise be read across fields)."""
    system, section, params = _wheel()
    memory = hx.ShootingSafeguard.fresh(np.zeros(2))
    start = hx.ShootingStart(np.array([1.0]), safeguard=memory)
    with pytest.raises(ValueError, match="safeguard"):
        hx.find_periodic_orbit(system, section, start, params, analyse=analyse)


# Slow: 10-20 s cold, over the fast set's share (run by .ci/run).
@pytest.mark.slow
def test_no_tracer_is_kept_by_a_traced_call():
    """An orbit solved under the caller's `jax.jit` and `jax.vmap` (the guess
    traced, the options concrete) keeps device constants that hold no tracer,
    and finds the eager call's orbit."""
    system, section, params = _wheel()
    hx.clear_caches()

    def solve(u):
        return hx.find_periodic_orbit(system, section, u, params, analyse=False).u

    # (Traced first: the constants are built by the traced calls.)
    jitted = jax.jit(solve)(jnp.array([1.0]))
    batched = jax.vmap(solve)(jnp.array([[1.0], [1.1]]))
    eager = solve(jnp.array([1.0]))
    for kept in _compile._CONSTANTS.values():
        for leaf in jax.tree.leaves(kept):
            assert isinstance(leaf, jax.Array)
            assert not isinstance(leaf, jax.core.Tracer)
    np.testing.assert_allclose(jitted, eager, rtol=1e-12)
    np.testing.assert_allclose(batched, np.stack([eager, eager]), rtol=1e-10)
