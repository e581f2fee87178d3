"""``python -m bertgraph`` runs the command line."""

import sys

from bertgraph.cli import main

sys.exit(main())
