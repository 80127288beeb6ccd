r"""Constrained multibody dynamics from a mass matrix, a force vector and constraints.

The equations of motion follow Zana et al. (2018), eqs. (15)-(18):

$$H(q)\,\ddot q + C(q, \dot q) + \gamma_q^T(q)\,\lambda = 0, \qquad \gamma(q) = 0,$$

index-reduced to the KKT system

$$\begin{bmatrix} H & \gamma_q^T \\ \gamma_q & 0 \end{bmatrix}
\begin{bmatrix} \ddot q \\ \lambda \end{bmatrix} =
\begin{bmatrix} -C \\ -\dot\gamma_q \dot q \end{bmatrix}.$$

Everything besides $H$, $C$ and $\gamma$ (the constraint Jacobian $\gamma_q$, the
convective term $\dot\gamma_q\dot q$, the impact projectors) is derived by JAX
autodiff. [`hybrax.LagrangianModel`][] derives $H$ and $C$ too, from the kinetic
and potential energies and the generalized forces.
"""

import abc
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ._custom_types import Params, RealScalarLike


class AbstractLagrangianModel(eqx.Module):
    r"""A mechanical model $H(q)\ddot q + C(q,\dot q) + \gamma_q^T\lambda = 0$.

    Subclasses implement `mass_matrix`, `forces` and `constraints`. The sign of
    `forces` is that of Zana et al. (2018) eq. (15): $C$ stands on the left-hand side,
    so gravity enters as $+m g$ for a coordinate pointing up.

    Constraints come in named groups (for example `"body"` for permanent rigid-body
    constraints and `"ground"` for a foot contact); a mode selects the active groups.
    Multipliers follow eq. (15): the constraint force on the coordinates is
    $-\gamma_q^T\lambda$, so a ground that pushes up on an upward coordinate has
    $\lambda < 0$.
    """

    @abc.abstractmethod
    def mass_matrix(self, q: Float[Array, " n"], params: Params) -> Float[Array, "n n"]:
        """The symmetric positive-definite mass matrix $H(q)$."""

    @abc.abstractmethod
    def forces(
        self,
        q: Float[Array, " n"],
        qd: Float[Array, " n"],
        params: Params,
        t: RealScalarLike = 0.0,
    ) -> Float[Array, " n"]:
        r"""The force vector $C(t, q, \dot q)$ of Zana et al. (2018) eq. (15)
        (left-hand-side sign).

        `t` is the time, for forces that depend on it (a controller's reference,
        a torque profile); the vector fields and guards of mechanical modes pass
        it, so every model accepts it (and may ignore it)."""

    @abc.abstractmethod
    def constraints(self, q: Float[Array, " n"], params: Params) -> dict[str, Array]:
        r"""All constraint groups $\gamma(q)$ by name; each value is a 1-D array."""


def point_velocity(
    point: Callable[[Array, Params], Array],
    q: Float[Array, " n"],
    qd: Float[Array, " n"],
    params: Params,
) -> Array:
    r"""The velocity $\dot r = \frac{\partial r}{\partial q}\dot q$ of a point whose
    position is $r = $ `point(q, params)`, by one forward-mode JVP.

    Write contacts and energies from positions only: a foot's position gives its
    velocity here, its constraint row $\partial r/\partial q$ in
    [`hybrax.constraint_jacobian`][], and a mass's kinetic energy
    $\tfrac12 m|\dot r|^2$.

    **Arguments:**

    - `point`: `point(q, params) -> array`, a position (any shape).
    - `q`, `qd`: coordinates and velocities.
    - `params`: the model parameters.

    **Returns:** the velocity, of the shape of `point`'s output.
    """
    return jax.jvp(lambda q_: point(q_, params), (q,), (qd,))[1]


