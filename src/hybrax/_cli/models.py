"""`hybrax models [NAME]`: list the registered models, with their parameters and
defaults."""

import argparse
import json

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
        "parameters with unit, meaning and default, orbit quantities)",
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
        print(f"{name}: {record['description']}")
        forms, state = ", ".join(record["forms"]), ", ".join(record["state"])
        print(f"  forms: {forms}; state: {state}")
        print(f"  commands: {', '.join(record['commands'])}")
        for parameter, row in record["parameters"].items():
            default = row["default"]
            shown = "derived" if default is None else f"{default:g}"
            text = (
                row["meaning"]
                if row["unit"] == row["meaning"]
                else f"{row['unit']}, {row['meaning']}"
            )
            print(f"    {parameter:<6} {shown:>9}  {text}")
        if record["quantities"]:
            print(f"  orbit quantities: {', '.join(record['quantities'])}")
        print()
    return 0
