"""Plain-text tables for the terminal: parameters, the module tree, head diffs."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from bertgraph.graph.facts.summary import shared_lines, stack_line
from bertgraph.render import figures
from bertgraph.render.deployment import deployment_sentences, deployment_table
from bertgraph.render.escape import terminal_text


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], right: Sequence[bool]) -> Iterable[str]:
    """Aligned columns with a rule under the header; ``right`` marks numeric columns.

    Every cell is shown safely (:func:`~bertgraph.render.escape.terminal_text`): a module
    name cannot move the cursor, recolour the terminal or break a row.
    """
    body = [[terminal_text(cell) for cell in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in body]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        padded = [c.rjust(w) if r else c.ljust(w) for c, w, r in zip(cells, widths, right)]
        return "  ".join(padded).rstrip()

    yield line(headers)
    yield "  ".join("─" * w for w in widths)
    for row in body:
        yield line(row)


def title(stats: dict[str, Any]) -> str:
    return terminal_text(f"{stats['model']} · {stats['model_class']} (head: {stats['head']})")


def not_traced_line(data: dict[str, Any]) -> str:
    """Counts and folding from the module tree alone, and why there is no trace."""
    return terminal_text(
        f"not traced: {data['not_traced']}; counts and folding come from the module tree, shapes need a trace"
    )


def generate_params(stats: dict[str, Any]) -> Iterable[str]:
    """Every parameter, then totals and groups with their share."""
    yield title(stats)
    if stats.get("not_traced"):
        yield not_traced_line(stats)
    yield from stored_lines(stats)
    yield ""
    yield from table(
        ["Parameter", "Shape", "Count", "Trainable"],
        (
            [p["name"], figures.shape(p["shape"]), figures.count(p["numel"]), "yes" if p["trainable"] else "no"]
            for p in stats["parameters"]
        ),
        [False, False, True, False],
    )
    yield ""
    total = stats["total"]
    rows = [[name, figures.count(n), figures.percent(n, total)] for name, n in stats["groups"].items()]
    rows.append(["total", figures.count(total), figures.percent(total, total)])
    rows.append(["trainable", figures.count(stats["trainable"]), figures.percent(stats["trainable"], total)])
    if "active" in stats:
        rows.append(["active per token", figures.count(stats["active"]), figures.percent(stats["active"], total)])
    yield from table(["Group", "Parameters", "Share"], rows, [False, True, True])
    if "active" in stats:
        yield ""
        yield active_line(stats)
    yield ""
    yield f"{len(stats['parameters'])} parameter tensors"


def _tree_prefix(rows: list[dict[str, Any]], index: int) -> str:
    """Box-drawing prefix for a row of a pre-order tree listing."""
    level = rows[index]["level"]
    if level == 0:
        return ""

    def has_later_sibling(at: int, depth: int) -> bool:
        for later in rows[at + 1 :]:
            if later["level"] < depth:
                return False
            if later["level"] == depth:
                return True
        return False

    parts = []
    ancestor_index = index
    for depth in range(level, 0, -1):
        while rows[ancestor_index]["level"] > depth:
            ancestor_index -= 1
        last = not has_later_sibling(ancestor_index, depth)
        if depth == level:
            parts.append("└─ " if last else "├─ ")
        else:
            parts.append("   " if last else "│  ")
    return "".join(reversed(parts))


def module_label(row: dict[str, Any]) -> str:
    name = row["name"]
    attention = f" · {row['attention']} attention" if row.get("attention") else ""
    if row.get("calls"):
        attention = f" × {row['calls']} · shared weights{attention}"
    if row.get("repeat", 1) > 1:
        return f"{name}: {row['repeat']} × {row['type']}{attention}"
    return name if row["level"] == 0 else f"{name}: {row['type']}{attention}"


# What the shape column says of a module the traced forward pass never runs (used only in training).
NOT_RUN = "not run"


def generate_summary(summary: dict[str, Any]) -> Iterable[str]:
    """The module tree with sizes, output shapes, parameters and share."""
    rows = summary["rows"]
    yield title(summary)
    example = ", ".join(f"{k}={v}" for k, v in summary["example"].items())
    if summary.get("not_traced"):
        yield not_traced_line(summary)
    else:
        yield terminal_text(f"example input: {example}; shapes show these dims by name")
    yield from stored_lines(summary)
    if summary.get("roles_inferred"):
        yield "roles inferred from the module tree (transformers has this model type; bertgraph has no record of it)"
    if "active" in summary:
        yield active_line(summary)
    yield ""
    yield from _architecture_lines(summary.get("architecture", {}))
    if summary.get("kv_cache"):
        yield kv_cache_line(summary["kv_cache"])
        yield ""
    body = []
    for index, row in enumerate(rows):
        params = figures.count(row["params"])
        if row.get("repeat", 1) > 1:
            params = f"{params} ({row['repeat']} × {figures.count(row['each'])})"
        body.append(
            [
                _tree_prefix(rows, index) + module_label(row),
                row["sizes"],
                NOT_RUN if row.get("runs") is False else figures.shapes(row["shapes"]),
                params,
                figures.percent(row["share"], 1) + (" each" if row["in_fold"] else ""),
            ]
        )
    yield from table(
        ["Module", "Sizes", "Output shape", "Parameters", "Share"], body, [False, False, False, True, True]
    )
    yield ""
    yield (
        f"total {figures.count(summary['total'])} parameters, "
        f"trainable {figures.count(summary['trainable'])}; rows inside a folded group count one instance"
    )


def active_line(summary: dict[str, Any]) -> str:
    """``active per token: 12,879,925,248 of 46,702,792,704 parameters (2 of 8 experts per block)``."""
    return (
        f"active per token: {figures.count(summary['active'])} of {figures.count(summary['total'])} parameters "
        f"({summary['experts_per_token']} of {summary['experts']} experts per block; router and shared experts always)"
    )


# The words for a quantized checkpoint's parts (model/stored.py's PARTS).
_PART_WORDS = {
    "float8": "low-precision float weights",
    "packed": "packed weights",
    "scales": "scales",
    "zeros": "zero points",
    "g_idx": "group indices",
    "quant-state": "quantizer state",
}


def stored_lines(data: dict[str, Any]) -> Iterable[str]:
    """The checkpoint line and the remote-code line, where a summary or parameter table has them."""
    if data.get("checkpoint"):
        yield checkpoint_line(data["checkpoint"])
    if data.get("remote_code"):
        yield remote_code_line(data["remote_code"])


def checkpoint_line(found: dict[str, Any]) -> str:
    """What the checkpoint's headers say, held to the graph: ``checkpoint bfloat16, 2 shards, 336.6 kB;
    168,323 parameters, as the graph``, or what differs (tensors the model lacks, parameters not stored)."""
    dtypes = [dtype_name(name) for name in found["dtypes"]]
    kinds = " + ".join(dtypes[:3]) + (" + …" if len(dtypes) > 3 else "")
    parts = found.get("parts", {})
    if found.get("quantization") or parts:
        held = ", ".join(
            f"{'/'.join(dtype_name(d) for d in part['dtypes'])} {_PART_WORDS.get(name, name)}"
            for name, part in parts.items()
        )
        kinds = f"{found.get('quantization') or 'quantized'}" + (f" ({held})" if held else "")
    files = f"{found['files']} shards" if found.get("sharded") else "one file"
    text = f"checkpoint {kinds}, {files}, {figures.size(found['bytes'])}; {_compared_words(found)}"
    return terminal_text(text)


def _compared_words(found: dict[str, Any]) -> str:
    """``168,323 parameters, as the graph``; or the totals and what only one side has."""
    compared = found["compared"]
    quantized = compared.get("quantized")
    held = f"{figures.count(found['elements'])} parameters"
    if quantized:
        held = (
            f"{figures.count(compared['stored'] + quantized['elements'])} of the graph's parameters, "
            f"{figures.count(quantized['elements'])} of them in {quantized['tensors']} weights stored quantized"
        )
    if compared["matches"]:
        return f"{held}, as the graph"
    words = [f"{held}, the graph {figures.count(compared['graph'])}"]
    sides = (("not_in_model", "stored tensors not in the model"), ("not_in_checkpoint", "of the graph's not stored"))
    for side, where in sides:
        part = compared[side]
        if part["tensors"]:
            names = ", ".join(part["names"]) + (", …" if part["tensors"] > len(part["names"]) else "")
            words.append(f"{part['tensors']} {where} ({figures.count(part['elements'])}: {names})")
    return "; ".join(words)


def dtype_name(name: str) -> str:
    """A safetensors dtype as torch names it (``BF16`` → ``bfloat16``)."""
    from bertgraph.model.stored import DTYPE_NAMES

    return DTYPE_NAMES.get(name, name.lower())


def remote_code_line(classes: list[str]) -> str:
    """The code a config names and bertgraph did not run."""
    return terminal_text(
        f"config's auto_map names code of its own ({', '.join(classes)}), not run: drawn with transformers' classes "
        "for its model_type"
    )


def kv_cache_line(entry: dict[str, Any]) -> str:
    """``KV cache at 4,096 tokens in bfloat16: 96.0 MiB (batch 1)``; a latent cache (MLA) says so, and what
    every head's keys and values would take."""
    line = (
        f"KV cache at {figures.count(entry['tokens'])} tokens in {entry['dtype']}: {figures.size(entry['bytes'])} "
        f"(batch 1; {entry['readable']} bytes)"
    )
    if "decompressed_bytes" in entry:
        line += (
            f"; MLA's latent and shared rotary key, as transformers caches them — every head's keys and values "
            f"would take {figures.size(entry['decompressed_bytes'])}"
        )
    return line


