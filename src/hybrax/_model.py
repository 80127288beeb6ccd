r"""A model declares itself: one bundle per model of the zoo, read by the command line
and by any code that serves several models.

A [`hybrax.ModelBundle`][] gathers what a model provides beyond its equations: its
systems per formulation with their Poincaré sections, how to build and check its
parameters (with derived ones such as the hopper's $D_G$), its state names, an
orbit guess, its orbit quantities; and, in its [`hybrax.ModelPresentation`][], how
the commands show it (labels, units, figures, defaults, model-specific summaries).
A model of your own reaches the command line through one entry point of its
package in the `hybrax.models` group (how-to "Add a model to the command line"),
with no change to hybrax.
"""

from collections.abc import Callable, Mapping
from typing import Any

import equinox as eqx

from ._units import Units, plain_text


class ModelForm(eqx.Module):
    """One formulation of a model (e.g. minimal or constrained coordinates).

    - `system`: a factory of its [`hybrax.HybridSystem`][].
    - `section`: a factory of its [`hybrax.PoincareSection`][] (`None`: the model
      has no periodic orbit to look for).
    - `from_minimal`, `to_minimal`: maps between its state and the model's
      minimal coordinates, in which states are read and printed (`None` for the
      minimal form itself).
    """

    system: Callable[[], Any]
    section: Callable[[], Any] | None = None
    from_minimal: Callable[[Any], Any] | None = None
    to_minimal: Callable[[Any], Any] | None = None

    def minimal_monodromy(self, monodromy, n_minimal: int):
        r"""A monodromy matrix $\Phi$ of this form in the model's minimal
        coordinates: $R\,\Phi\,E$ with $R = \partial(\text{to\_minimal})/
        \partial x$ and $E = \partial(\text{from\_minimal})/\partial x_{min}$
        (the maps between the forms are linear, so both are constant; identities
        for the minimal form). NumPy in, NumPy out, `(n_minimal, n_minimal)`."""
        import numpy as np

        monodromy = np.asarray(monodromy, dtype=float)
        if self.to_minimal is None or self.from_minimal is None:
            return monodromy
        import jax
        import jax.numpy as jnp

        n_states = monodromy.shape[-1]
        R = np.asarray(jax.jacfwd(self.to_minimal)(jnp.zeros(n_states)))
        E = np.asarray(jax.jacfwd(self.from_minimal)(jnp.zeros(n_minimal)))
        return R @ monodromy @ E


class ContinuationDefaults(eqx.Module):
    """A model's defaults for `hybrax continue`: the parameter's name, where a
    branch starts and towards where it goes, the arclength scale of the parameter,
    and the longest period followed."""

    parameter: str
    start: float
    stop: float
    parameter_scale: float = 1.0
    max_period: float = 1.5


class TuneDefaults(eqx.Module):
    """A model's defaults for `hybrax tune` without `--vary` (its headline
    tuning problem).

    - `vary`: the parameters tuned; `scale`: a typical size of each (one number
      for all, or one each).
    - `targets`: quantity name -> value; `tolerance`: of every target.
    - `minimize`: the quantity minimised (or `None`); `max_multiplier`: the bound
      on every nontrivial |multiplier| (or `None`).
    - `start`: parameter values the tuning starts from (before `--params` and
      `--set`), e.g. a controller under which the walker falls.
    - `seek_steps`: the existence stage's most steps (see [`hybrax.tune`][]).
    - `verify_steps`: steps of the forward simulation that checks the result
      (0: none).
    - `max_steps`: the most evaluations.
    """

    vary: tuple[str, ...]
    targets: Mapping[str, float]
    minimize: str | None = None
    max_multiplier: float | None = None
    tolerance: float = 1e-3
    scale: float | tuple[float, ...] | None = None
    start: Mapping[str, float] = eqx.field(default_factory=dict)
    seek_steps: int = 0
    verify_steps: int = 0
    max_steps: int = 200


