"""Writes `hopper_tutorial.ipynb` from the cells below (run: python make_tutorial.py;
with `--execute` it runs the notebook and keeps its outputs and figures).

The notebook is executed by the test suite (tests/test_notebook.py)."""

import pathlib
import sys

import nbformat


CELLS = [
    (
        "md",
        """# hybrax tutorial: the vertical hopper of Zana et al. (2018)

This notebook reproduces Zana, Bodor, Bencsik & Zelei (2018), "A Tutorial for the
Analysis of the Piecewise-Smooth Dynamics of a Constrained Multibody Model of
Vertical Hopping", Math. Comput. Appl. 23(4):74, step by step with the public API:
the constrained model, one hop, the periodic orbit, its stability two ways
(autodiff and saltation matrices), and a continuation in the ground damping $D_G$.""",
    ),
    (
        "code",
        """%matplotlib inline
import jax

jax.config.update("jax_enable_x64", True)  # analysis needs float64

import numpy as np

import hybrax as hx
import hybrax.models.hopper_figures
import hybrax.plot
from hybrax import models""",
    ),
    (
        "md",
        """## 1. The model
Four coordinates $z_1..z_4$ with the rigid constraints $z_1 = z_2$, $z_3 = z_4$ in
both phases and the ground constraint $z_4 = 0$ in the ground phase (paper
sections 2 and 3.2). Accelerations and multipliers come from the KKT system (eq. 18),
derived by JAX from $H$, $C$ and $\\gamma$.""",
    ),
    (
        "code",
        """params = hx.canonical_params(models.hopper.make_params())  # the paper's section 4.2
system = models.hopper.constrained()[0]
print([m.name for m in system.modes], [t.name for t in system.transitions])
print("D_G =", float(params.D_G))""",
    ),
    (
        "md",
        """## 2. One hop
From rest, 0.15 m above the ground: touchdown (plastic impact, $T_c$ lost),
ground phase with negative damping, lift-off when the ground force changes sign.""",
    ),
    (
        "code",
        """x0 = models.hopper.to_constrained(models.hopper.default_state(params))
sol = hx.simulate(system, x0, params, n_events=6, n_save=200)
print(hx.status_message(sol.result))
for t, k, tc in zip(sol.t_events, sol.transitions, sol.T_c):
    print(f"t = {float(t):.6f} s  {system.transitions[int(k)].name:9s}  T_c = {float(tc):.3f} J")
trajectory = hybrax.plot.Trajectory.from_solution(sol, system, to_minimal=models.hopper.to_minimal)
fig = hybrax.models.hopper_figures.energy_history(trajectory, params)
display(fig)""",
    ),
    (
        "md",
        """## 3. The periodic orbit (shooting on the lift-off section, section 3.4)""",
    ),
    (
        "code",
        """section = models.hopper.section("constrained")
orbit = hx.find_periodic_orbit(
    system, section, models.hopper.orbit_guess(params), params,
    settings=hx.Settings(rtol=1e-12, atol=1e-12),
)
floquet = orbit.floquet
print("converged:", bool(orbit.succeeded), " period:", float(orbit.period))
print("t_F, t_G:", np.asarray(orbit.phase_durations))
print("lift-off state [z_U, z_L, v_U, v_L]:", np.asarray(models.hopper.to_minimal(orbit.state)))""",
    ),
    (
        "md",
        """## 4. Stability two ways (section 3.5)
The monodromy matrix by autodiff through the composite flow and by the product
$S_{G2F}\\Phi_G S_{F2G}\\Phi_F$ of saltation and phase fundamental matrices; Floquet
multipliers on the constraint manifold (the paper's 1, 0.4714, 0, 0).""",
    ),
    (
        "code",
        """E = jax.jacfwd(models.hopper.to_constrained)(jax.numpy.zeros(4))
R = jax.jacfwd(models.hopper.to_minimal)(jax.numpy.zeros(8))
np.set_printoptions(precision=4, suppress=True)
print("monodromy (AD), order [z_U, z_L, v_U, v_L]:\\n", np.asarray(R @ floquet.monodromy_ad @ E))
print("max |AD - saltation| =", float(floquet.max_discrepancy))
print("multipliers (AD):", np.asarray(floquet.multipliers_ad))
print("multipliers (saltation):", np.asarray(floquet.multipliers_saltation))
print("trivial multiplier:", complex(floquet.trivial_ad))
print("reduced Jacobian M (eq. 33):\\n", np.asarray(orbit.reduced_jacobian))""",
    ),
    (
        "md",
        """## 5. Continuation in $D_G$ (section 4.3, Figures 6-9)
Pseudo-arclength continuation of the orbit from the paper's point towards $D_G \\to 0^-$,
with stability along the branch and folds located.""",
    ),
    (
        "code",
        """minimal, section_min = models.hopper.minimal()[0], models.hopper.section("minimal")
# The start is corrected onto the branch first: the plain guess will do.
branch = hx.continue_orbits(
    minimal, section_min, models.hopper.orbit_guess(params), params,
    models.hopper.parameter("D_G"), start=float(params.D_G), stop=(-0.06, -0.0005),
    direction=-1,
    continuation_settings=hx.ContinuationSettings(
        max_points=120, parameter_scale=0.01, max_period=1.2
    ),
    settings=hx.Settings(rtol=1e-12, atol=1e-12),
)
print(branch.n_points, "orbits; folds at D_G =", [round(f.parameter, 6) for f in branch.folds])
t_flight, t_ground = branch.phase_durations[:, 0], branch.phase_durations[:, 1]
fig = hybrax.plot.branch_figure(
    branch.parameter,
    {"$t_F$": t_flight, "$t_G$": t_ground, "$t_p$": branch.period},
    branch.stable,
    folds=[f.index for f in branch.folds],
    xlabel="$D_G$",
    ylabel="time [s]",
    title="Fig. 6: phase durations along the branch",
)
fig2 = hybrax.plot.branch_figure(
    branch.parameter,
    {"multiplier": np.abs(branch.multipliers[:, 0])},
    branch.stable,
    folds=[f.index for f in branch.folds],
    reference_lines=[1.0],
    xlabel="$D_G$",
    title="Fig. 7: the nontrivial Floquet multiplier",
)
display(fig, fig2)""",
    ),
]


def write_notebook(cells, name: str, execute: bool = False) -> None:
    """Write `cells` ((kind, source) pairs) as the notebook `name` beside this
    script; with `execute`, run it first (a fresh kernel in a temporary folder)
    and keep its outputs, so that it reads with its figures where it is not run."""
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_markdown_cell(src)
        if kind == "md"
        else nbformat.v4.new_code_cell(src)
        for kind, src in cells
    ]
    notebook.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    path = pathlib.Path(__file__).with_name(name)
    if execute:
        import tempfile

        from nbclient import NotebookClient

        with tempfile.TemporaryDirectory() as folder:
            NotebookClient(
                notebook,
                timeout=3600,
                kernel_name="python3",
                resources={"metadata": {"path": folder}},
            ).execute()
    nbformat.write(notebook, path)
    print(f"wrote {path}")


def main() -> None:
    write_notebook(CELLS, "hopper_tutorial.ipynb", execute="--execute" in sys.argv)


if __name__ == "__main__":
    main()
