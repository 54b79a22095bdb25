"""`python -m worldline` is the `worldline` command."""

from worldline.cli import main

main()