class FigureSpec(eqx.Module):
    """What the generic figures of a model's simulations and orbits need.

    - `labels`: a label per minimal coordinate (TeX allowed).
    - `energy`: `(x, params) -> (kinetic, potential)` of minimal states (batched on
      leading axes), for `energy.png`.
    - `portrait`: the state indices `(i, j)` of the phase portraits.
    - `surfaces`: `params -> [(axis, value, label), ...]`, lines drawn on the
      portraits (e.g. the heel-strike angle), or `None`.
    - `units`: the [`hybrax.plot.Units`][] of time, length and energy on the
      figures' axes (default SI; a dimensionless model gives its own).
    """

    labels: tuple[str, ...] = eqx.field(static=True)
    energy: Callable[[Any, Any], Any] = eqx.field(static=True)
    portrait: tuple[int, int] = eqx.field(static=True, default=(0, 1))
    surfaces: Callable[[Any], Any] | None = eqx.field(static=True, default=None)
    units: Units = eqx.field(static=True, default_factory=Units)


class Quantity(eqx.Module):
    r"""A scalar of a periodic orbit that a model declares, $q(\text{orbit},
    \text{params})$, with its unit and meaning: what `hybrax tune` brings to a
    target or minimises, what `hybrax sweep --quantity` maps, and what
    `hybrax orbit` prints and writes to its JSON (under the quantity's name).

    - `function`: `(orbit, params) -> scalar`, a [`hybrax.PeriodicOrbit`][] and
      the model's parameters; differentiable where it is a number (it reads the
      orbit's arrays: `orbit.period`, `orbit.u`, `orbit.T_c`, the cycle's event
      and phase observables by name).
    - `unit`: the unit of its value as the summary prints it (`"s"`, `"m"`,
      `"J"`; `"1"` for a dimensionless one, the default); `None` declares a
      condition (a yes/no answer, such as "the ground pulls after touchdown"),
      which the summary writes as `true`/`false` and which `tune` does not take.
    - `meaning`: a few plain words for the summary and the figures' axes (the
      name where it is empty); `symbol`: its symbol on the figures' axes (TeX,
      e.g. `r"$t_F$"`; optional).

    A plain callable in a [`hybrax.ModelBundle`][]'s `quantities` reads as a
    dimensionless `Quantity` without a meaning.
    """

    function: Callable[[Any, Any], Any] = eqx.field(static=True)
    unit: str | None = eqx.field(static=True, default="1")
    meaning: str = eqx.field(static=True, default="")
    symbol: str | None = eqx.field(static=True, default=None)

    def __check_init__(self):
        if not callable(self.function):
            raise ValueError(
                f"`function` must be callable (orbit, params); got {self.function!r}."
            )
        if self.unit is not None and not isinstance(self.unit, str):
            raise ValueError(f"`unit` must be a string or None; got {self.unit!r}.")
        if not isinstance(self.meaning, str):
            raise ValueError(f"`meaning` must be a string; got {self.meaning!r}.")
        if self.symbol is not None and not isinstance(self.symbol, str):
            raise ValueError(f"`symbol` must be a string or None; got {self.symbol!r}.")

    @property
    def is_condition(self) -> bool:
        """Whether the quantity is a yes/no condition (`unit=None`)."""
        return self.unit is None

    def __call__(self, orbit, params):
        r"""The quantity's value, $q(\text{orbit}, \text{params})$.

        **Arguments:**

        - `orbit`: a [`hybrax.PeriodicOrbit`][] (or a batch of them, under
          `jax.vmap`).
        - `params`: the model's parameter PyTree.

        **Returns:** `function(orbit, params)`, a scalar (a boolean for a
        condition).
        """
        return self.function(orbit, params)

    def label(self, name: str) -> str:
        """An axis label: the meaning (else `name`) and symbol with the unit,
        e.g. `"flight time $t_F$ [s]"`, `"speed (dimensionless)"`."""
        text = self.meaning or name
        if self.symbol:
            text = f"{text} {self.symbol}"
        return f"{text} (yes/no)" if self.unit is None else with_unit(text, self.unit)


