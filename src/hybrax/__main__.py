"""`python -m hybrax`: the command line (see `hybrax --help`)."""

from ._cli import main


raise SystemExit(main())
