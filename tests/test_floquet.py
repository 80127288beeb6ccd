"""`hybrax.floquet_multipliers` on matrices with known spectra: the values against
the construction and NumPy, the order, the tangent basis, and derivatives (grad,
jacfwd) against central differences, under `vmap` too."""

import jax
import jax.numpy as jnp
import numpy as np

import hybrax as hx


# A fixed, well-conditioned change of basis.
_V = np.random.default_rng(0).normal(size=(4, 4)) + 4 * np.eye(4)


def _monodromy(rho, theta, real):
    """$V \\operatorname{diag}(1, \\text{real}, R(\\rho, \\theta)) V^{-1}$: the
    trivial multiplier 1, a real one and the pair $\\rho e^{\\pm i\\theta}$."""
    block = jnp.zeros((4, 4)).at[0, 0].set(1.0).at[1, 1].set(real)
    rotation = rho * jnp.array(
        [[jnp.cos(theta), -jnp.sin(theta)], [jnp.sin(theta), jnp.cos(theta)]]
    )
    block = block.at[2:, 2:].set(rotation)
    return jnp.asarray(_V) @ block @ jnp.linalg.inv(jnp.asarray(_V))


def test_multipliers_of_a_known_spectrum():
    """The trivial multiplier apart, the others by decreasing modulus, a complex
    pair with its positive imaginary part first; equal to NumPy's eigenvalues;
    with a tangent basis B, those of B^T M B."""
    M = np.asarray(_monodromy(0.6, 0.7, -0.3))
    trivial, others = jax.jit(hx.floquet_multipliers)(jnp.asarray(M))
    expected = [0.6 * np.exp(0.7j), 0.6 * np.exp(-0.7j), -0.3]
    np.testing.assert_allclose(trivial, 1.0, atol=1e-12)
    np.testing.assert_allclose(others, expected, atol=1e-12)
    numpy_all = np.linalg.eigvals(M)
    np.testing.assert_allclose(
        np.sort_complex(np.append(others, trivial)),
        np.sort_complex(numpy_all),
        atol=1e-12,
    )
    # An orthonormal basis of a 3-dimensional subspace.
    B, _ = np.linalg.qr(np.random.default_rng(1).normal(size=(4, 3)))
    trivial_b, others_b = hx.floquet_multipliers(jnp.asarray(M), jnp.asarray(B))
    reduced = np.linalg.eigvals(B.T @ M @ B)
    np.testing.assert_allclose(
        np.sort_complex(np.append(others_b, trivial_b)),
        np.sort_complex(reduced),
        atol=1e-12,
    )


def _leading_modulus(params):
    """|leading| + |last| nontrivial multiplier: rho + |real| while rho > |real|."""
    _, others = hx.floquet_multipliers(_monodromy(*params))
    return jnp.abs(others[0]) + jnp.abs(others[-1])


def test_derivatives_against_central_differences():
    """|leading| + |smallest| multiplier is rho + |real|: grad and jacfwd equal
    central differences of the eigenvalue routine (and the closed form
    (1, 0, sign(real))); under vmap, each element's gradient."""
    params = jnp.array([0.6, 0.7, -0.3])
    value = jax.jit(_leading_modulus)
    np.testing.assert_allclose(value(params), 0.9, atol=1e-12)
    h = 1e-6
    central = np.array(
        [
            (value(params.at[i].add(h)) - value(params.at[i].add(-h))) / (2 * h)
            for i in range(3)
        ]
    )
    gradient = jax.jit(jax.grad(_leading_modulus))(params)
    forward = jax.jit(jax.jacfwd(_leading_modulus))(params)
    np.testing.assert_allclose(gradient, central, atol=1e-8)
    np.testing.assert_allclose(forward, central, atol=1e-8)
    np.testing.assert_allclose(gradient, [1.0, 0.0, -1.0], atol=1e-9)
    batch = jnp.array([[0.6, 0.7, -0.3], [0.5, 1.2, 0.2], [0.8, 0.3, -0.1]])
    batched = jax.jit(jax.vmap(jax.grad(_leading_modulus)))(batch)
    np.testing.assert_allclose(
        batched, [[1.0, 0.0, -1.0], [1.0, 0.0, 1.0], [1.0, 0.0, -1.0]], atol=1e-9
    )