def with_unit(text: str, unit: str) -> str:
    """An axis label: `text [unit]`, `text (dimensionless)` for unit `"1"`, the
    text alone without a unit (`""`, or `"derived"` in a parameter table)."""
    if unit == "1":
        return f"{text} (dimensionless)"
    return f"{text} [{unit}]" if unit not in ("", "derived") else text


def as_quantity(declared) -> Quantity:
    """A declared quantity as a [`hybrax.Quantity`][] (a plain callable reads as a
    dimensionless one)."""
    return declared if isinstance(declared, Quantity) else Quantity(declared)


def _cycle_with_observables(orbit, solution):
    """`orbit` with its cycle's phase observables taken from `solution`, a
    simulation from the orbit's state (its first phases are the cycle's), where
    the orbit was found without them (`phase_observables=False`)."""
    if orbit.cycle.phase_observables or solution is None:
        return orbit
    n_phases = len(orbit.phase_durations)
    observed = {
        name: values[:n_phases] for name, values in solution.phase_observables.items()
    }
    if not observed:
        return orbit
    return eqx.tree_at(
        lambda o: o.cycle.phase_observables,
        orbit,
        replace=observed,
        is_leaf=lambda node: isinstance(node, dict) and not node,
    )


_DEFAULT_SWEEP_FLAG = (
    "starts_past_guard",
    "orbit(s) whose second phase starts past its guard (flagged)",
    "phase starts past its guard",
)


