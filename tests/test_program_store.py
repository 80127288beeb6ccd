"""hybrax's store of traced programs (`hybrax._program_store`): a second process
of the same script loads each program that the store keeps instead of tracing
it, computes the same numbers, and a stored file runs no code: a damaged,
foreign or hostile file is not used, and the program is traced again."""

import json
import logging
import os
import pathlib
import sys
import textwrap

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
import pytest

import hybrax as hx
from helpers import run_user_script
from hybrax import _compile, _program_store, models
from hybrax._periodic import orbit
from own_wheel import own_wheel


WHEEL = models.rimless_wheel

# equinox before 0.13.3 flattens a Module into a form the store does not read:
# there the store keeps no program that holds one (every routine's), and the
# last test checks that the routines work as without it.
needs_store = pytest.mark.skipif(
    not _program_store.supported(),
    reason="this equinox flattens Modules into a form the store does not read",
)


@pytest.fixture
def store(tmp_path):
    """The store on, in a folder of the test's own, for the test only (JAX's
    caches emptied first: a program this process already holds is not traced
    again, so neither stored nor loaded)."""
    folder = tmp_path / "traced"
    hx.clear_caches()
    _program_store.set_directory(folder)
    try:
        yield folder
    finally:
        _program_store.set_directory(None)


def _wheel():
    system, params = WHEEL.rimless_wheel()
    return system, WHEEL.section(), hx.canonical_params(params)


