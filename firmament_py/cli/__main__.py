"""`python -m firmament_py.cli`: the `firmament-py` command."""

from firmament_py.cli import main

main()
