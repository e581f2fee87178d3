"""Diagrams drawn where documentation is built: a Sphinx extension and an MkDocs plugin.

Both are thin: :mod:`bertgraph.docs.request` reads a directive's or fence's options into a
:class:`~bertgraph.docs.request.DiagramRequest` (no torch), :mod:`bertgraph.docs.renderer`
draws it through the graph cache and a cache of finished drawings, and
:mod:`bertgraph.docs.sphinx` / :mod:`bertgraph.docs.mkdocs` put the result where each
builder wants it.
"""