class ModelPresentation(eqx.Module):
    r"""How the commands present a model: labels, units and figures, the commands'
    defaults, and model-specific summaries. Nothing here changes a number the
    library computes; the mathematics is in [`hybrax.ModelBundle`][].

    Every field has a default (a generic output, or none); a misspelt name is a
    `TypeError` where the presentation is built.

    **Labels, figures and defaults:**

    - `labels`: parameter or state name $\to$ a figure label (TeX allowed).
    - `figures`: a [`hybrax.FigureSpec`][]: `simulate` then writes
      `time_series.png`, `phase_portrait.png` and `energy.png`, and `orbit` adds
      `orbit.png` (one period and the `orbit_perturbations`), unless
      `simulate_figures` / `orbit_figures` replace them.
    - `simulate_cycles`: the default `--cycles` of `hybrax simulate` (5; fewer for
      a model whose default run ends, such as a jumper that lands and stands).
    - `continuation`: a [`hybrax.ContinuationDefaults`][], what `hybrax continue
      MODEL` follows without `--param` (without it, `--param`, `--start` and
      `--stop` are required, and the period has no bound).
    - `tune`: a [`hybrax.TuneDefaults`][], what `hybrax tune MODEL` does without
      `--vary`.
    - `sweep_grids`: the default grids of `hybrax sweep` (`"NAME=START:STOP:N"`).
    - `basin_grids`: the default grids of `hybrax basin`, over the section's
      unknowns (`"NAME=START:STOP:N"`, names from the bundle's `unknown_names`;
      default: the first two unknowns from half to 1.5 times the orbit's values,
      41 each).
    - `orbit_perturbations`: `((state index, size, label), ...)`, the disturbed
      starts drawn beside an orbit (`orbit.png`).
    - `sweep_flag`: `(column, message, legend)`, the sweep's column of flagged
      orbits (default: orbits whose second phase starts past its guard).

    **Model-specific outputs** (`None`: the generic one, or none):

    - `simulate_figures(trajectory, params, out) -> [paths]`, `orbit_figures(cycle,
      perturbed, perturbed_labels, trajectory, params, out) -> [paths]`: the
      model's own figures instead of those of `figures`.
    - `no_orbit_hint(params) -> str | None`: why no orbit exists at `params`, where
      the model knows (the command then does not look further).
    - `explain(status, mode, transition, params) -> str | None`: what a failed
      simulation's status means for this model.
    - `describe_boundary(kind, mode, value, params) -> str | None`: a declared
      boundary that a run breaks, in the model's words, for `hybrax simulate`'s
      admissibility: `kind` is `"force_reversal"` (the phase in `mode` starts
      past its guard, whose signed value is `value`), `"release_reversal"` (the
      release velocity `value` of an impact into `mode`) or `"clearance"` (the
      clearance `value` of a phase in `mode`), e.g. `"the ground pulls, force
      -240.1 N"` (default, or `None`: the generic words with the value).
    - `continuation_limits(branch, summary, params, parameter) -> {name:
      value}`: limits located on the branch; `continuation_figures(branch,
      summary, params, parameter, out) -> [paths]`: the branch's figures
      instead of the generic ones. `summary` holds the branch's columns by
      name: `period`, `multiplier` (the leading one: its real value where it
      is real, else its modulus) and each declared quantity at every point
      ([`hybrax.branch_quantities`][]).
    - `stick_figure(x, params) -> [polyline (k, 2), ...]`: the body drawn in the
      model's frame; for a model whose frame moves with its stance foot,
      `frame_shift(x_before, params) -> (dx, dy)`, the new frame's origin at an
      event: `simulate` and `orbit` then write `stick_figure.png` and
      `animation.gif` (see [`hybrax.plot.stick_frames`][]).
    - `stick_names`: the legend's names of the stick figure's polylines after
      the ground (`stick_names[0]` names polyline 1; `None`: not in the legend),
      e.g. `("leg 1", "leg 2")`.
    - `stick_swaps`: pairs `(i, j)` of the stick figure's polylines that trade
      roles at every event, as a walker's stance and swing legs at heel strike:
      the pictures draw them exchanged after every other event, so each
      physical leg keeps one colour (and its name).
    - `animation_note`: a simplification of the model that the animation shows,
      written at the foot of each frame, e.g. that the swing foot passes
      through the slope where the model ignores foot scuffing (`None`: no note).
    """

    labels: Mapping[str, str] = eqx.field(static=True, default_factory=dict)
    figures: FigureSpec | None = eqx.field(static=True, default=None)
    simulate_cycles: int = eqx.field(static=True, default=5)
    continuation: ContinuationDefaults | None = eqx.field(static=True, default=None)
    tune: TuneDefaults | None = eqx.field(static=True, default=None)
    sweep_grids: tuple[str, ...] | None = eqx.field(static=True, default=None)
    basin_grids: tuple[str, ...] | None = eqx.field(static=True, default=None)
    orbit_perturbations: tuple[tuple[int, float, str], ...] = eqx.field(
        static=True, default=()
    )
    sweep_flag: tuple[str, str, str] = eqx.field(
        static=True, default=_DEFAULT_SWEEP_FLAG
    )
    simulate_figures: Callable[..., list] | None = eqx.field(static=True, default=None)
    orbit_figures: Callable[..., list] | None = eqx.field(static=True, default=None)
    no_orbit_hint: Callable[[Any], str | None] | None = eqx.field(
        static=True, default=None
    )
    explain: Callable[..., str | None] | None = eqx.field(static=True, default=None)
    describe_boundary: Callable[..., str | None] | None = eqx.field(
        static=True, default=None
    )
    continuation_limits: Callable[..., Mapping] | None = eqx.field(
        static=True, default=None
    )
    continuation_figures: Callable[..., list] | None = eqx.field(
        static=True, default=None
    )
    stick_figure: Callable[[Any, Any], list] | None = eqx.field(
        static=True, default=None
    )
    frame_shift: Callable[[Any, Any], Any] | None = eqx.field(static=True, default=None)
    stick_names: tuple[str | None, ...] = eqx.field(static=True, default=())
    stick_swaps: tuple[tuple[int, int], ...] = eqx.field(static=True, default=())
    animation_note: str | None = eqx.field(static=True, default=None)

    def __check_init__(self):
        if self.simulate_cycles < 1:
            raise ValueError(
                f"`simulate_cycles` must be at least 1; got {self.simulate_cycles}."
            )
        if len(self.sweep_flag) != 3:
            raise ValueError(
                "`sweep_flag` must be (column, message, legend); got "
                f"{self.sweep_flag!r}."
            )
        if self.frame_shift is not None and self.stick_figure is None:
            raise ValueError("`frame_shift` needs a `stick_figure` to move.")

    @property
    def units(self) -> Units:
        """The units on the model's figures (its `figures.units`; SI without
        `figures`)."""
        return self.figures.units if self.figures is not None else Units()


