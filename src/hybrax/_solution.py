r"""Status codes and the result of a hybrid simulation.

One status vocabulary serves every routine: [`hybrax.RESULTS`][] extends
`diffrax.RESULTS` (and through it optimistix's and lineax's), so a status raised by
the ODE solver, the event root finder or the shooting solve is one of its items.
"""

import functools

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int, PyTree


class RESULTS(dfx.RESULTS):  # pyright: ignore[reportGeneralTypeIssues]
    """Status codes of [`hybrax.simulate`][] and the orbit routines.

    Extends `diffrax.RESULTS` (whose `max_steps_reached` reports a step limit hit).
    Read a status with [`hybrax.status_name`][] and [`hybrax.status_message`][].
    """

    event_not_reached = (
        "No transition occurred before `t_max`: a guard was never reached. Increase "
        "`t_max` or check the initial state and parameters."
    )
    invalid_time_span = "`t_max` must exceed the initial time `t0`."
    infeasible_initial_state = (
        "The initial state lies outside its mode: a guard of a transition leaving the "
        "initial mode is already past its crossing (e.g. a foot below the ground), or "
        "a condition of the mode's declared domain fails (e.g. the hopper's upper "
        "mass below its foot)."
    )
    constraint_violated = (
        "A phase starts off its mode's constraints (e.g. a stance mode entered with "
        "the foot above the ground, or a reset whose state the next mode does not "
        "admit); see `Mode(constraints=...)`."
    )
    mode_not_viable = (
        "A phase would end at the instant it starts: the state lies on a guard of "
        "its mode and moves out of the mode at once, so events would pile up at one "
        "instant (e.g. a foot pulled back into the ground right after lift-off, or a "
        "ball at rest on the floor). `cause_transition` names the guard."
    )
    zeno = (
        "Zeno behaviour: the events accumulate (each phase shorter than the one "
        "before, the next one below the guard tolerance); `zeno_time` holds the "
        "extrapolated accumulation time."
    )
    grazing_event = (
        "A guard was met tangentially (grazing): its crossing speed vanishes, so the "
        "event time is not differentiable there and a transversal-crossing analysis "
        "(saltation, monodromy) does not apply. The run stops after recording it."
    )
    event_location_failed = (
        "The event root finder did not converge on the step where a guard changed "
        "sign: the crossing is (nearly) tangential, or the guard is not smooth "
        "there. Scale the guard to O(1), or loosen `Settings.event_root_finder`."
    )
    armed_beyond_guard = (
        "A transition became armed (`Transition(arm=...)`) with its guard already "
        "past the crossing (e.g. a swing foot coming ahead of the stance foot under "
        "the ground): its crossing came before the arming and was missed, so the "
        "run stops. `cause_transition` names it."
    )
    terminal_event = (
        "A terminal transition fired (e.g. a walker fell: its hip reached the "
        "ground): the motion cannot go on as modelled, and the run stops there. "
        "`cause_transition` names it."
    )
    singular_dynamics = (
        "The vector field is not finite where a phase starts: the mass matrix (or "
        "the KKT system of the mode's constraints) is singular there, or a force "
        "is not finite (e.g. a kinetic energy that does not involve every "
        "velocity)."
    )
    nonfinite_state = "The state became non-finite (NaN or inf)."
    nonfinite_parameters = "The parameters contain NaN or inf."
    parameters_out_of_domain = (
        "A parameter lies outside its declared domain (the bound of its "
        "`hybrax.parameter_field`, e.g. a restitution above 1, or a relation the "
        "model declares between fields): the model does not hold there. Built "
        "eagerly, such parameters raise a `ValueError`; traced, they give this."
    )
    inadmissible_orbit = (
        "The orbit converged but breaks a boundary its model declares: a phase "
        "starts past its guard (e.g. the ground would have to pull right after "
        "touchdown), or a contact an impact releases would stay (its declared "
        "release velocity is negative). Its values are kept; "
        "`PeriodicOrbit.boundary_violations(system)` names each boundary and its "
        "value. (A declared clearance, recorded with the phase observables, is "
        "judged by `hybrax.boundary_violations` and a branch's `admissible`.)"
    )
    wrong_event_sequence = (
        "The cycle fired a different sequence of transitions than the section "
        "declares (e.g. a foot that never left the ground, or a missed event)."
    )
    shooting_failed = (
        "The shooting solve did not converge to a periodic orbit (residual above "
        "tolerance) although every cycle it ran succeeded: no orbit was found from "
        "this guess, or none exists."
    )
    not_run = (
        "Not solved: the run was interrupted (Ctrl-C) before this element's solve "
        "finished; its values are NaN (see `hybrax.Interrupted`)."
    )
    # How a continuation stopped (`Branch.result`, `Homotopy.result`).
    reached_bound = (
        "The branch was followed to a bound of its parameter range; its last point "
        "lies on the bound."
    )
    max_points_reached = (
        "The branch has `ContinuationSettings.max_points` points: raise it to "
        "follow the branch further."
    )
    max_period_reached = (
        "An orbit of the branch has a period above `max_period`: the branch stops "
        "there (towards a homoclinic orbit or a standstill, or raise the bound)."
    )
    min_step_reached = (
        "No step above `ContinuationSettings.min_step` could be corrected onto the "
        "branch: natural continuation at a fold, or a point where the cycle "
        "changes (a grazing, a phase no longer viable, another event sequence)."
    )
    start_failed = (
        "No solution was found at the start of the continuation (the guess at the "
        "first parameter value did not converge): give a better guess."
    )
    interrupted = (
        "Interrupted (Ctrl-C): the result holds the work finished before (see "
        "`hybrax.Interrupted`)."
    )
    # How a tuning ended (`TuneResult.result`; an optimum is `successful`).
    targets_met = (
        "The tuning's targets are met at an orbit, but the minimiser stopped "
        "before its own tolerance (`TuneResult.minimiser_result` says why): a "
        "feasible point, not a minimum."
    )
    targets_not_met = (
        "The tuning ended at an orbit where some constraint lies outside its "
        "tolerance (or the stability bound is exceeded)."
    )
    fold_reached = (
        "The orbit family turns back at a fold before reaching the requested "
        "parameters: no orbit of this family exists there (another family may)."
    )