class LagrangianModel(AbstractLagrangianModel):
    r"""A mechanical model built from its energies: $H$ and $C$ by autodiff.

    The Euler-Lagrange equations of the kinetic energy $T(q, \dot q)$, the potential
    energy $V(q)$ and the non-conservative generalized forces $Q(t, q, \dot q)$
    (Wells 1967, *Lagrangian Dynamics*, ch. 4; Goldstein, *Classical Mechanics*,
    sec. 1.4),
    $$\frac{d}{dt}\frac{\partial T}{\partial\dot q} - \frac{\partial T}{\partial q}
    + \frac{\partial V}{\partial q} = Q,$$
    with $T = \tfrac12\dot q^T H(q)\dot q$, are written in the left-hand-side form
    of [`hybrax.AbstractLagrangianModel`][], $H\ddot q + C = 0$ (plus constraint
    forces), where
    $$H = \frac{\partial^2 T}{\partial\dot q^2}, \qquad
    C = \dot H\dot q - \frac{\partial T}{\partial q} + \frac{\partial V}{\partial q}
    - Q, \qquad \dot H\dot q = \frac{\partial}{\partial q}
    \Big(\frac{\partial T}{\partial\dot q}\Big)\dot q.$$
    $H$ is the Hessian of $T$ in $\dot q$ (exact at $\dot q = 0$, $T$ being
    quadratic); $\dot H\dot q$ is one JVP of the momentum $\partial T/\partial\dot q$
    along $\dot q$, so no Christoffel symbols are formed.

    Joint torques enter through $Q$: a torque $\tau$ at a joint whose angle is
    $\phi(q)$ contributes $Q = (\partial\phi/\partial q)^T\tau$ (virtual work
    $\tau\,\delta\phi$); read controller gains from `params` so that they can be
    differentiated and batched.

    !!! example

        ```python
        def kinetic(q, qd, p):  # a pendulum: angle from the downward vertical
            return 0.5 * p["m"] * p["l"] ** 2 * qd[0] ** 2

        def potential(q, p):
            return -p["m"] * p["g"] * p["l"] * jnp.cos(q[0])

        pendulum = hx.LagrangianModel(kinetic, potential)
        ```
    """

    kinetic: Callable[[Array, Array, Params], Array]
    potential: Callable[[Array, Params], Array] | None = None
    generalized_forces: (
        Callable[[RealScalarLike, Array, Array, Params], Array] | None
    ) = None
    constraint_groups: Callable[[Array, Params], dict[str, Array]] | None = None

    def __check_init__(self):
        if not callable(self.kinetic):
            raise ValueError("`kinetic` must be callable as T(q, qd, params).")
        for name in ("potential", "generalized_forces", "constraint_groups"):
            value = getattr(self, name)
            if value is not None and not callable(value):
                raise ValueError(f"`{name}` must be callable or None; got {value!r}.")

    def mass_matrix(self, q, params):
        r"""$H(q) = \partial^2 T/\partial\dot q^2$."""
        return jax.hessian(lambda qd: self.kinetic(q, qd, params))(jnp.zeros_like(q))

    def forces(self, q, qd, params, t=0.0):
        r"""$C = \dot H\dot q - \partial T/\partial q + \partial V/\partial q - Q$."""
        momentum = jax.grad(self.kinetic, argnums=1)
        Hdot_qd = jax.jvp(lambda q_: momentum(q_, qd, params), (q,), (qd,))[1]
        C = Hdot_qd - jax.grad(self.kinetic, argnums=0)(q, qd, params)
        if self.potential is not None:
            C = C + jax.grad(self.potential)(q, params)
        if self.generalized_forces is not None:
            C = C - jnp.asarray(self.generalized_forces(t, q, qd, params))
        return C

    def constraints(self, q, params):
        """The groups of `constraint_groups` (none if it is `None`)."""
        if self.constraint_groups is None:
            return {}
        return dict(self.constraint_groups(q, params))


LagrangianModel.__init__.__doc__ = """**Arguments:**

- `kinetic`: `T(q, qd, params) -> scalar`, the kinetic energy, quadratic in `qd`
  ([`hybrax.point_velocity`][] gives the velocities of points).
- `potential`: `V(q, params) -> scalar`, the potential energy, or `None`.
- `generalized_forces`: `Q(t, q, qd, params) -> vector` of the shape of `q`,
  positive along the coordinates: the non-conservative generalized forces (joint
  torques included), or `None`.
- `constraint_groups`: `gamma(q, params) -> dict[str, array]`, the named constraint
  groups, or `None`.
"""


# Above this order the elimination below is not unrolled: LAPACK's pivoted LU
# (`jnp.linalg.solve`) then costs little next to the solve itself, and an unrolled
# program would grow with the square of the order.
_UNROLLED_MAX_ORDER = 12


