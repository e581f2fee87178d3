"""Shared fixtures: a private graph cache, traced models reused across tests, tiny checkpoints."""

from __future__ import annotations

import gc
import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import settings

import bertgraph
from bertgraph.api import Architecture

if TYPE_CHECKING:
    import networkx as nx

    from bertgraph.model import ModelSpec

# Two workers share two cores: each worker's torch, and every command it starts, computes on one
# thread, so no intra-op thread spins at a barrier waiting for a peer the other worker descheduled.
# (Set before torch is first imported, which reads it once.)
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")

# A test process keeps millions of objects to its end. With the collector's default, a walk of the
# youngest generation every 700 allocations, the short-lived objects of each test's work survive into
# the older generations, whose walks then cover the whole heap (up to 140 a worker, 18 s of its CPU). A
# walk every 10,000 lets them die young: in the working tree's runs the collections took 10 s a worker
# instead of 28, the suite 412 s instead of 481 (a fresh clone's CI run took as long either way; see
# benchmarks/suite-time.md). What the tests run is unchanged; the collector's own tests set its state.
gc.set_threshold(10_000, 10, 10)

# No test reaches a real Hub: fetching is off, and the endpoint is a closed local port. Tests of
# fetching (tests/test_hub.py) turn it on against a server of their own on 127.0.0.1.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_ENDPOINT"] = "http://127.0.0.1:9"

# CI explores the same examples every run, so a failure there is reproducible here.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

TINY_CONFIG = {
    "vocab_size": 99,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 37,
    "max_position_embeddings": 64,
    "type_vocab_size": 2,
}


def require(condition: bool, reason: str) -> None:
    """Skip locally when a real component is missing; fail in CI, where it must be there."""
    if condition:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI installs it: run .ci/run)")
    pytest.skip(reason)


@pytest.fixture(autouse=True, scope="session")
def private_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Tests never read or fill the user's graph cache; the workers of one run share theirs.

    A model one worker traced is read from the shared folder by the other (the cache's own
    checks and build lock apply), so a run traces each model about once, not once per worker.
    Every writer stores the same annotated graph (``api.annotated_trace``), the docs plugins too.
    """
    if os.environ.get("PYTEST_XDIST_WORKER"):
        folder = tmp_path_factory.getbasetemp().parent / "graph-cache"
        folder.mkdir(exist_ok=True)
    else:
        folder = tmp_path_factory.mktemp("graph-cache")
    previous = os.environ.get("BERTGRAPH_CACHE_DIR")
    os.environ["BERTGRAPH_CACHE_DIR"] = str(folder)
    yield folder
    if previous is None:
        os.environ.pop("BERTGRAPH_CACHE_DIR", None)
    else:
        os.environ["BERTGRAPH_CACHE_DIR"] = previous


_TRACED: dict[tuple[str, str, tuple[tuple[str, int], ...]], Architecture] = {}
_ONCE: dict[Any, Any] = {}


@pytest.fixture(scope="session")
def once() -> Callable[[Any, Callable[[], Any]], Any]:
    """``once(key, build)``: what ``build()`` returns, made once per test process.

    A module-scoped fixture is torn down whenever the worker moves to another module's
    tests, and with ``--dist loadgroup`` a worker interleaves modules: an expensive fixture
    (an ONNX export, a browser page) is kept here instead, for the whole session.
    """

    def get(key: Any, build: Callable[[], Any]) -> Any:
        if key not in _ONCE:
            _ONCE[key] = build()
        return _ONCE[key]

    return get


@pytest.fixture(scope="session")
def traced() -> Callable[..., Architecture]:
    """``traced(model, head, **overrides)``: an Architecture, traced once per session."""

    def get(model: str = "bert-base-uncased", head: str = "base", **overrides: int) -> Architecture:
        key = (model, head, tuple(sorted(overrides.items())))
        if key not in _TRACED:
            _TRACED[key] = bertgraph.trace(model, head, **overrides)  # through the run's shared cache
        return _TRACED[key]

    return get


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random BertForSequenceClassification saved with save_pretrained (safetensors)."""
    import torch
    import transformers

    folder = tmp_path_factory.mktemp("tiny-bert")
    torch.manual_seed(1234)
    config = transformers.BertConfig(**TINY_CONFIG, num_labels=3)
    model = transformers.BertForSequenceClassification(config).eval()
    model.save_pretrained(folder, safe_serialization=True)
    assert (folder / "model.safetensors").is_file()
    return folder


@pytest.fixture(scope="session")
def family_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A folder with a tiny config.json for every model_type."""
    from tests.family_configs import TINY

    folders = {}
    for model_type, config in TINY.items():
        folder = tmp_path_factory.mktemp(model_type)
        (folder / "config.json").write_text(json.dumps(config))
        folders[model_type] = folder
    return folders


_FAMILY_GRAPHS: dict[tuple[str, str], nx.DiGraph] = {}


@pytest.fixture(scope="session")
def tiny_graph(family_dirs: dict[str, Path]) -> Callable[[str, str], tuple[ModelSpec, nx.DiGraph]]:
    """``tiny_graph(model_type, head)``: the spec and traced graph, once per session."""

    from bertgraph.model import resolve
    from bertgraph.tracing import trace

    def get(model_type: str, head: str) -> tuple[ModelSpec, nx.DiGraph]:
        spec = resolve(str(family_dirs[model_type]), head)
        if (model_type, head) not in _FAMILY_GRAPHS:
            _FAMILY_GRAPHS[model_type, head] = trace(spec)
        return spec, _FAMILY_GRAPHS[model_type, head]

    return get


@pytest.fixture(scope="session")
def real_vits(tmp_path_factory: pytest.TempPathFactory) -> nx.DiGraph:
    """VITS (text to speech, no record) traced once from its small config, past the graph cache.

    Its wavenets, vocoder and prior flows are cut to one of each (the shrink's config took four
    exports of 1,645 ops, half a minute): what the tests read is each kind's shape and the duration
    predictor's four flows. The tests that read it share the ``vits`` worker group and must not
    change the graph.
    """
    from bertgraph.model.families.generic import small_config

    config = small_config(
        "vits",
        num_hidden_layers=1,
        posterior_encoder_num_wavenet_layers=1,
        prior_encoder_num_wavenet_layers=1,
        prior_encoder_num_flows=2,
        depth_separable_num_layers=1,
        upsample_initial_channel=32,
        upsample_rates=[4],
        upsample_kernel_sizes=[8],
        resblock_kernel_sizes=[3],
        resblock_dilation_sizes=[[1]],
        flow_size=16,
        spectrogram_bins=33,
        duration_predictor_filter_channels=32,
    )
    assert config["duration_predictor_num_flows"] == 4
    folder = tmp_path_factory.mktemp("vits")
    (folder / "config.json").write_text(json.dumps(config, default=str))
    return bertgraph.trace(str(folder), cache=False).graph


@pytest.fixture
def dot_binary() -> str:
    found = shutil.which("dot")
    require(found is not None, "Graphviz dot is not installed (apt-get install graphviz)")
    return str(found)