# Every item of `RESULTS`, ours and inherited, in a fixed order (filtered on what
# the installed diffrax, optimistix and lineax define).
_CANDIDATE_NAMES = (
    "successful",
    "max_steps_reached",
    "dt_min_reached",
    "event_occurred",
    "max_steps_rejected",
    "internal_error",
    "nonlinear_max_steps_reached",
    "nonlinear_divergence",
    "nonfinite",
    "singular",
    "breakdown",
    "stagnation",
    "conlim",
    "nonfinite_input",
    "event_not_reached",
    "invalid_time_span",
    "infeasible_initial_state",
    "constraint_violated",
    "mode_not_viable",
    "zeno",
    "grazing_event",
    "terminal_event",
    "armed_beyond_guard",
    "event_location_failed",
    "nonfinite_state",
    "nonfinite_parameters",
    "wrong_event_sequence",
    "shooting_failed",
    "singular_dynamics",
    "not_run",
    "reached_bound",
    "max_points_reached",
    "max_period_reached",
    "min_step_reached",
    "start_failed",
    "interrupted",
    "fold_reached",
    "targets_met",
    "targets_not_met",
    # Appended, so that the codes of the items above stay as written before.
    "parameters_out_of_domain",
    "inadmissible_orbit",
)
STATUS_NAMES: tuple[str, ...] = tuple(
    n for n in _CANDIDATE_NAMES if hasattr(RESULTS, n)
)
# The statuses of a numerical failure (the integration or a linear solve broke
# down, or the input was not finite), as against those that say the motion took
# another course or no orbit was found (usually: none exists there).
NUMERICAL_FAILURES: frozenset[str] = frozenset(
    # Every item diffrax, optimistix and lineax define (they come before
    # hybrax's own) but success and `event_occurred`, and hybrax's numerical ones.
    name
    for name in _CANDIDATE_NAMES[: _CANDIDATE_NAMES.index("event_not_reached")]
    if name not in ("successful", "event_occurred")
) | {
    "event_location_failed",
    "nonfinite_state",
    "nonfinite_parameters",
    "singular_dynamics",
}


