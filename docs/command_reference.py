"""Write `docs/pages/command-reference.md`: every command's options as `hybrax
<command> --help` prints them, taken from the command line's own parser, so the
page cannot drift from the program (`tests/test_docs.py` checks that it is
current).

Run: `python docs/command_reference.py` (from the repository's root).
"""

import argparse
import os
import pathlib


PAGE = pathlib.Path(__file__).parent / "pages" / "command-reference.md"

# The width of the help text: argparse reads it from `COLUMNS`.
WIDTH = "88"


def page() -> str:
    """The page's Markdown: the program's help, then each command's."""
    from hybrax._cli import _build_parser

    parser = _build_parser()
    parts = [
        "# Command reference",
        "",
        "Every command and option as `hybrax --help` and `hybrax <command> --help`",
        "print them: this page is generated from the command line's parser by",
        "`docs/command_reference.py`, and a test checks that it is current. The",
        "[command line](command-line.md) page says what the options mean together.",
        "",
        "```text",
        _help(parser),
        "```",
    ]
    commands = next(
        action
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
    )
    for name, command in commands.choices.items():
        parts += ["", f"## hybrax {name}", "", "```text"]
        parts += [_help(command), "```"]
    return "\n".join(parts) + "\n"


def _help(parser: argparse.ArgumentParser) -> str:
    """`parser`'s help at the page's width (argparse reads it from `COLUMNS`, set
    for the call only)."""
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        return parser.format_help().rstrip()
    finally:
        if before is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = before


if __name__ == "__main__":
    PAGE.write_text(page())
    print(f"wrote {PAGE}")
