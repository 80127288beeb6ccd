"""The compiled corrector."""

import dataclasses
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
from jaxtyping import Array, Bool, Float, Int

from .._compile import compiled
from .._program_store import StoredModel, traced_model
from .problems import _AbstractResidual, branch_test_functions
from .results import _closest_pair


class _Options(eqx.Module):
    root_finder: optx.AbstractRootFinder
    max_iterations: int = eqx.field(static=True)


class _Correction(eqx.Module):
    z: Float[Array, " k+1"]
    jacobian: Float[Array, "k k+1"]
    multiplier_matrix: Float[Array, "k k"] | None
    residual_norm: Float[Array, ""]
    n_steps: Int[Array, ""]
    ok: Bool[Array, ""]
    aux: Any


def _residual_model(arguments: dict) -> "StoredModel | None":
    """The model of a continuation's residual for the store of traced programs,
    where the residual is hybrax's (a return map's or a curve's of an orbit)."""
    return traced_model(arguments["residual"])


@compiled("the continuation corrector", model=_residual_model)
def _correct(residual: _AbstractResidual, z_pred, w, options: _Options):
    """Newton on $[F(z); w \\cdot (z - z_p)] = 0$ from $z_p$, then one forward-mode
    pass at the solution for $[F_u\\ F_\\lambda]$ and the auxiliary output. One
    compilation per problem serves every predictor, every hyperplane and every
    parameter value."""

    def augmented(z, _):
        F, _, _ = residual(z)
        return jnp.concatenate([F, jnp.dot(w, z - z_pred)[None]])

    root = optx.root_find(
        augmented,
        options.root_finder,
        z_pred,
        max_steps=options.max_iterations,
        throw=False,
    )
    z = root.value

    def with_aux(z):
        F, valid, aux = residual(z)
        return F, (F, valid, aux)

    # The primal residual comes back as auxiliary output: no third trace of F
    # just to evaluate it.
    jacobian, (F, valid, aux) = jax.jacfwd(with_aux, has_aux=True)(z)
    root_ok = (root.result == optx.RESULTS.successful) & jnp.all(jnp.isfinite(z))
    return _Correction(
        z=z,
        jacobian=jacobian,
        multiplier_matrix=residual.multiplier_matrix(z, jacobian),
        residual_norm=jnp.max(jnp.abs(F)),
        n_steps=root.stats["num_steps"],
        ok=root_ok & valid,
        aux=aux,
    )


@compiled("the continuation residual", model=_residual_model)
def _residual_only(residual: _AbstractResidual, z):
    """$F(z)$ alone (compiled: the hybrid return map is slow to run eagerly)."""
    F, _, _ = residual(z)
    return F


@compiled("the continuation's cycle status", model=_residual_model)
def _cycle_outcome(residual: _AbstractResidual, z):
    """The cycle's status, final mode and cause transition at `z` (a return
    map's residual only), where a correction failed."""
    return residual.cycle_outcome(z)


# ---------------------------------------------------------------------------
# Points on the host
# ---------------------------------------------------------------------------


@dataclasses.dataclass
class _Point:
    z: np.ndarray
    jacobian: np.ndarray
    M: np.ndarray | None
    residual_norm: float
    n_steps: int
    ok: bool
    aux: Any
    tangent: np.ndarray | None = None  # scaled, unit, oriented
    kind: str = "regular"
    # (jacobian, M, aux) -> {kind: test value}: the problem's test functions.
    tests: Callable[[np.ndarray, np.ndarray | None, Any], dict] = (
        lambda jacobian, M, aux: branch_test_functions(jacobian, M)
    )

    @property
    def lam(self) -> float:
        return float(self.z[-1])

    @property
    def u(self) -> np.ndarray:
        return self.z[:-1]

    def test_functions(self) -> dict[str, float]:
        """The test functions of the special points this point can tell (its
        problem's: see `_AbstractResidual.test_functions`)."""
        return self.tests(self.jacobian, self.M, self.aux)


def _is_torus_point(M: np.ndarray) -> bool:
    """Whether the pair with $\\nu_i\\nu_j \\approx 1$ is complex (a Neimark-Sacker
    point) rather than real (a neutral saddle, $\\nu_j = 1/\\nu_i$)."""
    nu = np.linalg.eigvals(M).astype(complex)
    i, j = _closest_pair(nu)
    return bool(min(abs(nu[i].imag), abs(nu[j].imag)) > 1e-8 * max(1.0, abs(nu[i])))


class _Corrector:
    """Calls the compiled corrector and converts its output to a `_Point`."""

    def __init__(self, residual: _AbstractResidual, options: _Options, residual_tol):
        self.residual = residual
        self.options = options
        self.residual_tol = residual_tol
        self.calls = 0
        self.last_prediction: np.ndarray | None = None

    def __call__(self, z_pred: np.ndarray, w: np.ndarray) -> _Point:
        self.calls += 1
        # Where a correction fails, its cycle at the prediction tells why.
        self.last_prediction = np.asarray(z_pred, dtype=float)
        out = jax.device_get(
            _correct(
                self.residual,
                jnp.asarray(z_pred, dtype=float),
                jnp.asarray(w, dtype=float),
                self.options,
            )
        )
        jacobian = np.asarray(out.jacobian, dtype=float)
        M = None if out.multiplier_matrix is None else np.asarray(out.multiplier_matrix)
        ok = (
            bool(out.ok)
            and float(out.residual_norm) <= self.residual_tol
            and bool(np.all(np.isfinite(jacobian)))
            and (M is None or bool(np.all(np.isfinite(M))))
        )
        return _Point(
            z=np.asarray(out.z, dtype=float),
            jacobian=jacobian,
            M=None if M is None else np.asarray(M, dtype=float),
            residual_norm=float(out.residual_norm),
            n_steps=int(out.n_steps),
            ok=ok,
            aux=out.aux,
            tests=self.residual.test_functions,
        )
