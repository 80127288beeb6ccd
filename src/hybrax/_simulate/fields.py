"""The pieces handed to diffrax."""

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp

from .tables import Tables


def _state_of_augmented(y):
    return y[0]


def _identity(y):
    return y


class _PhaseField(eqx.Module):
    """The right-hand side of one phase; `args = (params, mode, armed, t_start,
    on_surface)`. With an augmentation, `y = (x, extra)`."""

    tables: Tables
    augmentation: Any

    def __call__(self, t, y, args):
        params, mode = args[0], args[1]

        def field(t_, x_):
            return self.tables.field(mode, t_, x_, params)

        if self.augmentation is None:
            return field(t, y)
        return self.augmentation.field(field, t, y)


# The `t1` of every phase's solve: a constant, beyond any horizon. The horizon
# (`Settings.t_max`, a run-time value) is an entry of the event condition
# instead, and a lane with nothing left to do starts its solve at `t1`. diffrax
# rounds a traced `t1` down by 100 ULPs, one `nextafter` after another, in every
# solve: hundreds of operations in each solve's program, and seconds of an
# analysed orbit's compile.
_FAR = 1e30


class _PhaseCondition(eqx.Module):
    """The event condition of one stage: the smallest entry of the mode's guards
    (see `Tables.entries`) and of the horizon, $t_\text{end} - t$. A phase that
    starts on its guard surface, or a rounding error past it (a foot at -1e-17 m
    after the previous root find), must still see that guard positive at its
    start: diffrax only fires on a sign change from > 0 to <= 0, and would
    otherwise miss the next crossing when one large step spans both the rise and
    the return. The condition is therefore read as +tiny at the stage's start
    time only; the surface itself is not moved."""

    tables: Tables
    augmented: bool = eqx.field(static=True)

    def __call__(self, t, y, args, **kwargs):
        del kwargs
        params, mode, armed, t_start, on_surface, horizon = args
        x = y[0] if self.augmented else y
        value = jnp.minimum(
            self.tables.condition(mode, t, x, params, armed),
            (horizon - t).astype(x.dtype),
        )
        tiny = jnp.finfo(value.dtype).tiny
        return jnp.where(on_surface & (t <= t_start), tiny, value)


class _GuardRate(eqx.Module):
    """The stage's event-condition entries and their rates along the flow, for
    the dip detecting step-size controller."""

    tables: Tables
    augmented: bool = eqx.field(static=True)

    def __call__(self, t, y, args):
        params, mode, armed = args[0], args[1], args[2]
        x = y[0] if self.augmented else y
        f = self.tables.field(mode, t, x, params)
        return jax.jvp(
            lambda s, z: self.tables.entries(mode, s, z, params, armed),
            (t, x),
            (jnp.ones_like(t), f),
        )
