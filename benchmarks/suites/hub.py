"""A hub id next to a preset: bert-base with a classification head, fetched from a Hub on 127.0.0.1.

The Hub is tests/hub_server.py serving a bert-base checkpoint's header (the weights' bytes are
never asked for, so the file holds the header alone and the file list gives the full size). Every
command is a whole ``bertgraph summary`` process, as a user runs it:

* warm: the model fetched before (``HF_HOME`` kept) and the graph cached, the endpoint a closed port
  (no request could succeed) — against the preset with its graph cached;
* the fetch alone: ``HF_HOME`` emptied before each run, the graph cached;
* cold: both emptied — against the preset with an empty graph cache;
* each failure once: gated, no such model, no network, a server that never answers, one that stops
  answering midway (the fetch's 25 s cut-off).
"""

from __future__ import annotations

import json
import math
import shutil
import struct
import subprocess
import sys
from pathlib import Path

from harness import BERTGRAPH, Context, Stored, Suite, Target
from measure import Series, alternate

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.hub_server import HubServer, SilentServer, closed_port_url

PRESET_WARM, HUB_WARM = "preset, graph cached", "hub id, fetched before, graph cached"
FETCH = "hub id, fetched (graph cached)"
PRESET_COLD, HUB_COLD = "preset, cold", "hub id, cold (fetched, traced)"
FAILURES = {
    "gated": "fails: gated",
    "absent": "fails: no such model",
    "closed": "fails: no network (closed port)",
    "silent": "fails: server never answers",
    "stall": "fails: server stops answering midway",
}
REPO = "bench/bert-base-uncased"
HEAD = ["--head", "sequence-classification"]


# Prints bert-base's parameter names and shapes; run as a process of its own, so that this one never
# holds torch (a command forked from it would count torch's pages in its peak memory).
SHAPES = """
import json, torch, transformers
from bertgraph.model.presets import preset_config
with torch.device("meta"):
    model = transformers.BertForSequenceClassification(transformers.BertConfig(**preset_config("bert-base-uncased")))
print(json.dumps([[name, list(t.shape)] for name, t in model.state_dict().items()]))
"""


def header_only_checkpoint() -> tuple[dict[str, bytes], dict[str, int]]:
    """bert-base's files: its config and the header of its float32 checkpoint, and the checkpoint's full size."""
    from bertgraph.model.presets import preset_config

    done = subprocess.run([sys.executable, "-c", SHAPES], capture_output=True, text=True, check=True)
    header, offset = {}, 0
    for name, shape in json.loads(done.stdout):
        size = 4 * math.prod(shape)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    config = json.dumps(preset_config("bert-base-uncased")).encode()
    files = {"config.json": config, "model.safetensors": struct.pack("<Q", len(raw)) + raw}
    return files, {"model.safetensors": 8 + len(raw) + offset}


