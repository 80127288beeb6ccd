"""What every field of the command line's JSON files means, and in which unit:
the one reference that `docs/pages/json-reference.md` is generated from
(`reference_markdown()`; `python -m hybrax._cli.json_fields` prints it) and that
the writers check their records against (`check`, called by
`common._write_json`: a field that the reference does not describe is a
warning, never a change of the file).

`FIELDS` maps each section (a command's file, or a record nested in one) to
`field -> (unit, meaning)`. The unit is `"1"` for a dimensionless number (a
count, a ratio, a multiplier), `"-"` for text, flags, lists of names and records
(their entries' units in the meaning), `MODEL_UNITS` for values in the model's
own units (its parameters, its state, its quantities), else a unit such as
`"s"`. A field in angle brackets (`<PARAM>`) stands for names that the model or
the run chooses.
"""

import warnings
from collections.abc import Collection, Mapping


# The unit of values that are in the model's own units, which differ from one
# entry to the next (its parameters', its state coordinates', its quantities').
MODEL_UNITS = "model"

# Every file that `--json` writes starts with these (`common._write_json`).
_HEADER = {
    "hybrax": ("-", "The version of hybrax that wrote the file."),
    "schema": (
        "1",
        "The layout's number (now 1), raised when a field changes meaning.",
    ),
}

_SETTINGS = (
    "-",
    "The solver options: `tol` (1, the integration tolerance rtol = atol), "
    "`t_max` (s, the longest run or cycle before it is given up) and "
    "`max_ode_steps` (1, the integration steps allowed per phase).",
)

_MODEL = ("-", "The model's name (`hybrax models`).")
_FORM = ("-", "The model's formulation used (`--form`).")
_PARAMS = (
    MODEL_UNITS,
    "The parameters used, name -> value, each in its own unit (`hybrax models "
    "MODEL` lists them).",
)
_STATE_NAMES = (
    "-",
    "The names of the state's coordinates, in the order of every state vector "
    "of the file.",
)
_WALL = "wall-clock time"

