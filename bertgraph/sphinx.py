"""The Sphinx extension: add ``"bertgraph.sphinx"`` to ``extensions`` in ``conf.py``.

Then ``.. bertgraph:: bert-base-uncased`` draws a diagram at build time; see
:mod:`bertgraph.docs.sphinx` for the options.
"""

from bertgraph.docs.sphinx import setup

__all__ = ["setup"]
