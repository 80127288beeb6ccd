"""`python -m hybrax`: the command line (see `hybrax --help`)."""

from ._cli import console


console()
