"""Gradient-based tuning of periodic orbits ([`hybrax.tune`][]): what it takes and
gives in `results`, the objective's programs in `problem`, the minimisation in
`driver`.
"""

from .driver import (
    tune as tune,
)
from .problem import (
    Evaluated as Evaluated,
    ForwardProblem as ForwardProblem,
    evaluated_structs as evaluated_structs,
    evaluation_at as evaluation_at,
    minimiser_init as minimiser_init,
    minimiser_step as minimiser_step,
    minimiser_terminate as minimiser_terminate,
)
from .results import (
    QuantityTarget as QuantityTarget,
    TuneResult as TuneResult,
    TuneSettings as TuneSettings,
    TuneStep as TuneStep,
)
