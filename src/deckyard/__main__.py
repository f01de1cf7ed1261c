"""`python -m deckyard` runs the CLI."""

from deckyard.cli import main

main()