def _architecture_lines(facts: dict[str, Any]) -> Iterable[str]:
    """What the ops show of the architecture: attention and positions per stack, shared layers."""
    if not facts.get("stacks"):
        return
    yield terminal_text(f"architecture: {facts.get('structure') or 'read off the ops'}")
    for stack in facts["stacks"]:
        yield terminal_text(f"  {stack_line(stack)}")
    for line in shared_lines(facts.get("shared", {})):
        yield terminal_text(f"  {line}")
    yield ""


def generate_diff(diff: dict[str, Any]) -> Iterable[str]:
    """What a head adds and removes, with parameter deltas."""
    a, b = diff["a"], diff["b"]
    yield terminal_text(
        f"{a['model']}: {a['head']} ({a['model_class']}, {figures.count(a['total'])} parameters) → "
        f"{b['head']} ({b['model_class']}, {figures.count(b['total'])} parameters)"
    )
    yield ""
    rows = [["+", m["module"], m["type"], m["sizes"], f"+{figures.count(m['params'])}"] for m in diff["added"]]
    rows += [["-", m["module"], m["type"], m["sizes"], f"-{figures.count(m['params'])}"] for m in diff["removed"]]
    for m in diff["changed"]:
        delta = m["b"]["params"] - m["a"]["params"]
        rows.append(
            [
                "~",
                m["module"],
                f"{m['a']['type']} → {m['b']['type']}" if m["a"]["type"] != m["b"]["type"] else m["b"]["type"],
                f"{m['a']['sizes']} → {m['b']['sizes']}",
                f"{delta:+,}",
            ]
        )
    if rows:
        yield from table(["", "Module", "Type", "Sizes", "Parameters"], rows, [False, False, False, False, True])
    else:
        yield "no module differs"
    yield ""
    outs_a = ", ".join(f"{o['name']} {figures.shape(o['shape'])}" for o in a["outputs"])
    outs_b = ", ".join(f"{o['name']} {figures.shape(o['shape'])}" for o in b["outputs"])
    yield terminal_text(f"outputs: {outs_a} → {outs_b}")
    yield f"net change: {diff['delta']:+,} parameters"


