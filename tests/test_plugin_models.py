"""A model of another package on the command line, through the `hybrax.models`
entry-point group: an installed distribution (here a `.dist-info` folder on the
path, as pip leaves one) registers a bouncing ball written with the public API;
`hybrax models` lists it without importing it, `hybrax simulate` runs it (its
impact times against the closed form), and a broken entry is one line and exit 2.
"""

import json
import math
import textwrap

import pytest

import hybrax as hx
from helpers import run_cli as _run
from hybrax import _registry


PLUGIN = """
import dataclasses

import equinox as eqx
import jax.numpy as jnp

import hybrax as hx


class Params(eqx.Module):
    g: float = 9.81
    e: float = 0.8

    def __check_init__(self):
        if not 0 <= self.e <= 1:
            raise ValueError(f"Parameter `e` must be in [0, 1]; got {self.e}.")


def _fall(t, x, p):
    return jnp.stack([x[1], -p.g * jnp.ones_like(x[1])])


def _bounce(t, x, p):
    return x.at[1].multiply(-p.e)


def _system():
    return hx.HybridSystem(
        [hx.Mode(_fall, "air")],
        [hx.Transition("air", "air", lambda t, x, p: x[0], False, _bounce, "impact")],
        n_states=2,
    )


def bundle():
    return hx.ModelBundle(
        name="ball-demo",
        description="a ball dropped from 1 m, restitution e",
        parameters={"g": "m/s^2, gravity", "e": "1, restitution"},
        make_params=lambda **values: Params(**values),
        parameter=hx.FieldParameter,
        state_names=("y", "v"),
        default_state=lambda params: jnp.array([1.0, 0.0]),
        forms={"minimal": hx.ModelForm(_system)},
    )


def misnamed():
    return dataclasses.replace(bundle(), name="other")
"""

ENTRY_POINTS = """
[hybrax.models]
ball-demo = ballpit:bundle
misnamed = ballpit:misnamed
not-a-bundle = ballpit:Params
"""


@pytest.fixture
def installed_plugin(tmp_path, monkeypatch):
    (tmp_path / "ballpit.py").write_text(textwrap.dedent(PLUGIN))
    info = tmp_path / "ballpit-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: ballpit\nVersion: 0.1\n"
    )
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    monkeypatch.syspath_prepend(str(tmp_path))
    _registry.plugin_models.cache_clear()
    yield tmp_path
    _registry.plugin_models.cache_clear()


def test_a_packages_model_runs_through_the_command_line(installed_plugin):
    assert {"ball-demo", "misnamed", "hopper"} <= set(_registry.model_names())
    code, out, err = _run(["models", "ball-demo"])
    assert code == 0, err
    assert "ball-demo" in out and "restitution" in out

    path = installed_plugin / "run.json"
    code, out, err = _run(
        [
            "simulate",
            "ball-demo",
            "--cycles",
            "3",
            "--set",
            "e=0.5",
            "--no-figures",
            "--json",
            str(path),
            "-q",
        ]
    )
    assert code == 0, err
    record = json.loads(path.read_text())
    assert record["model"] == "ball-demo" and record["status"] == "successful"
    # Dropped from 1 m: the first impact at sqrt(2/g), then flights of 2 e^k v1/g.
    g, e = 9.81, 0.5
    v1 = math.sqrt(2 * g)
    expected = [math.sqrt(2 / g)]
    for k in (1, 2):
        expected.append(expected[-1] + 2 * e**k * v1 / g)
    times = [event["t"] for event in record["events"]]
    assert times == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize(
    "name, message",
    [
        ("misnamed", "gives the model named 'other'"),
        ("not-a-bundle", "must give a hybrax.ModelBundle"),
    ],
)
def test_a_broken_entry_point_is_one_line_and_exit_2(installed_plugin, name, message):
    code, out, err = _run(["simulate", name])
    assert code == 2
    lines = err.strip().splitlines()
    assert message in lines[-1] and "ballpit:" in lines[-1]
    assert "Traceback" not in err


