"""`hybrax orbit hopper` and `hybrax.models.hopper_figures.orbit_figure`.

The CLI runs in-process (`hybrax._cli.main`) once per form in this module (module-
scoped fixtures): the orbit search compiles once per form, the dense simulations once
per form. Its numbers are checked against the closed-form NumPy/SciPy reference
`reference_hopper.periodic_orbit` (modal solution of each phase, bracketed events,
Richardson-extrapolated finite differences), which imports neither JAX nor hybrax.
The plot test draws reference arrays only, so it needs no JAX run.
"""

import contextlib
import io
import json

import numpy as np
import pytest
from matplotlib.colors import to_rgba

import hybrax.models.hopper_figures
import hybrax.plot
from helpers import MULTIPLIER_TOL, ORACLE_TOL
from hybrax import models
from hybrax._cli import main
from reference_hopper import (
    HopperParams as ReferenceParams,
    flight_state,
    ground_state,
    one_hop,
    periodic_orbit,
)


JSON_KEYS = {
    "converged",
    "status",
    "state",
    "t_flight",
    "t_ground",
    "period",
    "apex_upper",
    "apex_lower",
    "T_a",
    "T_c",
    "Tc_over_T",
    "multipliers_ad",
    "multipliers_saltation",
    "trivial_multiplier_ad",
    "trivial_multiplier_saltation",
    "monodromy_ad",
    "monodromy_saltation",
    "max_discrepancy",
    "reduced_jacobian",
    "newton_iterations",
    "residual_norm",
    "params",
    "form",
    "stable",
    "ground_force_after_touchdown",
    "pulling_after_touchdown",
}
FIGURES = ("orbit.png", "phase_portraits.png", "energy.png")


def _run(argv):
    """`main(argv)` with its output captured: `(code, stdout, stderr)`."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def _orbit_run(tmp_path_factory, name, *options):
    directory = tmp_path_factory.mktemp(name)
    code, out, err = _run(
        ["orbit", "hopper", *options]
        + ["--out", str(directory / "figures"), "--json", str(directory / "o.json")]
    )
    data = json.loads((directory / "o.json").read_text())
    return dict(code=code, out=out, err=err, dir=directory, data=data)


@pytest.fixture(scope="module")
def minimal(tmp_path_factory):
    """The default run: minimal form, the paper's parameters."""
    return _orbit_run(tmp_path_factory, "minimal")


@pytest.fixture(scope="module")
def reference():
    return periodic_orbit(ReferenceParams())


def _complex(pairs):
    return np.array([complex(re, im) for re, im in pairs])


def test_json_and_figures(minimal):
    assert minimal["code"] == 0, minimal["err"]
    data = minimal["data"]
    assert JSON_KEYS <= set(data)
    assert data["converged"] is True
    assert data["status"] == "successful"
    assert data["form"] == "minimal"
    assert data["params"]["d_G"] == -80.0 and data["params"]["m"] == 75.0
    assert data["stable"] is True
    assert 1 <= data["newton_iterations"] <= 40
    assert data["residual_norm"] < ORACLE_TOL
    for name in FIGURES:
        path = minimal["dir"] / "figures" / name
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_printed_summary(minimal):
    out = minimal["out"]
    data = minimal["data"]
    for text in (
        "converged",
        "t_flight",
        "t_ground",
        "period",
        "apex_upper",
        "apex_lower",
        "Tc_over_T",
        "reduced Jacobian M",
        "monodromy by autodiff",
        "monodromy by saltation product",
        "max |AD - saltation|",
        "trivial",
        "stable",
    ):
        assert text in out
    assert f"{data['period']:.10f}" in out
    assert f"{data['multipliers_ad'][0][0]:+.10f}" in out
    # Each declared quantity is printed with its JSON value and declared unit.
    from hybrax.models import get_model

    hopper = get_model("hopper")
    for name in ("t_flight", "apex_upper", "T_c", "Tc_over_T"):
        unit = hopper.quantity(name).unit
        shown = f"{data[name]:.10g}" + ("" if unit == "1" else f" {unit}")
        assert any(
            line.split()[:1] == [name] and shown in line for line in out.splitlines()
        ), name
    assert any(
        line.split()[:2] == ["pulling_after_touchdown", "no"]
        for line in out.splitlines()
    )


