r"""Saltation matrices and phase fundamental matrices, computed generically by AD.

For a transition with guard $h$, reset $g$ and vector fields $f^-$ (before) and
$f^+$ (after), the saltation matrix (Leine 2000; Dankowicz & Piiroinen 2002; Zana et
al. 2018 eqs. 38-39) is

$$S = g_x + \frac{(f^+ - g_x f^-)\,h_x}{h_x f^- + h_t},$$

with $f^- = f^-(t, x^-)$, $f^+ = f^+(t, g(t, x^-))$ and the gradients at $x^-$. The
identity reset gives eq. (38), $S = I + (f^+ - f^-)h_x/(h_x f^-)$.
"""

import diffrax as dfx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ._custom_types import Params
from ._hybrid import HybridSystem
from ._misc import trace_once
from ._settings import Settings, resolve_settings


def saltation_matrix(
    system: HybridSystem,
    transition: int | str,
    t: Float[Array, ""],
    x_before: Float[Array, " n"],
    params: Params,
) -> Float[Array, "n n"]:
    r"""The saltation matrix of `transition` at the pre-event state `x_before`.

    $S = g_x + (f^+ - g_x f^-)h_x / (h_x f^- + h_t)$, every derivative by JAX autodiff
    from the system's own guard, reset and vector fields (no model-specific formula).
    A reset that depends explicitly on time is treated as frozen in time.

    **Arguments:**

    - `system`: the [`hybrax.HybridSystem`][].
    - `transition`: the transition (index or name).
    - `t`, `x_before`: event time and state just before the event.
    - `params`: the parameters.

    **Returns:** the $n \times n$ matrix $S$.
    """
    return saltation_parts(
        system, system.transition_index(transition), t, x_before, params
    )[0]


def saltation_parts(system: HybridSystem, k: int, t, x_before, params):
    r"""The saltation matrix of transition `k` with the pieces it is built from,
    `(S, h_x, h_t, f^-)`; $-h_x\Phi/(h_x f^- + h_t)$ is then the event-time gradient
    (used by the variational pass of the orbit routines)."""
    tr = system.transitions[k]
    x_before = jnp.asarray(x_before)
    t = jnp.asarray(t, x_before.dtype)
    reset, guard = trace_once(tr.reset), trace_once(tr.guard)
    g_x = jax.jacfwd(lambda x: reset(t, x, params))(x_before)
    h_x, h_t = jax.grad(lambda x, s: jnp.asarray(guard(s, x, params)), (0, 1))(
        x_before, t
    )
    fm = trace_once(system.modes[system.sources[k]].vector_field)(t, x_before, params)
    fp = trace_once(system.modes[system.targets[k]].vector_field)(
        t, reset(t, x_before, params), params
    )
    S = g_x + jnp.outer(fp - g_x @ fm, h_x) / (h_x @ fm + h_t)
    return S, h_x, h_t, fm


def phase_fundamental_matrix(
    system: HybridSystem,
    mode: int | str,
    t0: Float[Array, ""],
    x0: Float[Array, " n"],
    duration: Float[Array, ""],
    params: Params,
    *,
    settings: Settings | None = None,
) -> Float[Array, "n n"]:
    r"""The fundamental matrix $\Phi = \partial\varphi(x_0, \tau)/\partial x_0$ of one
    mode's smooth flow over a fixed duration $\tau$, i.e. the solution of the first
    variational equation $\dot\Phi = f_x\Phi$, $\Phi(0) = I$ (Zana et al. 2018 eq. 35),
    obtained by forward-mode AD through the diffrax solve (no events) with the
    solver, step-size controller and `max_steps` of `settings`.

    **Arguments:**

    - `system`: the [`hybrax.HybridSystem`][].
    - `mode`: the mode whose flow is taken (index or name).
    - `t0`: the initial time.
    - `x0`: the initial state $x_0$.
    - `duration`: $\tau$; the guards are not watched over it.
    - `params`: the parameter PyTree.
    - `settings`: a [`hybrax.Settings`][]; default `Settings()`.

    **Returns:** $\Phi$, shape `(n, n)`.
    """
    settings = resolve_settings(settings)
    index = system.mode_index(mode) if isinstance(mode, str | int) else mode
    field = system.modes[index].vector_field

    def flow(x):
        sol = dfx.diffeqsolve(
            dfx.ODETerm(lambda t, y, p: field(t, y, p)),
            settings.solver,
            t0=t0,
            t1=t0 + duration,
            dt0=None,
            y0=x,
            args=params,
            saveat=dfx.SaveAt(t1=True),
            stepsize_controller=settings.stepsize_controller,
            max_steps=settings.max_steps,
            adjoint=dfx.ForwardMode(),
            throw=False,
        )
        return sol.ys[-1]

    return jax.jacfwd(flow)(x0)
