"""`python -m schedd` is the `schedd` command."""

from schedd.cli.daemon import main

main()