# Jitted so that it is traced once per order (a vector field is traced many times:
# solver stages, guard derivatives, tangents), not at every use.
@jax.jit
def _gauss_jordan_inverse(A: Float[Array, "k k"]) -> Float[Array, "k k"]:
    r"""$A^{-1}$ by Gauss-Jordan elimination in place, in natural order without
    pivoting (Golub & Van Loan, *Matrix Computations*, 4th ed., sec. 3.2); one
    rank-one update of the whole matrix per pivot, unrolled."""
    k = A.shape[0]
    index = jnp.arange(k)
    for j in range(k):
        inverse_pivot = 1 / A[j, j]
        row = jnp.where(index == j, inverse_pivot, A[j] * inverse_pivot)
        column = jnp.where(index == j, 0, A[:, j])
        kept = jnp.where(index[None, :] == j, 0, A)
        A = jnp.where(
            index[:, None] == j, row[None, :], kept - column[:, None] * row[None, :]
        )
    return A


def symmetric_solve(
    A: Float[Array, "k k"], b: Float[Array, " k"]
) -> Float[Array, " k"]:
    r"""$x = A^{-1}b$ for the symmetric matrices of the equations of motion: a mass
    matrix $H$ (positive definite) or the KKT matrix
    $\begin{bmatrix} H & \gamma_q^T \\ \gamma_q & 0 \end{bmatrix}$ with $\gamma_q$
    of full row rank.

    Every leading principal minor of such a matrix is nonzero, so elimination in
    natural order needs no pivoting: it eliminates $H$, then the Schur complement
    $-\gamma_q H^{-1}\gamma_q^T$ (negative definite), the range-space method
    (Nocedal & Wright, *Numerical Optimization*, 2nd ed., sec. 16.2). Up to order
    12 the inverse comes from an unrolled Gauss-Jordan elimination in plain XLA
    operations (Golub & Van Loan, *Matrix Computations*, 4th ed., sec. 3.2): on a
    CPU one LAPACK call for a small system costs many times the rest of a vector
    field, and the field runs at every stage of every integrator step;
    a LAPACK call in a solver's loop also keeps XLA from compiling the loop into one
    kernel (`hybrax._xla_cpu`).
    Derivatives follow the implicit rule of `jax.lax.custom_linear_solve`,
    $\dot x = A^{-1}(\dot b - \dot A x)$, with the same inverse (no
    differentiation through the elimination). A singular matrix gives non-finite
    values, which a simulation reports as a status.
    """
    if A.shape[0] > _UNROLLED_MAX_ORDER:
        return jnp.linalg.solve(A, b)
    # The implicit rule never uses the inverse's derivative: stopped, so that
    # forward mode does not build one to discard (XLA removed it anyway: the
    # constrained hopper's analysed orbit compiles and runs in the same time).
    inverse = _gauss_jordan_inverse(jax.lax.stop_gradient(A))
    return jax.lax.custom_linear_solve(
        lambda x: A @ x, b, lambda _, r: inverse @ r, symmetric=True
    )


def stacked_constraints(
    model: AbstractLagrangianModel, active: tuple[str, ...]
) -> Callable[[Array, Params], Array]:
    r"""The function $q \mapsto \gamma(q)$ of the active groups, concatenated."""

    def gamma(q, params):
        groups = model.constraints(q, params)
        missing = [name for name in active if name not in groups]
        if missing:
            raise ValueError(
                f"`active` names constraint groups {missing} that the model does not "
                f"define; it defines {sorted(groups)}."
            )
        return jnp.concatenate([jnp.atleast_1d(groups[name]) for name in active])

    return gamma


def constraint_jacobian(
    model: AbstractLagrangianModel,
    active: tuple[str, ...],
    q: Float[Array, " n"],
    params: Params,
) -> Float[Array, "m n"]:
    r"""The constraint Jacobian $\gamma_q = \partial\gamma/\partial q$ (Zana et al.
    2018, eq. 17): the rows of the groups `active`, in their order.

    **Arguments:**

    - `model`: the mechanical model (a [`hybrax.AbstractLagrangianModel`][]).
    - `active`: names of the constraint groups (keys of `model.constraints`).
    - `q`: the coordinates.
    - `params`: the model parameters (any PyTree).

    **Returns:** $\gamma_q$, shape `(m, n)`: $m$ the number of constraints of the
    groups, $n$ that of the coordinates.
    """
    return jax.jacfwd(stacked_constraints(model, active))(q, params)


