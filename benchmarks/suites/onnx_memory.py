"""ONNX export of a bert-base checkpoint: bertgraph (verification included) next to a bare export.

The suite saves a bert-base + sequence-classification checkpoint with ``save_pretrained``
(random weights, 439 MB) and exports it twice per round: with ``bertgraph onnx`` — export
from a fake-tensor model, weights streamed from the memory-mapped checkpoint, the full
checker and onnxruntime parity at two sizes — and as a user of the bare exporter does:
``from_pretrained``, ``torch.onnx.export(dynamo=True)`` with dynamic batch and sequence,
``save``. The targets: at most half the bare export's peak memory and 0.8 × its wall time.
"""

from __future__ import annotations

import subprocess

from harness import BERT_BASE, BERTGRAPH, PEER, Command, Context, Stored, Suite, Target, ratio, size_args

OURS, BARE = "bertgraph onnx CHECKPOINT (verified)", "bare torch.onnx.export + save of CHECKPOINT"


def commands(ctx: Context) -> dict[str, Command]:
    size = ctx.size(BERT_BASE)
    checkpoint = ctx.work / "checkpoint"
    if not checkpoint.exists():
        argv = [*PEER, "save-checkpoint", *size_args(size), "--out", str(checkpoint)]
        subprocess.run(argv, check=True, capture_output=True)
    head = ["--head", "sequence-classification"]
    return {
        OURS: Command([BERTGRAPH, "onnx", str(checkpoint), *head, "-o", str(ctx.work / "checkpoint.onnx")]),
        BARE: Command([*PEER, "onnx-bare", "--checkpoint", str(checkpoint), *head, "--out", str(ctx.work / "b.onnx")]),
    }


def targets(stored: dict[str, Stored]) -> list[Target]:
    ours, bare = stored[OURS], stored[BARE]
    memory, time = ratio(ours.peak_mb, bare.peak_mb), ratio(ours.seconds, bare.seconds)
    return [
        Target(
            "ONNX export of a bert-base checkpoint, verified: ≤ 0.5 × the bare export's peak memory",
            f"{memory:.2f} × ({ours.peak_mb:.0f} MB vs {bare.peak_mb:.0f} MB)",
            memory <= 0.5,
        ),
        Target(
            "ONNX export of a bert-base checkpoint, verified: ≤ 0.8 × the bare export's wall time",
            f"{time:.2f} × ({ours.seconds:.2f} s vs {bare.seconds:.2f} s)",
            time <= 0.8,
        ),
    ]


SUITE = Suite(
    name="onnx-memory",
    title="ONNX export of a bert-base checkpoint (save_pretrained, 439 MB), verification included",
    order=55,
    commands=commands,
    targets=targets,
    notes=(
        "bertgraph's time includes the full ONNX checker and onnxruntime-vs-PyTorch parity at two sizes; "
        "the bare export does neither. Both write a self-contained file with the same graph and weights.",
    ),
)
