"""Second-order AD through a step of the five-link biped against central
differences: the gradient of $g(u) = \\det(M(u) + I)$, where $M = \\partial P /
\\partial u$ is the step map's Jacobian by forward AD (`jax.jacfwd` of
`hybrax.poincare_map` with `diffrax.ForwardMode`), by forward AD again and by
central differences of $g$ (step `--h`, several), at rtol = atol = `--rtol`.

$g$ is the test function of a period-doubling curve (`hx.continue_orbit_curve`),
and its gradient is the curve corrector's Jacobian row. At the period doubling
(`--knee 0.50245`) the stance hip's PD torque passes the 400 N m limit for
about 0.2 ms after heel strike; with the hard clip AD missed the corner's
switching-time term (up to 0.09 in entries of about 10), with the rounded
saturation (`torque_band`, 1 N m) AD and differences agree to 6e-5. $g$
jumps by about 5e-6 where the integrator's step sequence changes, so
differences with h >= 1e-4 are good to about 1e-3 of the gradient's entries.

Usage: `python experiments/second_derivative.py [--knee 0.50245] [--rtol 1e-12]
[--h 1e-3,3e-4]`. Without `--knee`, the model's default gait; `--knee 0.50245`
is the period doubling where `tests/test_biped5.py`'s curve starts. Compiles two
programs (about 2-3 minutes on a 2-core CPU)."""

import argparse
import dataclasses
import time

import diffrax as dfx
import jax


jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import hybrax as hx  # noqa: E402
from hybrax import models  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--knee", type=float, default=None, help="knee_swing_ref")
    parser.add_argument("--rtol", type=float, default=1e-12)
    parser.add_argument("--h", default="1e-3,3e-4", help="difference steps")
    args = parser.parse_args()

    bundle = models.get_model("biped5")
    form = bundle.forms[bundle.default_form]
    system, section = form.system(), form.section()
    params = bundle.make_params()
    if args.knee is not None:
        params = dataclasses.replace(params, knee_swing_ref=args.knee)
    params = hx.canonical_params(params)
    guess = bundle.orbit_guess(params)
    orbit = hx.find_periodic_orbit(system, section, guess, params, analyse=False)
    print(
        f"orbit: {hx.status_name(orbit.result)[0]}, period {float(orbit.period):.10f}"
    )
    settings = hx.Settings(rtol=args.rtol, atol=args.rtol, adjoint=dfx.ForwardMode())

    def step(u):
        return hx.poincare_map(system, section, u, params, settings=settings)[0]

    def g(u):
        M = jax.jacfwd(step)(u)
        return jnp.linalg.det(M + jnp.eye(M.shape[0]))

    began = time.perf_counter()
    value, gradient = jax.jit(lambda u: (g(u), jax.jacfwd(g)(u)))(orbit.u)
    print(f"g = {float(value):.6e}; AD gradient ({time.perf_counter() - began:.0f} s)")
    print(
        "  AD  ", np.array2string(np.asarray(gradient), precision=6, max_line_width=120)
    )
    values = jax.jit(jax.vmap(g))
    n = orbit.u.shape[0]
    for h in (float(text) for text in args.h.split(",")):
        eye = jnp.eye(n, dtype=orbit.u.dtype)
        both = np.asarray(
            values(jnp.concatenate([orbit.u + h * eye, orbit.u - h * eye]))
        )
        differences = (both[:n] - both[n:]) / (2 * h)
        worst = np.max(np.abs(differences - np.asarray(gradient)))
        print(
            f"  h={h:g}", np.array2string(differences, precision=6, max_line_width=120)
        )
        print(f"    max |AD - differences| = {worst:.3g}")


if __name__ == "__main__":
    main()