def convective_term(
    model: AbstractLagrangianModel,
    active: tuple[str, ...],
    q: Float[Array, " n"],
    qd: Float[Array, " n"],
    params: Params,
) -> Float[Array, " m"]:
    r"""The convective term
    $\dot\gamma_q\dot q = \frac{\partial(\gamma_q\dot q)}{\partial q}\dot q$,
    the second derivative of $\gamma$ along $\dot q$ (a nested JVP).

    **Arguments:**

    - `model`: the mechanical model (a [`hybrax.AbstractLagrangianModel`][]).
    - `active`: names of the constraint groups (keys of `model.constraints`).
    - `q`, `qd`: coordinates and velocities.
    - `params`: the model parameters (any PyTree).

    **Returns:** $\dot\gamma_q\dot q$, one entry per constraint of the groups
    `active`.
    """
    gamma = stacked_constraints(model, active)

    def velocity(q_):
        return jax.jvp(lambda s: gamma(s, params), (q_,), (qd,))[1]

    return jax.jvp(velocity, (q,), (qd,))[1]


def constrained_accelerations(
    model: AbstractLagrangianModel,
    active: tuple[str, ...],
    q: Float[Array, " n"],
    qd: Float[Array, " n"],
    params: Params,
    t: RealScalarLike = 0.0,
) -> tuple[Float[Array, " n"], Float[Array, " m"]]:
    r"""Accelerations and Lagrange multipliers from the index-reduced KKT system.

    Solves Zana et al. (2018) eq. (18),
    $\begin{bmatrix} H & \gamma_q^T \\ \gamma_q & 0 \end{bmatrix}
    \begin{bmatrix} \ddot q \\ \lambda \end{bmatrix} =
    \begin{bmatrix} -C \\ -\dot\gamma_q \dot q \end{bmatrix}$.
    With no active constraints it returns $\ddot q = -H^{-1}C$ and an empty $\lambda$.

    **Arguments:**

    - `model`: the mechanical model.
    - `active`: names of the active constraint groups.
    - `q`, `qd`: coordinates and velocities.
    - `params`: the model parameters (any PyTree).
    - `t`: the time, passed on to `model.forces` (time-dependent generalized
      forces).

    **Returns:** `(qdd, lam)`.
    """
    H = model.mass_matrix(q, params)
    C = model.forces(q, qd, params, t)
    n = q.shape[0]
    if not active:
        return symmetric_solve(H, -C), jnp.zeros((0,), q.dtype)
    G = constraint_jacobian(model, active, q, params)
    m = G.shape[0]
    kkt = jnp.block([[H, G.T], [G, jnp.zeros((m, m), H.dtype)]])
    rhs = jnp.concatenate([-C, -convective_term(model, active, q, qd, params)])
    solution = symmetric_solve(kkt, rhs)
    return solution[:n], solution[n:]


def admissible_projector(
    model: AbstractLagrangianModel,
    active: tuple[str, ...],
    q: Float[Array, " n"],
    params: Params,
) -> tuple[Float[Array, "n n"], Float[Array, "n n"]]:
    r"""The projectors onto the admissible and constrained motion spaces.

    Zana et al. (2018) eq. (27), Font-Llagunes & Kövecses:
    $P_a = I - H^{-1}\gamma_q^T(\gamma_q H^{-1}\gamma_q^T)^{-1}\gamma_q$ and
    $P_c = I - P_a$. $P_a$ is idempotent and $P_a^T H P_c = 0$ (the two spaces are
    $H$-orthogonal), so the kinetic energy splits as $T = T_a + T_c$.

    **Arguments:**

    - `model`: the mechanical model (a [`hybrax.AbstractLagrangianModel`][]).
    - `active`: names of the constraint groups that the impact makes active.
    - `q`: the coordinates.
    - `params`: the model parameters (any PyTree).

    **Returns:** `(P_a, P_c)`, each of shape `(n, n)`.
    """
    H = model.mass_matrix(q, params)
    G = constraint_jacobian(model, active, q, params)
    Hinv_GT = jnp.linalg.solve(H, G.T)
    P_c = Hinv_GT @ jnp.linalg.solve(G @ Hinv_GT, G)
    P_a = jnp.eye(q.shape[0], dtype=H.dtype) - P_c
    return P_a, P_c


class ImpactResult(eqx.Module):
    r"""The outcome of a plastic impact (see [`hybrax.plastic_impact`][]).

    - `qd_plus`: post-impact velocity $\dot q^+ = P_a\dot q^-$.
    - `impulse`: contact impulse $\bar\lambda$ with $H(\dot q^+ - \dot q^-) =
      \gamma_q^T\bar\lambda$ (Font-Llagunes & Kövecses' sign).
    - `T_c`: kinetic energy of the constrained motion space, lost in the impact.
    - `T_a`: kinetic energy of the admissible motion space, kept.
    """

    qd_plus: Float[Array, " n"]
    impulse: Float[Array, " m"]
    T_c: Float[Array, ""]
    T_a: Float[Array, ""]


