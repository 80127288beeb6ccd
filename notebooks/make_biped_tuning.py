"""Writes `biped_tuning.ipynb` from the cells below (run: python make_biped_tuning.py;
with `--execute` it runs the notebook at its full budget and keeps its outputs).

The notebook is executed by the test suite (tests/test_notebook.py), with a
small budget (the environment variable HYBRAX_NOTEBOOK_BUDGET) and at its full
budget."""

import sys

from make_tutorial import write_notebook


CELLS = [
    (
        "md",
        """# A walking controller by gradient: the five-link biped

The five-link biped of Zanchi & Cecić (1993) walks under joint torques that track
*virtual constraints*: each actuated joint angle follows a cubic Bézier curve of
the gait phase (the stance leg's angle, normalised over a step), tracked by a
saturated PD law. All controller numbers are parameters, so the periodic gait,
its Floquet multipliers and its speed are differentiable in them.

This notebook starts from a controller under which the biped **falls**, and asks
`hx.tune` for a stable gait at 0.8 m/s with the smallest cost of transport:
first an existence stage (a gait that exists), then the penalised objective
(speed, stability, effort), every stage by gradient. Then it checks the result by
finding the gait again from scratch and walking 50 steps.""",
    ),
    (
        "code",
        """%matplotlib inline
import dataclasses
import os

import jax

jax.config.update("jax_enable_x64", True)  # analysis needs float64

import numpy as np

import hybrax as hx
import hybrax.plot
from hybrax.models import biped5 as b5

# The tests run this notebook on a small budget.
BUDGET = int(os.environ.get("HYBRAX_NOTEBOOK_BUDGET", "60"))""",
    ),
    (
        "md",
        """## 1. The controller
The outputs are the joint angles $\\phi = S\\theta$ (stance knee, stance hip, swing
hip, swing knee); the phase is $s = (\\varphi - \\varphi_0)/(\\varphi_1 -
\\varphi_0)$ with $\\varphi$ the angle of the line from the stance foot to the hip.
`hx.virtual_constraint_torques` is the law
$\\tau = \\mathrm{clip}(-k_p(\\phi - h(s)) - k_d(\\dot\\phi - h'(s)\\dot s),
\\pm\\tau_{max})$.""",
    ),
    (
        "code",
        """system, defaults = b5.biped5()
start = hx.canonical_params(dataclasses.replace(defaults, **b5.FALLING_START))
x0 = b5.default_state(start)
print("torques at the start state [N m]:",
      np.round(np.asarray(b5.joint_torques(x0[:5], x0[5:], start)), 2))
print("tuned parameters:", ", ".join(b5.TUNED))""",
    ),
    (
        "md",
        """## 2. The falling start
With the swing hip's set point at 0 the swing leg is not brought forward: the
walker trips over its swing foot at its second step. The engine reports it (the
swing foot is already under the ground when it comes ahead of the stance foot)
rather than walking on through the ground.""",
    ),
    (
        "code",
        """fall = hx.simulate(system, x0, start, n_events=3)
print(hx.status_name(fall.result)[0], "after", int(fall.n_events), "heel strike(s)")
print(hx.status_message(fall.result)[0])""",
    ),
    (
        "md",
        """## 3. Tuning
`hx.tune` finds no orbit at the start, so its existence stage runs first: it
minimises the periodicity defect $|P(u; p) - u|^2$ over the section state $u$ and
the controller together (Levenberg-Marquardt). From the first gait found, BFGS
minimises the cost of transport with the speed target and the stability bound
as penalties, by implicit-function gradients through the orbit.""",
    ),
    (
        "code",
        """quantities = b5.ORBIT_QUANTITIES


def speed_error(orbit, p):
    return quantities["speed"](orbit, p) - 0.8


result = hx.tune(
    system, b5.section(), b5.orbit_guess(start), start,
    quantities["cost_of_transport"],          # minimise the effort ...
    vary=list(b5.TUNED), scale=[0.5] * len(b5.TUNED),
    constraints=[(speed_error, 0.016)],      # ... at 0.8 m/s (2%) ...
    max_multiplier=0.9,                       # ... with every |multiplier| < 0.9
    tune_settings=hx.TuneSettings(seek_steps=30, max_steps=BUDGET),
)
orbit = result.orbit
seek = [s for s in result.history if s.stage == "seek"]
print(f"{len(seek)} existence steps, {result.n_evaluations} evaluations in all")
print("stable:", result.stable, " spectral radius:", round(float(orbit.spectral_radius), 4))
print("speed:", round(float(quantities["speed"](orbit, result.params)), 4), "m/s",
      " cost of transport:", round(float(quantities["cost_of_transport"](orbit, result.params)), 5))""",
    ),
    (
        "code",
        """tuned = [s for s in result.history if s.stage == "tune" and s.orbit_found]
fig = hybrax.plot.multiplier_history_figure(
    [s.multipliers for s in tuned], final=np.asarray(orbit.multipliers), bound=0.9
)
display(fig)""",
    ),
    (
        "md",
        """## 4. Checking the gait
Walk 50 steps from the orbit disturbed by 0.1 rad/s on the trunk's rate: every
step must succeed, and the walk must come back to the orbit as fast as the
multipliers say. (`hybrax tune biped5 --verify-steps 50` also finds the gait again
from a cold start.)""",
    ),
    (
        "code",
        """x_start = np.asarray(orbit.state).copy()
x_start[7] += 0.1
walk = hx.simulate(system, x_start, result.params, n_events=50)
gaps = np.max(np.abs(np.asarray(walk.x_after) - np.asarray(orbit.state)), axis=1)
print(hx.status_name(walk.result)[0], int(walk.n_events), "steps; distance to the orbit:",
      f"{gaps[0]:.1e} after the first, {gaps[-1]:.1e} after the last")
print("predicted by the multipliers:",
      f"{gaps[0] * float(orbit.spectral_radius) ** 49:.1e} after the last")""",
    ),
]


def main() -> None:
    write_notebook(CELLS, "biped_tuning.ipynb", execute="--execute" in sys.argv)


if __name__ == "__main__":
    main()
