"""The problems: F(z) = 0, with its validity, auxiliary output and multipliers."""

import abc
from collections.abc import Callable
from typing import Any

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, PyTree

from .._continuation_parameter import (
    AbstractParameter,
)
from .._custom_types import Params
from .._hybrid import HybridSystem
from .._periodic import (
    PoincareSection,
    poincare_map_with,
)
from .._program_store import StoredModel
from .._settings import (
    Settings,
)
from .._simulate import clearance_names, release_names, stacked_observables
from .._solution import RESULTS


def branch_test_functions(jacobian: np.ndarray, M: np.ndarray | None) -> dict:
    r"""The test functions of a branch's codimension-one points: fold
    ($\det F_u$), and with a multiplier matrix period doubling ($\det(M + I)$)
    and Neimark-Sacker ($\det(M \odot M - I)$)."""
    k = jacobian.shape[1] - 1
    values = {"fold": float(np.linalg.det(jacobian[:, :k]))}
    if M is not None:
        values["period_doubling"] = float(np.linalg.det(M + np.eye(k)))
        if k >= 2:
            values["neimark_sacker"] = _neimark_sacker_test(M)
    return values


def _second_compound(M, xp=np):
    """The bialternate product $M \\odot M$: the matrix of the $2\\times 2$ minors
    $\\det M[\\{p, q\\}, \\{r, s\\}]$, $p < q$, $r < s$ (Kuznetsov 2004, sec. 10.2.2);
    its eigenvalues are the products $\\nu_i\\nu_j$, $i < j$. `xp`: NumPy on the
    host, `jax.numpy` where it is differentiated."""
    k = M.shape[0]
    pairs = [(p, q) for p in range(k) for q in range(p + 1, k)]
    rows = [
        xp.stack([M[p, r] * M[q, s] - M[p, s] * M[q, r] for r, s in pairs])
        for p, q in pairs
    ]
    return xp.stack(rows)


def _neimark_sacker_test(M: np.ndarray) -> float:
    """$\\det(M \\odot M - I) = \\prod_{i<j}(\\nu_i\\nu_j - 1)$."""
    C = _second_compound(M)
    return float(np.linalg.det(C - np.eye(C.shape[0])))


class _AbstractResidual(eqx.Module):
    """$F(z)$ of a continuation problem, $z = (u, \\lambda)$. `__call__(z)` returns
    `(F, valid, aux)`: the residual, whether the evaluation is meaningful (a cycle
    that ran as declared), and per-point data kept with the point (or `None`)."""

    @abc.abstractmethod
    def __call__(self, z: Float[Array, " k+1"]) -> tuple[Array, Array, Any]:
        """`(F, valid, aux)` at `z`."""

    @abc.abstractmethod
    def multiplier_matrix(
        self, z: Float[Array, " k+1"], jacobian: Float[Array, "k k+1"]
    ) -> Float[Array, "k k"] | None:
        """The multiplier matrix at the solution `z`, given $[F_u\\ F_\\lambda]$
        there; `None` when the problem has none."""

    def test_functions(self, jacobian, M, aux) -> dict[str, float]:
        """On the host, the test functions `{kind: value}` whose sign changes
        mark this problem's special points (by default a branch's fold, period
        doubling and Neimark-Sacker point: `branch_test_functions`); `aux` is
        the point's auxiliary output."""
        del aux
        return branch_test_functions(jacobian, M)

    def bracket_tolerance(self, kind: str) -> float:
        """How far from zero a test function must be at both ends of a step for
        its sign change to count (0: any sign change)."""
        del kind
        return 0.0

    def crosses_zero(self, kind: str, located: float, ends: tuple[float, float]):
        """Whether a located sign change of `kind`'s test function is a zero
        (`located`, its value there, against its values at the step's `ends`)
        rather than a jump across zero. Every test function is continuous
        except where a problem says otherwise."""
        del kind, located, ends
        return True


class _ZerosResidual(_AbstractResidual):
    fn: Callable
    multiplier_fn: Callable | None
    args: PyTree

    def __call__(self, z):
        u, lam = z[:-1], z[-1]
        F = jnp.asarray(self.fn(u, lam, self.args), dtype=z.dtype)
        return F, jnp.all(jnp.isfinite(F)), None

    def multiplier_matrix(self, z, jacobian):
        if self.multiplier_fn is None:
            return None
        return jnp.asarray(self.multiplier_fn(z[:-1], z[-1], self.args), z.dtype)


def _iterate(fn, u, lam, args, iterates):
    # A fori_loop with static bounds: one trace of `fn` whatever the iterate count,
    # and forward-mode differentiable (it lowers to a scan).
    return jax.lax.fori_loop(0, iterates, lambda _, v: fn(v, lam, args), u)


class _FixedPointResidual(_AbstractResidual):
    fn: Callable
    args: PyTree
    iterates: int = eqx.field(static=True)

    def __call__(self, z):
        u, lam = z[:-1], z[-1]
        F = _iterate(self.fn, u, lam, self.args, self.iterates) - u
        return F, jnp.all(jnp.isfinite(F)), None

    def multiplier_matrix(self, z, jacobian):
        k = z.shape[0] - 1
        return jacobian[:, :k] + jnp.eye(k, dtype=z.dtype)