def plastic_impact(
    model: AbstractLagrangianModel,
    active: tuple[str, ...],
    q: Float[Array, " n"],
    qd: Float[Array, " n"],
    params: Params,
) -> ImpactResult:
    r"""Perfectly plastic impact onto the constraints `active`.

    The post-impact velocity is the projection $\dot q^+ = P_a\dot q^-$ (Zana et al.
    2018 eq. 26); the impulse solves $H(\dot q^+ - \dot q^-) = \gamma_q^T\bar\lambda$
    (Font-Llagunes & Kövecses); the energies are eqs. (28)-(29),
    $T_a = \tfrac12\dot q^T P_a^T H P_a\dot q$ and
    $T_c = \tfrac12\dot q^T P_c^T H P_c\dot q$, with the pre-impact velocity.

    **Arguments:**

    - `model`: the mechanical model (a [`hybrax.AbstractLagrangianModel`][]).
    - `active`: names of the constraint groups that the impact makes active.
    - `q`: the coordinates at impact (unchanged by it).
    - `qd`: the pre-impact velocities $\dot q^-$.
    - `params`: the model parameters (any PyTree).

    **Returns:** an [`hybrax.ImpactResult`][]: $\dot q^+$, the impulse, $T_c$ and
    $T_a$.
    """
    H = model.mass_matrix(q, params)
    G = constraint_jacobian(model, active, q, params)
    Hinv_GT = jnp.linalg.solve(H, G.T)
    impulse = -jnp.linalg.solve(G @ Hinv_GT, G @ qd)
    qd_c = -Hinv_GT @ impulse  # P_c qd
    qd_plus = qd - qd_c  # P_a qd
    T_a = 0.5 * qd_plus @ H @ qd_plus
    T_c = 0.5 * qd_c @ H @ qd_c
    return ImpactResult(qd_plus=qd_plus, impulse=impulse, T_c=T_c, T_a=T_a)


def critical_friction(
    model: AbstractLagrangianModel,
    tangential: str,
    normal: str,
    q: Float[Array, " n"],
    params: Params,
) -> Float[Array, ""]:
    r"""The critical friction coefficient of Zana et al. (2018) eq. (24).

    $\kappa_c = |\gamma_{q,n}H^{-1}\gamma_{q,t}^T| / (\gamma_{q,n}H^{-1}
    \gamma_{q,n}^T)$, for a contact with one tangential and one normal constraint
    (the groups `tangential` and `normal`, one row each). The contact does not slip if
    the Coulomb coefficient exceeds $\kappa_c$ (Kövecses & Font-Llagunes 2009).

    **Arguments:**

    - `model`: the mechanical model (a [`hybrax.AbstractLagrangianModel`][]).
    - `tangential`: the name of the contact's tangential constraint group.
    - `normal`: the name of its normal constraint group.
    - `q`: the coordinates.
    - `params`: the model parameters (any PyTree).

    **Returns:** $\kappa_c$, a scalar.

    **Raises:** `ValueError` unless each group has exactly one constraint.
    """
    H = model.mass_matrix(q, params)
    G_t = constraint_jacobian(model, (tangential,), q, params)
    G_n = constraint_jacobian(model, (normal,), q, params)
    if G_t.shape[0] != 1 or G_n.shape[0] != 1:
        raise ValueError(
            "`tangential` and `normal` must each name a group of exactly one "
            f"constraint; got {G_t.shape[0]} and {G_n.shape[0]} rows."
        )
    Hinv_GnT = jnp.linalg.solve(H, G_n[0])
    return jnp.abs(G_t[0] @ Hinv_GnT) / (G_n[0] @ Hinv_GnT)


def kinetic_energy(
    model: AbstractLagrangianModel,
    q: Float[Array, " n"],
    qd: Float[Array, " n"],
    params: Params,
) -> Float[Array, ""]:
    r"""The kinetic energy $T = \tfrac12\dot q^T H(q)\dot q$ of a mechanical model.

    **Arguments:**

    - `model`: the mechanical model (a [`hybrax.AbstractLagrangianModel`][]).
    - `q`, `qd`: coordinates and velocities.
    - `params`: the model parameters (any PyTree).

    **Returns:** $T$, a scalar.
    """
    return 0.5 * qd @ model.mass_matrix(q, params) @ qd
