"""The model zoo: one module per model, each with its equations, parameters and
references, and a [`hybrax.ModelBundle`][] that the command line and generic tools
read (`get_model(name)`). A model of your own reaches the command line through
the `hybrax.models` entry point group of its own package, with no change to
hybrax (how-to "Add a model to the command line").

- `hybrax.models.hopper`: the two-mass vertical hopper (Zana et al. 2018), with
  `hybrax.models.hopper_figures` (the paper's figures).
- `hybrax.models.rimless_wheel`: the rimless wheel on a slope.
- `hybrax.models.compass_gait`: the passive compass-gait biped (Goswami et al. 1998).
- `hybrax.models.bouncing_ball`: a ball bouncing with restitution.
"""

from .._registry import (
    REGISTRY as REGISTRY,
    get_model as get_model,
    model_names as model_names,
)
from . import (
    biped5 as biped5,
    bouncing_ball as bouncing_ball,
    compass_gait as compass_gait,
    hopper as hopper,
    jumper as jumper,
    rimless_wheel as rimless_wheel,
    simplest_walker as simplest_walker,
)
