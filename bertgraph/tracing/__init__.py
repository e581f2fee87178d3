"""A spec → its annotated operator graph, with torch.export.

:mod:`~bertgraph.tracing.export` exports and reads the program, :mod:`~bertgraph.tracing.dims`
names batch and sequence from one static export (two where one is ambiguous),
:mod:`~bertgraph.tracing.grow` grows a graph traced with two layers to the full depth. (A package named ``tracing``, not
``trace``, so that ``bertgraph.trace()`` stays a function.)
"""

from bertgraph.tracing.export import export_program, graph_from_program, skeleton, trace, trace_module

__all__ = ["export_program", "graph_from_program", "skeleton", "trace", "trace_module"]
