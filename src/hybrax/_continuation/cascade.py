r"""A period-doubling cascade of periodic orbits: the branch, then the branch of
twice the period at its first period doubling, and so on."""

import dataclasses
import time

import equinox as eqx

from .._continuation_parameter import AbstractParameter
from .._custom_types import Params
from .._hybrid import HybridSystem
from .._periodic import PoincareSection
from .._settings import Settings
from .._solution import RESULTS
from .orbits import continue_orbits, period_doubled_section
from .results import Branch, SpecialPoint
from .settings import ContinuationSettings, resolve_continuation_settings


#: Why a cascade ended: every level asked for was followed; a branch had no
#: located period doubling to switch at; or the switch onto the next level found
#: no period-2 orbit near the doubling.
CASCADE_ENDS = ("levels_reached", "no_period_doubling", "start_failed")


class CascadeSwitch(eqx.Module):
    """A switch of a cascade onto the next level (see [`hybrax.Cascade`][]):
    the period doubling switched at, the branch it gave (for a failed switch,
    empty, its `message` saying why) and the switch's wall time."""

    doubling: SpecialPoint
    branch: Branch
    seconds: float


class Cascade(eqx.Module):
    """The levels of a period-doubling cascade (see [`hybrax.continue_cascade`][]).

    - `branches`: the branch of each level, period 1 first (the branch given), then
      periods 2, 4, ... in cycles of the model's own section.
    - `sections`: the section of each level (the doubled section of the one
      before: [`hybrax.period_doubled_section`][]).
    - `doublings`: the period doubling each level after the first was switched at
      (one fewer than `branches`).
    - `seconds`: the wall time of each level's continuation (0 for the first).
    - `ended`: why the cascade ended, one of `hybrax.CASCADE_ENDS`.
    - `failed_switch`: where `ended` is `"start_failed"`, the
      [`hybrax.CascadeSwitch`][] that found no orbit (its `branch.message` says
      why); else `None`.
    """

    branches: tuple[Branch, ...]
    sections: tuple[PoincareSection, ...]
    doublings: tuple[SpecialPoint, ...]
    seconds: tuple[float, ...]
    ended: str = eqx.field(static=True)
    failed_switch: CascadeSwitch | None = None

    @property
    def periods(self) -> tuple[int, ...]:
        """Each level's period in cycles of the first level's section."""
        return tuple(2**k for k in range(len(self.branches)))


def continue_cascade(
    system: HybridSystem,
    section: PoincareSection,
    branch: Branch,
    params: Params,
    parameter: AbstractParameter | str,
    *,
    levels: int,
    stop: float | tuple[float, float],
    settings: Settings | None = None,
    continuation_settings: ContinuationSettings | None = None,
) -> Cascade:
    r"""Follow a period-doubling cascade from a branch of periodic orbits: switch
    onto the period-2 branch at the first located period doubling of `branch`
    ([`hybrax.continue_orbits`][] from the doubling), then onto the period-4 branch
    at the first doubling of that one, `levels` times, or until a branch has no
    located doubling or the switch finds no orbit.

    Each level $k$ is a branch of zeros of $\pi(P^{2^k}(\chi(u)))- u$, the return
    map of the section doubled $k$ times ([`hybrax.period_doubled_section`][]),
    leaving its doubling tangent to the multiplier $-1$'s eigenvector (Kuznetsov
    2004, sec. 4.4; Feigenbaum 1978 for the cascade of maps). Garcia, Chatterjee,
    Ruina and Coleman 1998 ("The simplest walking model", J. Biomech. Eng.)
    follow such a cascade of the simplest walker in the slope; Goswami, Thuilot
    and Espiau 1998 ("A study of the passive gait of a compass-like biped robot",
    Int. J. Robotics Research) that of the compass gait.

    **Arguments:**

    - `system`, `section`: the hybrid system and the section of `branch`.
    - `branch`: a branch of [`hybrax.continue_orbits`][] (the period-1 level).
    - `params`, `parameter`, `settings`: as for [`hybrax.continue_orbits`][].
    - `levels`: how many doublings to switch at (a positive integer).
    - `stop`: the end of the parameter's range for every level, or its range
      `(low, high)`.
    - `continuation_settings`: the step control of every level after the first
      (pseudo-arclength, as switched branches leave their doubling along the
      arclength); its `max_period` bounds the first level's period, and level
      $k$ gets $2^k$ times it.

    **Returns:** a [`hybrax.Cascade`][] with the branches followed, their
    sections, the doublings switched at, each level's seconds, and why it ended.

    **Raises:** `ValueError` for `levels` that is not a positive integer; Ctrl-C
    as `hybrax.Interrupted` from the level being followed (the levels before it
    are lost: follow a cascade level by level with [`hybrax.continue_orbits`][]
    from each doubling to keep them).
    """
    if isinstance(levels, bool) or not isinstance(levels, int) or levels < 1:
        raise ValueError(f"`levels` must be a positive integer; got {levels!r}.")
    continuation = resolve_continuation_settings(continuation_settings)
    branches, sections, doublings, seconds = [branch], [section], [], [0.0]
    ended, failed_switch = "levels_reached", None
    for k in range(1, levels + 1):
        located = [p for p in branch.period_doublings if p.located]
        if not located:
            ended = "no_period_doubling"
            break
        point = located[0]
        began = time.perf_counter()
        level = continuation
        if continuation.max_period is not None:
            level = dataclasses.replace(
                continuation, max_period=(2**k) * continuation.max_period
            )
        doubled = continue_orbits(
            system,
            section,
            point,
            params,
            parameter,
            stop=stop,
            settings=settings,
            continuation_settings=level,
            throw=False,
        )
        elapsed = time.perf_counter() - began
        if doubled.result == RESULTS.start_failed:
            ended = "start_failed"
            failed_switch = CascadeSwitch(point, doubled, elapsed)
            break
        section = period_doubled_section(section)
        branch = doubled
        branches.append(branch)
        sections.append(section)
        doublings.append(point)
        seconds.append(elapsed)
    return Cascade(
        branches=tuple(branches),
        sections=tuple(sections),
        doublings=tuple(doublings),
        seconds=tuple(seconds),
        ended=ended,
        failed_switch=failed_switch,
    )
