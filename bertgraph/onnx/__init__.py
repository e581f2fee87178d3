"""ONNX: export verified against PyTorch (:mod:`~bertgraph.onnx.export`, :mod:`~bertgraph.onnx.verify`)
and any ``.onnx`` file read into the annotated graph (:mod:`~bertgraph.onnx.read`)."""