class _CycleRecord(eqx.Module):
    state: Float[Array, " n"]
    t_events: Float[Array, " E"]
    x_before: Float[Array, "E n"]
    x_after: Float[Array, "E n"]
    observables: dict[str, Float[Array, "E ..."]]
    guard_at_start: Float[Array, " E"]
    clearance: Float[Array, "E C"]
    release: Float[Array, "E R"]


def watched_return_map(system, section, u, params, settings):
    r"""The return map of continuation, `(u_next, solution, clearance,
    release)`: as [`hybrax.poincare_map`][] in forward mode, with the system's
    [`hybrax.Clearance`][]s over each phase, `(E, C)` (only those: the other
    phase observables are not what a branch watches), and its impacts' release
    velocities at each event, `(E, R)`. In forward mode (the corrector's
    `jax.jacfwd`) the loop carries its tangents from the start, one
    transformation of its body instead of three."""
    u_next, sol = poincare_map_with(
        system,
        section,
        u,
        params,
        settings,
        settings.adjoint,
        "clearance",
        seed_tangents=isinstance(settings.adjoint, dfx.ForwardMode),
    )
    E, dtype = sol.t_events.shape[0], sol.t_events.dtype
    clearance = stacked_observables(
        sol.phase_observables, clearance_names(system), E, dtype
    )
    release = stacked_observables(sol.observables, release_names(system), E, dtype)
    return u_next, sol, clearance, release


def boundary_tests(kind: str, values, names) -> dict[str, float]:
    """`kind@k@name`: each declared quantity `name` of phase or event $k$ that
    must stay positive (where finite): a clearance (`grazing`), a release
    velocity (`release_reversal`)."""
    tests = {}
    for k, row in enumerate(np.asarray(values, dtype=float)):
        for name, value in zip(names, row):
            if np.isfinite(value):
                tests[f"{kind}@{k}@{name}"] = float(value)
    return tests


class _ReturnMapResidual(_AbstractResidual):
    system: HybridSystem
    section: PoincareSection
    parameter: AbstractParameter
    params: Params
    settings: Settings

    def __call__(self, z):
        k = z.shape[0] - 1
        u, lam = z[:k], z[k]
        p = self.parameter.set(self.params, lam)
        u_next, sol, clearance, release = watched_return_map(
            self.system, self.section, u, p, self.settings
        )
        record = _CycleRecord(
            state=self.section.chart(u, p),
            t_events=sol.t_events,
            x_before=sol.x_before,
            x_after=sol.x_after,
            observables=sol.observables,
            guard_at_start=sol.guard_at_start,
            clearance=clearance,
            release=release,
        )
        return u_next - u, sol.result == RESULTS.successful, record

    def _traced_model(self) -> StoredModel:
        """Where the residual's functions of the user's own are, for the store of
        traced programs (see [`hybrax._program_store.StoredModel`][])."""
        return StoredModel(self.system, self.section, self.params, (self.parameter,))

    def cycle_outcome(self, z):
        """How the cycle at `z` ended, for a failure's message: its status, the
        mode it ended in and the transition that caused a degenerate stop."""
        k = z.shape[0] - 1
        p = self.parameter.set(self.params, z[k])
        _, sol, _, _ = watched_return_map(
            self.system, self.section, z[:k], p, self.settings
        )
        return sol.result, sol.mode_final, sol.cause_transition

    def multiplier_matrix(self, z, jacobian):
        # M = F_u + I = dP/du, the reduced Jacobian (Zana et al. 2018 eqs. 32-33).
        k = z.shape[0] - 1
        return jacobian[:, :k] + jnp.eye(k, dtype=z.dtype)

    def test_functions(self, jacobian, M, aux) -> dict[str, float]:
        r"""A branch's folds, period doublings and Neimark-Sacker points, and its
        hybrid boundaries: `force_reversal@k` is the guard of the phase that
        event $k$ starts, read at its start (`guard_at_start`): it changes sign
        where the orbit starts that phase on its guard, for the hopper's ground
        phase where the contact force after touchdown changes sign (positive
        inside the phase, so negative where the ground would have to pull),
        `grazing@k@name` is the declared [`hybrax.Clearance`][] `name` of
        phase $k$: it changes sign where the orbit grazes inside that phase;
        `release_reversal@k@name` is the release velocity `name` of event $k$:
        it changes sign where the contact that impact releases would stay (the
        compass gait's trailing foot would move into the ground)."""
        values = branch_test_functions(jacobian, M)
        guards = np.asarray(aux.guard_at_start, dtype=float)
        for k, value in enumerate(guards):
            if np.isfinite(value):
                values[f"force_reversal@{k}"] = float(value)
        system = self.system
        values.update(boundary_tests("grazing", aux.clearance, clearance_names(system)))
        values.update(
            boundary_tests("release_reversal", aux.release, release_names(system))
        )
        return values

    def bracket_tolerance(self, kind: str) -> float:
        """A guard that sits on its surface by construction (a flight that
        starts with the foot on the ground) stays within rounding of zero: a
        force reversal counts only where the guard is beyond `guard_tol` on both
        sides."""
        return (
            float(self.settings.guard_tol) if kind.startswith("force_reversal") else 0.0
        )
