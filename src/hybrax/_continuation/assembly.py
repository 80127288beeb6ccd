"""Assembly of the results."""

import jax.numpy as jnp
import numpy as np

from .._periodic import (
    sorted_multipliers,
)
from .._simulate import cycle_admissible
from .._solution import RESULTS
from .driver import _Trace
from .results import Branch, SolutionBranch, SpecialPoint


def _multipliers(M: np.ndarray) -> np.ndarray:
    """The multipliers of `M` in the library's one ordering (by decreasing modulus,
    a complex pair with its positive imaginary part first)."""
    return np.asarray(sorted_multipliers(jnp.asarray(M)), dtype=complex)


def _durations(t_events: np.ndarray) -> np.ndarray:
    return np.diff(np.concatenate([[0.0], t_events]))


def _special_point(trace: _Trace, index, kind, g, located, **extras) -> SpecialPoint:
    point = trace.points[index]
    # "force_reversal@k" (event k), "grazing@k@name" (phase k's clearance),
    # "release_reversal@k@name" (event k's release velocity).
    kind, *where = kind.split("@")
    return SpecialPoint(
        kind=kind,
        event=int(where[0]) if where else None,
        observable=where[1] if len(where) > 1 else None,
        index=index,
        parameter=point.lam,
        u=point.u.copy(),
        multipliers=None if point.M is None else _multipliers(point.M),
        multiplier_matrix=None if point.M is None else point.M.copy(),
        test_value=float(g),
        located=bool(located),
        **extras,
    )


def _solution_branch(
    trace: _Trace, parameter_name: str, method: str, iterates: int | None
) -> SolutionBranch:
    points = trace.points
    has_multipliers = points[0].M is not None
    M = np.stack([p.M for p in points]) if has_multipliers else None
    multipliers = None if M is None else np.stack([_multipliers(m) for m in M])
    return SolutionBranch(
        parameter_name=parameter_name,
        method=str(method),
        iterates=iterates,
        parameter=np.array([p.lam for p in points]),
        u=np.stack([p.u for p in points]),
        tangent=np.stack([p.tangent for p in points]),
        multiplier_matrix=M,
        multipliers=multipliers,
        stable=None
        if multipliers is None
        else np.all(np.abs(multipliers) < 1.0, axis=1),
        kind=tuple(p.kind for p in points),
        residual_norm=np.array([p.residual_norm for p in points]),
        newton_steps=np.array([p.n_steps for p in points], dtype=int),
        special_points=tuple(
            _special_point(trace, *special) for special in trace.specials
        ),
        result=trace.result,
        message=trace.message,
        n_rejected=trace.n_rejected,
    )


def _empty_solution_branch(parameter_name, method, iterates, k, message):
    return SolutionBranch(
        parameter_name=parameter_name,
        method=str(method),
        iterates=iterates,
        parameter=np.zeros(0),
        u=np.zeros((0, k)),
        tangent=np.zeros((0, k + 1)),
        multiplier_matrix=None,
        multipliers=None,
        stable=None,
        kind=(),
        residual_norm=np.zeros(0),
        newton_steps=np.zeros(0, dtype=int),
        special_points=(),
        result=RESULTS.start_failed,
        message=message,
        n_rejected=0,
    )


def _orbit_branch(
    trace: _Trace,
    parameter_name,
    method,
    guard_tol,
    clearance_names=(),
    release_names=(),
) -> Branch:
    points = trace.points
    records = [p.aux for p in points]
    M = np.stack([p.M for p in points])
    multipliers = np.stack([_multipliers(m) for m in M])
    t_events = np.stack([np.asarray(r.t_events, dtype=float) for r in records])
    durations = np.stack([_durations(t) for t in t_events])
    guard = np.stack([np.asarray(r.guard_at_start, dtype=float) for r in records])
    clearance = np.stack([np.asarray(r.clearance, dtype=float) for r in records])
    release = np.stack([np.asarray(r.release, dtype=float) for r in records])

    def stacked(name):
        return np.stack([np.asarray(getattr(r, name), dtype=float) for r in records])

    specials = tuple(
        _special_point(
            trace,
            index,
            kind,
            g,
            located,
            state=stacked("state")[index].copy(),
            phase_durations=durations[index].copy(),
            period=float(t_events[index, -1]),
        )
        for index, kind, g, located in trace.specials
    )
    return Branch(
        parameter_name=parameter_name,
        method=str(method),
        parameter=np.array([p.lam for p in points]),
        u=np.stack([p.u for p in points]),
        state=stacked("state"),
        tangent=np.stack([p.tangent for p in points]),
        t_events=t_events,
        phase_durations=durations,
        period=t_events[:, -1].copy(),
        x_before=stacked("x_before"),
        x_after=stacked("x_after"),
        observables={
            name: np.stack([np.asarray(r.observables[name], float) for r in records])
            for name in records[0].observables
        },
        guard_at_start=guard,
        phase_observables={
            name: clearance[:, :, i].copy() for i, name in enumerate(clearance_names)
        },
        admissible=np.asarray(cycle_admissible(guard, clearance, release, guard_tol)),
        reduced_jacobian=M,
        multipliers=multipliers,
        stable=np.all(np.abs(multipliers) < 1.0, axis=1),
        kind=tuple(p.kind for p in points),
        residual_norm=np.array([p.residual_norm for p in points]),
        newton_steps=np.array([p.n_steps for p in points], dtype=int),
        special_points=specials,
        result=trace.result,
        message=trace.message,
        n_rejected=trace.n_rejected,
        clearance_names=tuple(clearance_names),
        release_names=tuple(release_names),
    )


def _empty_orbit_branch(parameter_name, method, result, message) -> Branch:
    def empty(*shape, dtype=float):
        return np.zeros((0, *shape), dtype=dtype)

    return Branch(
        parameter_name=parameter_name,
        method=str(method),
        parameter=empty(),
        u=empty(0),
        state=empty(0),
        tangent=empty(0),
        t_events=empty(0),
        phase_durations=empty(0),
        period=empty(),
        x_before=empty(0, 0),
        x_after=empty(0, 0),
        observables={},
        guard_at_start=empty(0),
        phase_observables={},
        admissible=empty(dtype=bool),
        reduced_jacobian=empty(0, 0),
        multipliers=empty(0, dtype=complex),
        stable=empty(dtype=bool),
        kind=(),
        residual_norm=empty(),
        newton_steps=empty(dtype=int),
        special_points=(),
        result=result,
        message=message,
        n_rejected=0,
    )
