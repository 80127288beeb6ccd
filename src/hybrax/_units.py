"""The units written on figure axes (no plotting imports: models declare them)."""

import dataclasses
import re


@dataclasses.dataclass(frozen=True)
class Units:
    """The units that figures write on their axes: SI by default; a
    dimensionless model gives its own (the simplest walker: time in
    $\\sqrt{l/g}$, lengths in $l$, energies in $M g l$)."""

    time: str = "s"
    length: str = "m"
    energy: str = "J"


def plain_text(tex: str) -> str:
    r"""A unit or symbol written for figures (TeX between dollars) as the console
    prints it: `r"$\sqrt{l/g}$"` reads `"sqrt(l/g)"`, `"N$^2$ m$^2$ s"` reads
    `"N^2 m^2 s"`."""
    text = re.sub(r"\^\{([^{}]*)\}", r"^\1", tex.replace("$", "").replace("\\", ""))
    return text.replace("{", "(").replace("}", ")")
