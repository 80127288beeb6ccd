"""The defaults of an orbit sweep's solves, shared by [`hybrax.sweep_orbits`][] and
`hybrax sweep`, so that a command and a library call with defaults compute the same
map. A module without JAX: the command line builds its parser from it before JAX is
imported.

Under `vmap` every loop of a chunk waits for its slowest element, so a point
without an orbit must be cheap: a short time limit per cycle (the zoo's orbit
periods on their default grids stay below about 2 s) and few Newton iterations
(Newton from a fair start converges in 3-6; see the strategies of
[`hybrax.sweep_orbits`][] for the starts tried before a point is reported without
an orbit).
"""

#: The time limit of one cycle (`hybrax.Settings.t_max`).
SWEEP_T_MAX = 5.0

#: Newton's iteration limit of one solve (`hybrax.Shooting.max_iterations`).
SWEEP_MAX_ITERATIONS = 10

#: The return-map iterations of the last strategy
#: (`hybrax.Shooting.return_map_iterations`): from the guess, before Newton, only where
#: Newton from the guess and from the neighbours' orbits found no orbit.
SWEEP_MAP_ITERATIONS = 30

#: Newton's Jacobian (`hybrax.Shooting.jacobian`): under `vmap` the variational
#: cycle compiles faster than forward-mode AD and runs the hopper's default grid
#: faster.
SWEEP_JACOBIAN = "variational"

#: The converged neighbours whose orbits an element without an orbit from its guess
#: is solved from, nearest first (`hybrax.SweepSettings.neighbours`): the eight
#: neighbours of a point of a two-parameter grid.
SWEEP_NEIGHBOURS = 8

#: The strategies of [`hybrax.sweep_orbits`][], in the order they are tried:
#: Newton from the guess, from the nearest converged neighbours' orbits, and after
#: return-map iterations from the guess. `OrbitSweep.found_by` holds positions in
#: this tuple (-1 where none found an orbit).
SWEEP_STRATEGIES = ("guess", "neighbour", "return_map")