_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
    import hybrax as hx
    from hybrax import _compile, models

    hx.enable_compilation_cache(sys.argv[1])
    wheel = models.rimless_wheel
    system, params = wheel.rimless_wheel()
    params = hx.canonical_params(params)
    sol = hx.simulate(system, wheel.default_state(params), params, n_events=4)
    orbit = hx.find_periodic_orbit(
        system, wheel.section(), jnp.array([1.0]), params
    )
    print(json.dumps({
        "records": [
            [r.what, r.cached, r.stored, r.trace] for r in _compile.COMPILATIONS
        ],
        "event_times": [float(t) for t in sol.t_events],
        "multiplier": float(abs(orbit.multipliers[0])),
        "period": float(orbit.period),
    }))
    """
)


@pytest.mark.slow  # two fresh processes, the first compiling three programs
@needs_store
def test_a_second_process_loads_its_traced_programs(tmp_path):
    """The rimless wheel's script run twice with `hx.enable_compilation_cache`:
    the first process traces, exports and stores each program (the simulation,
    the orbit search, its Floquet analysis); the second loads every one from the
    store (no tracing of its own) with its executable from JAX's cache, and
    computes the same numbers: the multiplier is the wheel's closed form
    cos(2 alpha)^2 (McGeer's rimless wheel)."""
    script = tmp_path / "wheel.py"
    script.write_text(_SCRIPT)
    cache = tmp_path / "cache"

    def run():  # (the suite's own runs keep no traced programs)
        return run_user_script(script, cache, timeout=600, HYBRAX_KEEP_TRACED="1")

    first = run()
    stored = sorted((cache / _compile.TRACED_PROGRAMS).glob("*.hxp"))
    whats = sorted(r[0] for r in first["records"])
    assert len(stored) == len(whats) >= 3, (stored, whats)
    assert not any(r[2] for r in first["records"])
    second = run()
    assert sorted(r[0] for r in second["records"]) == whats
    # Loaded: traced program from the store, executable from JAX's cache.
    assert all(stored and cached for _, cached, stored, _ in second["records"])
    assert all(trace < 0.5 for *_, trace in second["records"]), second["records"]
    assert second["event_times"] == first["event_times"]
    assert second["multiplier"] == first["multiplier"]
    assert second["period"] == first["period"]
    alpha = 0.39269908169872414  # pi / 8, the wheel's default
    assert abs(first["multiplier"] - np.cos(2 * alpha) ** 2) < 1e-8


@needs_store
def test_a_stored_program_computes_what_its_traced_program_computes(store):
    """In one process: the first call with the store on exports and writes its
    program; after `hx.clear_caches()` the next call loads it; both equal the
    call without the store, to the bit."""
    system, section, params = _wheel()
    u = jnp.array([1.0])
    _program_store.set_directory(None)
    plain = hx.poincare_map(system, section, u, params)
    _program_store.set_directory(store)
    with _compile.recorded() as records:
        exported = hx.poincare_map(system, section, u, params)
        hx.clear_caches()
        loaded = hx.poincare_map(system, section, u, params)
    assert len(list(store.glob("*.hxp"))) == 1
    assert [r.stored for r in records] == [False, True]
    for a, b in zip(jax.tree.leaves((plain, exported)), jax.tree.leaves(loaded)):
        np.testing.assert_array_equal(a, b)


def _damage(path, how):
    blob = path.read_bytes()
    if how == "truncated":
        path.write_bytes(blob[: len(blob) // 2])
    elif how == "payload flipped":
        path.write_bytes(blob[:-100] + bytes(b ^ 0xFF for b in blob[-100:]))
    elif how == "foreign":
        path.write_bytes(b"\x00" * 64)
    elif how == "empty":
        path.write_bytes(b"")
    else:  # a header edited
        magic = _program_store._MAGIC
        size = int.from_bytes(blob[len(magic) : len(magic) + 8], "little")
        header = json.loads(blob[len(magic) + 8 : len(magic) + 8 + size])
        how(header)
        text = json.dumps(header).encode()
        rest = blob[len(magic) + 8 + size :]
        path.write_bytes(magic + len(text).to_bytes(8, "little") + text + rest)


def _other_key(header):
    header["key"] = header["key"].replace("small", "large")


def _runs_os_system(header):
    header["tree"][0] = {"named": "os:system"}


def _names_a_function(header):
    header["tree"][0] = {"named": "hybrax._compile:clear_caches"}


def _imports_a_module(header):
    header["tree"][0] = {"named": "hybrax.never_imported:Thing"}


def _another_format(header):
    header["format"] = 0


@pytest.fixture
def folder(tmp_path):
    """The store's folder set, for a test that calls no routine."""
    _program_store.set_directory(tmp_path / "traced")
    try:
        yield tmp_path / "traced"
    finally:
        _program_store.set_directory(None)


def _small_program() -> str:
    """A small program written to the store (it doubles its input; its output's
    tree a hybrax Module with a static field), and its key."""
    exported = jax.export.export(jax.jit(lambda x: 2 * x))(
        jax.ShapeDtypeStruct((), "float64")
    )
    tree = jax.tree.structure(_program_store._Probe(jnp.zeros(()), "probe"))
    key_text = json.dumps(["a small program"])
    _program_store.save(key_text, exported, tree, [None])
    return key_text


@needs_store
@pytest.mark.parametrize(
    "how",
    [
        "truncated",
        "payload flipped",
        "foreign",
        "empty",
        _other_key,
        _runs_os_system,
        _names_a_function,
        _imports_a_module,
        _another_format,
    ],
    ids=lambda how: how if isinstance(how, str) else how.__name__.strip("_"),
)
def test_a_damaged_or_hostile_file_is_not_used(folder, how, caplog, monkeypatch):
    """A stored file that is damaged (cut short, its program's bytes changed, not
    a stored program at all, empty), another program's, of another format, or
    whose tree names a function, a module not imported or anything outside
    hybrax and its anchors is not used: a line on the `"hybrax"` logger says
    so, and nothing is imported or called on the file's word. The intact file
    loads, and computes what it was written to."""
    key_text = _small_program()
    exported, tree, static = _program_store.load(key_text)
    doubled = exported.call(jnp.asarray(1.5))
    assert float(doubled) == 3.0 and tree.num_leaves == 1 and static == [None]
    (path,) = folder.glob("*.hxp")
    _damage(path, how)
    modules = set(sys.modules)
    called = []
    monkeypatch.setattr(os, "system", lambda *a: called.append(a))
    with caplog.at_level(logging.INFO, logger="hybrax"):
        assert _program_store.load(key_text) is None
    assert called == [] and set(sys.modules) - modules == set()
    assert "not used" in caplog.text
    if how == "payload flipped":  # refused before JAX reads a byte of it
        assert "bytes are not those written" in caplog.text


@needs_store
def test_a_routine_whose_file_is_damaged_traces_and_writes_it_again(store, caplog):
    """A routine whose stored program's bytes were changed does not use it: it
    traces its program again, writes it anew and computes the same numbers."""
    system, section, params = _wheel()
    u = jnp.array([1.0])
    expected = hx.poincare_map(system, section, u, params)
    (path,) = store.glob("*.hxp")
    _damage(path, "payload flipped")
    hx.clear_caches()
    with caplog.at_level(logging.INFO, logger="hybrax"), _compile.recorded() as records:
        again = hx.poincare_map(system, section, u, params)
    assert "not used" in caplog.text
    assert [r.stored for r in records] == [False]
    for a, b in zip(jax.tree.leaves(expected), jax.tree.leaves(again)):
        np.testing.assert_array_equal(a, b)
    assert _program_store.load(_key_of(path)) is not None  # written anew


def _key_of(path):
    blob = path.read_bytes()
    magic = _program_store._MAGIC
    size = int.from_bytes(blob[len(magic) : len(magic) + 8], "little")
    return json.loads(blob[len(magic) + 8 : len(magic) + 8 + size])["key"]


def _falling(gravity, drag=lambda v: 0.0 * v):
    """A ball falling onto the ground under `gravity` (a literal of its vector
    field) less `drag(velocity)`, a model of the user's own functions, each
    built anew with the same names."""

    def fall(t, x, p):
        return jnp.stack([x[1], -gravity * p["scale"] - drag(x[1])])

    def ground(t, x, p):
        return x[0]

    return hx.HybridSystem(
        [hx.Mode(fall, "fall")],
        [hx.Transition("fall", "fall", ground, False, hx.identity_reset, "ground")],
        n_states=2,
    )


def _drop(system):
    params = hx.canonical_params({"scale": 1.0})
    return hx.simulate(system, jnp.array([1.0, 0.0]), params, n_events=1)


@pytest.mark.slow
@needs_store
def test_a_model_of_the_users_own_functions_is_kept_by_its_traces(store):
    """A model of the user's own functions is stored under the traces of its
    functions (with their derivatives): the same functions load the stored
    program; functions of the same names that compute something else (another
    constant in the vector field) do not, and are stored apart. Each falls in
    the closed-form time sqrt(2 h / g)."""
    with _compile.recorded() as records:
        first = _drop(_falling(9.81))
        hx.clear_caches()
        again = _drop(_falling(9.81))  # new function objects, same code
        hx.clear_caches()
        other = _drop(_falling(9.0))
    assert [r.stored for r in records] == [False, True, False]
    assert len(list(store.glob("*.hxp"))) == 2
    np.testing.assert_array_equal(first.t_events, again.t_events)
    np.testing.assert_allclose(first.t_events[0], np.sqrt(2 / 9.81), rtol=1e-7)
    np.testing.assert_allclose(other.t_events[0], np.sqrt(2 / 9.0), rtol=1e-7)


@needs_store
def test_a_changed_derivative_rule_changes_the_key(store):
    """A function's own derivative rule (`jax.custom_jvp`) enters the key through
    the traces of its derivatives: two vector fields equal in value whose rules
    differ have different keys."""

    def system_with(slope):
        @jax.custom_jvp
        def drag(v):
            return 0.1 * v

        @drag.defjvp
        def _(primals, tangents):
            return drag(primals[0]), slope * tangents[0]

        return _falling(9.81, drag)

    routine = _simulate_routine()
    params = hx.canonical_params({"scale": 1.0})

    def key(system):
        args = _simulate_arguments(system, params)
        keys, arrays, _ = routine._inputs(args, {})
        names = routine._names[: len(args)]
        return _program_store.key(
            routine.__wrapped__, routine.what, keys, arrays, names
        )

    assert key(system_with(0.1)) == key(system_with(0.1))
    assert key(system_with(0.1)) != key(system_with(0.2))


def _simulate_routine():
    from hybrax._simulate import entry

    return entry._simulate


def _simulate_arguments(system, params):
    """The arguments `hx.simulate` passes its program, by a call that records
    them."""
    from hybrax._simulate import entry

    seen = []
    original = entry._simulate
    try:
        entry._simulate = lambda *args: seen.append(args) or original(*args)
        hx.simulate(system, jnp.array([1.0, 0.0]), params, n_events=1)
    finally:
        entry._simulate = original
    return seen[0]


def _routine_key(routine, *args):
    keys, arrays, _ = routine._inputs(args, {})
    return _program_store.key(
        routine.__wrapped__,
        routine.what,
        keys,
        arrays,
        routine._names[: len(args)],
        routine._model,
    )


@needs_store
def test_a_sweep_or_continuation_of_the_users_own_model_is_keyed_by_its_traces():
    """A sweep chunk's and a continuation corrector's programs of a model of the
    user's own functions are keyed by the traces of the model's functions (the
    system, the section and the continuation parameter's setter): the same
    functions built anew give the same key, another gravity or another setter
    another key. A function of the user's own that the traces do not cover (a
    sweep's guess function, a sweep's own `fn`) is refused."""
    from hybrax._continuation import corrector, problems
    from hybrax._sweep import executor, rounds

    settings, shooting = orbit.resolve_settings(None), hx.Shooting()

    def chunk_key(system, section, params, guess=None, fn=None):
        if fn is None:
            fn = rounds._OrbitSolve(
                system, section, guess, settings, shooting, True, False
            )
        batch = jax.tree.map(lambda v: jnp.stack([v, v]), params)
        dynamic, static = eqx.partition((batch, jnp.ones((2, 1))), eqx.is_array)
        return _routine_key(executor._evaluate, fn, static, dynamic, None)

    def set_alpha(p, value):
        return {**p, "alpha": value}

    def corrector_key(system, section, params, setter=set_alpha):
        parameter = hx.FunctionParameter(lambda p: p["alpha"], setter, "alpha")
        residual = problems._ReturnMapResidual(
            system, section, parameter, params, settings
        )
        options = corrector._Options(optx.Newton(1e-10, 1e-10), 8)
        z = jnp.ones(2)
        return _routine_key(corrector._correct, residual, z, z, options)

    base = chunk_key(*own_wheel())
    assert chunk_key(*own_wheel()) == base
    assert chunk_key(*own_wheel(9.0)) != base

    def guess(p):
        return jnp.ones(1)

    def solve(element):
        return element

    for refused in ({"guess": guess}, {"fn": solve}):
        ((name, function),) = refused.items()
        with pytest.raises(_program_store.NotStorable, match=function.__qualname__):
            chunk_key(*own_wheel(), **refused)

    base = corrector_key(*own_wheel())
    assert corrector_key(*own_wheel()) == base
    assert corrector_key(*own_wheel(9.0)) != base
    assert corrector_key(*own_wheel(), lambda p, v: {**p, "alpha": 2 * v}) != base


@needs_store
def test_a_tuning_objective_of_the_users_own_is_keyed_by_its_trace_on_the_orbit(
    store, caplog
):
    """The tuning objective's program calls functions of the user's own on the
    orbit it finds: its key is completed by their traces on the orbit's
    structure, which the store keeps beside the program (here from the orbit's
    own abstract evaluation). Until it is kept the key is unknown
    (`OrbitUnknown`); then one objective built anew gives one key, another
    objective another; a damaged structure file is not used, with a line."""
    from hybrax._tune import driver, problem as tuning

    system, section, params = own_wheel()

    def problem_key(objective):
        problem, *_ = driver._checked_problem(
            system, section, params, objective, ["alpha"], (), None, None,
            hx.TuneSettings(), None, None,
        )  # fmt: skip
        args = (jnp.ones(1), jnp.ones(()))
        return _routine_key(tuning._evaluated, problem, jnp.ones(1), args, False)

    with pytest.raises(_program_store.OrbitUnknown) as unknown:
        problem_key(lambda orbit, p: orbit.period)
    orbit = jax.eval_shape(
        lambda u, p: hx.find_periodic_orbit(system, section, u, p, analyse=False),
        jnp.ones(1),
        params,
    )
    unknown.value.keep(orbit)
    base = problem_key(lambda orbit, p: orbit.period)
    assert problem_key(lambda orbit, p: orbit.period) == base
    assert problem_key(lambda orbit, p: 2 * orbit.period) != base
    (kept,) = store.glob("*.hxo")
    kept.write_bytes(kept.read_bytes()[:-20])
    with caplog.at_level(logging.INFO, logger="hybrax"):
        with pytest.raises(_program_store.OrbitUnknown):
            problem_key(lambda orbit, p: orbit.period)
    assert "not used" in caplog.text


_OWN_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import jax
    import jax.numpy as jnp
    import numpy as np
    jax.config.update("jax_enable_x64", True)
    import hybrax as hx
    from hybrax import _compile

    hx.enable_compilation_cache(sys.argv[1])

    from own_wheel import own_wheel

    system, section, params = own_wheel()
    alphas = jnp.array([0.3, 0.35, 0.4])
    sweep = hx.sweep_orbits(
        system, section, jnp.array([1.0]), {**params, "alpha": alphas}
    )
    branch = hx.continue_orbits(
        system,
        section,
        sweep.orbit.u[1],
        {**params, "alpha": alphas[1]},
        "alpha",
        stop=0.42,
        continuation_settings=hx.ContinuationSettings(max_points=4),
    )
    tuned = hx.tune(
        system,
        section,
        sweep.orbit.u[1],
        {**params, "alpha": alphas[1]},
        lambda orbit, p: orbit.period,
        vary=["alpha"],
        tune_settings=hx.TuneSettings(max_steps=1),
    )
    print(json.dumps({
        "records": [[r.what, r.cached, r.stored] for r in _compile.COMPILATIONS],
        "tuned": [float(tuned.objective), float(tuned.values["alpha"])],
        "alphas": alphas.tolist(),
        "sweep": np.abs(sweep.leading_multiplier).tolist(),
        "parameter": branch.parameter.tolist(),
        "branch": np.abs(branch.multipliers[:, 0]).tolist(),
    }))
    """
)


@pytest.mark.slow  # two fresh processes, the first compiling three programs
@needs_store
def test_a_sweep_a_continuation_and_a_tuning_of_the_users_own_model_load(tmp_path):
    """A script that sweeps, continues and tunes the orbits of a model of the
    user's own functions (the tuning's objective a lambda of the orbit), run
    twice with `hx.enable_compilation_cache`: the second process loads the
    sweep chunk's, the continuation corrector's and the tuning objective's
    programs from the store (no tracing of its own) with their executables
    from JAX's cache, and gives the same numbers, the multipliers McGeer's
    closed form cos(2 alpha)^2."""
    script = tmp_path / "wheel_script.py"
    script.write_text(_OWN_SCRIPT)
    cache = tmp_path / "cache"

    # The model's module, from the tests' folder, as a user's own module.
    path = os.pathsep.join(
        [str(pathlib.Path(__file__).parent), os.environ.get("PYTHONPATH", "")]
    )

    def run():
        return run_user_script(
            script, cache, timeout=600, HYBRAX_KEEP_TRACED="1", PYTHONPATH=path
        )

    first, second = run(), run()
    kept = {"a sweep chunk", "the continuation corrector", "the tuning objective"}
    assert {r[0] for r in first["records"]} >= kept
    assert {r[0] for r in second["records"]} >= kept
    for what, cached, stored in second["records"]:
        if what in kept:
            assert cached and stored, second["records"]
    for name in ("sweep", "parameter", "branch", "tuned"):
        assert second[name] == first[name]
    np.testing.assert_allclose(
        first["sweep"], np.cos(2 * np.array(first["alphas"])) ** 2, rtol=1e-7
    )
    np.testing.assert_allclose(
        first["branch"], np.cos(2 * np.array(first["parameter"])) ** 2, rtol=1e-7
    )


@needs_store
def test_a_class_of_the_users_own_beyond_a_reset_is_not_stored(store, caplog):
    """A vector field that is a Module of the user's own (not a reset, whose
    roles the system's traces cover) makes the program not stored, with a
    line (DEBUG) naming the class; the program runs as without the store."""

    class Field(eqx.Module):
        gravity: float = 9.81

        def __call__(self, t, x, p):
            return jnp.stack([x[1], -self.gravity * p["scale"]])

    system = hx.HybridSystem(
        [hx.Mode(Field(), "fall")],
        [
            hx.Transition(
                "fall", "fall", lambda t, x, p: x[0], False, hx.identity_reset, "g"
            )
        ],
        n_states=2,
    )
    with caplog.at_level(logging.DEBUG, logger="hybrax"):
        sol = _drop(system)
    assert list(store.glob("*")) == []
    assert "not kept between processes" in caplog.text and "Field" in caplog.text
    np.testing.assert_allclose(sol.t_events[0], np.sqrt(2 / 9.81), rtol=1e-7)


@pytest.mark.slow
def test_a_call_under_a_transformation_is_not_stored(store, caplog):
    """Inside the caller's `jax.jit`, `jax.grad` or `jax.vmap` a routine is part
    of the caller's program: nothing is stored (an exported program has fixed
    shapes and, in JAX, no forward-mode or batching rule), and the log says so
    where the routine is traced."""
    system, section, params = _wheel()

    def speed(u0):
        return hx.poincare_map(system, section, jnp.stack([u0]), params)[0][0]

    with caplog.at_level(logging.INFO, logger="hybrax"):
        jax.jit(speed)(1.0)
        jax.grad(speed)(1.0)
        jax.vmap(speed)(jnp.array([1.0, 1.1]))
    assert list(store.glob("*")) == []
    assert "tracing the return map inside a transformation" in caplog.text


@needs_store
def test_keys_name_everything_that_shapes_a_program(store):
    """A program's key is the same for the same call, and differs where a static
    value, an array's shape or dtype, or `EQX_ON_ERROR` differs; values that are
    not hybrax's or its anchors' are refused."""
    system, section, params = _wheel()

    settings = orbit.resolve_settings(None)
    adjoint = orbit.simulation_adjoint(settings)
    routine = orbit._checked_poincare_map

    def key(system, section, u, params):
        args = (system, section, u, params, settings, adjoint)
        keys, arrays, _ = routine._inputs(args, {})
        return _program_store.key(
            routine.__wrapped__, routine.what, keys, arrays, routine._names
        )

    u = jnp.array([1.0])
    base = key(system, section, u, params)
    assert key(system, section, jnp.array([2.0]), params) == base  # a value
    assert key(system, section, jnp.array([1.0, 2.0]), params) != base  # a shape
    assert key(system, section, u.astype(jnp.float32), params) != base  # a dtype
    other = hx.PoincareSection(("stall",), section.chart, section.coordinates)
    assert key(system, other, u, params) != base  # a static value
    os.environ["EQX_ON_ERROR"], before = "raise", os.environ.get("EQX_ON_ERROR")
    try:
        assert key(system, section, u, params) != base
    finally:
        if before is None:
            del os.environ["EQX_ON_ERROR"]
        else:
            os.environ["EQX_ON_ERROR"] = before

    class Mine:
        pass

    for value in (object(), lambda x: x, Mine, {1, 2}, np.ones(2).tolist):
        with pytest.raises(_program_store.NotStorable):
            _program_store._encode(value)


def test_enabling_the_cache_turns_the_store_on_or_off(tmp_path, monkeypatch):
    """`enable_compilation_cache` turns the store on in a folder of JAX's cache
    directory, unless `keep_traced=False` or, by default, `$HYBRAX_KEEP_TRACED`
    is `0`."""
    try:
        monkeypatch.setenv("HYBRAX_KEEP_TRACED", "1")
        path = hx.enable_compilation_cache(tmp_path)
        traced = pathlib.Path(path) / _compile.TRACED_PROGRAMS
        assert _program_store.directory() == traced
        hx.enable_compilation_cache(tmp_path, keep_traced=False)
        assert _program_store.directory() is None
        monkeypatch.setenv("HYBRAX_KEEP_TRACED", "0")
        hx.enable_compilation_cache(tmp_path)
        assert _program_store.directory() is None
        hx.enable_compilation_cache(tmp_path, keep_traced=True)
        assert _program_store.directory() == traced
    finally:
        _program_store.set_directory(None)


def test_the_limits_of_exported_programs_the_performance_page_reports():
    """What the performance page reports of `jax.export` (and why a routine under
    the caller's transformation is not stored): `Exported.call` differentiates
    in reverse mode, and raises under `jax.jvp` and `jax.vmap`. Where JAX
    changes this, this test fails and the page and the store can follow."""
    one = jnp.asarray(1.0, "float32")
    exported = jax.export.export(jax.jit(jnp.sin))(one)
    restored = jax.export.deserialize(exported.serialize(vjp_order=1))
    np.testing.assert_allclose(jax.grad(restored.call)(one), np.cos(1.0), rtol=1e-6)
    with pytest.raises(TypeError):
        jax.jvp(restored.call, (one,), (one,))
    with pytest.raises(NotImplementedError):
        jax.vmap(restored.call)(jnp.ones(3, "float32"))


class _XlaCompilations:
    """The names of the programs XLA compiles while active (JAX's monitoring
    events; a listener cannot be removed, so it is registered once)."""

    def __init__(self):
        self.names, self.active = [], False
        jax.monitoring.register_event_duration_secs_listener(self._listen)

    def _listen(self, event, duration, fun_name="", **kwargs):
        if self.active and event == "/jax/core/compile/backend_compile_duration":
            self.names.append(fun_name)


_XLA = _XlaCompilations()


@needs_store
def test_an_analysed_orbit_compiles_its_analysis_once(store):
    """With the store on, the Floquet analysis compiled beside the orbit search
    (in a thread, for placeholders of the search's outputs) is the program the
    call then runs: the placeholders and the search's outputs are committed
    alike (JAX 0.10 commits the outputs of a program that calls an
    `Exported`), so XLA compiles the analysis once, not again at the call."""
    system, section, params = _wheel()
    _XLA.names, _XLA.active = [], True
    try:
        orbit = hx.find_periodic_orbit(system, section, jnp.array([1.0]), params)
    finally:
        _XLA.active = False
    assert sum("floquet_analysis" in name for name in _XLA.names) == 1, _XLA.names
    alpha = 0.39269908169872414  # the wheel's closed form cos(2 alpha)^2
    assert abs(abs(orbit.multipliers[0]) - np.cos(2 * alpha) ** 2) < 1e-8
