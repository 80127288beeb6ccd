"""`hybrax models [NAME]`: list the registered models, with their parameters and
defaults."""

import argparse
import json
import textwrap

from .common import _load_model, model_record


def _add_models(subparsers) -> None:
    from .._registry import model_names

    parser = subparsers.add_parser(
        "models",
        help="list the registered models with their parameters",
        description=(
            "List the registered models (or the ones named): description, "
            "formulations, state, the commands each supports, and the parameters "
            "that --set takes with their units and defaults."
        ),
    )
    parser.add_argument(
        "names",
        nargs="*",
        metavar="MODEL",
        help=f"models to show (default: all): {', '.join(model_names())}",
    )
    parser.add_argument(
        "--json",
        dest="as_json",
        action="store_true",
        help="print the same as JSON (name -> description, forms, state, commands, "
        "parameters with unit, meaning, default, whether derived and value at the "
        "defaults, orbit quantities)",
    )
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="print nothing but warnings and errors (as every command's -q; the "
        "exit code still says whether every MODEL is known)",
    )
    parser.set_defaults(run=_run_models, command_parser=parser)


def _run_models(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from .._registry import model_names

    unknown = [name for name in args.names if name not in model_names()]
    if unknown:
        parser.error(
            f"argument MODEL: invalid choice: {unknown[0]!r} (choose from "
            f"{', '.join(map(repr, model_names()))})"
        )
    listing = {
        name: model_record(_load_model(parser, name))
        for name in args.names or model_names()
    }
    if args.as_json:
        print(json.dumps(listing, indent=2))
        return 0
    for name, record in listing.items():
        print("\n".join(_model_lines(name, record)))
        print()
    return 0


# Tables stay within 100 columns: longer lists and meanings go on further lines,
# indented under their column.
_WIDTH = 100


def _wrapped(first: str, text: str, indent: int) -> list[str]:
    """`first` followed by `text`, wrapped to `_WIDTH` columns with the further
    lines indented by `indent` spaces."""
    lines = textwrap.wrap(
        text,
        width=_WIDTH,
        initial_indent=first,
        subsequent_indent=" " * indent,
        break_on_hyphens=False,
    )
    return lines or [first.rstrip()]


def _model_lines(name: str, record: dict) -> list[str]:
    """One model's block of `hybrax models`: its description, forms, state and
    commands, then its parameters as a table whose columns (name, default, unit,
    meaning) are as wide as their longest entry. A derived parameter (one that
    sets others, e.g. the hopper's D_G) shows its value at the defaults, and its
    meaning starts with `derived:`."""
    lines = _wrapped(f"{name}: ", record["description"], len(name) + 2)
    lines += _wrapped("  forms: ", ", ".join(record["forms"]), 9)
    lines += _wrapped("  state: ", ", ".join(record["state"]), 9)
    lines += _wrapped("  commands: ", ", ".join(record["commands"]), 12)
    rows = []
    for parameter, row in record["parameters"].items():
        value = row["default"] if row["default"] is not None else row.get("value")
        shown = "" if value is None else f"{value:.6g}"
        meaning = f"derived: {row['meaning']}" if row.get("derived") else row["meaning"]
        rows.append((parameter, shown, row["unit"], meaning))
    if rows:
        header = ("parameter", "default", "unit", "meaning")
        widths = [max(len(row[i]) for row in [header, *rows]) for i in range(3)]
        indent = 4 + sum(widths) + 6
        lines.append("  parameters (--set NAME=VALUE):")
        for parameter, shown, unit, meaning in [header, *rows]:
            first = (
                f"    {parameter:<{widths[0]}}  {shown:>{widths[1]}}  "
                f"{unit:<{widths[2]}}  "
            )
            lines += _wrapped(first, meaning, indent)
    if record["quantities"]:
        lines += _wrapped("  orbit quantities: ", ", ".join(record["quantities"]), 20)
    return lines
