"""Writes the documentation's model gallery, `docs/pages/gallery.md`: each model of
the zoo with its description, forms, state, commands, parameters (unit, meaning,
default), orbit quantities, a link to its equations, and the figure of its main
command.

Run `python docs/gallery.py` after changing a model (the page's tables come from
the models' bundles; `tests/test_docs.py` checks that they agree), and `python
docs/gallery.py --figures` to draw the figures again (it runs each command into a
temporary folder and copies one figure per model to `docs/pages/images/gallery/`).
"""

import argparse
import pathlib
import shutil
import subprocess
import sys
import tempfile


DOCS = pathlib.Path(__file__).resolve().parent
PAGE = DOCS / "pages" / "gallery.md"
IMAGES = DOCS / "pages" / "images" / "gallery"

#: Per model: the command that draws its figure, the file it writes, and what the
#: figure shows.
FIGURES = {
    "hopper": (
        "orbit",
        "orbit.png",
        "the periodic orbit and two perturbed starts (Zana et al. 2018, Fig. 3)",
    ),
    "compass-gait": ("orbit", "stick_figure.png", "three steps of the passive gait"),
    "simplest-walker": (
        "orbit",
        "orbit.png",
        "one period of the gait and a perturbed start",
    ),
    "rimless-wheel": (
        "orbit",
        "orbit.png",
        "the rolling wheel's periodic orbit and a perturbed start",
    ),
    "biped5": ("orbit", "stick_figure.png", "the level-ground gait under PD torques"),
    "bouncing-ball": (
        "simulate",
        "time_series.png",
        "five bounces from 1 m, each rebound e times the impact speed",
    ),
    "jumper": (
        "simulate",
        "stick_figure.png",
        "the straight-legged drop onto the ground until it stands",
    ),
}


#: Per model: further figures, each (the commands that draw it, in order, as
#: arguments of `hybrax` with `{out}` for a scratch folder; the file the last one
#: writes there; what it shows; the gallery's image name).
def _curve_over_map(
    model, curves, param2, caption, image, points=60, branch=(), grid=()
):
    """A gallery entry: for each `(kind, stop)` of `curves`, the branch's first
    `kind` point followed in `param2` towards `stop` (`hybrax continue
    --curve`, at most `points` points), all drawn over the model's sweep heat
    map (`hybrax sweep --curves`). `branch`: the branch's options (`--param`,
    `--start`, `--stop`; the model's defaults without); `grid`: the sweep's
    (its `--grid`s; the model's defaults without)."""
    names = [f"{kind}-to-{stop}" for kind, stop in curves]
    follow = tuple(
        (
            "continue",
            model,
            *branch,
            "--curve",
            kind,
            "--param2",
            param2,
            "--stop2",
            stop,
            "--curve-points",
            str(points),
            "--json",
            f"{{out}}/{name}.json",
            "--out",
            f"{{out}}/{name}",
        )
        for name, (kind, stop) in zip(names, curves)
    )
    curves = [word for name in names for word in ("--curves", f"{{out}}/{name}.json")]
    draw = ("sweep", model, *grid, *curves, "--out", "{out}")
    return follow + (draw,), "sweep_heatmap.png", caption, image


MORE_FIGURES = {
    "hopper": (
        _curve_over_map(
            "hopper",
            (("fold", "0.95"), ("fold", "0.7"), ("force-reversal", "0.95")),
            "mu",
            "the D_G branch's first fold (mu = 0.8, D_G = -0.0354) followed in mu "
            "over the sweep's heat map: it reverses at a cusp (mu = 0.930, D_G = "
            "-0.0062) and comes back as the second fold (D_G = -0.0237 at mu = "
            "0.8); inside the wedge three orbits of the family coexist (at mu = "
            "0.8, D_G = -0.03 two stable, one unstable), which a map of one orbit "
            "per point (the one found from the guess) does not show. The "
            "force-reversal curve from the branch's first force reversal (D_G = "
            "-0.0320) bounds the orbits whose ground pulls right after touchdown: "
            "it touches the second fold at mu = 0.887 and returns to the "
            "branch's second force reversal (D_G = -0.0244)",
            "hopper-fold-curve",
            points=150,
        ),
    ),
    "compass-gait": (
        _curve_over_map(
            "compass-gait",
            (("period-doubling", "20"), ("period-doubling", "5")),
            "m_H",
            "the leading multiplier over slope and hip mass, with the period-doubling "
            "curve that `hybrax continue --curve period-doubling --param2 m_H` "
            "follows from the branch's period doubling (`hybrax sweep --curves`)",
            "compass-gait-period-doubling-curve",
        ),
    ),
    "biped5": (
        _curve_over_map(
            "biped5",
            (
                ("period-doubling", "0.65"),
                ("grazing", "0.65"),
                ("grazing", "0.45"),
            ),
            "hip_swing_ref",
            "the leading multiplier over the swing hip's and swing knee's set "
            "points, with the two boundaries of the usable gait that `hybrax "
            "continue biped5 --param knee_swing_ref` finds: the period doubling "
            "(the gait is stable above it), which `--curve period-doubling` "
            "follows along the map's |nu| = 1 contour (at most 150 points; here "
            "hip_swing_ref = 0.5 to about 0.6), and the grazing, "
            "which `--curve grazing` follows in the hip's set point (below it the "
            "swing foot, passing the stance foot with its knee bent, dips into "
            "the ground)",
            "biped5-grazing-curve",
            points=150,
            branch=("--param", "knee_swing_ref", "--start", "0.6", "--stop", "0.3"),
            grid=(
                "--grid",
                "hip_swing_ref=0.45:0.65:16",
                "--grid",
                "knee_swing_ref=0.3:0.65:16",
            ),
        ),
    ),
    "simplest-walker": (
        (
            (("basin", "simplest-walker", "--out", "{out}"),),
            "basin_map.png",
            "the basin of attraction of its gait on the default 100 x 100 grid, 20 "
            "steps each: a thin sliver, as Schwab & Wisse (2001) found",
            "simplest-walker-basin",
        ),
    ),
}