class ModelBundle(eqx.Module):
    r"""A model as the commands and generic tools read it: its mathematics, and
    (in `presentation`) how its results are shown.

    **Required:**

    - `name`: the registry name (`hybrax orbit NAME`); `description`: one line,
      with its reference.
    - `parameters`: parameter name $\to$ "unit, meaning", including derived ones
      (those that `make_params` accepts besides the fields of the parameter PyTree).
    - `make_params`: `(**values) -> params`, eager checks (`ValueError` naming the
      parameter); the defaults when called without arguments.
    - `parameter`: `name -> hybrax.AbstractParameter`, the scalar that `continue`,
      `sweep` and `tune` vary; it reads and sets derived parameters too and works
      on traced values.
    - `state_names`: names of the minimal coordinates; `default_state`:
      `params -> minimal initial state` for `simulate`.
    - `forms`: formulation name $\to$ [`hybrax.ModelForm`][]; the first is the
      default.

    **Optional** (`None` when the model has no such thing):

    - `orbit_guess`: `params -> u`, the default guess of the section's reduced
      unknowns (the same for every form); `branch_guesses`: `params -> [u, ...]`,
      guesses tried in order where a branch starts (default: `[orbit_guess]`);
      `scan_guess`: `params -> u`, a jittable guess that scans the parameters for
      an orbit (`hybrax sweep --guess scan`; default form only).
    - `unknown_names`: names of the section's reduced unknowns $u$ (the grid
      axes of `hybrax basin`; default `u0`, `u1`, ...).
    - `quantities`: name $\to$ [`hybrax.Quantity`][] (or a plain
      `q(orbit, params)`, dimensionless): the orbit's scalars with their units,
      which `hybrax orbit` prints and writes, `tune` targets and `sweep` maps.
    - `disturbances`: name $\to$ [`hybrax.Disturbance`][], the disturbances a
      step may meet (a walker's slope and height of the next step), and
      `gait_indicators`: the names of the `quantities` that measure a step
      (step time, step length): `hybrax orbit` reports the gait sensitivity norm of each
      disturbance on these indicators ([`hybrax.gait_sensitivity`][]).
    - `presentation`: a [`hybrax.ModelPresentation`][]: labels, units, figures,
      the commands' defaults and model-specific summaries (default: generic
      outputs only).
    """

    name: str = eqx.field(static=True)
    description: str = eqx.field(static=True)
    parameters: Mapping[str, str] = eqx.field(static=True)
    make_params: Callable[..., Any] = eqx.field(static=True)
    parameter: Callable[[str], Any] = eqx.field(static=True)
    state_names: tuple[str, ...] = eqx.field(static=True)
    default_state: Callable[[Any], Any] = eqx.field(static=True)
    forms: Mapping[str, ModelForm] = eqx.field(static=True)
    orbit_guess: Callable[[Any], Any] | None = eqx.field(static=True, default=None)
    branch_guesses: Callable[[Any], list[Any]] | None = eqx.field(
        static=True, default=None
    )
    scan_guess: Callable[[Any], Any] | None = eqx.field(static=True, default=None)
    unknown_names: tuple[str, ...] | None = eqx.field(static=True, default=None)
    quantities: Mapping[str, Quantity | Callable[[Any, Any], Any]] | None = eqx.field(
        static=True, default=None
    )
    presentation: ModelPresentation = eqx.field(
        static=True, default_factory=ModelPresentation
    )
    # (After `presentation`: a bundle built with positional fields keeps them.)
    disturbances: Mapping[str, Any] | None = eqx.field(static=True, default=None)
    gait_indicators: tuple[str, ...] = eqx.field(
        static=True, default=(), converter=tuple
    )

    def __check_init__(self):
        if not self.forms:
            raise ValueError("`forms` must name at least one formulation.")
        if not self.state_names:
            raise ValueError("`state_names` must not be empty.")
        self._check_robustness()
        if not isinstance(self.presentation, ModelPresentation):
            raise ValueError(
                "`presentation` must be a hybrax.ModelPresentation; got "
                f"{type(self.presentation).__name__}."
            )

    def _check_robustness(self) -> None:
        unknown = [n for n in self.gait_indicators if n not in (self.quantities or {})]
        if unknown:
            raise ValueError(
                f"`gait_indicators` names {unknown}, which `quantities` does not "
                "declare."
            )
        if not self.disturbances:
            return
        if not self.gait_indicators:
            raise ValueError(
                "`gait_indicators` must name the quantities that measure a step "
                "where `disturbances` are declared."
            )
        # (Imported here: the registry reads bundles at the command line's start,
        # and most models declare no disturbance.)
        from ._robustness import Disturbance

        for name, disturbance in self.disturbances.items():
            if not isinstance(disturbance, Disturbance):
                raise ValueError(
                    f"`disturbances[{name!r}]` must be a hybrax.Disturbance; got "
                    f"{type(disturbance).__name__}."
                )

    @property
    def default_form(self) -> str:
        """The first formulation's name."""
        return next(iter(self.forms))

    @property
    def has_orbits(self) -> bool:
        """Whether the model declares a Poincaré section and an orbit guess."""
        return self.orbit_guess is not None and any(
            form.section is not None for form in self.forms.values()
        )

    def section_unknowns(self, k: int) -> tuple[str, ...]:
        """The names of the `k` reduced unknowns of the model's sections
        (`unknown_names`, else `u0`, `u1`, ...)."""
        if self.unknown_names is not None:
            if len(self.unknown_names) != k:
                raise ValueError(
                    f"`unknown_names` names {len(self.unknown_names)} unknowns; the "
                    f"section has {k}."
                )
            return tuple(self.unknown_names)
        return tuple(f"u{i}" for i in range(k))

    def start_guesses(self, params) -> list:
        """The guesses tried in order where a branch starts."""
        if self.branch_guesses is not None:
            return list(self.branch_guesses(params))
        return [self.orbit_guess(params)]

    def simulate_figures(self, trajectory, params, out, *, portrait=True) -> list:
        """Write the figures of a simulation (the presentation's
        `simulate_figures`, else the generic figures of its `figures`, without
        `phase_portrait.png` when `portrait` is false); returns the paths."""
        shown = self.presentation
        if shown.simulate_figures is not None:
            return shown.simulate_figures(trajectory, params, out)
        if shown.figures is None:
            return []
        from . import plot

        spec = shown.figures
        figures = plot.simulation_figures(
            trajectory,
            spec.labels,
            lambda x: spec.energy(x, params),
            portrait=spec.portrait,
            surfaces=() if spec.surfaces is None else spec.surfaces(params),
            units=spec.units,
            title=self.name,
        )
        if not portrait:
            del figures["phase_portrait.png"]
        return plot.save_figures(figures, out)

    def orbit_figures(
        self, cycle, perturbed, perturbed_labels, trajectory, params, out
    ) -> list:
        """Write the figures of an orbit: `orbit.png` (one period `cycle` and
        `perturbed` starts), then those of a simulation over several periods
        (`trajectory`) but its phase portrait, which `orbit.png` already shows in
        the same plane; the presentation's `orbit_figures` if it has one. Returns
        the paths."""
        shown = self.presentation
        if shown.orbit_figures is not None:
            return shown.orbit_figures(
                cycle, perturbed, perturbed_labels, trajectory, params, out
            )
        if shown.figures is None:
            return []
        from . import plot

        spec = shown.figures
        orbit = plot.orbit_portrait(
            cycle,
            *spec.portrait,
            spec.labels,
            perturbed=perturbed,
            perturbed_labels=perturbed_labels,
            surfaces=() if spec.surfaces is None else spec.surfaces(params),
        )
        orbit.suptitle(f"{self.name}: one period and perturbed starts")
        paths = plot.save_figures({"orbit.png": orbit}, out)
        return paths + self.simulate_figures(trajectory, params, out, portrait=False)

    def quantity(self, name: str) -> Quantity:
        """The declared quantity `name` as a [`hybrax.Quantity`][] (`KeyError`
        where the model declares none of that name)."""
        return as_quantity((self.quantities or {})[name])

    def orbit_summary(self, orbit, params, solution=None):
        """The model's quantities of `orbit`, `({name: value}, lines)`: each
        declared quantity evaluated on the orbit (a float, or a bool for a
        condition), and its line of the console's summary (name, value with its
        unit, meaning). Where the orbit was found without phase observables,
        those of `solution` (a simulation from the orbit's state) stand in for
        its cycle's; a quantity that reads one missing from both is NaN (a
        condition `None`, "unknown")."""
        import jax

        orbit = _cycle_with_observables(orbit, solution)
        names = list(self.quantities or {})
        declared = tuple(self.quantity(name) for name in names)
        evaluated = jax.device_get(_evaluate_quantities(declared, orbit, params))
        values, shown = {}, {}
        for name, quantity, value in zip(names, declared, evaluated, strict=True):
            if quantity.is_condition:
                # Unknown (None) where what it reads is missing: not a "yes".
                values[name] = None if value is None else bool(value)
                shown[name] = {True: "yes", False: "no", None: "unknown"}[values[name]]
            elif value is None:
                values[name] = float("nan")
                shown[name] = "nan"
            else:
                values[name] = float(value)
                unit = "" if quantity.unit == "1" else f" {plain_text(quantity.unit)}"
                shown[name] = f"{values[name]:.10g}{unit}"
        name_width = max(map(len, shown), default=0)
        value_width = max(map(len, shown.values()), default=0)
        lines = [
            f"  {name:<{name_width}}  {shown[name]:<{value_width}}  "
            f"{plain_text(quantity.meaning)}".rstrip()
            for name, quantity in zip(names, declared, strict=True)
        ]
        return values, lines

    def label(self, name: str) -> str:
        """A figure label for a parameter, state or quantity name: the declared
        one, else a quantity's meaning and unit ([`hybrax.Quantity.label`][]),
        else the name with the unit of its `parameters` entry ("unit, meaning"),
        e.g. `"k [N/m]"`, `"mu_U (dimensionless)"` for a dimensionless one (unit
        `"1"`), the name alone for a derived one or a name it does not know."""
        labels = self.presentation.labels
        if name in labels:
            return labels[name]
        if name in (self.quantities or {}):
            return self.quantity(name).label(name)
        return with_unit(name, self.parameters.get(name, "").split(",")[0].strip())


