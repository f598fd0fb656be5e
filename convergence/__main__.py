"""``python -m convergence``: the same as the ``convergence`` command.

Callers: whoever runs the package as a program (the tests and benchmarks start ``convergence
api`` this way). Imports only the light root group of ``convergence.cli``: each command's
module is imported when the command runs.
"""

from convergence.cli import main

main()
