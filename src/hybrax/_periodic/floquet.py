"""The Floquet analysis: the multipliers of the monodromy matrix on the constraint
manifold."""

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Complex, Float

from .cycle import constraint_tangent_basis
from .spectrum import _by_modulus, _eigenvalues


class FloquetAnalysis(eqx.Module):
    r"""Monodromy matrices and Floquet multipliers of a periodic orbit.

    - `monodromy_ad`, `monodromy_saltation`: $\tilde\Phi$ by autodiff and by the
      saltation product (full state).
    - `max_discrepancy`: $\max|\tilde\Phi_{AD} - \tilde\Phi_{S}|$.
    - `tangent_basis`: $B$ of [`hybrax.constraint_tangent_basis`][] at the section
      state ($I$ for unconstrained states).
    - `multipliers_ad`, `multipliers_saltation`: the nontrivial eigenvalues of
      $B^T\tilde\Phi B$, sorted by decreasing modulus (see
      [`hybrax.floquet_multipliers`][]).
    - `trivial_ad`, `trivial_saltation`: the multiplier of the flow direction
      (ideally 1).
    - `conserved_ad`, `conserved_saltation`: the multiplier of each of the
      section's `invariants` (ideally 1; empty without them), deflated with
      their gradients, so that the nontrivial multipliers keep their number and
      order across parameters and a defective unit pair adds no complex part.
    """

    monodromy_ad: Float[Array, "n n"]
    monodromy_saltation: Float[Array, "n n"]
    max_discrepancy: Float[Array, ""]
    tangent_basis: Float[Array, "n r"]
    multipliers_ad: Complex[Array, " r-1"]
    multipliers_saltation: Complex[Array, " r-1"]
    trivial_ad: Complex[Array, ""]
    trivial_saltation: Complex[Array, ""]
    conserved_ad: Complex[Array, " m"]
    conserved_saltation: Complex[Array, " m"]

    @property
    def leading_multiplier(self):
        """The nontrivial multiplier of largest modulus (autodiff). For a model
        without losses whose section declares no invariant, the energy's
        multiplier 1 is among them: judge stability by the orbit's
        `spectral_radius` then, or declare the invariant (see
        [`hybrax.PoincareSection`][])."""
        return self.multipliers_ad[0]


def _deflated(matrix, vector):
    r"""Deflate an eigenvalue with a known eigenvector `vector` (right or left:
    the reflector is symmetric, so one construction serves both) by a
    Householder reflector $H$, $H v \propto e_1$: $H A H$ is block triangular,
    its corner $v^T A v / v^T v$ the eigenvalue and its trailing block the
    matrix of the other eigenvalues. Returns `(corner,
    block, H)`. (Plain arithmetic: differentiable, and exact for a defective pair,
    whose eigenvalues would split by the square root of rounding.)"""
    n = vector.shape[0]
    norm = jnp.linalg.norm(vector)
    sign = jnp.where(vector[0] >= 0, 1.0, -1.0)
    w = vector.at[0].add(sign * norm)
    H = jnp.eye(n, dtype=matrix.dtype) - 2.0 * jnp.outer(w, w) / jnp.dot(w, w)
    reflected = H @ matrix @ H
    return reflected[0, 0], reflected[1:, 1:], H