def check_form(form: str, known=("minimal",)) -> str:
    """`form` if it is one of a model's formulations `known`, else a `ValueError`
    naming them (every model's `section(form)` reads its form so)."""
    if form not in known:
        names = " or ".join(repr(name) for name in known)
        raise ValueError(f"`form` must be {names}; got {form!r}.")
    return form


def field_parameters(params_class, model_name: str):
    """`(make_params, parameter)` for a model whose parameters are the fields of
    `params_class` (an `eqx.Module` with defaults and eager checks): unknown names
    are a `ValueError` naming them (`hybrax._params.check_names`), and each field
    is a continuation parameter."""
    from ._continuation_parameter import FieldParameter
    from ._params import check_names, field_names

    names = field_names(params_class)

    def make_params(**values):
        check_names(params_class, values, names, model_name)
        return params_class(**values)

    def parameter(name: str):
        if name not in names:
            raise ValueError(
                f"unknown {model_name} parameter {name!r}; known: {', '.join(names)}"
            )
        return FieldParameter(name, None, name=name)

    return make_params, parameter


def orbit_period(orbit, params):
    """The period of an orbit: an orbit quantity every model has."""
    del params
    return orbit.period


def orbit_spectral_radius(orbit, params):
    """The largest nontrivial |multiplier| of an orbit: an orbit quantity every
    model has."""
    del params
    return orbit.spectral_radius