FIELDS: dict[str, dict[str, tuple[str, str]]] = {
    "models": {
        "<MODEL>": (
            "-",
            "One record per model shown (every model without names), keyed by "
            "the model's name: see `models: MODEL`.",
        ),
    },
    "models: MODEL": {
        "description": ("-", "What the model is, in one sentence."),
        "forms": ("-", "The names of its formulations (`--form`)."),
        "state": (
            "-",
            "The names of its state's coordinates, in order (the order of `--x0`).",
        ),
        "commands": ("-", "The commands that run it."),
        "parameters": (
            "-",
            "Name -> record: `unit` (text: the parameter's unit, `1` for a "
            "dimensionless one), `meaning`, `default` (in that unit; `null` for "
            "a derived parameter, which sets others), `derived` (flag) and "
            "`value` (at the defaults, in that unit).",
        ),
        "quantities": (
            "-",
            "The names of its orbit quantities (`tune --target`, `sweep --quantity`).",
        ),
    },
    "simulate": {
        **_HEADER,
        "model": _MODEL,
        "form": _FORM,
        "params": _PARAMS,
        "x0": (
            MODEL_UNITS,
            "The initial state, in the order of `state_names` (the model's "
            "coordinates and units).",
        ),
        "state_names": _STATE_NAMES,
        "cycles": (
            "1",
            "The cycles run (`--cycles`), each the events of the model's Poincaré "
            "section once (one event without a section).",
        ),
        "hops": ("1", "The same number as `cycles` (the hopper's word for a cycle)."),
        "settings": _SETTINGS,
        "status": (
            "-",
            "How the run ended: a library status (`hybrax.STATUS_NAMES`; "
            "`successful` where every event asked for happened).",
        ),
        "status_message": ("-", "The status's explanation, in words."),
        "admissible": (
            "-",
            "Flag: the run keeps every boundary its model declares.",
        ),
        "boundary_violations": (
            "-",
            "Each declared boundary the run breaks: `kind` (`force_reversal`, "
            "`release_reversal` or `clearance`), `event` (1, counted from 1), "
            "`event_kind`, `mode`, `name` (the observable, `null` for a guard), "
            "`value` (in the model's units of that guard or observable) and "
            "`text` (the note's words).",
        ),
        "t_final": ("s", "The simulated time at which the run ended."),
        "events": (
            "-",
            "Each event in order: `t` (s), `kind` (the transition's name), "
            "`state_before` and `state_after` (the model's units: the state just "
            "before and after the reset), `T_c` and `T_a` (J: the kinetic energy "
            "an impact removes and keeps; `null` for an event without one) and "
            "`guard_after` (the model's units: the smallest sign-normalised guard "
            "of the next phase at its start; negative: it started past a guard).",
        ),
    },
    "orbit": {
        **_HEADER,
        "model": _MODEL,
        "form": _FORM,
        "params": _PARAMS,
        "state_names": _STATE_NAMES,
        "settings": _SETTINGS,
        "converged": ("-", "Flag: an admissible periodic orbit was found."),
        "status": (
            "-",
            "How the orbit search ended: a library status (`hybrax.STATUS_NAMES`).",
        ),
        "status_message": ("-", "The status's explanation, in words."),
        "newton_iterations": ("1", "The Newton iterations of the shooting."),
        "residual_norm": (
            MODEL_UNITS,
            "The largest entry of the periodicity defect at the end, in the "
            "units of the section's unknowns.",
        ),
        "homotopy": (
            "-",
            "Where the orbit was followed from the model's defaults: `from`, "
            "`status` (a library status), `reached` (flag), `end` (1: the share "
            "of the path from the defaults that the family reached), "
            "`continuation_points` (1) and `message`; `null` where it was not.",
        ),
        "state": (
            MODEL_UNITS,
            "The orbit's state after the section's last event, in the order of "
            "`state_names`; `null` without an orbit.",
        ),
        "period": ("s", "The orbit's period; `null` without an orbit."),
        "phase_durations": (
            "s",
            "The duration of each phase of the cycle, in order; `null` without an "
            "orbit.",
        ),
        "<summary>": (
            MODEL_UNITS,
            "The model's declared quantities of the orbit (`hybrax.Quantity`), "
            "by name (e.g. the compass gait's `step_length`, the hopper's "
            "`t_flight`), each in its declared unit as the console's summary "
            "prints it, a condition as `true`/`false`; `null` without an orbit. "
            "A model without quantities writes none.",
        ),
        "reduced_jacobian": (
            MODEL_UNITS,
            "The Jacobian of the return map in the section's unknowns, as rows "
            "(entry i, j in the unit of unknown i over that of unknown j); `null` "
            "without an orbit.",
        ),
        "reduced_jacobian_eigenvalues": (
            "1",
            "Its eigenvalues, complex numbers as `[re, im]` pairs.",
        ),
        "monodromy_ad": (
            MODEL_UNITS,
            "The monodromy matrix in the model's minimal coordinates by automatic "
            "differentiation, as rows (entry i, j in the unit of coordinate i over "
            "that of coordinate j).",
        ),
        "monodromy_saltation": (
            MODEL_UNITS,
            "The same matrix as the product of the phases' fundamental and "
            "saltation matrices.",
        ),
        "max_discrepancy": (
            MODEL_UNITS,
            "The largest entry of the difference of the two monodromy matrices.",
        ),
        "max_discrepancy_full_state": (
            MODEL_UNITS,
            "The same in the full state (written with an orbit only).",
        ),
        "multipliers_ad": (
            "1",
            "The nontrivial Floquet multipliers by automatic differentiation, by "
            "decreasing modulus, complex numbers as `[re, im]` pairs.",
        ),
        "multipliers_saltation": (
            "1",
            "The same by the saltation product, as `[re, im]` pairs.",
        ),
        "trivial_multiplier_ad": (
            "1",
            "The trivial multiplier (along the flow, 1 up to rounding) by "
            "automatic differentiation, one `[re, im]` pair.",
        ),
        "trivial_multiplier_saltation": (
            "1",
            "The same by the saltation product, one `[re, im]` pair.",
        ),
        "conserved_multipliers_ad": (
            "1",
            "The multipliers of the section's declared invariants (e.g. the "
            "energy; 1 up to rounding) by automatic differentiation, as "
            "`[re, im]` pairs.",
        ),
        "conserved_multipliers_saltation": (
            "1",
            "The same by the saltation product, as `[re, im]` pairs.",
        ),
        "stable": (
            "-",
            "Flag: every nontrivial multiplier lies inside the unit circle by "
            "both routes; `null` without an orbit.",
        ),
        "gait_sensitivity": (
            MODEL_UNITS,
            "Where the model declares disturbances (`ModelBundle.disturbances`), "
            "for each by name: the gait sensitivity norm of Hobbelen & Wisse "
            "(2007) on the model's gait indicators (`hybrax.gait_sensitivity`): "
            "`norm` (the indicators' units over `unit`, the disturbance's; "
            "`null` where infinite, an unstable orbit), `norms` (each "
            "indicator's own), "
            "`indicator_units`, `meaning` and `status` (a library status); absent "
            "for a model without disturbances.",
        ),
        "best_iterate": (
            MODEL_UNITS,
            "Without an orbit: the section's unknowns with the smallest defect "
            "the search met.",
        ),
        "best_residual_norm": (
            MODEL_UNITS,
            "Without an orbit: that iterate's defect (largest entry).",
        ),
        "boundary_violations": (
            "-",
            "Without an admissible orbit: each declared boundary the orbit found "
            "breaks, as text (`force_reversal@k: ...`, `release_reversal@k@name: "
            "...`, with its value).",
        ),
    },
    "continue": {
        **_HEADER,
        "model": _MODEL,
        "form": _FORM,
        "params": (
            MODEL_UNITS,
            "The parameters at the start of the branch, name -> value, each in "
            "its own unit (`hybrax models MODEL` lists them).",
        ),
        "parameter": ("-", "The name of the parameter continued in (`--param`)."),
        "start": (
            MODEL_UNITS,
            "The parameter's first value, in its unit.",
        ),
        "stop": (
            MODEL_UNITS,
            "The value the branch was followed towards, in the parameter's unit.",
        ),
        "method": ("-", "`pseudo-arclength` or `natural` (`--method`)."),
        "status": (
            "-",
            "How the whole run ended: the status of its last stage (`ended_in`). "
            "A library status (`hybrax.STATUS_NAMES`: `reached_bound`, "
            "`max_points_reached`, `interrupted`, ...), or for a cascade its end "
            "(`hybrax.CASCADE_ENDS`: `no_period_doubling`, `start_failed`), or for "
            "a curve `no_point` or `empty_range` (see `continue: curve`).",
        ),
        "message": ("-", "That stage's message."),
        "branch_status": (
            "-",
            "How the branch itself ended: a library status (`hybrax.STATUS_NAMES`).",
        ),
        "branch_message": ("-", "The branch's message."),
        "n_points": ("1", "The points on the branch."),
        "n_rejected": ("1", "The steps retried with a smaller step."),
        "settings": _SETTINGS,
        "seconds": ("s", f"The branch's {_WALL}, compilation included."),
        "ended_in": (
            "-",
            "The run's last stage: `branch`, `cascade` or `curve`.",
        ),
        "end": ("-", "The line, printed last, that says how the run ended."),
        "force_reversals": (
            "-",
            "Points where a phase starts on its guard: the parameter's value "
            "(keyed by its name, in its unit), `event`, `guard_at_start` (the "
            "model's units) and `located` (flag).",
        ),
        "grazings": (
            "-",
            "Points where a declared clearance reaches zero inside a phase: the "
            "parameter's value (keyed by its name), `phase`, `clearance` (its "
            "name), `value` (the model's units) and `located`.",
        ),
        "release_reversals": (
            "-",
            "Points where an impact's release velocity changes sign: the "
            "parameter's value (keyed by its name), `event`, `release` (its name), "
            "`value` (the model's units) and `located`.",
        ),
        "branch": (
            "-",
            "Every point of the branch: the parameter's value (keyed by its name, "
            "in its unit), `period` (in the model's time unit), `multiplier` (1: "
            "the leading multiplier's value where it is real, else its modulus), "
            "each of the model's declared quantities by name in its unit (a "
            "condition as a flag), `stable` (flag), `kind` and `state` (the "
            "orbit's state in the model's minimal coordinates).",
        ),
        "folds": (
            "-",
            "The folds: a point's record with `located` (flag) and `test_value` (1).",
        ),
        "period_doublings": ("-", "The period doublings, as `folds`."),
        "neimark_sackers": ("-", "The Neimark-Sacker points, as `folds`."),
        "limits": (
            MODEL_UNITS,
            "The model's limits along the branch, name -> value (empty for a "
            "model without them).",
        ),
        "cascade_ended": (
            "-",
            "With `--cascade`: why the cascade ended (`hybrax.CASCADE_ENDS`).",
        ),
        "cascade_failure": (
            "-",
            "With `--cascade`: the message of the switch onto a level that failed.",
        ),
        "cascade_status": (
            "-",
            "`interrupted` where Ctrl-C stopped the cascade (the first branch is "
            "whole, the cascade dropped).",
        ),
        "cascade": (
            "-",
            "With `--cascade`: each period-doubled level: `period` (1, in cycles: "
            "2, 4, ...), `status`, `message`, `branch` (each point: the "
            "parameter's value, `<first state coordinate>_per_cycle` (its unit), "
            "`cycle_durations` (s), `period` (s), `multipliers_abs` (1), `stable`, "
            "`kind`) and `period_doublings`.",
        ),
        "curve": ("-", "With `--curve`: the curve's record (`continue: curve`)."),
    },
    "continue: curve": {
        "kind": (
            "-",
            "The curve's point: `fold`, `period_doubling`, `neimark_sacker`, "
            "`force_reversal`, `grazing` or `release_reversal`.",
        ),
        "status": (
            "-",
            "How the curve ended: a library status (`hybrax.STATUS_NAMES`), or "
            "`no_point` (no located point of that kind on the branch) or "
            "`empty_range` (`--stop2` is the second parameter's start): words "
            "of the command, outside the library's statuses.",
        ),
        "message": ("-", "The curve's message."),
        "n_points": ("1", "The points on the curve."),
        "max_points": ("1", "The most points allowed (`--curve-points`)."),
        "parameters": (
            "-",
            "The names of the two parameters: the branch's, then `--param2`.",
        ),
        "<PARAM>": (
            MODEL_UNITS,
            "The first parameter's value at every point, keyed by its name, in "
            "its unit.",
        ),
        "<PARAM2>": (
            MODEL_UNITS,
            "The second parameter's value at every point, keyed by its name, in "
            "its unit.",
        ),
        "u": (
            MODEL_UNITS,
            "The orbit's section unknowns at every point, one row per point.",
        ),
        "codim2": (
            "-",
            "The codimension-two points met: `kind`, both parameters' values "
            "(keyed by their names), `located` (flag), and `event` and "
            "`observable` where a boundary is met.",
        ),
        "seconds": ("s", f"The curve's {_WALL}, compilation included."),
    },
    "sweep": {
        **_HEADER,
        "model": _MODEL,
        "form": _FORM,
        "grid": (
            MODEL_UNITS,
            "The grid's axes: parameter name -> its values, in the parameter's unit.",
        ),
        "set": (
            MODEL_UNITS,
            "The parameters fixed by `--set` and `--params`, name -> value.",
        ),
        "points": ("1", "The grid's points."),
        "settings": (
            "-",
            "The solver options (`tol`, 1; `t_max`, s; `max_ode_steps`, 1) and "
            "the sweep's: `max_iterations` (1, Newton's), `map_iterations` (1), "
            "`neighbours` (1) and `jacobian` (the shooting Jacobian's method).",
        ),
        "converged": ("1", "The points where an admissible orbit converged."),
        "found_by": (
            "1",
            "Strategy -> the points whose orbit it found (`hybrax."
            "SWEEP_STRATEGIES`: `guess`, `neighbour`, `return_map`).",
        ),
        "stable": ("1", "The points with a stable orbit."),
        "failures": (
            "1",
            "Status -> the points run without an orbit (library statuses, "
            "`hybrax.STATUS_NAMES`).",
        ),
        "not_run": (
            "1",
            "The points not run (Ctrl-C; status `not_run` in the table).",
        ),
        "complete": (
            "-",
            "Flag: the sweep ran to the end (`false`: interrupted by Ctrl-C, "
            "`not_run` counts the points left).",
        ),
        "status": (
            "-",
            "Kept for older readers, not a library status: `finished` or "
            "`interrupted`, the same as `complete` (`true` or `false`).",
        ),
        "<flag>": (
            "1",
            "The points whose orbit the model flags, keyed by the table's flag "
            "column (the model's `sweep_flag`: `starts_past_guard` by default, "
            "the hopper's `pulling_after_touchdown`).",
        ),
        "seconds": ("s", f"The sweep's {_WALL}, compilation included."),
        "files": ("-", "The files written (table, arrays, heat map)."),
    },
    "basin": {
        **_HEADER,
        "model": (
            "-",
            "The model's record, as `hybrax models --json` gives it "
            "(`models: MODEL`), not its name.",
        ),
        "form": _FORM,
        "params": _PARAMS,
        "grid": (
            MODEL_UNITS,
            "The grid's axes: section coordinate (an unknown of the section) -> "
            "its values, in that coordinate's unit.",
        ),
        "steps": ("1", "The cycles run from every start (`--steps`)."),
        "settle_tol": (
            MODEL_UNITS,
            "The distance to the orbit (largest entry of the unknowns' "
            "difference) within which a start has reached it (`--settle-tol`).",
        ),
        "max_period": ("1", "The longest period identified, in cycles."),
        "solver": (
            "-",
            "The solver options, as other commands' `settings`: `tol` (1), "
            "`t_max` (s), `max_ode_steps` (1).",
        ),
        "orbit": (
            MODEL_UNITS,
            "The orbit's section unknowns; `null` where no orbit was found.",
        ),
        "orbit_status": (
            "-",
            "How the orbit search ended: a library status (`hybrax.STATUS_NAMES`).",
        ),
        "counts": (
            "1",
            "Outcome -> starts (`hybrax.BASIN_OUTCOMES`: `orbit`, `periodic`, "
            "`falls`, `unsettled`, `failed`).",
        ),
        "not_run": (
            "1",
            "The starts not run to the end (Ctrl-C; status `not_run` in the "
            "table, counted among `failed`).",
        ),
        "complete": (
            "-",
            "Flag: the basin ran to the end (`false`: interrupted by Ctrl-C).",
        ),
        "status": (
            "-",
            "Kept for older readers, not a library status: `finished` or "
            "`interrupted`, the same as `complete` (`true` or `false`).",
        ),
        "seconds": (
            "s",
            f"The {_WALL} of the orbit search, the compilation and the cycles.",
        ),
    },
    "robustness": {
        **_HEADER,
        "model": (
            "-",
            "The model's record, as `hybrax models --json` gives it "
            "(`models: MODEL`), not its name.",
        ),
        "form": _FORM,
        "params": _PARAMS,
        "disturbance": (
            "-",
            "The declared disturbance (`--disturbance`; `ModelBundle.disturbances`).",
        ),
        "unit": ("-", "The disturbance's unit, the unit of every `sigma`."),
        "orbit": (MODEL_UNITS, "The orbit's section unknowns."),
        "gait_sensitivity": (
            MODEL_UNITS,
            "The gait sensitivity norm of the model's gait indicators for this "
            "disturbance (their units over `unit`), as `hybrax orbit` reports it.",
        ),
        "walkers": ("1", "The Monte Carlo walks per roughness (`--walkers`)."),
        "max_steps": ("1", "The most steps of a walk (`--max-steps`)."),
        "seed": ("1", "The seed of the walks' disturbances (`--seed`)."),
        "mesh": (
            MODEL_UNITS,
            "The chain method's mesh: section unknown -> its values; "
            '`{"reachable": spacing}` for the states the walks reach '
            "(`--mesh reachable=SPACING`, `hybrax.ReachableMesh`); `null` where "
            "there was none (a section of more than one unknown without `--mesh`).",
        ),
        "bins": ("1", "The disturbance's quadrature intervals (`--bins`)."),
        "solver": (
            "-",
            "The solver options, as other commands' `settings`: `tol` (1), "
            "`t_max` (s), `max_ode_steps` (1).",
        ),
        "rows": (
            "-",
            "One record per roughness: `sigma` (the disturbance's standard "
            "deviation, in `unit`), `mfpt_walks` with its 95% interval "
            "`mfpt_low`, `mfpt_high` (steps; `null` for infinity: no fall), "
            "`falls` and `steps_walked` (1), `walks_ended_otherwise` (1: walks "
            "that failed otherwise than by a fall), `mfpt_mesh` and "
            "`mfpt_metastable` (the chain's expected steps from the orbit and "
            "1/(1 - lambda_2); `null` without a mesh), `mesh_outside` (1: the "
            "largest share of a step that the mesh did not cover), `mesh_states` "
            "(1: the mesh's states), `mesh_ended` (1: the largest share of a "
            "mesh state's step that ended in a failure that is no fall, counted "
            "as a fall by the chain) and `methods_agree` "
            "(flag: the chain is within the width of the walks' interval of "
            "their estimate; `null` without a mesh).",
        ),
        "seconds": (
            "s",
            f"The {_WALL} of the orbit search, the compilation and the walks.",
        ),
    },
    "tune": {
        **_HEADER,
        "model": _MODEL,
        "vary": ("-", "The names of the parameters tuned (`--vary`)."),
        "targets": (
            MODEL_UNITS,
            "Quantity -> its target value, in the quantity's unit.",
        ),
        "minimize": ("-", "The quantity minimised, or `null`."),
        "tolerance": (
            MODEL_UNITS,
            "The tolerance of every target, in each target quantity's unit.",
        ),
        "max_multiplier": (
            "1",
            "The bound on every nontrivial multiplier's modulus, or `null`.",
        ),
        "settings": _SETTINGS,
        "mode": ("-", "The gradients' mode: `reverse` or `forward`."),
        "status": (
            "-",
            "How the tuning ended: a library status (`hybrax.STATUS_NAMES`: "
            "`successful`, `targets_met`, `targets_not_met`, why no orbit was "
            "found, or `interrupted` after Ctrl-C).",
        ),
        "minimiser_result": (
            "-",
            "The minimiser's own status name, or `parameter_rule`.",
        ),
        "rule": (
            "-",
            "The parameters' rule that the next step would have broken, or `null`.",
        ),
        "n_evaluations": ("1", "The orbit solves with their gradients."),
        "wall_time": ("s", f"The tuning's {_WALL}."),
        "compile_time": (
            "s",
            "Of that, the time outside the minimiser's warm steps (tracing and "
            "compiling).",
        ),
        "history": (
            "-",
            "Every evaluation: `step` (1), `values` (the varied parameters, each "
            "in its unit), `objective` (as under `final`), `spectral_radius` (1), "
            "`multipliers` (1, complex numbers as `[re, im]` pairs), "
            "`orbit_found` (flag), `status`, `best` (flag) and `stage`.",
        ),
        "verification": (
            "-",
            "With `--verify-steps`: `walk_from_default_start` (a status), "
            "`orbit_refound` (flag), `refound_from`, `refound_distance` (the "
            "unknowns' units), `steps` (1), `steps_completed` (1), `status`, "
            "`disturbance`, `distance_to_orbit` (the unknowns' units, after each "
            "cycle), `back_on_orbit` and `passed` (flags); else `null`.",
        ),
        "final": ("-", "The final point (`tune: final`), which `--params` reads."),
    },
    "tune: final": {
        "params": (
            MODEL_UNITS,
            "Every parameter at the final point, name -> value, in its unit.",
        ),
        "values": (MODEL_UNITS, "The varied parameters, name -> value."),
        "objective": (
            MODEL_UNITS,
            "The minimised objective: the `--minimize` quantity over its "
            "magnitude at the first orbit (1), or a model's own objective in its "
            "own scale; `null` where not finite.",
        ),
        "multipliers": (
            "1",
            "The orbit's nontrivial multipliers, complex numbers as `[re, im]` pairs.",
        ),
        "orbit_found": ("-", "Flag: an orbit exists at the final point."),
        "stable": ("-", "Flag: it is stable (and within `max_multiplier`)."),
        "targets_met": ("-", "Flag: every target is met to its tolerance."),
        "u": (MODEL_UNITS, "The orbit's section unknowns."),
        "state": (MODEL_UNITS, "The orbit's state after the section's last event."),
        "<quantity>": (
            MODEL_UNITS,
            "Each of the model's orbit quantities at the final orbit, by name "
            "(`hybrax models MODEL` lists them).",
        ),
        "step": (
            "1",
            "After Ctrl-C: the evaluation whose point this is (the best so far).",
        ),
    },
}

