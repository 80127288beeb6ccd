import gc
import os
import signal

import jax
import jax.random as jr
import pytest


# The suite's time is XLA compilation of many small programs, each run for
# milliseconds: compile them with XLA CPU's classic loop emitters and XLA's own
# small-loop limit (1024 bytes), which the 1 GB that importing hybrax sets
# (`hybrax._xla_cpu`) raises to make programs run faster but compile slower
# (tests/test_gradients.py 81 s against 68 s). XLA's backend optimisation level
# stays at its default: at `--xla_backend_optimization_level=0` XLA CPU compiled
# reverse-mode derivatives through a diffrax loop that carries its last step's
# interpolant wrongly (NaN or a gradient twice the right one, exact at the
# default level), and had moved other derivatives by 1e-7 to 1e-6 before.
# `tests/test_xla_cpu.py` runs the library's own setting in a fresh process
# (hybrax still adds its other option here, YNNPACK fusions off). Child processes
# (the notebook's kernel, command-line runs) inherit the flags. XLA reads them when
# the CPU backend starts, at the first computation, after this file is loaded.
_FAST_COMPILE = (
    "--xla_cpu_use_fusion_emitters=false "
    "--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=1024"
)
os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_FAST_COMPILE}".strip()

# Started in the background of a non-interactive shell, the test process
# inherits SIGINT ignored, and passes that on to the commands it starts: then
# Ctrl-C does nothing, as the user's shell asked, and the interrupt tests
# (which send SIGINT) would wait out a run that the signal never reaches. They
# test a terminal's Ctrl-C: Python's own handler, inherited by children as the
# default action.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# hybrax's store of traced programs off (`hx.enable_compilation_cache`, which
# every command calls, reads it): a command run inside a test process would
# otherwise compile each program again as its stored program (the process
# already holds the plain one), and a command in a child process would export
# each (the cold suite took 6:31 against 4:23). tests/test_program_store.py
# turns it on where it tests it.
os.environ["HYBRAX_KEEP_TRACED"] = "0"

jax.config.update("jax_enable_x64", True)
# Reuse XLA compilations across test runs (CI runs the suite once; developers often).
# An absolute path: a test that changes the working directory keeps it.
_cache = os.path.abspath(os.environ.get("HYBRAX_TEST_CACHE", ".jax_cache"))
jax.config.update("jax_compilation_cache_dir", _cache)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)


# XLA CPU maps each compiled program's code into memory (about 6 mappings each)
# and keeps it while JAX's caches hold the program. A test worker that compiles
# thousands of programs reaches Linux's limit on mappings per process
# (vm.max_map_count, 65530 by default), where XLA's next compilation fails to map
# its code and the process dies of a segmentation fault: the slow set's workers
# died so in its last files (one held 43 000 mappings, the other more). After
# each test file, past `_MAX_MAPPINGS` (room left for 4 000 programs more), the
# worker clears JAX's caches (the programs' executables reload from the
# persistent cache where a later file needs them).
_MAX_MAPPINGS = 40_000
_MAPS = "/proc/self/maps"


def _mappings() -> int:
    try:
        with open(_MAPS, "rb") as maps:
            return sum(1 for _ in maps)
    except OSError:  # no /proc (not Linux): no such limit to watch
        return 0


@pytest.fixture(scope="module", autouse=True)
def _bounded_mappings():
    yield
    if _mappings() > _MAX_MAPPINGS:
        jax.clear_caches()
        gc.collect()  # the executables go with their last references


@pytest.fixture
def getkey():
    key = [jr.PRNGKey(0)]

    def _getkey():
        key[0], sub = jr.split(key[0])
        return sub

    return _getkey


# Cold-cache seconds per test file (setup, call and teardown summed from
# `--durations=0` of one cold run on the 2-core machine). pytest-xdist hands whole
# files to its two workers in collection order (`--no-loadscope-reorder` in
# pyproject.toml: by default it reorders files by their number of tests, which
# left the workers' sums at 563 and 519 s); longest first keeps one long file from
# running alone at the end. Measured again after the heaviest tests of secondary
# paths moved to the slow set: 617 s in all, the run 5:38 cold (the slowest
# tests of sweeps, the compass gait's analysed gait and walk figures, and the
# five-link biped's walk moved to the slow set after runs of 6:20-6:40).
_FILE_SECONDS = {
    "test_events.py": 87,
    "test_transforms.py": 52,
    "test_continuation.py": 45,
    "test_simulate.py": 42,
    "test_sweep.py": 41,
    "test_program_store.py": 39,
    "test_compass_gait.py": 32,
    "test_periodic.py": 31,
    "test_wheel_gradients.py": 12,
    "test_compile.py": 17,
    "test_cli_orbit.py": 17,
    "test_admissible.py": 14,
    "test_traced_checks.py": 13,
    "test_impact_energy.py": 12,
    "test_figure_properties.py": 12,
    "test_json_reference.py": 3,
    "test_cli_interrupt.py": 10,
    "test_cli_simulate.py": 9,
    "test_animation_rules.py": 2,
    "test_params.py": 8,
    "test_first_passage.py": 8,
    "test_robustness.py": 8,
    "test_lagrangian.py": 8,
    "test_mechanics.py": 6,
    "test_tangent_control.py": 6,
    "test_jumper.py": 6,
    "test_floquet.py": 6,
    "test_continuation_maps.py": 6,
    "test_basin.py": 5,
    "test_cli_models.py": 5,
    "test_outputs.py": 4,
    "test_archive.py": 4,
    "test_bifurcation_curves.py": 4,
    "test_cli_bad_input.py": 4,
    "test_plugin_models.py": 4,
    "test_hybrid.py": 4,
    "test_plot_generic.py": 3,
    "test_control.py": 3,
    "test_biped5.py": 3,
    "test_docstrings.py": 2,
    "test_tune_steps.py": 2,
    "test_figure_rules.py": 1,
    "test_cli_robustness.py": 1,
    "test_layout.py": 1,
}


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: -_FILE_SECONDS.get(item.path.name, 0))