def orbit_energy_lost(orbit, params):
    """$T_c$ of the cycle's first event: the kinetic energy an impact removes (for
    a walker, per step)."""
    del params
    return orbit.T_c[0]


def orbit_energy_kept(orbit, params):
    """$T_a$ of the cycle's first event: the kinetic energy left after its
    impact."""
    del params
    return orbit.T_a[0]


def impact_quantities(at: str, energy_unit: str = "J") -> dict[str, Quantity]:
    """The energy split of the cycle's first impact as declared quantities:
    `T_c` (the kinetic energy it removes), `T_a` (what it leaves) and
    `Tc_over_T` ($T_c / (T_c + T_a)$), described as at `at` (e.g. "heel
    strike"), energies in `energy_unit`."""
    return {
        "T_c": Quantity(
            orbit_energy_lost, energy_unit, f"kinetic energy lost at {at}", r"$T_c$"
        ),
        "T_a": Quantity(
            orbit_energy_kept, energy_unit, f"kinetic energy kept at {at}", r"$T_a$"
        ),
        "Tc_over_T": Quantity(
            orbit_energy_lost_share,
            "1",
            f"share of kinetic energy lost at {at}",
            r"$T_c / T^-$",
        ),
    }


@eqx.filter_jit
def _evaluate_quantities(quantities, orbit, params):
    """Each of `quantities` on `orbit`, in one compiled program (one small
    compilation, where eager evaluation compiled each operation apart: 0.6 s
    for the hopper's twelve); `None` for one that reads an observable that
    nothing recorded."""
    from ._periodic import quantity_value

    return [quantity_value(quantity, orbit, params) for quantity in quantities]