# What writes each section.
WRITTEN_BY: dict[str, str] = {
    "models": "`hybrax models [MODEL ...] --json` (printed, not written).",
    "models: MODEL": "The record of one model in `hybrax models --json` (and "
    "`basin`'s `model`).",
    "simulate": "`hybrax simulate MODEL --json FILE`.",
    "orbit": "`hybrax orbit MODEL --json FILE` (also without an orbit: its "
    "orbit fields `null`, the best iterate added).",
    "continue": "`hybrax continue MODEL --json FILE`: the branch, its special "
    "points and, with `--cascade` and `--curve`, their records.",
    "continue: curve": "The `curve` record of `hybrax continue ... --curve KIND "
    "--param2 NAME --json FILE` (which `hybrax sweep --curves` reads).",
    "sweep": "`hybrax sweep MODEL --json FILE` (the points themselves are in "
    "`sweep.csv` and `sweep.npz`).",
    "basin": "`hybrax basin MODEL --json FILE` (the starts themselves are in "
    "`basin.csv` and `basin.npz`).",
    "robustness": "`hybrax robustness MODEL --terrain sigma=... --json FILE` (the "
    "rows also in `robustness.csv`).",
    "tune": "`hybrax tune MODEL --json FILE` (`tune.json` in `--out` after "
    "Ctrl-C without `--json`: then `model`, `vary`, `settings`, `status`, "
    "`n_evaluations`, `history` and `final` only).",
    "tune: final": "The `final` record of `hybrax tune`'s file.",
}


