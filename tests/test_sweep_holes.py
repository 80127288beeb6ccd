"""No false holes in a sweep's map: on the default grids of `hybrax sweep hopper`
and `hybrax sweep compass-gait`, every point reported without an orbit that has a
converged grid neighbour is solved again singly, by `find_periodic_orbit` with
its own defaults, from the model's guess and from each converged neighbour's
orbit; none may converge to an admissible orbit (one whose second phase does not
start past its guard, the sweep's flag). A single solve is the reference a user
compares the map with (`hybrax orbit MODEL --set ...`).
"""

import numpy as np
import pytest

import hybrax as hx
from hybrax._cli import main
from hybrax._registry import get_model
from hybrax._sweep_defaults import SWEEP_T_MAX


# The sweep's admissibility flag: the guard of the cycle's second phase at its
# start, below minus this (the hopper's ground would have to pull).
PULL_TOL = 1e-9


def _neighbours(index, shape):
    """The positions of the (up to 8) grid neighbours of `index` in a 2-D grid."""
    i, j = index
    return [
        (i + di, j + dj)
        for di in (-1, 0, 1)
        for dj in (-1, 0, 1)
        if (di, dj) != (0, 0) and 0 <= i + di < shape[0] and 0 <= j + dj < shape[1]
    ]


def _admissible(orbit) -> bool:
    guard = np.asarray(orbit.guard_at_start, dtype=float)
    return bool(orbit.succeeded) and bool(guard[0] >= -PULL_TOL)


# Slow: each default grid's sweep and its audit by single solves (minutes).
@pytest.mark.slow
@pytest.mark.parametrize("name", ["hopper", "compass-gait"])
def test_no_false_holes_on_the_default_grid(name, tmp_path):
    assert main(["sweep", name, "--out", str(tmp_path), "--no-figures", "-q"]) == 0
    with np.load(tmp_path / "sweep.npz") as npz:
        data = dict(npz)
    names = [str(n) for n in data["grid_names"]]
    converged = data["converged"]
    shape = converged.shape
    model = get_model(name)
    form = model.forms[model.default_form]
    system, section = form.system(), form.section()
    # The single solve with its own defaults, but a cycle as long as the sweep's
    # (a longer one only finds the same orbits later).
    settings = hx.Settings(t_max=SWEEP_T_MAX)
    audited = 0
    for index in zip(*np.nonzero(~converged)):
        around = [k for k in _neighbours(index, shape) if converged[k]]
        if not around:
            continue
        audited += 1
        point = {n: float(data["grid_" + n][k]) for n, k in zip(names, index)}
        params = hx.canonical_params(model.make_params(**point))
        starts = [model.orbit_guess(params)] + [data["u"][k] for k in around]
        for start in starts:
            orbit = hx.find_periodic_orbit(
                system, section, np.asarray(start), params, settings=settings
            )
            assert not _admissible(orbit), (
                f"{name} at {point}: the sweep reports no orbit, a single solve "
                f"from {np.asarray(start)} finds one (period {float(orbit.period)})"
            )
    # The hopper's grid crosses the edges of its family (holes audited); the
    # compass gait's has an orbit at every point (63 of 63, 13 of them from
    # neighbours' orbits), so there only the sweep itself is checked.
    assert audited or converged.all()