class _EventObservable(eqx.Module):
    """The cycle's event observable `name` at its first event (a declared
    transition observable, e.g. a release velocity)."""

    name: str = eqx.field(static=True)

    def __call__(self, orbit, params):
        del params
        return orbit.cycle.observables[self.name][0]


class _Positive(eqx.Module):
    """Whether a quantity is positive: a condition."""

    quantity: Callable[[Any, Any], Any] = eqx.field(static=True)

    def __call__(self, orbit, params):
        return self.quantity(orbit, params) > 0


#: The largest nontrivial |multiplier| of an orbit, as a declared quantity.
SPECTRAL_RADIUS = Quantity(
    orbit_spectral_radius, "1", "spectral radius", r"$\max|\nu|$"
)


def release_quantities(
    name: str, meaning: str, leaves: str, leaves_meaning: str, unit: str = "m/s"
) -> dict[str, Quantity]:
    """A released contact's velocity after the cycle's first impact (the event
    observable `name` that the impact's `release` declares, described by
    `meaning`), and the condition `leaves` that it is positive (the contact
    leaves; described by `leaves_meaning`)."""
    velocity = Quantity(_EventObservable(name), unit, meaning)
    return {name: velocity, leaves: Quantity(_Positive(velocity), None, leaves_meaning)}


def orbit_energy_lost_share(orbit, params):
    r"""$T_c / (T_c + T_a)$ of the cycle's first event: the share of the
    pre-impact kinetic energy that the impact removes: the $T_c/T^-$ of
    Font-Llagunes & Kövecses, "Modelling Dynamic Walking Bipeds as Variable Topology
    Mechanical Systems" (poster, McGill University)."""
    del params
    return orbit.T_c[0] / (orbit.T_c[0] + orbit.T_a[0])
