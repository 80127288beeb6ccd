"""The registered models, by name, without importing them (the command line builds
its parser from these names before JAX is configured).

A package adds its own models to the command line through the entry-point group
`hybrax.models`: each entry names a model and points to a function of no
arguments that returns its [`hybrax.ModelBundle`][] (see the how-to page "Add a
model to the command line"). Only the names are read until a model is used."""

import functools
import importlib
import importlib.metadata


#: The zoo's models: name -> the module of `hybrax.models` that defines its bundle
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

#: Where a model's bundle is assembled, if not in its module: the hopper's and the
#: jumper's modules are their mathematics alone, and their presentation modules
#: (which import them) put the two together, so that no import runs in a circle.
_BUNDLE_MODULES = {"hopper": "_hopper_presentation", "jumper": "_jumper_presentation"}

#: The entry-point group through which other packages register models.
ENTRY_POINT_GROUP = "hybrax.models"


@functools.cache
def plugin_models() -> dict[str, importlib.metadata.EntryPoint]:
    """Models that installed packages register in the `hybrax.models` entry-point
    group, by name (not loaded). A name the zoo has already is the zoo's."""
    return {
        entry.name: entry
        for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
        if entry.name not in REGISTRY
    }


def model_names() -> list[str]:
    """The models' names, the zoo's and those of installed packages, sorted."""
    return sorted({*REGISTRY, *plugin_models()})


def get_model(name: str):
    """The [`hybrax.ModelBundle`][] of the registered model `name`; a `ValueError`
    naming the known ones otherwise, or saying what a package's entry point gave
    instead of a bundle of that name."""
    if name in REGISTRY:
        where = _BUNDLE_MODULES.get(name, REGISTRY[name])
        module = importlib.import_module(f"hybrax.models.{where}")
        return module._bundle()
    entry = plugin_models().get(name)
    if entry is None:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(model_names())}")
    from ._model import ModelBundle

    where = f"entry point {name!r} = {entry.value!r} (group {ENTRY_POINT_GROUP!r})"
    try:
        make_bundle = entry.load()
    except Exception as error:  # the package's import failed: say which
        raise ValueError(f"{where} could not be loaded: {error}") from error
    bundle = make_bundle() if callable(make_bundle) else make_bundle
    if not isinstance(bundle, ModelBundle):
        raise ValueError(
            f"{where} must give a hybrax.ModelBundle (or a function of no arguments "
            f"returning one); got {type(bundle).__name__}."
        )
    if bundle.name != name:
        raise ValueError(
            f"{where} gives the model named {bundle.name!r}; the entry point's name "
            "and the bundle's `name` must agree."
        )
    return bundle
