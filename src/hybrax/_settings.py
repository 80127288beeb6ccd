r"""The integration and event settings shared by every routine."""

import functools
import math

import diffrax as dfx
import equinox as eqx
import jax
import numpy as np
import optimistix as optx
from jaxtyping import ArrayLike

from ._choices import ShootingJacobian, as_choice


class Settings(eqx.Module):
    r"""How each phase of a hybrid system is integrated and its events found.

    One object accepted by [`hybrax.simulate`][], [`hybrax.poincare_map`][],
    [`hybrax.find_periodic_orbit`][], [`hybrax.monodromy`][],
    [`hybrax.phase_fundamental_matrix`][], [`hybrax.sweep_orbits`][] and
    [`hybrax.continue_orbits`][], in the manner of diffrax's solver and controller
    objects: every numerical choice lives here, none is silently dropped.

    **Arguments:**

    - `solver`: a diffrax solver; default `diffrax.Tsit5()` (its dense output is as
      accurate as its steps, which event location relies on; Dopri8's is not).
    - `stepsize_controller`: a diffrax step-size controller; default
      `diffrax.PIDController(rtol, atol)`.
    - `rtol`, `atol`: the tolerances of the default controller (default `1e-10`
      each). Giving them together with `stepsize_controller` is an error, since
      they would not be used.
    - `event_root_finder`: the optimistix root finder that locates event times on
      the dense output; default `optimistix.Newton(rtol=1e-12, atol=1e-12)`. Its
      `atol` also bounds $|h|$ at the event: scale guards to $O(1)$.
    - `adjoint`: a diffrax adjoint, or `None` (default) for each routine's own
      choice. [`hybrax.simulate`][] and [`hybrax.poincare_map`][] integrate with
      it: `diffrax.RecursiveCheckpointAdjoint()` by default (reverse mode:
      `jax.grad`); give `diffrax.ForwardMode()` for `jax.jacfwd`/`jax.jvp`
      there. The orbit routines ([`hybrax.find_periodic_orbit`][] and those
      built on it) differentiate in both modes whatever it says (their
      derivative is one linear map with a forward and a transposed rule); a
      `diffrax.RecursiveCheckpointAdjoint(checkpoints=...)` given here serves
      their transpose where it sweeps back (more varied parameter entries than
      the section's coordinates plus one; with fewer it runs forward lanes).
    - `max_steps`: the step limit of one phase; a phase that hits it ends the run
      with status `max_steps_reached`.
    - `t_max`: the time horizon: a simulation, or one cycle of a periodic orbit,
      that has not finished its events by then ends with `event_not_reached`. May be
      a traced value.
    - `guard_tol`: the resolution of guards (in their own units; guards should be
      $O(1)$). A phase may start this far past a guard (rounding after a reset);
      a guard whose excursion at a phase start stays within it makes the mode not
      viable; a crossing whose dip depth $\dot h^2/(2\ddot h)$ is within it is
      grazing (status `grazing_event`).
    - `constraint_tol`: how far a phase's start may violate its mode's
      constraints (`Mode(constraints=...)`) before the status is
      `constraint_violated`.
    - `dip_tol`: find crossings in which a guard dips below zero and comes back
      within one integrator step (which diffrax, testing signs at step ends,
      would miss): each step is checked on the cubic Hermite interpolant of the
      guard and its rate, and a step containing a dip deeper than `dip_tol`
      (default `1e-12`, about the event root finder's resolution) is retried,
      ending on the dip's falling side. A step that ends past a crossing with
      the guard rising again is retried the same way (the event root finder,
      started at the step's end, would leave the step). `None` turns the check
      off. It costs one vector-field evaluation per step.
    - `control_tangents`: where a routine integrates the first variational
      equation beside the state (the saltation route of the monodromy,
      `Shooting(jacobian="variational")`), the step controller also controls its
      error, so that the fundamental matrices are accurate to the tolerances and
      smooth in the unknowns. By default (`False`) it controls the state alone
      and the variational part follows its steps (the AD route follows the same
      steps, so the two monodromies agree closely): with fast decaying modes
      (the five-link biped's joints, -270/s) its $\det(M + I)$ near a period
      doubling jumps by up to 3e-5 where the step sequence changes, and a state
      resting on such a mode can get a fundamental matrix wrong by any amount,
      both routes agreeing. The curves of folds, period doublings and
      Neimark-Sacker points ([`hybrax.continue_orbit_curve`][]) compute their
      test functions with it on. Costs more steps on such models; changing it
      compiles a new program.

    **Compiling.** The numbers here are run-time values of the compiled programs:
    another `rtol`/`atol`, `t_max`, `guard_tol`, `constraint_tol`, `dip_tol` or
    tolerance of the default event root finder runs the program already compiled.
    The solver, the controller's kind, `adjoint`, `max_steps` (the loop's static
    bound) and turning `dip_tol` off change the program and compile a new one.
    """

    solver: dfx.AbstractSolver
    stepsize_controller: dfx.AbstractStepSizeController
    event_root_finder: optx.AbstractRootFinder
    adjoint: dfx.AbstractAdjoint | None
    max_steps: int = eqx.field(static=True)
    t_max: ArrayLike
    guard_tol: ArrayLike
    constraint_tol: ArrayLike
    dip_tol: ArrayLike | None
    control_tangents: bool = eqx.field(static=True)

    def __init__(
        self,
        *,
        solver: dfx.AbstractSolver | None = None,
        stepsize_controller: dfx.AbstractStepSizeController | None = None,
        rtol: float | None = None,
        atol: float | None = None,
        event_root_finder: optx.AbstractRootFinder | None = None,
        adjoint: dfx.AbstractAdjoint | None = None,
        max_steps: int = 4096,
        t_max: ArrayLike = 50.0,
        guard_tol: float = 1e-9,
        constraint_tol: float = 1e-8,
        dip_tol: float | None = 1e-12,
        control_tangents: bool = False,
    ):
        if solver is None:
            solver = dfx.Tsit5()
        if not isinstance(solver, dfx.AbstractSolver):
            raise ValueError(
                f"`solver` must be a diffrax solver; got {type(solver).__name__}."
            )
        if stepsize_controller is None:
            for name, value in (("rtol", rtol), ("atol", atol)):
                if value is not None and not (
                    isinstance(value, int | float) and 0 < value < 1
                ):
                    raise ValueError(f"`{name}` must be in (0, 1); got {value!r}.")
            stepsize_controller = dfx.PIDController(
                rtol=_run_time(1e-10 if rtol is None else rtol),
                atol=_run_time(1e-10 if atol is None else atol),
            )
        elif rtol is not None or atol is not None:
            raise ValueError(
                "Give either `stepsize_controller` or `rtol`/`atol`, not both: the "
                "tolerances belong to the controller (e.g. "
                "`diffrax.PIDController(rtol=..., atol=...)`)."
            )
        if not isinstance(stepsize_controller, dfx.AbstractStepSizeController):
            raise ValueError(
                "`stepsize_controller` must be a diffrax step-size controller; got "
                f"{type(stepsize_controller).__name__}."
            )
        if event_root_finder is None:
            event_root_finder = optx.Newton(
                rtol=_run_time(1e-12), atol=_run_time(1e-12)
            )
        if not isinstance(event_root_finder, optx.AbstractRootFinder):
            raise ValueError(
                "`event_root_finder` must be an optimistix root finder; got "
                f"{type(event_root_finder).__name__}."
            )
        if adjoint is not None and not isinstance(adjoint, dfx.AbstractAdjoint):
            raise ValueError(
                f"`adjoint` must be a diffrax adjoint or None; got "
                f"{type(adjoint).__name__}."
            )
        if isinstance(max_steps, bool) or not isinstance(max_steps, int | np.integer):
            raise ValueError(f"`max_steps` must be an integer; got {max_steps!r}.")
        if int(max_steps) < 1:
            raise ValueError(f"`max_steps` must be positive; got {max_steps}.")
        if not isinstance(t_max, jax.core.Tracer):
            value = np.asarray(t_max, dtype=float)
            if value.ndim != 0 or not math.isfinite(float(value)):
                raise ValueError(f"`t_max` must be a finite number; got {t_max!r}.")
            t_max = value
        for name, value in (
            ("guard_tol", guard_tol),
            ("constraint_tol", constraint_tol),
            ("dip_tol", 0.0 if dip_tol is None else dip_tol),
        ):
            if not (isinstance(value, int | float) and 0 <= value < 1):
                raise ValueError(f"`{name}` must be in [0, 1); got {value!r}.")
        self.solver = solver
        self.stepsize_controller = stepsize_controller
        self.event_root_finder = event_root_finder
        self.adjoint = adjoint
        self.max_steps = int(max_steps)
        self.t_max = t_max
        self.guard_tol = _run_time(guard_tol)
        self.constraint_tol = _run_time(constraint_tol)
        self.dip_tol = None if dip_tol is None else _run_time(dip_tol)
        if not isinstance(control_tangents, bool | np.bool_):
            raise ValueError(
                f"`control_tangents` must be True or False; got {control_tangents!r}."
            )
        self.control_tangents = bool(control_tangents)