def test_orbit_matches_reference(minimal, reference):
    data = minimal["data"]
    np.testing.assert_allclose(data["state"], reference["state"], atol=ORACLE_TOL)
    for key in ("t_flight", "t_ground", "period", "Tc_over_T"):
        assert abs(data[key] - reference[key]) < ORACLE_TOL, key
    for key in ("T_c", "T_a"):
        assert data[key] == pytest.approx(reference[key], rel=ORACLE_TOL), key
    for key in ("apex_upper", "apex_lower"):
        assert abs(data[key] - reference[key]) < MULTIPLIER_TOL, key
    np.testing.assert_allclose(
        data["reduced_jacobian"], reference["M_reduced"], rtol=0, atol=MULTIPLIER_TOL
    )


def test_floquet_matches_reference(minimal, reference):
    data = minimal["data"]
    for key in ("monodromy_ad", "monodromy_saltation"):
        np.testing.assert_allclose(
            data[key], reference["monodromy"], rtol=0, atol=MULTIPLIER_TOL
        )
    assert data["max_discrepancy"] < MULTIPLIER_TOL
    for key in ("multipliers_ad", "multipliers_saltation"):
        multipliers = _complex(data[key])
        # The leading one is the paper's; the other two are the (numerical) zeros of
        # the z_L, v_L directions that the plastic impact collapses.
        assert multipliers.shape == (3,)
        assert abs(multipliers[0] - reference["multiplier"]) < ORACLE_TOL
        assert np.all(np.abs(multipliers[1:]) < MULTIPLIER_TOL)
    for key in ("trivial_multiplier_ad", "trivial_multiplier_saltation"):
        assert abs(complex(*data[key]) - 1.0) < MULTIPLIER_TOL
    # M has the nontrivial multiplier and 0 as eigenvalues (its image is the
    # lift-off line).
    eig_M = np.sort(np.abs(np.linalg.eigvals(np.asarray(data["reduced_jacobian"]))))
    assert eig_M[0] < MULTIPLIER_TOL
    assert abs(eig_M[1] - reference["multiplier"]) < MULTIPLIER_TOL


def test_ground_force_after_touchdown(minimal, reference):
    data = minimal["data"]
    # lambda_g = T - m_L g with z_L = v_L = 0 right after the plastic impact.
    expected = reference["hop"]["lambda_touchdown"]
    assert data["ground_force_after_touchdown"] == pytest.approx(expected, rel=1e-8)
    assert data["ground_force_after_touchdown"] < 0
    assert data["pulling_after_touchdown"] is False
    assert "ground force after touchdown" in minimal["out"]


def test_no_orbit_exits_1(tmp_path):
    out = tmp_path / "figures"
    code, stdout, stderr = _run(
        ["orbit", "hopper", "--set", "d_G=10", "--out", str(out)]
        + ["--json", str(tmp_path / "o.json")]
    )
    assert code == 1
    assert "Traceback" not in stderr
    assert "no periodic orbit found" in stderr
    assert "d_G = 10" in stderr and "no hopping orbit exists" in stderr
    data = json.loads((tmp_path / "o.json").read_text())
    assert data["converged"] is False
    assert data["status"] != "successful"
    assert data["params"]["d_G"] == 10.0
    assert JSON_KEYS <= set(data)
    assert data["state"] is None and data["multipliers_ad"] is None
    assert not out.exists() or not list(out.iterdir())
    assert "periodic orbit: converged" not in stdout


@pytest.mark.parametrize(
    "argument, names",
    [("--form=reduced", ["--form", "reduced"]), ("--set=foo=1", ["foo", "--set"])],
)
def test_bad_arguments_exit_2(tmp_path, capsys, argument, names):
    with pytest.raises(SystemExit) as info:
        main(["orbit", "hopper", argument, "--out", str(tmp_path / "figures")])
    assert info.value.code == 2
    message = capsys.readouterr().err.strip().splitlines()[-1]
    for name in names:
        assert name in message
    assert not (tmp_path / "figures").exists()