def status_code(result: RESULTS | str) -> np.ndarray:
    """The position of each element of a (possibly batched) status in
    `hybrax.STATUS_NAMES` (0 is `successful`).

    **Arguments:**

    - `result`: a [`hybrax.RESULTS`][] status (e.g. `solution.result`), batched
      or not, or a status's name (e.g. `status_code("zeno")`, to compare with the
      codes of a saved table).

    **Returns:** a NumPy integer array of the status's shape (0-d for a name);
    -1 for an item this version does not name.

    **Raises:** `ValueError` for a name that is not a status (the message lists
    them), or a `result` that is neither a status nor a name."""
    if isinstance(result, str):
        if result not in STATUS_NAMES:
            raise ValueError(
                f"`result`: {result!r} is not a status name; the names are "
                f"{', '.join(STATUS_NAMES)}."
            )
        return np.asarray(STATUS_NAMES.index(result))
    if not isinstance(result, RESULTS):
        raise ValueError(
            "`result` must be a status (a `hybrax.RESULTS` item, e.g. "
            f"`solution.result`) or a status name; got {type(result).__name__}."
        )
    # Read on the host and looked up (no comparison dispatched per name).
    values = _raw_values(result)
    table = _codes_by_value()
    inside = (values >= 0) & (values < table.size)
    return np.where(inside, table[np.where(inside, values, 0)], -1)


def any_failed(result: RESULTS) -> bool:
    """Whether any element of a concrete (possibly batched) status is not
    `successful`: one comparison on the host, what an eager routine asks of its
    program's status on every call (cheaper than `status_code`'s lookup)."""
    values = _raw_values(result)
    successful = _successful_value()
    if values.ndim == 0:  # (NumPy's reductions cost more than the read)
        return int(values) != successful
    return bool((values != successful).any())


def _raw_values(result: RESULTS) -> np.ndarray:
    """A concrete status's integer values on the host (a status is a PyTree with
    one leaf, its value)."""
    return np.asarray(jax.tree_util.tree_leaves(result)[0])


@functools.cache
def _successful_value() -> int:
    return int(_raw_values(RESULTS.successful))


@functools.cache
def _codes_by_value() -> np.ndarray:
    """The position in `STATUS_NAMES` of each status value (-1 for a value
    without a name)."""
    values = [int(_raw_values(getattr(RESULTS, name))) for name in STATUS_NAMES]
    table = np.full(max(values) + 1, -1)
    table[values] = np.arange(len(values))
    return table


def status_name(result: RESULTS) -> list[str]:
    """The names of the elements of a (possibly batched) status.

    **Arguments:**

    - `result`: a [`hybrax.RESULTS`][] status (e.g. `solution.result`), batched
      or not.

    **Returns:** a list of names (e.g. `"event_not_reached"`), one per element
    in row-major order; `"unknown"` for an item this version does not name.
    """
    return [
        STATUS_NAMES[c] if c >= 0 else "unknown" for c in np.ravel(status_code(result))
    ]


