r"""Which motions lose the most kinetic energy at a topology change.

Kövecses & Font-Llagunes (2009), "An eigenvalue problem for the analysis of variable
topology mechanical systems", J. Comput. Nonlinear Dyn. 4(3); applied to the heel
strike of walking bipeds by Font-Llagunes & Kövecses ("Modelling Dynamic Walking
Bipeds as Variable Topology Mechanical Systems", poster, McGill University) and
Font-Llagunes & Kövecses (2009), "On the Use of Impulsive Bilateral Constraints to
Characterize Topology Transitions", 2009 CCToMM M³ Symposium. A plastic
impact onto constraints $A\dot q^+ = 0$ keeps the admissible part
$\dot q_a = P_a\dot q^-$ of the velocity and loses its constrained part
$\dot q_c = P_c\dot q^-$, with $P_c = M^{-1}A^T(AM^{-1}A^T)^{-1}A$. The fraction of
the kinetic energy lost is the Rayleigh quotient

$$\frac{T_c}{T^-} = \frac{\dot q^T K \dot q}{\dot q^T M \dot q}, \qquad
K = MP_c = A^T(AM^{-1}A^T)^{-1}A,$$

over the velocities the system can have just before the event (those that satisfy
the constraints active before it, $A_b\dot q^- = 0$; with $N$ a basis of their null
space, $\dot q^- = Nz$). Its stationary values are the eigenvalues of
$N^TKN\,z = \rho\,N^TMN\,z$, all in $[0, 1]$: the largest is the most energy any
pre-impact motion can lose, the smallest the least, and the eigenvectors are the
motions that do so.
"""

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from ._custom_types import Params
from ._mechanics import (
    AbstractLagrangianModel,
    admissible_projector,
    constraint_jacobian,
)


class ImpactEnergyModes(eqx.Module):
    r"""The energy-loss eigen-analysis of an impact (see
    [`hybrax.impact_energy_modes`][]).

    - `fractions`: the eigenvalues $\rho_i = T_c/T^-$, ascending, each in $[0, 1]$.
    - `directions`: the corresponding pre-impact velocities $\dot q_i$ as columns,
      mass-orthonormal ($\dot q_i^TM\dot q_j = \delta_{ij}$). Any pre-impact
      velocity is $\dot q^- = \sum_i z_i\dot q_i$ and loses
      $T_c = \tfrac12\sum_i\rho_iz_i^2$ of its $T^- = \tfrac12\sum_i z_i^2$.
    """

    fractions: Float[Array, " k"]
    directions: Float[Array, "n k"]


def impact_energy_modes(
    model: AbstractLagrangianModel,
    impact: tuple[str, ...],
    q: Float[Array, " n"],
    params: Params,
    before: tuple[str, ...] = (),
) -> ImpactEnergyModes:
    r"""The pre-impact motions that lose the most and the least kinetic energy in a
    plastic impact onto the constraint groups `impact`.

    Solves the generalized symmetric eigenproblem of Kövecses & Font-Llagunes
    (2009), $N^TKN\,z = \rho\,N^TMN\,z$ with $K = A^T(AM^{-1}A^T)^{-1}A$ ($A$ the
    Jacobian of the `impact` constraints at `q`) and $N$ an orthonormal basis of the
    velocities allowed before the impact, the null space of the Jacobian of the
    `before` groups (all velocities when `before` is empty). The eigenvalue $\rho$
    of a direction is the fraction $T_c/T^-$ of its kinetic energy that
    [`hybrax.plastic_impact`][] removes, so every pre-impact velocity loses a
    fraction between the smallest and the largest eigenvalue.

    **Arguments:**

    - `model`: the mechanical model (descriptor coordinates).
    - `impact`: names of the constraint groups imposed at the impact.
    - `q`: the configuration at the impact.
    - `params`: the model parameters.
    - `before`: names of the constraint groups that hold just before the impact
      (for a biped's heel strike: the stance foot).

    **Returns:** an [`hybrax.ImpactEnergyModes`][]. Differentiable with respect to
    `q` and `params` (`jax.grad`, `jax.jacfwd`) where the fractions are distinct
    (the derivative of a repeated eigenvalue's directions is not defined).
    """
    if not impact:
        raise ValueError("`impact` must name at least one constraint group.")
    M = model.mass_matrix(q, params)
    n = q.shape[0]
    if before:
        A_before = constraint_jacobian(model, tuple(before), q, params)
        # The rows of V^T past the rank of A_before span its null space; the
        # constraints of a model are independent, so the rank is the row count.
        _, _, Vt = jnp.linalg.svd(A_before, full_matrices=True)
        N = Vt[A_before.shape[0] :].T
    else:
        N = jnp.eye(n, dtype=M.dtype)
    # K = M P_c with the constrained-space projector of the impact.
    _, P_c = admissible_projector(model, tuple(impact), q, params)
    K = M @ P_c
    # Reduce to a standard symmetric problem with the Cholesky factor of N^T M N.
    L = jnp.linalg.cholesky(N.T @ M @ N)
    L_inv_S = jnp.linalg.solve(L, N.T @ K @ N)
    S = jnp.linalg.solve(L, L_inv_S.T).T
    fractions, W = jnp.linalg.eigh(0.5 * (S + S.T))
    Z = jnp.linalg.solve(L.T, W)
    return ImpactEnergyModes(fractions=fractions, directions=N @ Z)
