"""bertgraph's version, in a module of its own so that any layer can read it without importing the package's faces."""

__version__ = "0.1.0"