def test_a_misspelt_presentation_entry_is_an_error():
    """The presentation's entries are typed fields: a misspelt one is refused where
    it is built (it would otherwise never be called), and a bundle takes only a
    `ModelPresentation` as its presentation."""
    import dataclasses

    from hybrax.models import get_model

    hopper = get_model("hopper")
    shown = hopper.presentation
    assert shown.explain is not None and shown.stick_figure is None
    with pytest.raises(TypeError, match="explian"):
        hx.ModelPresentation(explian=shown.explain)
    with pytest.raises(ValueError, match="`presentation` must be"):
        dataclasses.replace(hopper, presentation={"explain": None})
    with pytest.raises(ValueError, match="`frame_shift` needs a `stick_figure`"):
        hx.ModelPresentation(frame_shift=lambda x, params: (0.0, 0.0))
    # The mathematics and the presentation are apart: the bundle has no labels,
    # figures or command defaults of its own.
    fields = {field.name for field in dataclasses.fields(hopper)}
    assert not fields & {"labels", "figures", "continuation", "tune", "hooks"}


def test_a_quantity_declares_its_unit_and_meaning():
    """`hx.Quantity` carries a model's orbit quantity with its unit and meaning:
    the figures' labels come from it, a plain callable reads as dimensionless,
    and bad declarations are `ValueError`s naming the argument."""
    from hybrax._model import as_quantity
    from hybrax.models import get_model

    def height(orbit, params):
        return orbit * params

    speed = hx.Quantity(height, "m/s", "walking speed", r"$v$")
    assert speed(2.0, 3.0) == 6.0
    assert speed.label("speed") == r"walking speed $v$ [m/s]"
    assert hx.Quantity(height).label("h") == "h (dimensionless)"
    leaves = hx.Quantity(height, None, "the foot leaves")
    assert leaves.is_condition and leaves.label("x") == "the foot leaves (yes/no)"
    plain = as_quantity(height)
    assert plain.unit == "1" and plain.function is height and not plain.is_condition
    for kwargs, named in (
        (dict(function=1.0), "`function`"),
        (dict(function=height, unit=2), "`unit`"),
        (dict(function=height, meaning=None), "`meaning`"),
        (dict(function=height, symbol=1), "`symbol`"),
    ):
        with pytest.raises(ValueError, match=named):
            hx.Quantity(**kwargs)
    # A zoo model's labels of its quantities come from their declarations; a
    # label the presentation declares comes first.
    hopper = get_model("hopper")
    assert hopper.label("t_flight") == r"flight time $t_F$ [s]"
    assert hopper.label("pulling_after_touchdown").endswith("(yes/no)")
    assert hopper.label("z_U") == hopper.presentation.labels["z_U"]
    with pytest.raises(KeyError):
        hopper.quantity("apex")


def test_a_quantity_that_reads_nothing_recorded_is_unknown():
    """A declared quantity that reads a phase observable neither the orbit nor
    a simulation recorded is NaN in the summary, and a condition on it is
    unknown (`None`), never a "yes"; the others are evaluated (the rimless
    wheel's orbit, found without phase observables)."""
    import dataclasses

    import numpy as np

    from hybrax.models import get_model

    def apex(orbit, params):
        return orbit.cycle.phase_observables["apex"][0]

    wheel = get_model("rimless-wheel")
    form = wheel.forms[wheel.default_form]
    params = hx.canonical_params(wheel.make_params())
    orbit = hx.find_periodic_orbit(
        form.system(),
        form.section(),
        wheel.orbit_guess(params),
        params,
        phase_observables=False,
    )
    wheel = dataclasses.replace(
        wheel,
        quantities={
            "apex": hx.Quantity(apex, "m", "apex height"),
            "high": hx.Quantity(lambda o, p: apex(o, p) > 1, None, "the apex is high"),
            "period": hx.Quantity(lambda o, p: o.period, "s", "period"),
        },
    )
    values, lines = wheel.orbit_summary(orbit, params)
    assert np.isnan(values["apex"]) and values["high"] is None
    assert values["period"] == float(orbit.period)
    assert lines[1].split()[:2] == ["high", "unknown"]
