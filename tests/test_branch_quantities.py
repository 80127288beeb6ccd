"""Orbit quantities along a branch (`hx.branch_quantities`) against the
closed-form NumPy/SciPy reference of the hopper (`reference_hopper.py`): at
points of a branch in D_G, the flight and ground times, the energy split at
touchdown and the apex heights of one hop from the branch's lift-off state, the
period and the multiplier; a declared condition comes back as truth values, a
quantity that reads what nothing records as NaN, and bad arguments as a
`ValueError` naming them."""

import re

import numpy as np
import pytest

import hybrax as hx
import reference_hopper as ref
from hybrax import models


# Each test needs the branch (the continuation's corrector and the quantities'
# program compile, about 30 s): too slow for the fast set.
pytestmark = pytest.mark.slow

TOL = 1e-11  # integration tolerance of the branch and of its cycles
SYSTEM = models.hopper.minimal()[0]
SECTION = models.hopper.section()
D_G = models.hopper.parameter("D_G")
QUANTITIES = models.hopper.ORBIT_QUANTITIES


@pytest.fixture(scope="module")
def branch_and_params():
    params = hx.canonical_params(models.hopper.make_params(D_G=-0.01, mu=0.8))
    branch = hx.continue_orbits(
        SYSTEM,
        SECTION,
        models.hopper.orbit_guess(params, 0.5),
        params,
        D_G,
        stop=-0.03,
        continuation_settings=hx.ContinuationSettings(
            parameter_scale=0.01, max_step=0.1, max_points=12
        ),
        settings=hx.Settings(rtol=TOL, atol=TOL),
    )
    assert branch.n_points == 12, branch.message
    return branch, params


def _along(branch_and_params, quantities):
    """The quantities along the branch, its cycles at the branch's tolerance."""
    branch, params = branch_and_params
    settings = hx.Settings(rtol=TOL, atol=TOL)
    return hx.branch_quantities(
        SYSTEM, SECTION, branch, params, D_G, quantities, settings=settings
    )


def test_quantities_along_a_branch_equal_the_closed_form_hop(branch_and_params):
    branch, params = branch_and_params
    values = _along(branch_and_params, QUANTITIES)
    assert set(values) == set(QUANTITIES)
    assert all(v.shape == (branch.n_points,) for v in values.values())
    assert values["pulling_after_touchdown"].dtype == bool
    for i in (0, branch.n_points // 2, branch.n_points - 1):
        p = ref.HopperParams(mu=0.8).with_D_G(float(branch.parameter[i]))
        state = np.asarray(branch.state[i], dtype=float)
        hop = ref.one_hop(state, p)
        expected = {
            "t_flight": hop["t_flight"],
            "t_ground": hop["t_ground"],
            "period": hop["t_flight"] + hop["t_ground"],
            "T_c": hop["T_c"],
            "T_a": hop["T_a"],
            "Tc_over_T": hop["Tc_over_T"],
            "Ta_over_T": hop["T_a"] / (hop["T_c"] + hop["T_a"]),
            "apex_upper": ref._flight_max(state, hop["t_flight"], p, 0),
            "apex_lower": ref._flight_max(state, hop["t_flight"], p, 1),
            "v_U": state[2],
            # The ground force right after touchdown, positive where the
            # ground pulls: the closed-form contact multiplier lambda there.
            "ground_force_after_touchdown": hop["lambda_touchdown"],
        }
        for name, value in expected.items():
            np.testing.assert_allclose(
                values[name][i], value, rtol=1e-7, atol=1e-8, err_msg=f"{name}, {i}"
            )
        assert bool(values["pulling_after_touchdown"][i]) == (
            expected["ground_force_after_touchdown"] > 0
        )
        # The spectral radius from the branch's own reduced Jacobian.
        np.testing.assert_allclose(
            values["multiplier"][i], np.max(np.abs(branch.multipliers[i])), rtol=1e-12
        )


def test_a_quantity_that_reads_nothing_recorded_is_nan(branch_and_params):
    branch, params = branch_and_params
    values = _along(
        branch_and_params,
        {
            "missing": lambda orbit, p: orbit.cycle.phase_observables["no_such"][0],
            "missing_condition": lambda orbit, p: (
                orbit.cycle.observables["no_such"][0] > 0
            ),
            "period": lambda orbit, p: orbit.period,
        },
    )
    assert np.all(np.isnan(values["missing"]))
    # Unknown, never a truth value read from NaN.
    assert values["missing_condition"].dtype != bool
    assert np.all(np.isnan(values["missing_condition"]))
    np.testing.assert_allclose(values["period"], branch.period, rtol=1e-8)


@pytest.mark.parametrize(
    "change, argument",
    [
        (dict(branch="not a branch"), "`branch`"),
        (dict(quantities={"apex": 1.0}), "`quantities['apex']`"),
        (dict(parameter="D_G"), "`parameter`"),
    ],
)
def test_bad_arguments_are_value_errors_naming_them(
    branch_and_params, change, argument
):
    branch, params = branch_and_params
    arguments = dict(
        system=SYSTEM,
        section=SECTION,
        branch=branch,
        params=params,
        parameter=D_G,
        quantities=QUANTITIES,
    )
    arguments.update(change)
    with pytest.raises(ValueError, match=re.escape(argument)):
        hx.branch_quantities(**arguments)


def test_an_empty_branch_gives_empty_columns(branch_and_params):
    branch, params = branch_and_params
    empty = branch.select(np.zeros(branch.n_points, dtype=bool))
    values = hx.branch_quantities(SYSTEM, SECTION, empty, params, D_G, QUANTITIES)
    assert set(values) == set(QUANTITIES)
    assert all(v.shape == (0,) for v in values.values())
