"""Renderers: each turns plain data or a view graph into text of one format.

Every module has ``generate_*`` functions that return text (or yield lines) and
``write_*`` functions that write them. Escaping for a format lives in
:mod:`bertgraph.render.escape`.
"""
