"""Python's cyclic garbage collector held off while a model is imported, built and exported.

Importing torch and transformers and tracing a model create millions of objects, most of
which live to the end; the collector, triggered by allocation counts, walks them again and
again (a quarter of a cold trace's CPU time). Inside :func:`paused` nothing is collected
automatically (reference counting still frees everything without cycles). When the caller
calls ``settle`` — torch, transformers and the model imported and built — what exists is
set aside (``gc.freeze``), so the one collection at the end walks only what came after it
and frees the cycles tracing left (exported programs, fx graphs); then everything is handed
back to the collector's oldest generation, as if it had been collected all along. The few
cycles importing left (6 MB for bert-base) go back with it, to the collector's next walk of
that generation: collecting them at ``settle`` would walk torch's million objects once more
(0.25 s) to free them a little sooner.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def paused() -> Iterator[Callable[[], None]]:
    """No automatic collection inside the block, one collection after it; yields ``settle``.

    A collector that was off stays off and nothing is collected: the command line turns it
    off for its whole run, which ends in ``os._exit``, so nothing would ever walk what
    ``settle`` set aside. Objects someone else froze stay frozen (then ``settle`` does
    nothing and the last collection walks everything).
    """
    was_enabled = gc.isenabled()
    own_freeze = gc.get_freeze_count() == 0
    frozen = False

    def settle() -> None:
        nonlocal frozen
        if was_enabled and own_freeze and not frozen:
            gc.freeze()
            frozen = True

    gc.disable()
    try:
        yield settle
    finally:
        if was_enabled:
            gc.collect()
        if frozen:
            gc.unfreeze()
        if was_enabled:
            gc.enable()