def with_controlled_tangents(settings: Settings, tighten: float = 1.0) -> Settings:
    """`settings` with `control_tangents=True` and, for an adaptive controller,
    its `rtol` and `atol` multiplied by `tighten` (the rest unchanged)."""
    controller = settings.stepsize_controller
    if tighten != 1.0 and isinstance(controller, dfx.PIDController):
        controller = eqx.tree_at(
            lambda c: (c.rtol, c.atol),
            controller,
            (
                _run_time(tighten * float(controller.rtol)),
                _run_time(tighten * float(controller.atol)),
            ),
        )
    return Settings(
        solver=settings.solver,
        stepsize_controller=controller,
        event_root_finder=settings.event_root_finder,
        adjoint=settings.adjoint,
        max_steps=settings.max_steps,
        t_max=settings.t_max,
        guard_tol=float(settings.guard_tol),
        constraint_tol=float(settings.constraint_tol),
        dip_tol=None if settings.dip_tol is None else float(settings.dip_tol),
        control_tangents=True,
    )


def _run_time(value) -> np.ndarray:
    """A number as a float64 NumPy scalar array: an input of the compiled program
    rather than a constant of it, so that another value compiles nothing
    (`equinox`'s partition keeps Python floats static)."""
    return np.asarray(value, dtype=np.float64)


