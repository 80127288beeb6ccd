import os

import jax
import jax.random as jr
import pytest


jax.config.update("jax_enable_x64", True)
# Reuse XLA compilations across test runs (CI runs the suite once; developers often).
_cache = os.environ.get("HYBRAX_TEST_CACHE", ".jax_cache")
jax.config.update("jax_compilation_cache_dir", _cache)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)


@pytest.fixture
def getkey():
    key = [jr.PRNGKey(0)]

    def _getkey():
        key[0], sub = jr.split(key[0])
        return sub

    return _getkey
