"""``python -m convergence``: the same as the ``convergence`` command."""

from convergence.cli import main

main()
