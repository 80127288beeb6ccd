"""Eigenvalues of the reduced Jacobian and the monodromy, sorted by modulus."""

import jax
import jax.numpy as jnp
from jaxtyping import Array, Complex, Float


def modulus_key(eig, xp=jnp):
    """The sort key of the one ordering of multipliers in the library: decreasing
    modulus, a complex pair with its positive imaginary part first (the relative
    1e-12 lets the imaginary part decide between a pair's rounded moduli). `xp`:
    `jax.numpy` or `numpy`."""
    return -xp.abs(eig) * (1 + 1e-12) - 1e-15 * xp.imag(eig)


def _by_modulus(eig: Complex[Array, " k"]) -> Complex[Array, " k"]:
    """`eig` sorted by `modulus_key`."""
    return eig[jnp.argsort(jax.lax.stop_gradient(modulus_key(eig)))]


@jax.jit
def _eigenvalues(matrix: Float[Array, "k k"]) -> Complex[Array, " k"]:
    """The eigenvalues of a small real matrix by LAPACK's `geev` (differentiable).

    LAPACK on every backend: on GPUs `jnp.linalg.eigvals` runs cuSOLVER's `geev`
    one matrix after another (a large batch then takes seconds), while JAX's
    LAPACK path copies the batch to the host once.
    Jitted on its own, as `jnp.linalg.eigvals` is: inlined into a larger program
    compiled by XLA CPU at backend optimisation level 0, the forward-mode
    derivatives of an orbit's quantities moved by 3.5e-6 (relative)."""
    return jax.lax.linalg.eig(
        matrix,
        compute_left_eigenvectors=False,
        compute_right_eigenvectors=False,
        implementation=jax.lax.linalg.EigImplementation.LAPACK,
    )[0]


def sorted_multipliers(matrix: Float[Array, "k k"]) -> Complex[Array, " k"]:
    r"""The eigenvalues of `matrix` by decreasing modulus, a complex pair with its
    positive imaginary part first (differentiable; the order is not)."""
    return _by_modulus(_eigenvalues(matrix))