@pytest.mark.slow
def test_constrained_form_agrees(minimal, tmp_path_factory):
    constrained = _orbit_run(tmp_path_factory, "constrained", "--form", "constrained")
    assert constrained["code"] == 0, constrained["err"]
    a, b = constrained["data"], minimal["data"]
    assert a["converged"] is True and a["form"] == "constrained"
    for key in ("multipliers_ad", "multipliers_saltation"):
        np.testing.assert_allclose(
            _complex(a[key])[0], _complex(b[key])[0], rtol=0, atol=ORACLE_TOL
        )
        assert np.all(np.abs(_complex(a[key])[1:]) < MULTIPLIER_TOL)
    np.testing.assert_allclose(a["state"], b["state"], rtol=0, atol=ORACLE_TOL)
    assert abs(a["period"] - b["period"]) < ORACLE_TOL
    # R Phi E in minimal order equals the minimal form's monodromy.
    for key in ("monodromy_ad", "monodromy_saltation", "reduced_jacobian"):
        np.testing.assert_allclose(a[key], b[key], rtol=0, atol=MULTIPLIER_TOL)
    for name in FIGURES:
        assert (constrained["dir"] / "figures" / name).is_file()


# ---------------------------------------------------------------------------
# orbit_figure, on arrays from the closed-form reference
# ---------------------------------------------------------------------------


def _reference_trajectory(x_liftoff, p, n=120):
    """One cycle from a lift-off-like state in flight, as a `Trajectory` of
    reference arrays (flight phase, then ground phase)."""
    hop = one_hop(x_liftoff, p)
    t_f, t_g = hop["t_flight"], hop["t_ground"]
    tau_f, tau_g = np.linspace(0, t_f, n), np.linspace(0, t_g, n)
    x_flight = flight_state(x_liftoff, tau_f, p)
    x_ground = ground_state(hop["x_touchdown_post"], tau_g, p)
    return hybrax.plot.Trajectory(
        t_phase=np.stack([tau_f, t_f + tau_g]),
        x_phase=np.stack([x_flight, x_ground]),
        phase_modes=("flight", "ground"),
        t_events=np.array([t_f, t_f + t_g]),
        event_kinds=("touchdown", "liftoff"),
        x_before=np.stack([hop["x_touchdown_pre"], hop["x_liftoff"]]),
        x_after=np.stack([hop["x_touchdown_post"], hop["x_liftoff"]]),
        T_c=np.array([hop["T_c"], np.nan]),
        T_a=np.array([hop["T_a"], np.nan]),
    )


