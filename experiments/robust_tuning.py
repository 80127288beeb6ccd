"""Tuning a gait for robustness: a walker's parameters tuned by gradient to
minimise its gait sensitivity norm (slope of the next step; step time and step
length; Hobbelen & Wisse 2007) at a set walking speed, and its mean
first-passage time on random slopes measured before and after (Monte Carlo
walks; Byl & Tedrake 2009).

- `--model biped5` (the default): the five-link biped's controller (`--vary`,
  default its four joint set points and four PD gains) at its 0.8 m/s target
  speed (the model's `hybrax tune` target). Its default gait walks at 0.96 m/s:
  a first tune brings it to the target speed (no objective), and the robust
  tune starts from there.
- `--model compass-gait`: the passive walker's hip mass and leg geometry
  (default m_H, a, b) at its own walking speed.

The objective is `hybrax.gait_sensitivity(...).norm` of the orbit that
`hybrax.tune` finds at each point: its gradient differentiates the step's
Jacobians through the orbit's own derivative (forward over forward, so the tune
runs in forward mode). The speed is held to its target (a constraint to
1e-3 m/s) and the spectral radius kept below `--max-multiplier` (0.9), in
both tunes (the speed tune that precedes the robust one too).

Usage: `python experiments/robust_tuning.py [--model biped5] [--sigma 0.01]
[--walkers 4000] [--max-steps 400] [--tune-steps 100] [--vary a,b,...]
[--speed 0.8] [--max-multiplier 0.9]`. Prints the varied parameters, norm,
speed, spectral radius and mean first-passage time with its 95% interval, before
and after the robust tune, and the seconds of each tune (compilation included)
and of the walks.
"""

import argparse
import time

import jax
import jax.numpy as jnp


jax.config.update("jax_enable_x64", True)

import hybrax as hx  # noqa: E402
from hybrax import models  # noqa: E402


#: The parameters each model's robust tune varies by default.
VARY = {
    "biped5": (
        "hip_swing_ref,hip_stance_ref,knee_swing_ref,knee_stance_ref,"
        "kp_hip,kd_hip,kp_knee,kd_knee"
    ),
    "compass-gait": "m_H,a,b",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="biped5", choices=sorted(VARY))
    parser.add_argument("--sigma", type=float, default=0.01)
    parser.add_argument("--walkers", type=int, default=4000)
    parser.add_argument("--max-steps", type=int, default=400)
    parser.add_argument("--tune-steps", type=int, default=100)
    parser.add_argument("--vary", default=None, help="the tuned parameters")
    parser.add_argument(
        "--max-multiplier",
        type=float,
        default=0.9,
        help="bound on the tuned orbit's spectral radius",
    )
    parser.add_argument(
        "--speed",
        type=float,
        default=None,
        help="target speed, m/s (default: the model's tune target, else its gait's)",
    )
    args = parser.parse_args()

    model = models.get_model(args.model)
    form = model.forms[model.default_form]
    system, section = form.system(), form.section()
    params = hx.canonical_params(model.make_params())
    slope = model.disturbances["slope"]
    indicators = {name: model.quantity(name) for name in model.gait_indicators}
    speed = model.quantity("speed")
    vary = (args.vary or VARY[args.model]).split(",")

    def gsn(orbit, p):
        return hx.gait_sensitivity(system, section, orbit, p, slope, indicators).norm

    def report(label, p, guess):
        orbit = hx.find_periodic_orbit(system, section, guess, p)
        norm = float(gsn(orbit, p))
        start = time.perf_counter()
        walks = hx.first_passage_walks(
            system,
            section,
            orbit,
            p,
            slope,
            args.sigma,
            walkers=args.walkers,
            max_steps=args.max_steps,
        )
        seconds = time.perf_counter() - start
        low, high = walks.interval
        values = ", ".join(f"{name} = {float(getattr(p, name)):.4f}" for name in vary)
        print(
            f"{label}: {values}; GSN {norm:.4f}; speed "
            f"{float(speed(orbit, p)):.4f} m/s; spectral radius "
            f"{float(orbit.spectral_radius):.4f}"
        )
        print(
            f"  MFPT at sigma = {args.sigma} rad: {walks.mfpt:.1f} steps "
            f"[{low:.1f}, {high:.1f}] ({walks.falls} passages of {args.walkers}, "
            f"{walks.passages}; {walks.ended} ended otherwise) in {seconds:.1f} s",
            flush=True,
        )
        return orbit

    def tune(label, p, u, objective):
        start = time.perf_counter()
        result = hx.tune(
            system,
            section,
            u,
            p,
            objective,
            vary=vary,
            constraints=[(hx.QuantityTarget(speed, jnp.asarray(target)), 1e-3)],
            max_multiplier=args.max_multiplier,
            tune_settings=hx.TuneSettings(mode="forward", max_steps=args.tune_steps),
        )
        print(
            f"{label}: {hx.status_name(result.result)[0]} after "
            f"{len(result.history)} evaluations in "
            f"{time.perf_counter() - start:.1f} s (compilation included)",
            flush=True,
        )
        return result

    guess = jnp.asarray(model.orbit_guess(params), float)
    orbit = hx.find_periodic_orbit(system, section, guess, params)
    tune_defaults = model.presentation.tune
    target = args.speed
    if target is None and tune_defaults is not None:
        target = tune_defaults.targets.get("speed")
    if target is None:
        target = float(speed(orbit, params))
    if abs(float(speed(orbit, params)) - target) > 1e-3:
        reached = tune(f"speed {target} m/s", params, orbit.u, None)
        params, guess = reached.params, reached.orbit.u
    before = report("before", params, guess)
    result = tune("robust tune", params, before.u, gsn)
    report("after", result.params, result.orbit.u)


if __name__ == "__main__":
    main()
