"""Signals that end a run, turned into an exception so that every cleanup runs.

Python turns only SIGINT into an exception; SIGTERM (what CI runners and ``kill`` send),
SIGHUP (a closed terminal) and SIGQUIT (Ctrl-\\) would end the process on the spot and
leave temporary files behind. :func:`install` makes each of them raise
:class:`Interrupted` in the main thread instead, so ``finally`` blocks remove what was
staged. Native code (the ONNX checker, onnxruntime) sees the signal only when it hands
back control, and may wrap the exception in its own; :func:`reraise_if_interrupted`
gives the interruption back its meaning.
"""

from __future__ import annotations

import signal
from types import FrameType

# The signals a user or a CI runner sends to stop a command.
SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT")

_received: list[int] = []
_armed: list[bool] = []


class Interrupted(KeyboardInterrupt):
    """The run was stopped by a signal (``signum``); cleanups run as for Ctrl-C."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def install() -> None:
    """Raise :class:`Interrupted` on the first of :data:`SIGNALS`; ignore repeats while cleaning up."""
    _armed[:] = [True]
    for name in SIGNALS:
        number = getattr(signal, name, None)
        if number is not None:
            signal.signal(number, _handle)


def disarm() -> None:
    """From now on a signal is ignored: the run has finished its work."""
    _armed.clear()


def received() -> int | None:
    """The signal that interrupted this run, if one did."""
    return _received[0] if _received else None


def reraise_if_interrupted(error: BaseException) -> None:
    """Raise :class:`Interrupted` when ``error`` is only what native code made of a signal."""
    signum = received()
    if signum is not None and not isinstance(error, Interrupted):
        raise Interrupted(signum) from error


def _handle(signum: int, frame: FrameType | None) -> None:
    if _received or not _armed:
        return  # already stopping (let the cleanup finish), or done
    _received.append(signum)
    raise Interrupted(signum)
