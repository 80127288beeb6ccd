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
    trivial, conserved, others = jax.jit(hx.floquet_multipliers)(jnp.asarray(M))
    assert conserved.shape == (0,)
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
    trivial_b, _, others_b = hx.floquet_multipliers(jnp.asarray(M), jnp.asarray(B))
    reduced = np.linalg.eigvals(B.T @ M @ B)
    np.testing.assert_allclose(
        np.sort_complex(np.append(others_b, trivial_b)),
        np.sort_complex(reduced),
        atol=1e-12,
    )


def _leading_modulus(params):
    """|leading| + |last| nontrivial multiplier: rho + |real| while rho > |real|."""
    _, _, others = hx.floquet_multipliers(_monodromy(*params))
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


def _conservative_monodromy(nu, jordan=1.0):
    """$V J V^{-1}$ with $J$ = a Jordan block at 1 (the flow and a conserved
    quantity of a conservative orbit), $\\nu$ and 0; the flow direction is
    $f = V e_1$ and the invariant's gradient $\\nabla I = e_2^T V^{-1}$ (a left
    eigenvector, with $\\nabla I \\cdot f = 0$)."""
    J = jnp.zeros((4, 4)).at[0, 0].set(1.0).at[0, 1].set(jordan).at[1, 1].set(1.0)
    J = J.at[2, 2].set(nu)
    V = jnp.asarray(_V)
    V_inv = jnp.linalg.inv(V)
    return V @ J @ V_inv, V[:, 0], V_inv[1]


def test_structural_multipliers_are_deflated_by_their_eigenvectors():
    """A conservative orbit's defective unit pair: deflated by the flow and the
    invariant's gradient, the flow's and the invariant's multipliers are 1 and the
    nontrivial ones are exactly (nu, 0), in that order whether |nu| is above or
    below 1, with no imaginary part; an eigenvalue routine alone splits the pair
    by the square root of a 1e-12 perturbation (into a real or a complex pair).
    Also with a tangent basis, and differentiable (the derivative of nu by
    central differences)."""
    for nu in (-2.5, -0.4, 0.3, 1.7):
        M, flow, gradient = _conservative_monodromy(nu)
        M = M + 1e-12 * jnp.asarray(np.random.default_rng(2).normal(size=(4, 4)))
        trivial, conserved, others = hx.floquet_multipliers(
            M, flow=flow, invariant_gradients=gradient[None]
        )
        np.testing.assert_allclose(trivial, 1.0, atol=1e-9)
        np.testing.assert_allclose(conserved, [1.0], atol=1e-9)
        np.testing.assert_allclose(others, [nu, 0.0], atol=1e-9)
        assert np.all(np.abs(np.imag(others)) == 0)
        # An eigenvalue routine alone splits the pair by about sqrt(1e-12).
        plain = np.linalg.eigvals(np.asarray(M))
        pair = plain[np.argsort(np.abs(plain - 1.0))[:2]]
        assert np.max(np.abs(pair - 1.0)) > 1e-7
    # The same orbit embedded in a 6-dimensional state with two constrained
    # directions: B^T (B M B^T) B = M, the flow and gradient mapped by B.
    B, _ = np.linalg.qr(np.random.default_rng(3).normal(size=(6, 4)))
    M, flow, gradient = _conservative_monodromy(-0.4)
    big = jnp.asarray(B) @ M @ jnp.asarray(B.T)
    trivial, conserved, others = hx.floquet_multipliers(
        big,
        jnp.asarray(B),
        flow=jnp.asarray(B) @ flow,
        invariant_gradients=(gradient @ jnp.asarray(B.T))[None],
    )
    np.testing.assert_allclose([trivial, conserved[0]], [1.0, 1.0], atol=1e-12)
    np.testing.assert_allclose(others, [-0.4, 0.0], atol=1e-12)

    def leading(nu):
        M, flow, gradient = _conservative_monodromy(nu)
        _, _, others = hx.floquet_multipliers(
            M, flow=flow, invariant_gradients=gradient[None]
        )
        return jnp.real(others[0])

    h = 1e-6
    central = (leading(-0.4 + h) - leading(-0.4 - h)) / (2 * h)
    np.testing.assert_allclose(jax.grad(leading)(-0.4), central, atol=1e-8)
    np.testing.assert_allclose(jax.jacfwd(leading)(-0.4), 1.0, atol=1e-9)