# --- cost ------------------------------------------------------------------------------------------

COST_NOTE = (
    "one forward pass · matmul FLOPs count 2 per multiply-add, as torch.utils.flop_counter does · "
    "other FLOPs follow bertgraph's per-element rule (softmax 3, layer norm 5, elementwise 1)"
)


def cost_totals(report: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the whole-model figures, exact, one column per size, then the formula."""
    total = report["total"]
    labels = [", ".join(f"{k}={v}" for k, v in s.items()) for s in report["sizes"]]
    named = [
        ("matmul FLOPs", "matmul_flops"),
        ("  linear layers", "linear_matmul_flops"),
        ("  attention", "attention_matmul_flops"),
        ("other FLOPs", "other_flops"),
        ("all FLOPs", "flops"),
        ("activations written (bytes)", "activation_bytes"),
    ]
    dtype = report.get("assumptions", {}).get("dtype", "")
    planning = [
        # what a kernel skipping masked pairs needs: not FlopCounterMode's count
        ("  attention, allowed pairs", "attention_matmul_flops_masked", 3),
        # a mixture of experts: the matmul FLOPs count the experts a token runs; this, all of them
        ("matmul FLOPs, every expert", "all_experts_matmul_flops", 1),
        (f"KV cache (bytes, {dtype})", "kv_cache_bytes", None),
        ("  keys and values per head", "kv_cache_bytes_decompressed", None),
        ("decode step matmul FLOPs", "decode_flops_per_token", None),
    ]
    for name, key, at in planning:
        if key in total:
            named.insert(at if at is not None else len(named), (name, key))
    rows = [[name, *(figures.count(v) for v in total[key]["values"]), total[key]["readable"]] for name, key in named]
    return ["", *labels, "formula"], rows


def planning_sentences(report: dict[str, Any]) -> Iterable[str]:
    """What the planning figures assume and mean, and the arithmetic of generating N tokens."""
    total = report["total"]
    assumed = report.get("assumptions", {})
    if assumed:
        held = {
            "sdpa": "sdpa attention, as traced (one fused op; --attention eager holds every score matrix)",
            "eager": "eager attention, as traced (every score matrix held)",
        }.get(assumed["attention"], "no attention")
        yield f"memory counts {held} and {assumed['dtype']} floating-point tensors"
    if "attention_matmul_flops_masked" in total:
        yield (
            "allowed pairs: attention products over the (query, key) pairs the mask allows, what a kernel "
            "that skips masked blocks needs, not what FlopCounterMode counts (every pair)"
        )
    if "kv_cache_bytes" in total:
        yield (
            "KV cache: keys and values every causal and cross-attention block keeps after the prompt "
            "(a sliding window of w keeps w - 1 tokens); decode step: one new token with the prompt cached "
            "(an encoder-decoder: tgt decoder tokens and the encoder's output), head included"
        )
    if "kv_cache_bytes_decompressed" in total:
        yield (
            "multi-head latent attention (MLA): the KV cache is each token's latent and shared rotary key, as "
            "transformers' cache holds them, decompressed over every cached token at each decode step; keys and "
            "values per head: what attention reads, and what a cache keeping them would hold"
        )
    for entry, sizes in zip(report.get("generate", []), report["sizes"]):
        label = ", ".join(f"{k}={v}" for k, v in sizes.items())
        yield (
            f"generating {figures.count(entry['tokens'])} tokens after {label}: prefill "
            f"{figures.count(entry['prefill_flops'])} + decode {figures.count(entry['decode_flops'])} = "
            f"{figures.count(entry['total_flops'])} matmul FLOPs; KV cache at the end "
            f"{figures.count(entry['kv_cache_bytes'])} B ({figures.size(entry['kv_cache_bytes'])})"
        )
    yield from report.get("notes", [])


def cost_memory(report: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """Header and rows of inference memory, one column per size."""
    memory = report["memory"]
    labels = [", ".join(f"{k}={v}" for k, v in s.items()) for s in report["sizes"]]

    def cells(values: list[int]) -> list[str]:
        return [f"{figures.count(v)} B ({figures.size(v)})" for v in values]

    count = len(report["sizes"])
    rows = [
        ["peak activations", *cells(memory["peak_activation_bytes"])],
        ["inputs", *cells(memory["input_bytes"])],
        [f"parameters ({memory['dtype']})", *cells([memory["parameter_bytes"]] * count)],
    ]
    return ["inference memory", *labels], rows


def peak_sentence(report: dict[str, Any]) -> str:
    """Where the activation peak is reached: one op, or one per size when it moves."""
    at = report["memory"]["peak_at"]
    if len(set(at)) == 1:
        return f"activations peak right after {at[0]}"
    labels = [", ".join(f"{k}={v}" for k, v in s.items()) for s in report["sizes"]]
    return "activations peak right after " + "; ".join(f"{node} ({label})" for node, label in zip(at, labels))


def training_sentence(report: dict[str, Any]) -> str:
    training = report["training"]
    parts = " + ".join(f"{row['what']} {figures.size(row['bytes'])}" for row in training["rows"])
    sentence = (
        f"training with Adam in {training['dtype']}: {training['bytes_per_parameter']} bytes per trainable "
        f"parameter = {figures.count(training['total'])} B ({figures.size(training['total'])}): {parts}"
    )
    if training.get("frozen_parameters"):
        sentence += (
            f" ({figures.count(training['trainable_parameters'])} trainable; "
            f"{figures.count(training['frozen_parameters'])} frozen, weights only)"
        )
    kept = training.get("activations")
    if not kept:
        return sentence + "; activations kept for the backward pass not included"
    labels = [", ".join(f"{k}={v}" for k, v in s.items()) for s in report["sizes"]]
    each = "; ".join(
        f"{label}: {figures.size(saved)} saved, {figures.size(whole)} in all"
        for label, saved, whole in zip(labels, kept["values"], training["total_with_activations"])
    )
    missing = f" (ops without a rule, left out: {', '.join(kept['unsupported'])})" if kept["unsupported"] else ""
    return (
        f"{sentence}; activations autograd keeps for the backward pass ({kept['dtype']}, dropout on, "
        f"{kept['readable']} bytes){missing}: {each}"
    )


def unsupported_sentence(report: dict[str, Any]) -> str:
    missing = report["unsupported"]
    if not missing:
        return "every op has a cost formula"
    listed = ", ".join(f"{name} ×{n}" for name, n in missing.items())
    return f"ops without a cost, not in the sums: {listed}"


def cost_tree(report: dict[str, Any]) -> tuple[list[str], list[list[str]], list[bool]]:
    """Header, rows and right-alignment of the module table (compact figures; the formula is exact)."""
    rows = report["rows"]
    single = len(report["sizes"]) == 1
    saved = bool(rows) and "saved_bytes" in rows[0]  # training's saved activations (not in ONNX files)
    headers = ["Module"]
    for s in report["sizes"]:
        suffix = "" if single else f" @{s.get('seq', s.get('sequence', ''))}"
        headers += [f"matmul{suffix}", f"other{suffix}", f"share{suffix}", f"activations{suffix}"]
        headers += [f"kept for backward{suffix}"] * saved
    headers.append("FLOPs formula")
    body = []
    for index, row in enumerate(rows):
        cells = [_tree_prefix(rows, index) + module_label(row)]
        for i in range(len(report["sizes"])):
            each = " each" if row["in_fold"] else ""
            cells += [
                figures.flops(row["matmul_flops"]["values"][i]),
                figures.flops(row["other_flops"]["values"][i]),
                figures.percent(row["share"][i], 1) + each,
                figures.size(row["activation_bytes"]["values"][i]),
            ]
            if saved:
                cells.append(figures.size(row["saved_bytes"]["values"][i]))
        cells.append(row["flops"]["readable"])
        body.append(cells)
    right = [False] + [True] * (len(headers) - 2) + [False]
    return headers, body, right


def generate_cost(report: dict[str, Any]) -> Iterable[str]:
    """Whole-model FLOPs with their formulas, inference and training memory, and the module tree."""
    yield title(report)
    yield COST_NOTE
    yield ""
    headers, rows = cost_totals(report)
    yield from table(headers, rows, [False] + [True] * (len(headers) - 2) + [False])
    yield ""
    headers, rows = cost_memory(report)
    yield from table(headers, rows, [False] + [True] * (len(headers) - 1))
    yield peak_sentence(report)
    yield training_sentence(report)
    yield from planning_sentences(report)
    yield unsupported_sentence(report)
    yield ""
    planned = deployment_table(report)
    if planned is not None:
        yield from table(planned[0], planned[1], [False] + [True] * (len(planned[0]) - 1))
        yield from deployment_sentences(report)
        yield ""
    headers, rows, right = cost_tree(report)
    yield from table(headers, rows, right)
    yield ""
    yield "rows inside a folded group count one instance; share is of all FLOPs"
