"""The one exception type a user sees: a mistake in their input, said in one line."""

from __future__ import annotations


class BertgraphError(Exception):
    """A problem with the user's input or environment, with what to do about it.

    The command line prints ``str(error)`` on one line and exits non-zero; the
    message therefore names the thing at fault and the next step.
    """


class ModelReferenceError(BertgraphError):
    """A model reference that is not a preset, a local path or a cached hub id."""


class ConfigError(BertgraphError):
    """A ``config.json`` or an override that does not describe a valid BERT."""


class CheckpointError(BertgraphError):
    """A weights file that cannot be used with its config."""


class TraceError(BertgraphError):
    """torch.export could not trace the model."""


class RenderError(BertgraphError):
    """A diagram could not be produced (missing Graphviz, a limit exceeded, ...)."""


class OnnxError(BertgraphError):
    """An ONNX export, verification or read failed."""


def first_line(error: BaseException) -> str:
    """The first informative line of an exception message, shortened, for one-line errors."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip() and not line.strip().startswith("#")]
    text = lines[0] if lines else type(error).__name__
    return text if len(text) <= 300 else text[:297] + "…"
