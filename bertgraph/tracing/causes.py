"""Why a model cannot be traced: one cause per failure, named in one line with what to do.

torch.export's own messages are long and speak of guards, fake tensors and pytrees. Each
failure is sorted here into one of a few causes (:data:`CAUSES`), by the exception and the
model's line it stopped at, and said as one line: the model, the cause, where (module and
source line), and what the user can do. The command line prints that line; ``benchmarks/reach.py``
counts the causes.
"""

from __future__ import annotations

import re
from typing import NamedTuple

# Cause key (what the line names) → why it stops torch.export.
CAUSES: dict[str, str] = {
    "data-dependent branch": "torch.export follows one path through the code, and this one turns on a tensor's values",
    "weights changed in forward": "the forward pass converts its own weights (`.to(dtype)`), which export cannot",
    "tensor off the model's device": "the forward pass makes a tensor on the CPU, beside weights on the meta device",
    "runtime state needed": "the model needs state set before it runs, which a config does not hold",
    "input besides text needed": "the model's forward pass needs an input besides the token ids",
    "output export cannot flatten": "the forward pass returns an object torch.export cannot take apart",
    "config does not run": "the config builds a model whose forward pass fails on it",
    "unsupported op": "torch.export cannot trace this operation",
    "default config cannot build": "transformers cannot build the model from its type's default config",
    "config refused": "bertgraph refuses a field of the config",
}
# What to do, per cause.
_ADVICE: dict[str, str] = {
    "data-dependent branch": "`summary` and `params` still work without a trace",
    "weights changed in forward": "`summary` and `params` still work without a trace",
    "tensor off the model's device": "`summary` and `params` still work without a trace",
    "runtime state needed": "`summary` and `params` still work without a trace",
    "input besides text needed": "`summary` and `params` still work without a trace",
    "output export cannot flatten": "`summary` and `params` still work without a trace",
    "config does not run": "give a config.json with the fields named (a published checkpoint's config has them)",
    "unsupported op": "`summary` and `params` still work without a trace",
    "default config cannot build": "give the checkpoint's config.json instead of the type's defaults",
    "config refused": "change the field named",
}
_DATA_DEPENDENT = re.compile(
    r"data-dependent|data dependent|GuardOnDataDependent|DataDependentOutput|DynamicOutputShape", re.I
)
_NEEDED = re.compile(r"`?(\w+)`? (?:cannot|must not|can't) be `?None")
_UNSUPPORTED = re.compile(r"not implemented for|NotImplemented|no fake impl|Unsupported|does not support|not supported")


class Cause(NamedTuple):
    """One failure's cause (a key of :data:`CAUSES`) and the detail the line quotes."""

    kind: str
    detail: str


def classify(error: BaseException, code: str = "") -> Cause:
    """The cause of a failed export, from the exception (and its chain) and the model's source
    line ``code`` it stopped at.

    >>> classify(RuntimeError("Could not guard on data-dependent expression Eq(u0, 1)")).kind
    'data-dependent branch'
    >>> classify(ValueError("Input language unknown."), 'raise ValueError("Input language unknown.")').kind
    'runtime state needed'
    >>> classify(ValueError("`visual_feats` cannot be `None`"), 'raise ValueError("`visual_feats` cannot be `None`")')
    Cause(kind='input besides text needed', detail='visual_feats')
    >>> classify(RuntimeError("shape '[83, 9, -1]' is invalid for input of size 6059")).kind
    'config does not run'
    """
    chain = _chain(error)
    text = " ".join(f"{type(e).__name__}: {e}" for e in chain)
    names = {type(e).__name__ for e in chain}
    if _DATA_DEPENDENT.search(text):
        return Cause("data-dependent branch", "")
    if "Couldn't swap" in text or "_apply()" in text:
        return Cause("weights changed in forward", "")
    if "same device" in text and "meta" in text:
        return Cause("tensor off the model's device", "")
    if "register a pytree" in text or "not a known type" in text:
        found = re.search(r"Found <class '([\w.]+)'>", text)
        return Cause("output export cannot flatten", found.group(1).rsplit(".", 1)[-1] if found else "")
    if code.startswith("raise "):
        # The model's own check: an argument it cannot do without (LXMERT's visual features), or state.
        needed = _NEEDED.search(str(error))
        return Cause("input besides text needed", needed.group(1)) if needed else Cause("runtime state needed", "")
    if names & {"NotImplementedError", "Unsupported"} or _UNSUPPORTED.search(text):
        return Cause("unsupported op", "")
    return Cause("config does not run", "")


def _chain(error: BaseException) -> list[BaseException]:
    found: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in found:
        found.append(current)
        current = current.__cause__ or current.__context__
    return found


def trace_line(name: str, model_class: str, cause: Cause, where: str, message: str) -> tuple[str, str]:
    """The one line a user reads, ``cannot trace NAME (CLASS): CAUSE WHERE: MESSAGE — WHY; WHAT TO DO``,
    and its middle part ``CAUSE WHERE: MESSAGE`` (what a table without a trace says of it).

    ``where`` is `` in module 'm' (Class) at file.py:12 `code` `` (or empty); ``message`` the
    exception's first line, kept where the cause alone does not say which field or value.
    """
    kind = f"{cause.kind} ({cause.detail})" if cause.detail else cause.kind
    quoted = f": {message}" if cause.kind in ("config does not run", "runtime state needed", "unsupported op") else ""
    said = f"{kind}{where}{quoted}"
    return f"cannot trace {name} ({model_class}): {said} — {CAUSES[cause.kind]}; {_ADVICE[cause.kind]}", said


def cause_of(message: str) -> str:
    """The cause key of a one-line error bertgraph printed (for tables of many types), or ``""``.

    >>> cause_of("cannot trace x (XModel): data-dependent branch in module 'a' at m.py:1 `if a:` — ...")
    'data-dependent branch'
    >>> cause_of("/tmp/c/config.json: transformers cannot build DbrxModel from its default config: ...")
    'default config cannot build'
    """
    for kind in CAUSES:
        if message.startswith("cannot trace ") and f"): {kind}" in message:
            return kind
    if "transformers cannot build" in message:
        return "default config cannot build"
    if "config.json" in message or message.startswith("field "):
        return "config refused"
    return ""