def test_orbit_figure_content(reference):
    p = ReferenceParams()
    params = models.hopper.make_params()
    x_star = reference["state"]
    orbit = _reference_trajectory(x_star, p)
    perturbed = [
        _reference_trajectory(x_star + np.array([0.01, 0, 0, 0]), p),
        _reference_trajectory(x_star + np.array([0, 0, 0.1, 0]), p),
    ]
    fig = hybrax.models.hopper_figures.orbit_figure(
        orbit, params, perturbed=perturbed, labels=["z_U + 0.01", "v_U + 0.1"]
    )
    ax3, ax2 = fig.axes
    assert ax3.name == "3d"
    assert "z_U" in ax3.get_xlabel() and r"\dot z_U" in ax3.get_ylabel()
    assert "z_L" in ax3.get_zlabel()
    assert "z_U" in ax2.get_xlabel() and "[m/s]" in ax2.get_ylabel()
    # The touchdown floor z_L = 0 is drawn as a surface.
    assert len(ax3.collections) >= 1

    lines = {line.get_label(): line for line in ax2.get_lines()}
    for label in ("periodic orbit", "z_U + 0.01", "v_U + 0.1"):
        assert label in lines
    assert {"touchdown point", "lift-off point", "perturbed start"} <= set(lines)
    # The orbit's curve is its samples in the (z_U, v_U) projection.
    samples = orbit.x_phase.reshape(-1, 4)
    np.testing.assert_allclose(lines["periodic orbit"].get_xdata(), samples[:, 0])
    np.testing.assert_allclose(lines["periodic orbit"].get_ydata(), samples[:, 2])
    # ... and, in 3-D, (z_U, v_U, z_L) with z_L >= 0 and the reference apex.
    (curve3,) = [
        ln
        for ln in ax3.get_lines()
        if len(ln.get_data_3d()[0]) == samples.shape[0]
        and to_rgba(ln.get_color()) == to_rgba("k")
    ]
    z_U, v_U, z_L = curve3.get_data_3d()
    np.testing.assert_allclose(z_L, samples[:, 1])
    assert np.min(z_L) >= -1e-12
    assert np.max(z_L) == pytest.approx(reference["apex_lower"], abs=1e-4)
    # The lift-off surface lambda_g = 0: z_U = L0 + (m_L g - d_G v_U) / k.
    (surface,) = [ln for ln in ax2.get_lines() if "lambda_g" in ln.get_label()]
    z, v = surface.get_data()
    assert len(z) > 1
    np.testing.assert_allclose(z, p.L0 + (p.m_L * p.g - p.d_G * v) / p.k)
    # One touchdown and one lift-off dot per curve and view, at the event states.
    for ax in (ax2, ax3):
        dots = [
            ln
            for ln in ax.get_lines()
            if ln.get_marker() in ("v", "^") and len(ln.get_xdata()) > 0
        ]
        assert len(dots) == 2 * 3
    touchdowns = [
        ln for ln in ax2.get_lines() if ln.get_marker() == "v" and ln.get_xdata().size
    ]
    expected = sorted(tuple(t.x_before[0, [0, 2]]) for t in [orbit, *perturbed])
    got = sorted((ln.get_xdata()[0], ln.get_ydata()[0]) for ln in touchdowns)
    np.testing.assert_allclose(got, expected)

    with pytest.raises(ValueError, match="labels"):
        hybrax.models.hopper_figures.orbit_figure(
            orbit, params, perturbed=perturbed, labels=["a"]
        )


def test_a_tuned_optimum_is_found_from_the_models_guess(tmp_path):
    """`hybrax tune hopper --vary d_G,k --target apex_upper=1.15 --minimize
    multiplier` ends at this stable orbit; plain Newton from the model's guess
    overshot there (the return map is nearly tangent to the diagonal: its second
    iterate left the flight mode) and reported no orbit. The safeguarded Newton
    finds it from the same guess: one of the SciPy reference's fixed points (a
    scan of the 1-D return map refined by Brent's method), the stable one."""
    d_G, k = -62.46692407074424, 10536.030187011824
    code, stdout, stderr = _run(
        ["orbit", "hopper", "--set", f"d_G={d_G!r}", "--set", f"k={k!r}"]
        + ["--out", str(tmp_path / "figures"), "--json", str(tmp_path / "o.json")]
    )
    assert code == 0, stderr
    data = json.loads((tmp_path / "o.json").read_text())
    assert data["converged"] is True and data["stable"] is True
    reference = periodic_orbit(ReferenceParams(d_G=d_G, k=k), v_guess=2.0)
    speeds = np.array([v for v, _ in reference["fixed_points"]])
    nearest = int(np.argmin(np.abs(speeds - data["state"][2])))
    v_star, multiplier = reference["fixed_points"][nearest]
    assert abs(data["state"][2] - v_star) < ORACLE_TOL
    assert abs(multiplier) < 1
    assert abs(data["multipliers_ad"][0][0] - multiplier) < MULTIPLIER_TOL