def run(ctx: Context) -> dict[str, Series]:
    server = HubServer()
    files, sizes = header_only_checkpoint()
    server.repo(REPO).add(files)
    server.repo(REPO).sizes.update(sizes)
    gated = server.repo("bench/gated")
    gated.add(files)
    gated.token = "hf_nobody"
    stalled = server.repo("bench/stalled")
    stalled.add(files)
    stalled.stall.add("config.json")  # its HEAD unanswered: huggingface_hub would retry for minutes
    silent = SilentServer()
    homes = {name: ctx.work / f"hf-{name}" for name in ("warm", "cold", "fail")}

    def env(home: str, endpoint: str, graphs: Path) -> dict[str, str]:
        return {
            "HF_HOME": str(homes[home]),
            "HF_ENDPOINT": endpoint,
            "HF_HUB_OFFLINE": "0",
            "BERTGRAPH_CACHE_DIR": str(graphs),
        }

    def summary(model: str) -> list[str]:
        return [BERTGRAPH, "summary", model, *HEAD]

    def fails(model: str) -> list[str]:
        return ["sh", "-c", '"$0" "$@"; [ $? -eq 1 ]', *summary(model)]  # exit 1 (one line) is the success here

    closed = closed_port_url()
    for home in homes.values():
        shutil.rmtree(home, ignore_errors=True)
    try:
        commands = {
            PRESET_WARM: summary("bert-base-uncased"),
            HUB_WARM: summary(REPO),
            FETCH: summary(REPO),
            PRESET_COLD: summary("bert-base-uncased"),
            HUB_COLD: summary(REPO),
        }
        envs = {
            PRESET_WARM: env("warm", closed, ctx.warm_cache),
            HUB_WARM: env("warm", closed, ctx.warm_cache),
            FETCH: env("cold", server.url, ctx.warm_cache),
            PRESET_COLD: env("cold", closed, ctx.cold_cache),
            HUB_COLD: env("cold", server.url, ctx.cold_cache),
        }
        # Fetched once and both traced once before anything is recorded: the warm runs' state.
        fill = {"fetch": summary(REPO), "preset": summary("bert-base-uncased")}
        alternate(fill, 1, warmup=0, envs={name: env("warm", server.url, ctx.warm_cache) for name in fill})

        def empty_home() -> None:
            shutil.rmtree(homes["cold"], ignore_errors=True)

        def empty_both() -> None:
            empty_home()
            shutil.rmtree(ctx.cold_cache, ignore_errors=True)

        prepare = {FETCH: empty_home, PRESET_COLD: empty_both, HUB_COLD: empty_both}
        results = alternate(commands, ctx.runs, warmup=ctx.warmup, envs=envs, prepare=prepare)
        failures = {
            FAILURES["gated"]: (fails("bench/gated"), server.url),
            FAILURES["absent"]: (fails("bench/absent"), server.url),
            FAILURES["closed"]: (fails(REPO), closed),
            FAILURES["silent"]: (fails(REPO), silent.url),
            FAILURES["stall"]: (fails("bench/stalled"), server.url),
        }
        results.update(
            alternate(
                {name: argv for name, (argv, _) in failures.items()},
                1,
                warmup=0,
                envs={name: env("fail", url, ctx.warm_cache) for name, (_, url) in failures.items()},
            )
        )
    finally:
        server.stop()
        silent.stop()
    leftovers = [str(p) for p in homes["fail"].rglob("*") if p.is_file()] if homes["fail"].exists() else []
    if leftovers or server.violations():
        raise RuntimeError(f"a failure left {leftovers} in the cache, or a request read weights: {server.violations()}")
    return results


def targets(stored: dict[str, Stored]) -> list[Target]:
    found = []
    if HUB_WARM in stored and PRESET_WARM in stored:
        hub, preset = stored[HUB_WARM], stored[PRESET_WARM]
        found.append(
            Target(
                "a hub id fetched before is as fast as a preset: ≤ 1.1 × the preset's warm summary",
                f"{hub.seconds / preset.seconds:.2f} × ({hub.seconds:.2f} s vs {preset.seconds:.2f} s)",
                hub.seconds <= 1.1 * preset.seconds,
            )
        )
    if all(name in stored for name in (HUB_COLD, PRESET_COLD, FETCH, HUB_WARM)):
        fetch = stored[FETCH].seconds - stored[HUB_WARM].seconds
        extra = stored[HUB_COLD].seconds - stored[PRESET_COLD].seconds
        found.append(
            Target(
                "a cold hub id costs one cold render plus the fetch (+ 0.5 s)",
                f"{extra:+.2f} s over the cold preset; the fetch alone {fetch:.2f} s",
                extra <= fetch + 0.5,
            )
        )
    ends = [stored[name].seconds for name in FAILURES.values() if name in stored]
    if ends:
        found.append(
            Target(
                "each failure ends in ≤ 30 s, one line, exit status 1",
                f"the longest {max(ends):.1f} s",
                max(ends) <= 30,
            )
        )
    return found


SUITE = Suite(
    name="hub",
    title="A hub id next to a preset: bert-base with the sequence-classification head",
    order=35,
    run=run,
    targets=targets,
    notes=(
        "The Hub is a local server (tests/hub_server.py): a fetch's time here is the client's own, without the "
        "internet's latency. Failures run once each; a server that never answers ends at the 10 s request timeout, "
        "one that stops answering midway at the fetch's 25 s cut-off.",
    ),
)