def floquet_multipliers(
    monodromy: Float[Array, "n n"],
    tangent_basis: Float[Array, "n r"] | None = None,
    *,
    flow: Float[Array, " n"] | None = None,
    invariant_gradients: Float[Array, "m n"] | None = None,
) -> tuple[Complex[Array, ""], Complex[Array, " m"], Complex[Array, " r-1-m"]]:
    r"""Floquet multipliers: the eigenvalues $\nu_i$ of $A = B^T\tilde\Phi B$, the
    structural ones apart.

    - The trivial multiplier belongs to the flow direction $f(x_0)$, a right
      eigenvector of the monodromy ($\tilde\Phi f = f$ for an autonomous orbit,
      Zana et al. 2018 section 3.5).
    - A first integral $I$ of the cycle gives a left eigenvector $\nabla I$
      ($\nabla I\,\tilde\Phi = \nabla I$): the unit multipliers of a conservative
      system, with the flow's a defective (Jordan) pair whose computed
      eigenvalues would split into $1 \pm \sqrt{\epsilon}$, even into a complex
      pair.

    Each known eigenvector is deflated by a Householder reflector (Saad 2011,
    *Numerical Methods for Large Eigenvalue Problems*, section 4.2): its
    multiplier is the Rayleigh quotient, the rest are the eigenvalues of the
    remaining block, whatever their values, so their number and order do not
    depend on where they lie. Without `flow`, the trivial multiplier is the
    eigenvalue closest to 1. The nontrivial ones come by decreasing modulus; the
    orbit is asymptotically stable if all have $|\nu_i| < 1$.

    **Arguments:**

    - `monodromy`: $\tilde\Phi$, `(n, n)`.
    - `tangent_basis`: $B$, an orthonormal basis of the states the orbit's
      constraints admit (`None`: all states).
    - `flow`: $f(x_0)$, the vector field where the cycle starts.
    - `invariant_gradients`: $\nabla I_j(x_0)$, one row per first integral.

    **Returns:** `(trivial, conserved, nontrivial)`: the flow's multiplier, one
    per invariant (`(m,)`) and the others (`(r - 1 - m,)`).
    """
    matrix = monodromy
    if tangent_basis is not None:
        matrix = tangent_basis.T @ monodromy @ tangent_basis
    if invariant_gradients is None:
        invariant_gradients = jnp.zeros((0, monodromy.shape[0]), monodromy.dtype)
    rows = invariant_gradients
    if flow is not None:
        flow = jnp.asarray(flow, matrix.dtype)
    if tangent_basis is not None:
        rows = rows @ tangent_basis
        flow = None if flow is None else tangent_basis.T @ flow
    conserved = []
    # The invariants first: their gradients are orthogonal to the flow
    # ($\nabla I \cdot f = 0$), so the flow stays an eigenvector of each block.
    for j in range(rows.shape[0]):
        value, matrix, H = _deflated(matrix, rows[j])
        conserved.append(value)
        rows = (rows @ H)[:, 1:]
        flow = None if flow is None else (H @ flow)[1:]
    conserved = jnp.stack(conserved) if conserved else jnp.zeros((0,), matrix.dtype)
    conserved = conserved.astype(jnp.result_type(conserved.dtype, jnp.complex64))
    if flow is None:
        eig = _eigenvalues(matrix)
        trivial_index = jnp.argmin(jnp.abs(eig - 1.0))
        trivial = eig[trivial_index]
        others = jnp.delete(eig, trivial_index, assume_unique_indices=True)
        return trivial, conserved, _by_modulus(others)
    trivial, matrix, _ = _deflated(matrix, flow)
    trivial = trivial.astype(conserved.dtype)
    return trivial, conserved, _by_modulus(_eigenvalues(matrix))


def _floquet(system, section, state, params, mode0, mono_ad, mono_s):
    basis = constraint_tangent_basis(system, mode0, state, params)
    # The known eigenvectors: the flow where the cycle starts, and the gradients
    # of the section's first integrals there.
    flow = system.modes[mode0].vector_field(jnp.zeros((), state.dtype), state, params)
    gradients = [jax.grad(invariant)(state, params) for invariant in section.invariants]
    gradients = (
        jnp.stack(gradients)
        if gradients
        else jnp.zeros((0,) + state.shape, state.dtype)
    )
    trivial_ad, conserved_ad, mult_ad = floquet_multipliers(
        mono_ad, basis, flow=flow, invariant_gradients=gradients
    )
    trivial_s, conserved_s, mult_s = floquet_multipliers(
        mono_s, basis, flow=flow, invariant_gradients=gradients
    )
    return FloquetAnalysis(
        monodromy_ad=mono_ad,
        monodromy_saltation=mono_s,
        max_discrepancy=jnp.max(jnp.abs(mono_ad - mono_s)),
        tangent_basis=basis,
        multipliers_ad=mult_ad,
        multipliers_saltation=mult_s,
        trivial_ad=trivial_ad,
        trivial_saltation=trivial_s,
        conserved_ad=conserved_ad,
        conserved_saltation=conserved_s,
    )