class UndescribedFieldWarning(UserWarning):
    """A JSON file of the command line has a field that `FIELDS` does not
    describe (a gap in the reference, not in the file)."""


def undescribed(
    section: str, record: Mapping, generic: Collection[str] = ()
) -> list[str]:
    """The keys of `record` that `FIELDS[section]` does not describe. `generic`:
    the keys that stand for the section's fields in angle brackets (names the
    model or the run chooses: parameters, the model's quantities)."""
    fields = FIELDS[section]
    has_generic = any(name.startswith("<") for name in fields)
    return [
        key
        for key in record
        if key not in fields and not (has_generic and key in generic)
    ]


def check(section: str, record: Mapping, generic: Collection[str] = ()) -> None:
    """Warn (`UndescribedFieldWarning`) about each key of `record` that the
    reference's `section` does not describe; the record is left as it is."""
    missing = undescribed(section, record, generic)
    if missing:
        warnings.warn(
            f"hybrax {section}: the JSON reference (docs/pages/json-reference.md) "
            f"does not describe the field(s) {', '.join(map(repr, missing))}; "
            "please report it",
            UndescribedFieldWarning,
            stacklevel=2,
        )


_UNIT_WORDS = {
    "1": "`1`",
    "-": "`-`",
    MODEL_UNITS: "model",
}


