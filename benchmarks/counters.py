"""One FLOP counter on bert-base, run as its own process by the ``flops`` suite.

Every tool counts the same model — ``BertModel`` with the bert-base-uncased config, seeded
random weights, on the CPU, batch 1, sequence 128, ``input_ids`` only — called the way its
documentation shows, with the attention implementation given (``sdpa``, transformers'
default, or ``eager``). The last line printed is a JSON object: the count as the tool
reports it, its unit and, where the tool gives one, its breakdown.

    python benchmarks/counters.py TOOL ATTENTION [--smoke]
"""

from __future__ import annotations

import argparse
import io
import json
import time
import warnings
from contextlib import redirect_stdout
from typing import Any

BATCH, SEQ = 1, 128
TOOLS = ("bertgraph", "FlopCounterMode", "torchinfo", "ptflops (pytorch)", "ptflops (aten)", "calflops", "fvcore")
SMOKE = {"hidden_size": 64, "num_attention_heads": 2, "intermediate_size": 128, "num_hidden_layers": 2}


def config(attention: str, smoke: bool) -> Any:
    import transformers

    from bertgraph.model.presets import preset_config

    fields = {**(preset_config("bert-base-uncased") or {}), **(SMOKE if smoke else {})}
    return transformers.BertConfig(**fields, attn_implementation=attention)


def model_and_ids(attention: str, smoke: bool) -> tuple[Any, Any]:
    import torch
    import transformers

    torch.manual_seed(0)
    settings = config(attention, smoke)
    return transformers.BertModel(settings).eval(), torch.randint(0, settings.vocab_size, (BATCH, SEQ))


def bertgraph_count(smoke: bool) -> dict[str, Any]:
    import bertgraph
    from bertgraph.graph import cost, costbase

    overrides = {"layers": 2, "hidden": 64, "heads": 2, "intermediate": 128} if smoke else {}
    graph = bertgraph.trace("bert-base-uncased", cache=False, seq_len=SEQ, batch=BATCH, **overrides).graph
    at = {"batch": BATCH, "seq": SEQ}
    values = {key: costbase.evaluate(poly, at) for key, poly in cost.model_totals(graph).items()}
    detail = {**values, "unsupported": cost.unsupported(graph)}
    return {"value": values["matmul_flops"], "unit": "FLOPs", "detail": detail}


def count(tool: str, attention: str, smoke: bool) -> dict[str, Any]:
    """The tool's count of one forward pass, with its unit."""
    import torch

    if tool == "bertgraph":
        return bertgraph_count(smoke)
    model, ids = model_and_ids(attention, smoke)
    if tool == "FlopCounterMode":
        from torch.utils.flop_counter import FlopCounterMode

        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            model(input_ids=ids)
        ops = {str(op): int(n) for op, n in counter.get_flop_counts()["Global"].items()}
        return {"value": int(counter.get_total_flops()), "unit": "FLOPs", "detail": ops}
    if tool == "torchinfo":
        import torchinfo

        summary = torchinfo.summary(model, input_data={"input_ids": ids}, verbose=0)
        return {"value": int(summary.total_mult_adds), "unit": "mult-adds"}
    if tool.startswith("ptflops"):
        from ptflops import get_model_complexity_info

        macs, _ = get_model_complexity_info(
            model,
            (SEQ,),
            as_strings=False,
            print_per_layer_stat=False,
            input_constructor=lambda _: {"input_ids": ids},
            backend="aten" if "aten" in tool else "pytorch",
        )
        return {"value": int(macs), "unit": "MACs"}
    if tool == "calflops":
        from calflops import calculate_flops

        flops, macs, _ = calculate_flops(
            model=model, kwargs={"input_ids": ids}, output_as_string=False, print_results=False, print_detailed=False
        )
        return {"value": int(flops), "unit": "FLOPs", "detail": {"macs": int(macs)}}
    if tool == "fvcore":
        from fvcore.nn import FlopCountAnalysis

        class Outputs(torch.nn.Module):
            """fvcore traces with TorchScript, which needs tensors out; both outputs keep the pooler alive."""

            def __init__(self, inner: Any) -> None:
                super().__init__()
                self.inner = inner

            def forward(self, input_ids: Any) -> Any:
                out = self.inner(input_ids=input_ids)
                return out.last_hidden_state, out.pooler_output

        analysis = FlopCountAnalysis(Outputs(model), (ids,))
        analysis.unsupported_ops_warnings(False).uncalled_modules_warnings(False)
        total = int(analysis.total())
        detail = {
            "by_operator": {k: int(v) for k, v in analysis.by_operator().items()},
            "unsupported": {k: int(v) for k, v in analysis.unsupported_ops().items()},
        }
        return {"value": total, "unit": "MACs", "detail": detail}
    raise SystemExit(f"unknown tool {tool!r}; one of: {', '.join(TOOLS)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("tool", choices=TOOLS)
    parser.add_argument("attention", choices=("sdpa", "eager"))
    parser.add_argument("--smoke", action="store_true", help="a two-layer model of hidden 64")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    start = time.perf_counter()
    with redirect_stdout(io.StringIO()):  # some tools print tables of their own
        result = count(args.tool, args.attention, args.smoke)
    result["seconds"] = time.perf_counter() - start
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
