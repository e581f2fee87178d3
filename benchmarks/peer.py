"""One task of one peer tool, run as its own process by ``benchmarks/run.py``.

Each task builds the same model as bertgraph from the same config and does what a user
of that tool does. Tasks that time a single call (``export-call``, ``trace-call``) print
its seconds on stdout, measured after the imports; the rest are timed from outside.

    python benchmarks/peer.py TASK --layers 12 --hidden 768 --heads 12 --intermediate 3072 \
        --head sequence-classification [--out PATH]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

HEADS = {"base": "BertModel", "sequence-classification": "BertForSequenceClassification"}
TASKS = (
    "torchview-real",
    "torchview-meta",
    "torchinfo-meta",
    "export-call",
    "export-process",
    "trace-call",
    "onnx-bare",
)


def build(args: argparse.Namespace, device: str) -> Any:
    import torch
    import transformers

    config = transformers.BertConfig(
        num_hidden_layers=args.layers,
        hidden_size=args.hidden,
        num_attention_heads=args.heads,
        intermediate_size=args.intermediate,
    )
    torch.manual_seed(0)
    with torch.device(device):
        model = getattr(transformers, HEADS[args.head])(config)
    return model.eval()


def inputs(device: str, with_mask: bool, batch: int = 1, seq: int = 128) -> dict[str, Any]:
    import torch

    ids = torch.zeros(batch, seq, dtype=torch.long, device=device)
    data = {"input_ids": ids, "token_type_ids": torch.zeros_like(ids)}
    if with_mask:  # a data-dependent mask check in transformers cannot run on the meta device
        data["attention_mask"] = torch.ones_like(ids)
    return data


def torchview_svg(args: argparse.Namespace, device: str) -> None:
    from torchview import draw_graph

    model = build(args, device)
    graph = draw_graph(model, input_data=inputs(device, with_mask=device != "meta"), device=device)
    graph.visual_graph.render(filename=args.out, format="svg", cleanup=True)


def torchinfo_table(args: argparse.Namespace) -> None:
    from torchinfo import summary

    model = build(args, "meta")
    print(summary(model, input_data=inputs("meta", with_mask=False), device="meta", verbose=0))


def export_call(args: argparse.Namespace) -> float:
    import torch

    model = build(args, "meta")
    start = time.perf_counter()
    torch.export.export(model, (), inputs("meta", with_mask=True, batch=2), strict=False)
    return time.perf_counter() - start


def trace_call(args: argparse.Namespace) -> float:
    from bertgraph.model import resolve
    from bertgraph.tracing import trace

    spec = resolve(
        "bert-base-uncased",
        args.head,
        overrides={
            "layers": args.layers,
            "hidden": args.hidden,
            "heads": args.heads,
            "intermediate": args.intermediate,
        },
    )
    # Imports are not part of the call: load what building the model would load.
    from transformers import BertForSequenceClassification, BertModel  # noqa: F401

    start = time.perf_counter()
    trace(spec)
    return time.perf_counter() - start


def onnx_bare(args: argparse.Namespace) -> None:
    import torch

    model = build(args, "cpu")
    data = inputs("cpu", with_mask=True, batch=2)
    batch = torch.export.Dim("batch", min=1, max=4096)
    sequence = torch.export.Dim("sequence", min=1, max=model.config.max_position_embeddings)
    program = torch.onnx.export(
        model,
        (),
        kwargs=data,
        dynamo=True,
        verbose=False,
        dynamic_shapes={name: {0: batch, 1: sequence} for name in data},
    )
    program.save(args.out)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("task", choices=TASKS)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--hidden", type=int, default=768)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--intermediate", type=int, default=3072)
    parser.add_argument("--head", choices=list(HEADS), default="sequence-classification")
    parser.add_argument("--out", default="peer-output")
    args = parser.parse_args()
    if args.task == "torchview-real":
        torchview_svg(args, "cpu")
    elif args.task == "torchview-meta":
        torchview_svg(args, "meta")
    elif args.task == "torchinfo-meta":
        torchinfo_table(args)
    elif args.task == "export-call":
        print(f"{export_call(args):.4f}")
    elif args.task == "export-process":
        export_call(args)
    elif args.task == "trace-call":
        print(f"{trace_call(args):.4f}")
    elif args.task == "onnx-bare":
        onnx_bare(args)


if __name__ == "__main__":
    main()