def status_message(result: RESULTS) -> list[str]:
    """Human-readable messages of the elements of a (possibly batched) status.

    **Arguments:**

    - `result`: a [`hybrax.RESULTS`][] status (e.g. `solution.result`), batched
      or not.

    **Returns:** a list of messages, one per element in row-major order;
    `"successful"` for success, `"unknown status"` for an item this version does
    not name.
    """
    messages = [RESULTS[getattr(RESULTS, name)] or name for name in STATUS_NAMES]
    return [
        messages[c] if c >= 0 else "unknown status"
        for c in np.ravel(status_code(result))
    ]


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (a `KeyboardInterrupt`) stopped [`hybrax.sweep_orbits`][] or a
    continuation ([`hybrax.continue_orbits`][] and its siblings); `partial` holds
    the work that had finished.

    It is a `KeyboardInterrupt`, so a script that does not catch it stops as
    before. Catch it to keep what was computed:

    ```python
    try:
        out = hx.sweep_orbits(system, section, guess, batch)
    except hx.Interrupted as stop:
        out = stop.partial  # finished elements exact, the others `not_run`
    ```

    - After `sweep_orbits`: an [`hybrax.OrbitSweep`][] whose finished elements are
      exactly those of an uninterrupted sweep and whose other elements have the
      status `not_run` and NaN values (`None` when no element had finished).
    - After a continuation: the [`hybrax.Branch`][] (or
      [`hybrax.SolutionBranch`][]) of the points accepted so far, with `status ==
      "interrupted"` (`None` when no point had been found).
    """

    def __init__(self, partial, message: str = "interrupted"):
        super().__init__(message)
        self.partial = partial


class HybridSolution(eqx.Module):
    r"""The result of [`hybrax.simulate`][] (and the cycle of a periodic orbit).

    Slots beyond the events that occurred are padded with NaN (times, states,
    observables) or -1 (indices), as diffrax pads unused save slots.

    - `t_events`, `x_before`, `x_after`: event times and the states just before and
      just after each reset, shape `(E,)` and `(E, n)`.
    - `transitions`: index of the transition fired at each event.
    - `modes`: the mode of each phase; phase `k` ends at event `k`.
    - `observables`: the event observables of the transitions
      (`Transition(observe=...)`, e.g. `T_c`, `T_a`, `impulse` of a plastic impact),
      a dict of arrays with leading axis `E`; NaN where the fired transition does
      not define that key.
    - `crossing_rate`: $\dot h$, the time derivative of the fired guard
      (sign-normalised, so negative for a transversal crossing) at each event.
    - `guard_at_start`: the smallest sign-normalised armed guard of each phase's
      mode right after its reset; negative means the phase started beyond one of
      its guards (for a ground phase: the contact force already pulls).
    - `t_phase`, `x_phase`: `n_save` samples of each phase, `(E, s)` and
      `(E, s, n)` (empty when `n_save=0`).
    - `phase_observables`: extrema over each phase of the mode's
      `Mode(observables=...)` (e.g. an apex height), dict of `(E, ...)` arrays,
      NaN for phases of modes that do not define the key.
    - `t_final`, `x_final`, `mode_final`: the time, state and mode after the last
      event (`t0`, `x0` and `mode0` without one): where the last phase started,
      which for a failed simulation is the phase that failed (for
      `mode_not_viable`, `mode_final` is the mode that could not start; for
      `event_not_reached`, the phase ran to `t_max` from there).
    - `n_events`: how many events occurred; `result`: a [`hybrax.RESULTS`][].
    - `zeno_time`: the extrapolated accumulation time when `result` is `zeno`
      (Aitken's $\Delta^2$ on the last three event times), else NaN.
    - `cause_transition`: the transition whose guard caused a `mode_not_viable`,
      `zeno`, `grazing_event`, `terminal_event`, `armed_beyond_guard` or
      `infeasible_initial_state` status, else -1.
    """

    t_events: Float[Array, " E"]
    x_before: Float[Array, "E n"]
    x_after: Float[Array, "E n"]
    transitions: Int[Array, " E"]
    modes: Int[Array, " E"]
    observables: dict[str, Float[Array, "E ..."]]
    crossing_rate: Float[Array, " E"]
    guard_at_start: Float[Array, " E"]
    t_phase: Float[Array, "E s"]
    x_phase: Float[Array, "E s n"]
    phase_observables: dict[str, Float[Array, "E ..."]]
    t_final: Float[Array, ""]
    x_final: Float[Array, " n"]
    mode_final: Int[Array, ""]
    n_events: Int[Array, ""]
    zeno_time: Float[Array, ""]
    cause_transition: Int[Array, ""]
    result: RESULTS

    @property
    def succeeded(self) -> Bool[Array, ""]:
        """Whether the simulation ran all requested events without failure."""
        return self.result == RESULTS.successful

    def _observable(self, key: str) -> Float[Array, " E"]:
        if key in self.observables:
            return self.observables[key]
        return jnp.full(self.t_events.shape, jnp.nan, self.t_events.dtype)

    @property
    def T_c(self) -> Float[Array, " E"]:
        """Kinetic energy lost at each event (`observables["T_c"]`; NaN where the
        event reports none)."""
        return self._observable("T_c")

    @property
    def T_a(self) -> Float[Array, " E"]:
        """Kinetic energy kept at each event (`observables["T_a"]`)."""
        return self._observable("T_a")


def masked_nan(tree: PyTree, ok: Bool[Array, "..."]) -> PyTree:
    r"""Every floating leaf of `tree` multiplied by $1$ where `ok`, by NaN elsewhere
    (`ok` broadcast from the leading axes).

    A product rather than a `where`: values *and* derivatives of a failed element
    become NaN, so that a failure can never pass for a finite number or a finite
    gradient.
    """

    def mask(leaf):
        if not (eqx.is_array(leaf) and jnp.issubdtype(leaf.dtype, jnp.inexact)):
            return leaf
        factor = jnp.where(ok, 1.0, jnp.nan).astype(leaf.dtype)
        factor = jnp.reshape(factor, factor.shape + (1,) * (leaf.ndim - factor.ndim))
        return leaf * jax.lax.stop_gradient(factor)

    return jax.tree_util.tree_map(mask, tree)
