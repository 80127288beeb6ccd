"""The units written on figure axes (no plotting imports: models declare them)."""

import dataclasses


@dataclasses.dataclass(frozen=True)
class Units:
    """The units that figures write on their axes: SI by default; a
    dimensionless model gives its own (the simplest walker: time in
    $\\sqrt{l/g}$, lengths in $l$, energies in $M g l$)."""

    time: str = "s"
    length: str = "m"
    energy: str = "J"
