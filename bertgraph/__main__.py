"""``python -m bertgraph`` runs the command line."""

from bertgraph.cli import run

run()
