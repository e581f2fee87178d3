"""Python's cyclic garbage collector held off while a model is imported, built and exported.

Importing torch and transformers and tracing a model create millions of objects, most of
which live to the end; the collector, triggered by allocation counts, walks them again and
again (a quarter of a cold trace's CPU time). Inside :func:`paused` nothing is collected
automatically (reference counting still frees everything without cycles). When the caller
calls ``settle`` — torch, transformers and the model imported and built — what exists is
set aside (``gc.freeze``), so the one collection at the end walks only what came after it
and frees the cycles tracing left (exported programs, fx graphs); then everything is handed
back to the collector's oldest generation, as if it had been collected all along. The few
cycles importing left (8 MB for bert-base; 58 of them copies of ``sys.modules`` that
``torch._dynamo``'s import makes through ``inspect``) go back with it, to the collector's next
walk of that generation.

The command line turns the collector off for its whole run, so nothing would ever free those
cycles: there ``settle`` collects them first, the one walk of torch's objects it pays for
(about 0.3 s of CPU), and the export then fills their memory instead of new pages — a cold
``render`` of bert-base peaks 8 MB lower. A process whose collector runs (the API, the docs
builders, the tests, which trace hundreds of models) keeps the walk for its own schedule.

Each block ends with a collection of the youngest generation only: the collector was held off,
so that generation holds exactly what the block made (a full collection would walk everything
the process made since, every trace again). The docs builders freeze what lives on after each
trace for good (:func:`set_aside`); this module remembers that, because counting what is frozen
(``gc.get_freeze_count``) walks every frozen object, millions of them once torch is imported.
"""

from __future__ import annotations

import atexit
import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager

# Whether bertgraph froze objects for good (set_aside): what is frozen then is not ours to hand back.
_SET_ASIDE: list[bool] = []
_EXIT_REGISTERED: list[bool] = []


def set_aside() -> None:
    """Freeze what lives now for good, and once more at exit: later collections and the interpreter's
    last ones never walk it again (objects are still freed by reference counting)."""
    gc.freeze()
    _SET_ASIDE[:] = [True]
    if not _EXIT_REGISTERED:
        atexit.register(gc.freeze)
        _EXIT_REGISTERED.append(True)


def hand_back() -> None:
    """Unfreeze everything, what :func:`set_aside` froze too: the collector walks it all again."""
    gc.unfreeze()
    _SET_ASIDE.clear()


@contextmanager
def paused() -> Iterator[Callable[[], None]]:
    """No automatic collection inside the block, one collection of what it made after it; yields ``settle``.

    A collector that was off stays off: ``settle`` collects what importing left before setting
    the rest aside, and leaving collects what came after. Objects someone else froze stay
    frozen (then ``settle`` does nothing).
    """
    was_enabled = gc.isenabled()
    # Counting walks every frozen object: not when bertgraph knows it froze them itself.
    own_freeze = not _SET_ASIDE and gc.get_freeze_count() == 0
    frozen = False

    def settle() -> None:
        nonlocal frozen
        if own_freeze and not frozen:
            if not was_enabled:
                gc.collect()
            gc.freeze()
            frozen = True

    gc.disable()
    try:
        yield settle
    finally:
        if was_enabled or frozen:
            gc.collect(0)  # held off, the youngest generation is what the block made
        if frozen:
            gc.unfreeze()
        if was_enabled:
            gc.enable()