HEADER = """# Model gallery

Every model of the zoo (`hybrax.models`), as `hybrax models NAME` describes it:
its formulations, state, the commands it runs through, its parameters with units
and defaults (`--set NAME=VALUE` changes one), its orbit quantities (for `tune`,
`sweep --quantity` and summaries), and the figure of its main command. The
equations and references are in each model's module, linked under its name; what
the models reproduce from their papers is on [the models page](models.md).
This page is written by `docs/gallery.py` from the models themselves.
"""


def _default(value) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def section(name: str) -> str:
    """The gallery's section of one model, from its bundle."""
    from hybrax._cli.common import model_record
    from hybrax._registry import get_model

    model = get_model(name)
    info = model_record(model)
    module = _module_of(name)
    command, figure, caption = FIGURES[name]
    lines = [
        f"## {name}",
        "",
        f"{info['description'][0].upper()}{info['description'][1:]}. Equations and "
        f"reference: [`hybrax.models.{module}`][].",
        "",
        f"- forms: {', '.join(f'`{form}`' for form in info['forms'])} (the first "
        "is the default)",
        f"- state: {', '.join(f'`{s}`' for s in info['state'])}",
        f"- commands: {', '.join(f'`{c}`' for c in info['commands'])}",
    ]
    lines += ["", "| parameter | unit | meaning | default |", "|---|---|---|---|"]
    for parameter, row in info["parameters"].items():
        default = "" if row["default"] is None else _default(row["default"])
        lines.append(
            f"| `{parameter}` | {row['unit']} | {row['meaning']} | {default} |"
        )
    if info.get("quantities"):
        # Its declared orbit quantities (hx.Quantity): `tune`, `sweep --quantity`
        # and the summary of `orbit`.
        lines += ["", "| orbit quantity | unit | meaning |", "|---|---|---|"]
        for quantity in info["quantities"]:
            declared = model.quantity(quantity)
            unit = "yes/no" if declared.unit is None else declared.unit
            lines.append(f"| `{quantity}` | {unit} | {declared.meaning} |")
    lines += [
        "",
        f"![{name}: {caption}](images/gallery/{name}.png)",
        "",
        f"`hybrax {command} {name}`: {caption}.",
        "",
    ]
    for runs, _, caption, image in MORE_FIGURES.get(name, ()):
        words = [word.replace("{out}/", "") for word in runs[-1]]
        at = words.index("--out")
        command = " ".join(words[:at] + words[at + 2 :])
        lines += [
            f"![{name}: {caption}](images/gallery/{image}.png)",
            "",
            f"`hybrax {command}`: {caption}.",
            "",
        ]
    return "\n".join(lines)


def _module_of(name: str) -> str:
    from hybrax._registry import REGISTRY

    return REGISTRY[name]


def page() -> str:
    from hybrax._registry import REGISTRY

    return HEADER + "\n" + "\n".join(section(name) for name in sorted(REGISTRY))


def _hybrax(arguments) -> None:
    subprocess.run(
        [sys.executable, "-m", "hybrax", *arguments, "--dpi", "110", "-q"], check=True
    )


def draw_figures(only=None) -> None:
    """Draw every figure, or the images named in `only`."""
    IMAGES.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        for name, (command, figure, _) in FIGURES.items():
            if only and name not in only:
                continue
            out = pathlib.Path(folder) / name
            _hybrax([command, name, "--out", str(out)])
            shutil.copyfile(out / figure, IMAGES / f"{name}.png")
        for more in MORE_FIGURES.values():
            for runs, figure, _, image in more:
                if only and image not in only:
                    continue
                out = pathlib.Path(folder) / image
                for arguments in runs:
                    _hybrax([word.format(out=out) for word in arguments])
                shutil.copyfile(out / figure, IMAGES / f"{image}.png")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--figures", action="store_true", help="draw the figures")
    parser.add_argument(
        "--only",
        action="append",
        metavar="IMAGE",
        help="with --figures, draw only this image (a model's name or a further "
        "figure's, e.g. hopper-fold-curve); repeatable",
    )
    args = parser.parse_args()
    if args.figures:
        draw_figures(args.only)
    PAGE.write_text(page())
    print(f"wrote {PAGE}")


if __name__ == "__main__":
    main()
