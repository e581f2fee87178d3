"""One task of one peer tool, run as its own process by ``benchmarks/run.py``.

Each task builds the same model as bertgraph from the same config and does what a user
of that tool does. ``export-span`` and ``trace-span`` also print the seconds of the same
span measured inside the process (after the imports, model building included); every
task is timed as a whole process from outside too.

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
    "export-span",
    "export-one-layer",
    "imports-only",
    "trace-span",
    "onnx-bare",
    "save-checkpoint",
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


def _import_for_span(head: str) -> None:
    """What both spans leave outside the timer: torch, torch.export and transformers' classes."""
    import torch.export  # noqa: F401
    import transformers

    getattr(transformers, HEADS[head])


def export_span(args: argparse.Namespace) -> float:
    """Build the model on the meta device and export it: the seconds after the imports."""
    import torch

    _import_for_span(args.head)
    start = time.perf_counter()
    model = build(args, "meta")
    torch.export.export(model, (), inputs("meta", with_mask=True, batch=2), strict=False)
    return time.perf_counter() - start


def export_one_layer(args: argparse.Namespace) -> None:
    """The least torch.export work a tool that exports this model does: its imports, the model with one
    layer on the meta device, one export at a fixed size. Its peak memory is the floor of any such tool."""
    import torch

    model = build(argparse.Namespace(**{**vars(args), "layers": 1}), "meta")
    torch.export.export(model, (), inputs("meta", with_mask=False, batch=2), strict=False)


def imports_only(args: argparse.Namespace) -> None:
    """What any tool that exports this model and keeps a networkx graph imports, and nothing run:
    torch, transformers with the model's class, and networkx (torch.export imports it too)."""
    import networkx  # noqa: F401
    import torch.export  # noqa: F401
    import transformers

    getattr(transformers, HEADS[args.head])


def trace_span(args: argparse.Namespace) -> float:
    """bertgraph's trace of the same model (build, export, graph): the seconds after the imports."""
    from bertgraph.model import resolve
    from bertgraph.tracing import trace

    _import_for_span(args.head)
    start = time.perf_counter()
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
    trace(spec)
    return time.perf_counter() - start


def onnx_bare(args: argparse.Namespace) -> None:
    """torch.onnx.export + save, as its users run it; of ``--checkpoint`` when given (from_pretrained)."""
    import torch
    import transformers

    if args.checkpoint:
        model = getattr(transformers, HEADS[args.head]).from_pretrained(args.checkpoint).eval()
    else:
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


def save_checkpoint(args: argparse.Namespace) -> None:
    """A checkpoint with real (seeded random) weights, as ``save_pretrained`` writes it, into ``--out``."""
    build(args, "cpu").save_pretrained(args.out, safe_serialization=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("task", choices=TASKS)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--hidden", type=int, default=768)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--intermediate", type=int, default=3072)
    parser.add_argument("--head", choices=list(HEADS), default="sequence-classification")
    parser.add_argument("--out", default="peer-output")
    parser.add_argument("--checkpoint", help="onnx-bare: export this save_pretrained folder")
    args = parser.parse_args()
    if args.task == "torchview-real":
        torchview_svg(args, "cpu")
    elif args.task == "torchview-meta":
        torchview_svg(args, "meta")
    elif args.task == "torchinfo-meta":
        torchinfo_table(args)
    elif args.task == "export-span":
        print(f"{export_span(args):.4f}")
    elif args.task == "export-one-layer":
        export_one_layer(args)
    elif args.task == "imports-only":
        imports_only(args)
    elif args.task == "trace-span":
        print(f"{trace_span(args):.4f}")
    elif args.task == "onnx-bare":
        onnx_bare(args)
    elif args.task == "save-checkpoint":
        save_checkpoint(args)


if __name__ == "__main__":
    main()
