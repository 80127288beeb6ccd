"""The command line's program cache: a lowered program read back from disk gives the
same PyTree (equinox Modules and status enumerations included) as a direct call."""

import jax.numpy as jnp
import numpy as np

import hybrax as hx
from hybrax import models
from hybrax._program_cache import cached_call


def _program(x, params):
    sol = hx.simulate(models.bouncing_ball.bouncing_ball()[0], x, params, n_events=3)
    return sol, {"energy": params.m * params.g * x[0]}


def test_round_trip_through_the_cache(tmp_path):
    params = hx.canonical_params(models.bouncing_ball.BallParams(e=0.5))
    x0 = jnp.array([1.0, 0.0])
    first = cached_call("ball", _program, x0, params, cache_dir=str(tmp_path))
    assert list((tmp_path / "programs").glob("ball-*.bin"))
    second = cached_call("ball", _program, x0, params, cache_dir=str(tmp_path))
    direct = _program(x0, params)
    for got in (first, second):
        sol, extra = got
        assert isinstance(sol, hx.HybridSolution)
        assert sol.result == hx.RESULTS.successful
        np.testing.assert_array_equal(sol.t_events, direct[0].t_events)
        np.testing.assert_array_equal(sol.transitions, direct[0].transitions)
        np.testing.assert_array_equal(extra["energy"], direct[1]["energy"])
    # A failure status survives the trip as a status.
    bad = cached_call(
        "ball", _program, jnp.array([-1.0, 0.0]), params, cache_dir=str(tmp_path)
    )
    assert bad[0].result == hx.RESULTS.infeasible_initial_state
    assert "initial state" in hx.status_message(bad[0].result)[0]


def test_enable_compilation_cache_stores_compilations(tmp_path):
    """`hx.enable_compilation_cache` in a fresh process: its directory fills with
    the compiled programs of a first run, and a second run finds them there (it
    adds no entry)."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        """
        import sys
        import jax
        jax.config.update("jax_enable_x64", True)
        import hybrax as hx
        print(hx.enable_compilation_cache(sys.argv[1]))
        f = jax.jit(lambda x: jax.numpy.sin(x) ** 2 + 1.0)
        print(float(f(jax.numpy.ones(()))))
        """
    )
    cache = tmp_path / "cache"

    def run():
        return subprocess.run(
            [sys.executable, "-c", script, str(cache)],
            capture_output=True,
            text=True,
            timeout=300,
            env={
                k: v
                for k, v in __import__("os").environ.items()
                if not k.startswith("JAX_COMPILATION_CACHE")
            },
        )

    entries = []
    for _ in range(2):
        done = run()
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[0] == str(cache)
        entries.append(sorted(p.name for p in cache.iterdir()))
    assert entries[0] and entries[1] == entries[0]
