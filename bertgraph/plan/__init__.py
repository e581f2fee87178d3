"""Deployment planning: weights as a checkpoint stores them, a GPU as data, fits and bounds as arithmetic.

A stage above the cost tables (:mod:`bertgraph.graph.costtable`) and below the writers: it reads the
annotated graph (parameters, modules, the checkpoint's summary, the config's ``quantization_config``)
and the cost primitives (:mod:`~bertgraph.graph.costbase`, :mod:`~bertgraph.graph.generation`,
:mod:`~bertgraph.graph.memory`), and nothing below it imports it.

- :mod:`~bertgraph.plan.layouts`: the tensors each quantization library stores for one linear layer.
- :mod:`~bertgraph.plan.stored`: those tensors for a whole model, from a ``quantization_config`` or a scheme.
- :mod:`~bertgraph.plan.gpus`: GPUs as data, each row with its datasheet.
- :mod:`~bertgraph.plan.deploy`: memory per part, fits, the longest context and largest batch, the bounds.
"""