@pytest.mark.slow
def test_the_orbit_is_followed_from_the_defaults_where_the_guess_fails(tmp_path):
    """At mu = 0.709898, D_G = -0.032999 shooting from the model's guess stalls
    (`--no-homotopy` reports no orbit); by default the command follows the orbit
    from the model's defaults along the straight path in (mu, d_G), through two
    folds, to one of the SciPy reference's fixed points. At D_G > 0 no orbit
    exists (the ground damper pumps in no energy: the family ends at D_G = 0,
    `tests/test_homotopy.py`), and the command says that first, without
    following the family."""
    sets = ["--set", "mu=0.709898", "--set", "D_G=-0.032999"]
    json_path = tmp_path / "o.json"
    outputs = ["--out", str(tmp_path / "figures"), "--json", str(json_path)]
    code, _, stderr = _run(["orbit", "hopper", *sets, "--no-homotopy", *outputs])
    assert code == 1 and "no periodic orbit found" in stderr
    assert json.loads(json_path.read_text())["homotopy"] is None
    code, stdout, stderr = _run(["orbit", "hopper", *sets, *outputs])
    assert code == 0, stderr
    data = json.loads(json_path.read_text())
    assert data["converged"] is True
    assert data["homotopy"]["reached"] is True
    assert "followed from the model's defaults" in stdout
    p = ReferenceParams(mu=0.709898, d_G=data["params"]["d_G"])
    speeds = [v for v, _ in periodic_orbit(p, v_bounds=(0.02, 4.0))["fixed_points"]]
    assert np.min(np.abs(np.array(speeds) - data["state"][2])) < ORACLE_TOL

    code, _, stderr = _run(["orbit", "hopper", "--set", "D_G=0.01", *outputs])
    assert code == 1
    lines = stderr.strip().splitlines()
    assert lines[-3].startswith("note: with d_G = ") and ">= 0" in lines[-3]
    assert lines[-2].startswith("no periodic orbit found")
    # The failed run makes no figures: those of the run before it, in the same
    # folder, are removed (said on the last line), so none passes for its own.
    assert lines[-1].startswith("removed from ") and "orbit.png" in lines[-1]
    assert [p.name for p in (tmp_path / "figures").iterdir()] == [
        "hybrax-manifest.json"
    ]
    assert "following the orbit from the model's defaults" not in stderr
    assert json.loads(json_path.read_text())["homotopy"] is None


# Slow: the wheel's simulation and gait sensitivity compile to their end (15 s
# cold).
@pytest.mark.slow
@pytest.mark.parametrize("search", ["fails", "raises"])
def test_a_compilation_that_outlives_the_orbit_command_reports_nothing(
    search, tmp_path, monkeypatch, capsys
):
    """The command compiles the simulation and the gait sensitivity in threads
    of their own while it seeks the orbit. Where the search ends at once (no
    orbit, or an error), they go on after the command returns, and report
    nothing into whatever the caller runs next (a test of the fast set once
    failed on a stray "compiled" line on its stderr)."""
    import concurrent.futures
    import threading

    import jax.numpy as jnp

    from hybrax._cli import orbit as orbit_command

    def search_orbit(args, problem):
        if search == "raises":
            raise RuntimeError("the search broke")
        failed = hybrax.find_periodic_orbit(
            problem.system,
            problem.section,
            jnp.asarray([1.5]),
            problem.params,
            settings=hybrax.Settings(max_steps=1),
        )
        return failed, None, None

    started = []
    prepare = orbit_command._prepare_periods

    def prepare_periods(*args):
        started.append(prepare(*args))
        return started[-1]

    monkeypatch.setattr(orbit_command, "_search_orbit", search_orbit)
    monkeypatch.setattr(orbit_command, "_prepare_periods", prepare_periods)
    argv = ["orbit", "rimless-wheel", "--out", str(tmp_path)]
    if search == "raises":
        with pytest.raises(RuntimeError, match="the search broke"):
            main(argv)
    else:
        assert main(argv) == 1
    capsys.readouterr()
    concurrent.futures.wait(started)
    for thread in threading.enumerate():
        if thread.name.startswith("hybrax: "):
            thread.join()
    assert capsys.readouterr().err == ""
