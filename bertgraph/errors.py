"""The one exception type a user sees: a mistake in their input, said in one line."""

from __future__ import annotations

import re

# Line breaks, other control characters and bidi controls a message may quote from user
# input (a file name, a shard name): shown as escapes, so a message stays one line and
# cannot act on the terminal it is printed to.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def one_line(text: str) -> str:
    r"""``text`` on one line, every control character written as its escape.

    >>> print(one_line("bad\nname\x1b[2J\u202e"))
    bad\nname\x1b[2J\u202e
    """
    return _UNSAFE.sub(lambda match: match.group().encode("unicode_escape").decode("ascii"), text)


class BertgraphError(Exception):
    """A problem with the user's input or environment, with what to do about it.

    The command line prints ``str(error)`` on one line and exits non-zero; the
    message therefore names the thing at fault and the next step. ``str()`` is always
    one line, whatever the message quotes (:func:`one_line`).
    """

    def __str__(self) -> str:
        return one_line(super().__str__())


class ModelReferenceError(BertgraphError):
    """A model reference that is not a preset, a local path or a cached hub id."""


class ConfigError(BertgraphError):
    """A ``config.json`` or an override that does not describe a valid BERT."""


class CheckpointError(BertgraphError):
    """A weights file that cannot be used with its config."""


class TraceError(BertgraphError):
    """torch.export could not trace the model.

    ``cause`` is a key of ``tracing.causes.CAUSES``; ``where`` the cause with the module and the
    source line it stopped at (the message without the model's name, the reason and the advice).
    """

    def __init__(self, message: str, cause: str = "", where: str = "") -> None:
        super().__init__(message)
        self.cause = cause
        self.where = one_line(where)


class RenderError(BertgraphError):
    """A diagram could not be produced (missing Graphviz, a limit exceeded, ...)."""


class OnnxError(BertgraphError):
    """An ONNX export, verification or read failed."""


def first_line(error: BaseException) -> str:
    r"""The first informative line of an exception message, shortened, for one-line errors.

    A line ending in ":" only introduces the reason (huggingface_hub's "Validation error
    for field 'mlp_bias':"), so the lines it introduces are joined to it.

    >>> first_line(ValueError("Validation error for field 'x':\n    TypeError: expected bool\nmore"))
    "Validation error for field 'x': TypeError: expected bool"
    """
    lines = [line.strip() for line in str(error).splitlines() if line.strip() and not line.strip().startswith("#")]
    text = lines[0] if lines else type(error).__name__
    for line in lines[1:]:
        if not text.endswith(":"):
            break
        text = f"{text} {line}"
    return text if len(text) <= 300 else text[:297] + "…"
