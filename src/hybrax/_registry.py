"""The registered models, by name, without importing them (the command line builds
its parser from these names before JAX is configured)."""

import importlib


#: Registered models: name -> the module of `hybrax.models` that defines its bundle
#: (a function `_bundle()` returning a `hybrax.ModelBundle`).
REGISTRY = {
    "hopper": "hopper",
    "compass-gait": "compass_gait",
    "rimless-wheel": "rimless_wheel",
    "bouncing-ball": "bouncing_ball",
    "jumper": "jumper",
    "biped5": "biped5",
    "simplest-walker": "simplest_walker",
}


def model_names() -> list[str]:
    """The registered models' names, sorted."""
    return sorted(REGISTRY)


def get_model(name: str):
    """The [`hybrax.ModelBundle`][] of the registered model `name`; a `ValueError`
    naming the known ones otherwise."""
    if name not in REGISTRY:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(model_names())}")
    module = importlib.import_module(f"hybrax.models.{REGISTRY[name]}")
    return module._bundle()