#: The adjoint of a simulation whose settings name none (reverse mode), built
#: once: an immutable object without arrays.
DEFAULT_ADJOINT = dfx.RecursiveCheckpointAdjoint()


def simulation_adjoint(settings: "Settings"):
    """`settings.adjoint`, or [`DEFAULT_ADJOINT`][] where it is `None`."""
    return DEFAULT_ADJOINT if settings.adjoint is None else settings.adjoint


@functools.cache
def _defaults(options_class: type):
    """`options_class()`, built once (the options objects are immutable and hold
    no JAX arrays), so that a call with the defaults does not build them again."""
    return options_class()


def resolve_options(value, options_class: type, name: str):
    """`value`, or the defaults of `options_class` where it is `None` (a
    [`hybrax.Settings`][], [`hybrax.Shooting`][] or
    [`hybrax.ContinuationSettings`][]); a `ValueError` naming the argument
    `name` for anything else."""
    if value is None:
        return _defaults(options_class)
    if not isinstance(value, options_class):
        raise ValueError(
            f"`{name}` must be a hybrax.{options_class.__name__}; got "
            f"{type(value).__name__}."
        )
    return value


def resolve_settings(settings: Settings | None) -> Settings:
    """`settings`, or the defaults; a clear error for anything else."""
    return resolve_options(settings, Settings, "settings")


