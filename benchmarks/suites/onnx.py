"""ONNX export of bert-base with a classification head: bertgraph next to a bare torch.onnx.export."""

from __future__ import annotations

from harness import BERT_BASE, Command, Context, Suite


def commands(ctx: Context) -> dict[str, Command]:
    size = ctx.size(BERT_BASE)
    return {
        "bertgraph onnx (verified)": ctx.bertgraph("onnx", size, out="bert.onnx"),
        "bertgraph onnx --no-verify": ctx.bertgraph("onnx", size, "--no-verify", out="bert2.onnx"),
        "bare torch.onnx.export + save": ctx.peer("onnx-bare", size),
    }


SUITE = Suite(
    name="onnx", title="ONNX export of bert-base with the sequence-classification head", order=50, commands=commands
)