_INTRO = r"""
# JSON reference

Every field of the JSON files that the commands write (`--json FILE`) and of
`hybrax models --json`, with its unit and its meaning. This page is generated
from `hybrax._cli.json_fields` (`python -m hybrax._cli.json_fields`), which the
commands check their files against, and a test checks that it is current. The
[command line](command-line.md) page says what the commands do.

## Conventions

- Units: `1` is a dimensionless number (a count, a ratio, a multiplier). `-` is
  text, a flag (`true` or `false`), a list of names or a record, whose entries'
  units the meaning gives. **model** is the model's own units, which differ from
  one entry to the next: a parameter's unit is listed by `hybrax models MODEL`,
  a state vector has the units of the model's coordinates (`state_names`), and a
  quantity that the model defines has the unit that its summary prints.
- `s` and `J` are the SI models' units. A model with scales of its own writes
  simulated times and energies in those (the simplest walker: time in
  $\sqrt{l/g}$, energy in $M g l$). Wall-clock times (`seconds`, `wall_time`,
  `compile_time`) are in seconds.
- Complex numbers (Floquet multipliers, eigenvalues) are `[re, im]` pairs: the
  real part, then the imaginary part; a list of them is a list of pairs.
- A number that is not finite (NaN, an infinity) is written `null`; a matrix is
  a list of its rows.
- A field in angle brackets (`<PARAM>`) stands for names that the model or the
  run chooses (a parameter's name, the model's quantities).
- Statuses are the library's (`hybrax.STATUS_NAMES`, explained on the
  [concepts](concepts.md) page) unless a field says otherwise.
"""


def reference_markdown() -> str:
    """The page `docs/pages/json-reference.md`: the conventions, then a table
    per section (field, unit, meaning)."""
    parts = [_INTRO.strip()]
    for section, fields in FIELDS.items():
        parts += ["", f"## {section}", "", WRITTEN_BY[section], ""]
        parts += ["| field | unit | meaning |", "| --- | --- | --- |"]
        for name, (unit, meaning) in fields.items():
            shown = _UNIT_WORDS.get(unit, f"`{unit}`")
            row = f"| `{name}` | {shown} | {meaning} |"
            if row.count("|") != 4:
                raise ValueError(f"a `|` in the meaning of {section}: {name}")
            parts.append(row)
    return "\n".join(parts) + "\n"


if __name__ == "__main__":
    print(reference_markdown(), end="")
