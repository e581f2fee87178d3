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
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def paused() -> Iterator[Callable[[], None]]:
    """No automatic collection inside the block, one collection after it; yields ``settle``.

    A collector that was off stays off: ``settle`` collects what importing left before setting
    the rest aside, and leaving collects what came after. Objects someone else froze stay
    frozen (then ``settle`` does nothing and the last collection walks everything not frozen).
    """
    was_enabled = gc.isenabled()
    own_freeze = gc.get_freeze_count() == 0
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
            gc.collect()
        if frozen:
            gc.unfreeze()
        if was_enabled:
            gc.enable()