class Shooting(eqx.Module):
    r"""How a periodic orbit is solved for: the root finder of the shooting
    equation $F(u) = \pi(P(\chi(u))) - u = 0$ (Zana et al. 2018 eq. 30) and its
    options, in the manner of optimistix's solver objects.

    One object accepted by [`hybrax.find_periodic_orbit`][],
    [`hybrax.sweep_orbits`][], [`hybrax.tune`][] and the command line (the
    continuation's corrector, Newton on the extended system, is set in
    [`hybrax.ContinuationSettings`][]). How each phase is integrated is
    [`hybrax.Settings`][]'s.

    **Arguments:**

    - `root_finder`: any `optimistix.AbstractRootFinder`, or a least-squares
      solver such as `optimistix.LevenbergMarquardt` (which minimises
      $\frac12|F|^2$); default `optimistix.Newton(rtol=1e-11, atol=1e-11)`,
      safeguarded inside the model's domain (see [`hybrax.find_periodic_orbit`][]).
    - `max_iterations`: the iteration limit (default 40). Every limit up to the
      program's static loop bound (64, or the next power of two above) runs the
      same compiled program.
    - `residual_tol`: the largest $\max|F|$ accepted as an orbit (default `1e-8`;
      some solvers report success off a root).
    - `jacobian`: how Newton differentiates the return map, a
      [`hybrax.ShootingJacobian`][] (or its value). `"variational"` (default): the first
      variational equation integrated with the state and the saltation matrices at the
      events (one augmented solve per iteration, whose last one also holds the orbit's
      analysis). `"autodiff"`: forward-mode AD through diffrax, then a variational pass
      at the solution. The orbit and its derivatives do not depend on this choice.
    - `return_map_iterations`: iterate the return map this many times from the
      guess before the Newton steps (default 0): cheap forward cycles that pull
      the guess towards a stable orbit (an iteration whose cycle fails is not
      taken). They count in the orbit's `n_steps` and apart from
      `max_iterations`; a resumed solve (a [`hybrax.ShootingStart`][] with
      `iterations_used > 0`) takes none. A least-squares solver takes none.
    - `fallback`: a second root finder, e.g. `optimistix.LevenbergMarquardt(rtol,
      atol)`, run from the same guess where the first one did not converge (its
      damped step recovers orbits from guesses where Newton overshoots into a
      region where the cycle fails); default none.

    **Compiling.** `max_iterations` (within its loop bound), `residual_tol`,
    `return_map_iterations` and the default root finder's tolerances are run-time
    values: another one runs the program already compiled. The root finder's
    kind, `jacobian` and `fallback` change the program.
    """

    root_finder: optx.AbstractRootFinder | optx.AbstractLeastSquaresSolver
    max_iterations: int = eqx.field(static=True)
    residual_tol: ArrayLike
    jacobian: ShootingJacobian = eqx.field(static=True)
    return_map_iterations: ArrayLike
    fallback: optx.AbstractRootFinder | optx.AbstractLeastSquaresSolver | None

    def __init__(
        self,
        root_finder: optx.AbstractRootFinder
        | optx.AbstractLeastSquaresSolver
        | None = None,
        *,
        max_iterations: int = 40,
        residual_tol: float = 1e-8,
        jacobian: ShootingJacobian | str = ShootingJacobian.VARIATIONAL,
        return_map_iterations: int = 0,
        fallback: optx.AbstractRootFinder
        | optx.AbstractLeastSquaresSolver
        | None = None,
    ):
        self.root_finder = resolve_root_finder(root_finder)
        self.max_iterations = check_iterations(max_iterations)
        if not isinstance(residual_tol, jax.core.Tracer):
            if isinstance(residual_tol, bool) or not (
                np.ndim(residual_tol) == 0 and float(residual_tol) > 0
            ):
                raise ValueError(
                    f"`residual_tol` must be a positive number; got {residual_tol!r}."
                )
            residual_tol = _run_time(residual_tol)
        self.residual_tol = residual_tol
        self.jacobian = as_choice(ShootingJacobian, jacobian, "jacobian")
        if not isinstance(return_map_iterations, jax.core.Tracer):
            value = np.asarray(return_map_iterations)
            if (
                value.shape != ()
                or isinstance(return_map_iterations, bool)
                or not np.issubdtype(value.dtype, np.integer)
                or value < 0
            ):
                raise ValueError(
                    "`return_map_iterations` must be an integer >= 0; got "
                    f"{return_map_iterations!r}."
                )
            return_map_iterations = value.astype(np.int64)
        self.return_map_iterations = return_map_iterations
        self.fallback = (
            None if fallback is None else resolve_root_finder(fallback, "fallback")
        )

    @property
    def least_squares(self) -> bool:
        """Whether a least-squares solver takes part (`root_finder` or `fallback`)."""
        return any(
            isinstance(solver, optx.AbstractLeastSquaresSolver)
            for solver in (self.root_finder, self.fallback)
        )


def resolve_shooting(shooting: Shooting | None) -> Shooting:
    """`shooting`, or the defaults; a clear error for anything else."""
    return resolve_options(shooting, Shooting, "shooting")


def resolve_root_finder(
    root_finder: optx.AbstractRootFinder | optx.AbstractLeastSquaresSolver | None,
    name: str = "root_finder",
):
    """The root finder of shooting and continuation: `root_finder`, or the default
    `optimistix.Newton(rtol=1e-11, atol=1e-11)`; a clear error for anything else.

    An optimistix least-squares solver (e.g. `optimistix.LevenbergMarquardt`) is
    accepted too: `optimistix.root_find` minimises $\frac12|F|^2$ with it, a damped
    step that recovers roots from guesses where Newton overshoots."""
    if root_finder is None:
        return optx.Newton(rtol=_run_time(1e-11), atol=_run_time(1e-11))
    if not isinstance(
        root_finder, (optx.AbstractRootFinder, optx.AbstractLeastSquaresSolver)
    ):
        raise ValueError(
            f"`{name}` must be an optimistix root finder or least-squares solver; "
            f"got {type(root_finder).__name__}."
        )
    return root_finder


def check_iterations(max_iterations, name: str = "max_iterations") -> int:
    """`max_iterations` as a positive int, or a `ValueError` naming it."""
    if isinstance(max_iterations, bool) or int(max_iterations) < 1:
        raise ValueError(f"`{name}` must be positive; got {max_iterations}.")
    return int(max_iterations)
