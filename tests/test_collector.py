"""Tracing holds the cyclic garbage collector off, then frees what tracing left and hands everything back."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from bertgraph.tracing import collector


class _Cycle:
    def __init__(self) -> None:
        self.me = self


@pytest.fixture
def collecting() -> Iterator[None]:
    """The collector on and nothing frozen, as in a fresh process; restored afterwards."""
    was = gc.isenabled()
    gc.enable()
    collector.hand_back()  # a docs build in this process may have set torch's objects aside
    yield
    if was:  # a test may have turned it off: the next test in this worker finds it as it was
        gc.enable()
    else:
        gc.disable()


def test_nothing_is_collected_inside_and_cycles_are_freed_after(collecting: None) -> None:
    runs: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            runs.append(info["generation"])

    gc.callbacks.append(count)
    try:
        with collector.paused() as settle:
            before = weakref.ref(_Cycle())
            for _ in range(50_000):
                _Cycle()  # far beyond gen 0's threshold: a running collector would have run
            assert runs == []
            kept = _Cycle()
            settle()
            assert runs == []  # settling sets aside what exists; it walks nothing
            assert gc.get_freeze_count() > 0
            left = weakref.ref(_Cycle())  # a cycle nothing refers to: only the collector frees it
            for _ in range(50_000):
                _Cycle()
            assert runs == []
            assert left() is not None
        assert left() is None
        assert runs == [0]  # once, at the end, of the youngest generation: what the block made
        assert before() is not None  # set aside during that collection
    finally:
        gc.callbacks.remove(count)
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0  # what settle() set aside is the collector's again
    gc.collect()
    assert before() is None  # and its next walk frees it: nothing leaks
    del kept


def test_a_collector_switched_off_stays_off_and_only_settling_and_leaving_collect(collecting: None) -> None:
    """Off (the command line turns it off for the whole run): settling frees what importing left, so the
    export fills that memory, and leaving frees what tracing left; nothing stays set aside."""
    runs: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            runs.append(info["generation"])

    gc.disable()
    gc.callbacks.append(count)
    try:
        with collector.paused() as settle:
            before = weakref.ref(_Cycle())  # what importing leaves: a cycle nothing refers to
            settle()
            assert runs == [2] and before() is None
            assert gc.get_freeze_count() > 0  # what lives on is set aside: the last walk skips it
            left = weakref.ref(_Cycle())
            for _ in range(50_000):
                _Cycle()
            settle()  # settling twice walks nothing more
            assert runs == [2]
            assert left() is not None  # off: no automatic collection
        assert left() is None
    finally:
        gc.callbacks.remove(count)
    assert runs == [2, 0]
    assert not gc.isenabled()
    assert gc.get_freeze_count() == 0


def test_the_command_line_runs_without_the_cyclic_collector() -> None:
    """``bertgraph`` is one command and an exit: the collector is off from its first line."""
    import subprocess
    import sys

    probe = (
        "import gc, sys\n"
        "from bertgraph import cli\n"
        "cli.main = lambda: print('collector', gc.isenabled(), 'torch' in sys.modules) or 0\n"
        "cli.run()\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "collector False False"


def test_objects_someone_else_froze_stay_frozen(collecting: None) -> None:
    gc.freeze()
    frozen = gc.get_freeze_count()
    try:
        with collector.paused() as settle:
            settle()
            left = weakref.ref(_Cycle())
        assert left() is None
        # Unfrozen, the count would fall to about nothing; a frozen object freed by reference
        # counting meanwhile (another test's leftovers) lowers it by one.
        assert gc.get_freeze_count() >= frozen - 100
    finally:
        gc.unfreeze()


def test_what_bertgraph_set_aside_is_not_counted_and_the_block_walks_only_what_it_made(
    collecting: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a docs build froze what lives on (``collector.set_aside``), a trace neither counts the frozen
    objects (``gc.get_freeze_count`` walks them all) nor walks the objects made before it: a process that
    traces hundreds of models (the tests, a docs build) paid both, every trace again."""
    older = [_Cycle() for _ in range(1000)]  # what the process made before: in the older generations
    gc.collect()
    collector.set_aside()
    runs: list[dict[str, int]] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "stop":
            runs.append(info)

    def no_counting() -> int:
        raise AssertionError("counted the frozen objects")

    unfrozen = [_Cycle() for _ in range(1000)]  # made after the freeze, before the block: not the block's
    gc.collect()
    monkeypatch.setattr(gc, "get_freeze_count", no_counting)
    gc.callbacks.append(count)
    try:
        with collector.paused() as settle:
            settle()  # frozen by someone: nothing to set aside
            left = weakref.ref(_Cycle())
        assert left() is None
        assert [info["generation"] for info in runs] == [0]
        assert runs[0]["collected"] >= 1
    finally:
        gc.callbacks.remove(count)
        monkeypatch.undo()
        collector.hand_back()
    assert gc.get_freeze_count() == 0
    del older, unfrozen


def test_export_records_no_stack_traces_and_restores_the_switch(tiny_graph) -> None:  # type: ignore[no-untyped-def]
    import torch.fx.config

    from bertgraph.model import build_model
    from bertgraph.tracing import export_program

    spec, _ = tiny_graph("bert", "base")
    before = torch.fx.config.do_not_emit_stack_traces
    program = export_program(build_model(spec), spec, (2, 7))
    assert torch.fx.config.do_not_emit_stack_traces == before
    ops = [node for node in program.graph.nodes if node.op == "call_function"]
    assert ops
    assert all(not node.meta.get("stack_trace") for node in ops)
