"""The ``bertgraph`` command line.

Only argparse and the standard library load at start-up, so ``--help`` is instant; each
command imports what it needs. A mistake in the input is one line on stderr and exit
status 1 (2 for a malformed command line); ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from bertgraph.api import Architecture
    from bertgraph.graph.masks import Example
    from bertgraph.model import ModelSpec

# The head vocabulary of bertgraph.model.families.record.HEAD_NAMES (kept here so --help imports nothing).
HEAD_NAMES = (
    "base",
    "sequence-classification",
    "token-classification",
    "question-answering",
    "masked-lm",
    "multiple-choice",
    "next-sentence",
    "pretraining",
    "causal-lm",
    "seq2seq-lm",
)
DIAGRAM_FORMATS = ("svg", "png", "pdf", "dot", "mermaid", "html", "tex", "drawio")
FAMILIES_FORMATS = ("svg", "png", "pdf", "dot", "mermaid", "markdown", "tex", "drawio")
# Formats Graphviz lays out: images, the page, and the editable ones drawn from its layout (render/editable.py).
LAID_OUT = ("svg", "png", "pdf", "html", "tex", "drawio")
MASKS_FORMATS = ("svg", "png", "pdf", "dot", "json", "markdown")
TABLE_FORMATS = ("text", "markdown", "json")
DIFF_FIGURES = ("svg", "png", "pdf", "dot", "mermaid", "html", "tex", "drawio")
DIFF_FORMATS = (*TABLE_FORMATS, *DIFF_FIGURES)
COST_DTYPES = ("float32", "float16", "bfloat16")
# plan/weights.py's and plan/deploy.py's choices (kept here so --help imports nothing).
WEIGHT_SCHEMES = ("float32", "bfloat16", "float16", "fp8", "int8", "int4")
INT4_LAYOUTS = ("gptq", "awq", "nf4")
KV_DTYPES = ("float32", "bfloat16", "float16", "fp8")
ANNOTATIONS = ("params", "flops", "memory")
EDGE_LABELS = ("shapes", "changes", "none")  # render/diagram.py's, kept here so --help imports no renderer
_TABLE_FORMAT_HELP = "text, markdown or json (default: from the output suffix, .md or .json; else text)"
_TABLE_SUFFIXES = {".json": "json", ".md": "markdown"}


class UsageError(Exception):
    """A malformed command line (exit status 2)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")


def _at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type for whole numbers of at least ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < minimum:
            wanted = "a positive integer" if minimum == 1 else f"{minimum} or more"
            raise argparse.ArgumentTypeError(f"must be {wanted}, got {value}")
        return value

    return parse


_positive = _at_least(1)
_non_negative = _at_least(0)


def _amount(allow_zero: bool = False) -> Callable[[str], float]:
    """An argparse type for a positive (or, with ``allow_zero``, non-negative) finite number."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
        if not (value > 0 or (allow_zero and value == 0)) or value == float("inf"):
            raise argparse.ArgumentTypeError(
                f"must be a {'non-negative' if allow_zero else 'positive'} number, got {text}"
            )
        return value

    return parse


MAX_DEPTH = 4  # 4 draws every operator; nothing is deeper


def _depth(text: str) -> int:
    """An argparse type for a diagram depth, 0 to :data:`MAX_DEPTH`."""
    value = _non_negative(text)
    if value > MAX_DEPTH:
        raise argparse.ArgumentTypeError(f"must be 0 to {MAX_DEPTH} ({MAX_DEPTH} draws every operator), got {value}")
    return value


def _mask_tokens(text: str) -> int:
    """An argparse type for the masks example's lengths, up to the figure's limit (``LIMITS["mask"]``)."""
    from bertgraph.model.fields import LIMITS

    value = _positive(text)
    limit = LIMITS["mask"]
    if value > limit.maximum:
        shown = f"{value:,}" if len(text) <= 24 else f"a number of {len(str(value))} digits"
        raise argparse.ArgumentTypeError(f"must be at most {limit.maximum:,} ({limit.why}), got {shown}")
    return value


_MODEL_HELP = (
    "preset (bert-base-uncased, roberta-base, gpt2, t5-small, …), directory with config.json, "
    "config.json, hub id (org/name or org/name@revision: config and safetensors headers fetched into the "
    "Hugging Face cache, never weights), or a .onnx file"
)


def _common(parser: argparse.ArgumentParser, head: bool = True, lengths: bool = False, two: bool = False) -> None:
    if two:
        parser.add_argument("models", nargs="+", metavar="MODEL", help=f"one or two models: {_MODEL_HELP}")
    else:
        parser.add_argument("model", metavar="MODEL", help=_MODEL_HELP)
    if head:
        parser.add_argument(
            "--head",
            default="base",
            metavar="HEAD",
            help=f"task head: {', '.join(HEAD_NAMES)}, as the model's family has them (default: base)",
        )
    sizes = parser.add_argument_group("config overrides")
    sizes.add_argument("--layers", type=_positive, help="number of layers (of every stack)")
    sizes.add_argument("--hidden", type=_positive, help="hidden size")
    sizes.add_argument("--heads", type=_positive, help="attention heads")
    sizes.add_argument("--kv-heads", type=_positive, help="key/value heads (grouped-query attention)")
    sizes.add_argument("--intermediate", type=_positive, help="feed-forward size")
    sizes.add_argument("--vocab", type=_positive, help="vocabulary size")
    sizes.add_argument("--num-labels", type=_positive, help="labels of a classification head")
    if lengths:
        sizes.add_argument(
            "--seq-len", type=_positive, nargs="+", metavar="N", help="sequence lengths to evaluate (default 128)"
        )
    else:
        sizes.add_argument("--seq-len", type=_positive, help="example sequence length (default 128)")
    sizes.add_argument("--batch", type=_positive, help="example batch size (default 1)")
    parser.add_argument(
        "--attention",
        choices=("eager", "sdpa"),
        help="attention implementation to build with (default: transformers' choice, sdpa where the model has it)",
    )
    parser.add_argument(
        "--allow-pickle", action="store_true", help="allow a pickled pytorch_model.bin checkpoint (it can run code)"
    )
    _hub_options(parser)
    parser.add_argument("--no-cache", action="store_true", help="do not use the on-disk graph cache")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")


def _hub_options(parser: argparse.ArgumentParser, several: bool = False) -> None:
    """``--revision`` and ``--offline``, for every command that names a model."""
    which = "every hub id named" if several else "a hub id"
    parser.add_argument(
        "--revision",
        metavar="REV",
        help=f"branch, tag or commit of {which} (default: main; or write org/name@REV)",
    )
    parser.add_argument(
        "--offline",
        action="store_true",
        help="never fetch: hub ids only from the Hugging Face cache (as HF_HUB_OFFLINE=1)",
    )


def _file_path(text: str) -> Path:
    """An argparse type for an output file: a name ending in / is a folder, which Path would hide."""
    if text.endswith(os.sep) and text.strip(os.sep):
        raise argparse.ArgumentTypeError(f"{text} ends in /, so it names a folder; give a file name")
    return Path(text)


def _output(parser: argparse.ArgumentParser, required: bool, help_text: str) -> None:
    parser.add_argument("-o", "--output", type=_file_path, required=required, metavar="PATH", help=help_text)


def _deployment_options(parser: argparse.ArgumentParser) -> None:
    """Weights as stored, the KV cache's dtype and a GPU: what ``cost`` and ``report`` plan a deployment with."""
    plan = parser.add_argument_group(
        "deployment", "weights as stored, the KV cache in its dtype, and a GPU: memory, fits, limits, bounds"
    )
    plan.add_argument(
        "--weights",
        choices=WEIGHT_SCHEMES,
        help="plan the weights in this scheme: a float dtype, fp8 (transformers' fine-grained FP8), int8 "
        "(bitsandbytes LLM.int8()) or int4 (GPTQ's layout) (default: the checkpoint's headers, else the config's "
        "quantization_config, else its torch_dtype)",
    )
    plan.add_argument("--scheme", choices=INT4_LAYOUTS, help="int4's layout: gptq (default), awq (GEMM) or nf4")
    plan.add_argument(
        "--group-size", type=_positive, default=128, metavar="N", help="input channels per int4 group (default 128)"
    )
    plan.add_argument(
        "--kv-dtype", choices=KV_DTYPES, help="the KV cache's dtype (default: the float dtype the model computes in)"
    )
    plan.add_argument(
        "--gpu",
        metavar="NAME",
        help="a GPU of the table: H100, H200, A100-40GB, A100-80GB, L4, L40S, RTX-4090, RTX-3090, T4",
    )
    plan.add_argument(
        "--gpu-memory", type=_amount(), metavar="GIB", help="another GPU's memory in GiB (an '80 GB' card: 80)"
    )
    plan.add_argument("--gpu-bandwidth", type=_amount(), metavar="GB/S", help="its memory bandwidth in GB/s")
    plan.add_argument("--gpu-flops", type=_amount(), metavar="TFLOP/S", help="its dense tensor-core TFLOP/s")
    plan.add_argument(
        "--gpu-overhead",
        type=_amount(allow_zero=True),
        default=1.0,
        metavar="GIB",
        help="memory kept for the CUDA context and the allocator's reserve, in GiB (default 1)",
    )


def build_parser() -> argparse.ArgumentParser:
    from bertgraph.version import __version__

    parser = _Parser(
        prog="bertgraph",
        description="See inside a BERT model, its descendants and the decoder-only and encoder-decoder "
        "models it is explained against: module tree, parameters, diagrams (Graphviz, Mermaid), "
        "reports and ONNX — offline, from configs, for any size.",
        epilog="Example: bertgraph render bert-base-uncased --head sequence-classification -o bert.svg",
    )
    parser.add_argument("--version", action="version", version=f"bertgraph {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    summary = commands.add_parser("summary", help="module tree with shapes, parameters and share")
    _common(summary)
    summary.add_argument("--depth", type=_non_negative, help="deepest module level to list (default: all)")
    summary.add_argument("--format", choices=TABLE_FORMATS, help=_TABLE_FORMAT_HELP)
    summary.add_argument("--unfold", action="store_true", help="list every repeated layer")
    _output(summary, False, "write to a file instead of standard output")

    params = commands.add_parser("params", help="every parameter; totals and groups")
    _common(params)
    params.add_argument("--format", choices=TABLE_FORMATS, help=_TABLE_FORMAT_HELP)
    _output(params, False, "write to a file instead of standard output")

    diff = commands.add_parser(
        "diff",
        help="two models compared by role (config, architecture, parameters, cost, tensors), or two heads",
        description="diff A B compares two models aligned by role: config fields, architecture (only what "
        "differs), parameters per part, cost at --seq-len and --batch, and the tensors of two checkpoints. "
        "diff MODEL --head X --head Y lists what one head adds or removes compared with another.",
    )
    _common(diff, head=False, two=True)
    diff.add_argument(
        "--head",
        action="append",
        metavar="HEAD",
        help="two models: the head of both; one model: give twice, --head A --head B (once: compared with base)",
    )
    diff.add_argument("--head-a", metavar="HEAD", help="the first model's head (two models)")
    diff.add_argument("--head-b", metavar="HEAD", help="the second model's head (two models)")
    diff.add_argument(
        "--format",
        choices=DIFF_FORMATS,
        help="text, markdown, json, or a figure of two models: svg, png, pdf, dot, mermaid, html "
        "(default: from the output suffix; else text)",
    )
    _output(diff, False, "write to a file, not standard output (.md .json .svg .png .pdf .dot .mmd .html .tex .drawio)")

    render = commands.add_parser(
        "render", help="diagram as SVG, PNG, PDF, DOT, Mermaid, an interactive HTML page, TikZ or draw.io"
    )
    _common(render)
    render.add_argument("--compare", metavar="HEAD2", help="draw a second head beside the first")
    render.add_argument(
        "--depth",
        type=_depth,
        default=2,
        help="0 model, 1 parts, 2 layers (default), 3 inside a layer, 4 operators",
    )
    render.add_argument("--format", choices=DIAGRAM_FORMATS, help="default: from the output suffix")
    render.add_argument("--unfold", action="store_true", help="draw every repeated layer")
    render.add_argument(
        "--theme",
        choices=("light", "dark", "auto"),
        help="light (default), dark, or auto: an .html page following the reader's setting (its default)",
    )
    render.add_argument(
        "--annotate",
        choices=ANNOTATIONS,
        help="put this figure on every node and colour nodes by their share (FLOPs and memory at the example size)",
    )
    render.add_argument(
        "--edge-labels",
        choices=EDGE_LABELS,
        help="shapes on every edge, only where the shape changes (default), or none",
    )
    render.add_argument(
        "--css",
        type=_file_path,
        metavar="FILE",
        help="a style sheet that restyles the SVG or the page's drawings by role (.role-attention, .edge-residual, …)",
    )
    _output(render, True, "output file (.svg .png .pdf .dot .mmd .md .html .tex .drawio)")

    cost = commands.add_parser("cost", help="FLOPs and memory per module, as formulas in batch and seq")
    _common(cost, lengths=True)
    cost.add_argument(
        "--decoder-len",
        type=_positive,
        nargs="+",
        metavar="N",
        help="decoder lengths of an encoder-decoder (T5, BART): one for every --seq-len, or one each "
        "(default: as long as the input)",
    )
    cost.add_argument("--depth", type=_non_negative, help="deepest module level to list (default: all)")
    cost.add_argument(
        "--dtype",
        choices=COST_DTYPES,
        help="build the model in this dtype (its own float32 casts kept) and count its tensors and weights so; "
        "training arithmetic for it (default: float32; an .onnx file is counted at this width)",
    )
    cost.add_argument(
        "--generate",
        type=_positive,
        metavar="N",
        help="a decoder's prefill of each length and N decode steps after it: matmul FLOPs, the KV cache at the end",
    )
    cost.add_argument(
        "--freeze",
        nargs="+",
        metavar="PATTERN",
        help="train with these parameters frozen (no gradient, no optimizer state): parameter names, "
        "module paths or globs as in model.named_parameters(), e.g. 'embeddings' 'encoder.layer.[0-5].*'",
    )
    cost.add_argument("--format", choices=TABLE_FORMATS, help=_TABLE_FORMAT_HELP)
    cost.add_argument("--unfold", action="store_true", help="list every repeated layer")
    _deployment_options(cost)
    _output(cost, False, "write to a file instead of standard output")

    report = commands.add_parser("report", help="Markdown report: diagram, tree, parameters, cost, head diff")
    _common(report)
    report.add_argument("--depth", type=_depth, default=2, help="diagram depth, 0 to 4 (default 2)")
    _deployment_options(report)
    _output(report, True, "output .md file (the plots go beside it: NAME-flops.png, NAME-memory.png)")

    graph = commands.add_parser("graph", help="the annotated graph as GraphML or node-link JSON")
    _common(graph)
    graph.add_argument("--depth", type=_depth, help="a view at this level, 0 to 4 (default: operators)")
    graph.add_argument("--unfold", action="store_true", help="keep every repeated layer in a view")
    _output(graph, True, "output .graphml or .json file")

    onnx = commands.add_parser("onnx", help="export to ONNX, verified against PyTorch")
    _common(onnx)
    onnx.add_argument("--opset", type=_positive, help="ONNX opset (default: the exporter's)")
    onnx.add_argument("--no-verify", action="store_true", help="skip the checker and onnxruntime parity")
    _output(onnx, True, "output .onnx file")

    families = commands.add_parser(
        "families",
        help="models of different structures side by side: one figure and a Markdown table",
        description="Draw models side by side at one depth — encoder stack, decoder stack, cross-attention "
        "edges, attention kinds coloured — and tabulate their structure, attention kinds, layers, hidden "
        "size, parameters and position kind, all read off the traces.",
    )
    families.add_argument(
        "models",
        nargs="*",
        metavar="MODEL",
        help="presets, config folders or hub ids (default: bert-base-uncased gpt2 t5-small)",
    )
    families.add_argument(
        "--view",
        choices=("schematic", "diagrams"),
        default="schematic",
        help="schematic (default: a compact column per stack, the layer once in an 'N ×' frame; "
        "every format, Mermaid too) or diagrams (the models' diagrams at --depth, stitched)",
    )
    families.add_argument("--depth", type=_depth, default=2, help="depth of every model's diagram (--view diagrams)")
    families.add_argument(
        "--format", choices=FAMILIES_FORMATS, help="default: from the output suffix (.md: the figure and table)"
    )
    families.add_argument("--theme", choices=("light", "dark"), help="light (default) or dark")
    families.add_argument(
        "--table", type=_file_path, metavar="PATH.md", help="also write the table to this Markdown file"
    )
    _hub_options(families, several=True)
    families.add_argument("--no-cache", action="store_true", help="do not use the on-disk graph cache")
    families.add_argument("--debug", action="store_true", help="show tracebacks")
    _output(families, True, "output file (.svg .png .pdf .dot .mmd .tex .drawio, or .md: Mermaid figure and table)")

    masks = commands.add_parser(
        "masks",
        help="every distinct attention mask the models compute, on a padded example",
        description="Evaluate each attention op's mask from the trace — the model's own mask ops run on "
        "an example of --seq-len tokens whose last --pad are padding — and draw one grid per distinct "
        "mask: query rows, key columns, allowed / masked / padding.",
    )
    masks.add_argument("models", nargs="+", metavar="MODEL", help="presets, config folders or hub ids")
    masks.add_argument(
        "--seq-len",
        type=_mask_tokens,
        metavar="N",
        help="tokens in the example, at most 8,192 (default 8, or enough that every sliding window shows: "
        "3 × a two-sided window, 2 × a causal one; JSON: 8)",
    )
    masks.add_argument(
        "--pad", type=_non_negative, metavar="K", help="padding tokens at its end (default 2, or a quarter of N)"
    )
    masks.add_argument(
        "--decoder-len",
        type=_mask_tokens,
        metavar="M",
        help="an encoder-decoder's decoder tokens (default 3/4 of N); refused when no model named has a decoder",
    )
    masks.add_argument(
        "--format", choices=MASKS_FORMATS, help="default: from the output suffix (json or markdown without -o)"
    )
    _hub_options(masks, several=True)
    masks.add_argument("--no-cache", action="store_true", help="do not use the on-disk graph cache")
    masks.add_argument("--debug", action="store_true", help="show tracebacks")
    _output(
        masks,
        False,
        "output file (.svg .png .pdf .dot .json, or .md: the page, with the .svg beside it); without it, "
        "--format json or markdown (text grids) goes to standard output",
    )

    gallery = commands.add_parser("gallery", help="regenerate the example diagrams and report")
    gallery.add_argument(
        "-o",
        "--output",
        type=Path,
        default=Path("outputs"),
        metavar="DIR",
        help="folder to write into (default: outputs)",
    )
    gallery.add_argument("--model", default="bert-base-uncased", help="model to draw (default bert-base-uncased)")
    gallery.add_argument("--head", default="sequence-classification", help="head to draw")
    _hub_options(gallery)
    gallery.add_argument("--no-cache", action="store_true", help="do not use the on-disk graph cache")
    gallery.add_argument("--debug", action="store_true", help="show tracebacks")
    return parser


# --- shared steps -------------------------------------------------------------------------


def _overrides(args: argparse.Namespace) -> dict[str, int | None]:
    return {
        name: getattr(args, name, None)
        for name in ("layers", "hidden", "heads", "kv_heads", "intermediate", "vocab", "num_labels")
    }


def _spec(args: argparse.Namespace, head: str, seq_len: int | None = None) -> ModelSpec:
    from bertgraph.model import resolve

    return resolve(
        args.model,
        head,
        overrides=_overrides(args),
        batch=args.batch or 1,
        seq_len=args.seq_len if seq_len is None else seq_len,
        allow_pickle=args.allow_pickle,
        attention=getattr(args, "attention", None),
        dtype=getattr(args, "dtype", None),  # cost's --dtype: traced in it
        revision=args.revision,
        offline=args.offline,
    )


def _is_onnx(args: argparse.Namespace) -> bool:
    return str(args.model).lower().endswith(".onnx")


# Options that shape a model built from a config; an .onnx file is drawn as it was exported.
_CONFIG_OPTIONS = (
    "layers",
    "hidden",
    "heads",
    "kv_heads",
    "intermediate",
    "vocab",
    "num_labels",
    "seq_len",
    "batch",
    "attention",
    "revision",
)


def _refuse_config_options_for_onnx(args: argparse.Namespace, allowed: tuple[str, ...] = ()) -> None:
    """An .onnx file fixes its head and sizes: an option that would change them is refused, not ignored.

    ``allowed`` names options the command reads for an .onnx file too (``cost`` evaluates
    at ``--seq-len`` and ``--batch``).
    """
    if not _is_onnx(args):
        return
    heads = args.head if isinstance(args.head, list) else [args.head]
    given = [
        f"--{name.replace('_', '-')}"
        for name in _CONFIG_OPTIONS
        if name not in allowed and getattr(args, name, None) is not None
    ]
    if any(head not in (None, "base") for head in heads):
        given.insert(0, "--head")
    if getattr(args, "compare", None):
        given.append("--compare")
    if args.allow_pickle:
        given.append("--allow-pickle")
    if given:
        verb, pronoun = ("does", "it") if len(given) == 1 else ("do", "them")
        raise UsageError(
            f"{', '.join(given)} {verb} not apply to an .onnx file, whose head and sizes were fixed when it was "
            f"exported; leave {pronoun} out, or give the model's config instead"
        )


def _check_output(args: argparse.Namespace, *paths: Path, models: Sequence[str] = ()) -> None:
    """Before any work: each output path can be written and is none of the files the command reads."""
    from bertgraph.files import check_writable, refuse_inputs
    from bertgraph.model.spec import reference_files

    inputs = [file for model in (models or [args.model]) for file in reference_files(str(model))]
    inputs += [args.css] if getattr(args, "css", None) is not None else []  # a style sheet is read too
    for path in paths:
        check_writable(path)
        refuse_inputs(path, inputs)


def _table_output(args: argparse.Namespace) -> None:
    """Settle a table command's format (the suffix's, unless --format says otherwise) and check -o.

    A name another command's format owns (``x.svg``, ``x.onnx``) is refused, with or without
    --format: a table written there would be taken for that format.
    """
    from bertgraph.render import SUFFIX_FORMATS

    suffix = args.output.suffix.lower() if args.output is not None else ""
    foreign = {**SUFFIX_FORMATS, ".onnx": "onnx"}.get(suffix) if suffix not in _TABLE_SUFFIXES else None
    if foreign is not None:
        said = f"--format {args.format} does not match" if args.format else "a table does not go in"
        raise UsageError(
            f"{said} the file name {args.output.name}, which says {foreign}; {args.command} writes text, "
            "markdown or json: name the file .txt, .md or .json"
        )
    implied = _TABLE_SUFFIXES.get(suffix)
    if args.format and implied and args.format != implied:
        raise UsageError(
            f"--format {args.format} does not match the file name {args.output.name}; "
            f"drop --format or name the file for {args.format}"
        )
    args.format = args.format or implied or "text"
    if args.output is not None:
        _check_output(args, args.output)


def _architecture(args: argparse.Namespace, head: str) -> Architecture:
    if _is_onnx(args):
        from bertgraph.api import read_onnx

        return read_onnx(args.model)
    from bertgraph.api import load

    return load(_spec(args, head), use_cache=not args.no_cache)


def _size_onnx_dims(arch: Architecture, batch: int | None, seq: int | None) -> None:
    """Give an ONNX file's symbolic dimensions (``batch_size``, ``sequence``, …) the sizes asked for."""
    from bertgraph.graph import schema as g
    from bertgraph.onnx.read import sized_example

    arch.graph.graph[g.G_EXAMPLE] = sized_example(arch.graph, batch, seq)


def _emit(args: argparse.Namespace, text: str) -> None:
    """Print ``text`` or write it atomically to ``-o``."""
    if args.output is None:
        _print_out(text)
        return
    from bertgraph.files import write_atomic

    write_atomic(args.output, text)
    print(f"wrote {args.output}", file=sys.stderr)


def _print_out(text: str) -> None:
    """Write to standard output now, so a full disk is reported here, not lost at exit."""
    import errno

    from bertgraph.errors import BertgraphError

    try:
        _write_all(text)
    except BrokenPipeError:
        raise
    except OSError as error:
        full = error.errno in (errno.ENOSPC, errno.EDQUOT)
        reason = "no space left on the device" if full else (error.strerror or str(error)).lower()
        raise BertgraphError(f"cannot write to standard output: {reason}; use -o FILE or free some space") from error


def _write_all(text: str) -> None:
    """Write every byte of ``text`` to standard output, or raise.

    A pipe whose reader leaves mid-write takes part of a large write and reports success
    (``write`` returns the count it took, and Python's buffered stream drops the rest); the
    next write then fails with EPIPE. So the bytes are written until none are left: a reader
    that went away is a :class:`BrokenPipeError`, never a short write ending in status 0.
    """
    stream = sys.stdout
    binary = getattr(stream, "buffer", None)
    if binary is None:  # a text-only stream (a StringIO standing in for stdout): nothing is short
        stream.write(text)
        stream.flush()
        return
    stream.flush()  # what was written as text before goes first
    remaining = memoryview(text.encode(stream.encoding or "utf-8", stream.errors or "strict"))
    while remaining:
        remaining = remaining[binary.write(remaining) :]
    binary.flush()


def _tables(
    fmt: str, data: dict[str, Any], text: Callable[[dict[str, Any]], Any], markdown: Callable[[dict[str, Any]], Any]
) -> str:
    if fmt == "json":
        from bertgraph.render.escape import json_text

        return json_text(json.dumps(data, indent=2, ensure_ascii=False)) + "\n"
    lines = text(data) if fmt == "text" else markdown(data)
    return "\n".join(lines) + "\n"


# --- commands ---------------------------------------------------------------------------


def cmd_params(args: argparse.Namespace) -> int:
    from bertgraph.render import markdown, text

    _refuse_config_options_for_onnx(args)
    _table_output(args)
    stats = _parameter_stats(args)
    _emit(args, _tables(args.format, stats, text.generate_params, markdown.generate_params))
    return 0


def _parameter_stats(args: argparse.Namespace) -> dict[str, Any]:
    """Parameter statistics; a cached graph answers without importing torch.

    A family record's model is counted from its module tree alone (its types trace); a type
    without a record is traced once (and cached), so that ``params`` says when it cannot be.
    """
    if _is_onnx(args):
        return _architecture(args, args.head).params()
    from bertgraph import cache
    from bertgraph.api import Architecture

    spec = _spec(args, args.head)
    if not args.no_cache and cache.enabled():
        cached = cache.load(spec)
        if cached is not None:
            return Architecture(cached).params()
    if spec.family.inferred:
        arch, untraced = _traced_or_tree(args, spec)
        return {**arch.params(), **untraced}
    from bertgraph.tracing import skeleton

    return Architecture(skeleton(spec)).params()


def _traced_or_tree(args: argparse.Namespace, spec: ModelSpec) -> tuple[Architecture, dict[str, str]]:
    """The traced model, or, where torch.export cannot trace it, its module tree alone (what
    counts, folding and mixture-of-experts sizes need) with ``not_traced`` (the cause, where it
    stopped) and ``trace_cause`` (its key in ``tracing.causes.CAUSES``)."""
    from bertgraph.api import Architecture, load
    from bertgraph.errors import TraceError

    try:
        return load(spec, use_cache=not args.no_cache), {}
    except TraceError as error:
        from bertgraph.tracing import skeleton

        return Architecture(skeleton(spec)), {"not_traced": error.where or str(error), "trace_cause": error.cause}


def cmd_summary(args: argparse.Namespace) -> int:
    from bertgraph.render import markdown, text

    _refuse_config_options_for_onnx(args)
    _table_output(args)
    untraced: dict[str, str] = {}
    if _is_onnx(args):
        arch = _architecture(args, args.head)
    else:
        arch, untraced = _traced_or_tree(args, _spec(args, args.head))
    summary = {**arch.summary(depth=args.depth, fold=not args.unfold), **untraced}
    from bertgraph.graph.generation import kv_cache_summary

    kv_cache = kv_cache_summary(arch.graph)
    if kv_cache is not None:
        summary["kv_cache"] = kv_cache
    _emit(args, _tables(args.format, summary, text.generate_summary, markdown.generate_summary))
    return 0


def cmd_cost(args: argparse.Namespace) -> int:
    from bertgraph.graph import cost, costbase, costtable
    from bertgraph.model.spec import check_length
    from bertgraph.plan import deploy
    from bertgraph.render import markdown, text

    _refuse_config_options_for_onnx(args, allowed=("seq_len", "batch"))
    request = _deployment_request(args)
    _table_output(args)
    lengths: list[int | None] = list(args.seq_len or [None])
    decoders = _decoder_lengths(args.decoder_len, len(lengths))
    if not _is_onnx(args):
        spec = _spec(args, args.head, seq_len=lengths[0])
        if args.seq_len is None and args.generate is not None and spec.max_positions is not None:
            # The default example leaves room for the tokens generated after it, as a given one must.
            room = max(1, spec.max_positions - args.generate)
            if room < spec.seq_len:
                lengths = [room]
                spec = _spec(args, args.head, seq_len=room)
        if args.decoder_len and "tgt" not in spec.dim_names:
            raise UsageError(_no_decoder(args.model))
        for length in lengths[1:]:
            _spec(args, args.head, seq_len=length)  # each length within the model's positions
        for length in args.decoder_len or []:
            check_length(spec, length, "--decoder-len")
        if args.generate is not None and spec.family.structure != "encoder-only":
            _check_generation(spec, lengths, decoders, args.generate, defaulted=args.seq_len is None)
    args.seq_len = lengths[0]
    arch = _architecture(args, args.head)
    if _is_onnx(args):
        _size_onnx_dims(arch, args.batch, lengths[0])
    if args.decoder_len and not costbase.has_decoder_length(arch.graph):
        raise UsageError(_no_decoder(args.model))
    cost.check_products_counted(arch.graph, name=str(args.model))
    frozen = _frozen(arch.graph, args.freeze)
    batch = args.batch or 1
    if _is_onnx(args):
        from bertgraph.onnx.read import sized_example

        # Every sequence dimension of the file, however its exporter named them, at each length.
        sizes = [
            costbase.sizes_for(arch.graph, decoder=d, example=sized_example(arch.graph, args.batch, n))
            for n, d in zip(lengths, decoders)
        ]
    else:
        sizes = [costbase.sizes_for(arch.graph, seq=n, batch=batch, decoder=d) for n, d in zip(lengths, decoders)]
    report = costtable.cost_report(
        arch.graph,
        sizes,
        depth=args.depth,
        fold=not args.unfold,
        dtype=args.dtype,
        generate=args.generate,
        frozen=frozen,
    )
    deploy.add_deployment(report, arch.graph, sizes, request)
    _emit(args, _tables(args.format, report, text.generate_cost, markdown.generate_cost))
    return 0


_DEPLOYMENT_OPTIONS = ("weights", "scheme", "kv_dtype", "gpu", "gpu_memory", "gpu_bandwidth", "gpu_flops")


def _deployment_request(args: argparse.Namespace) -> Any:
    """The deployment ``cost`` and ``report`` plan (``plan.deploy.Request``), its options checked before any work."""
    from bertgraph.plan import deploy, gpus

    given = [f"--{name.replace('_', '-')}" for name in _DEPLOYMENT_OPTIONS if getattr(args, name, None) is not None]
    if _is_onnx(args) and given:
        raise UsageError(
            f"{', '.join(given)}: an .onnx file records no attention kinds, so no KV cache or deployment can be "
            "planned from it; give the model's config instead"
        )
    numbers = [f"--gpu-{name}" for name in ("memory", "bandwidth", "flops") if getattr(args, f"gpu_{name}") is not None]
    if args.gpu is not None and numbers:
        raise UsageError(f"--gpu {args.gpu} has its numbers in the table: leave out {', '.join(numbers)}, or --gpu")
    if numbers and (args.gpu_memory is None or args.gpu_bandwidth is None):
        raise UsageError(
            "another GPU needs both --gpu-memory (GiB) and --gpu-bandwidth (GB/s); --gpu-flops is optional"
        )
    if args.scheme is not None and args.weights != "int4":
        raise UsageError(f"--scheme {args.scheme} chooses the layout of --weights int4; add --weights int4")
    if args.gpu is not None:
        gpu = gpus.gpu_named(args.gpu)
    elif args.gpu_memory is not None:
        gpu = gpus.custom_gpu(args.gpu_memory, args.gpu_bandwidth, args.gpu_flops)
    else:
        gpu = None
    return deploy.Request(
        weights=args.weights,
        scheme=args.scheme,
        group_size=args.group_size,
        kv_dtype=args.kv_dtype,
        dtype=getattr(args, "dtype", None),
        gpu=gpu,
        overhead_bytes=round(args.gpu_overhead * gpus.GIB),
    )


def _check_generation(
    spec: ModelSpec, lengths: list[int | None], decoders: list[int | None], tokens: int, defaulted: bool
) -> None:
    """Each column's prompt and the tokens generated after it fit the model's positions, as one
    sequence would: the input of a decoder-only model, an encoder-decoder's decoder input
    (``defaulted``: no --seq-len was given, so the error names none)."""
    from bertgraph.model.spec import check_generation

    for length, decoder in zip(lengths, decoders):
        if "tgt" in spec.dim_names and decoder is not None:
            check_generation(spec, decoder, tokens, "--decoder-len")
        else:
            check_generation(spec, length or spec.seq_len, tokens, None if defaulted else "--seq-len")


def _frozen(graph: Any, patterns: list[str] | None) -> list[str]:
    from bertgraph.graph import memory

    try:
        return memory.freeze_patterns(graph, patterns or [])
    except ValueError as error:
        raise UsageError(str(error)) from None


def _decoder_lengths(given: list[int] | None, columns: int) -> list[int | None]:
    """One decoder length per --seq-len column: none given, one for all, or one each."""
    if not given:
        return [None] * columns
    if len(given) == 1:
        return [given[0]] * columns
    if len(given) != columns:
        raise UsageError(f"--decoder-len takes one length or one per --seq-len ({columns}), not {len(given)}")
    return list(given)


def _no_decoder(models: str | Sequence[str]) -> str:
    """The refusal of --decoder-len where no model named has a decoder (cost and masks say it alike)."""
    names = [models] if isinstance(models, str) else list(models)
    has = "has" if len(names) == 1 else "have"
    return (
        f"--decoder-len applies to encoder-decoder models (t5-small, bart-base, …); {', '.join(names)} {has} "
        "no decoder length: leave it out"
    )


def cmd_diff(args: argparse.Namespace) -> int:
    from bertgraph.errors import BertgraphError
    from bertgraph.render import markdown, text

    if len(args.models) > 2:
        raise BertgraphError(f"diff compares two models, not {len(args.models)}: bertgraph diff A B")
    if len(args.models) == 2:
        return _diff_models(args)
    args.model = args.models[0]
    if args.head_a or args.head_b:
        raise BertgraphError(
            "--head-a and --head-b name the heads of two models (bertgraph diff A B --head-a X --head-b Y); "
            "for two heads of one model give --head X --head Y"
        )
    heads = args.head or []
    if len(heads) == 1:
        heads = ["base", heads[0]]
    if len(heads) != 2:
        raise UsageError("diff needs two heads: --head A --head B (see 'bertgraph diff --help')")
    if _is_onnx(args):
        raise UsageError("diff compares two heads of one config; an .onnx file has one head: use summary or params")
    if args.format in DIFF_FIGURES or _suffix_format(args) in DIFF_FIGURES:
        raise BertgraphError(
            "a diff figure draws two models (bertgraph diff A B -o diff.svg); two heads of one model are drawn "
            "side by side with render --compare"
        )
    _table_output(args)
    first, second = (_architecture(args, head) for head in heads)
    _emit(args, _tables(args.format, first.diff(second), text.generate_diff, markdown.generate_diff))
    return 0


# A figure's suffixes, beside the tables' (.md and .json).
_DIFF_SUFFIXES = {".svg": "svg", ".png": "png", ".pdf": "pdf", ".dot": "dot", ".gv": "dot", ".mmd": "mermaid"}
_DIFF_SUFFIXES |= {".mermaid": "mermaid", ".html": "html", ".htm": "html", ".txt": "text", ".tex": "tex"}
_DIFF_SUFFIXES |= {".drawio": "drawio"}


def _suffix_format(args: argparse.Namespace) -> str | None:
    if args.output is None:
        return None
    suffix = args.output.suffix.lower()
    return _TABLE_SUFFIXES.get(suffix) or _DIFF_SUFFIXES.get(suffix)


def _diff_models(args: argparse.Namespace) -> int:
    """``diff A B``: two models compared by role, as tables, JSON or a figure."""
    from bertgraph.api import compare_specs
    from bertgraph.errors import BertgraphError
    from bertgraph.files import write_atomic
    from bertgraph.render import diff, graphviz_run

    if args.head and (args.head_a or args.head_b):
        raise BertgraphError("give --head (both models) or --head-a and --head-b, not both")
    if args.head and len(args.head) > 1:
        raise BertgraphError(
            "with two models --head names the head of both, once; give each its own with --head-a X --head-b Y "
            "(two heads of one model: bertgraph diff MODEL --head X --head Y)"
        )
    onnx = [model for model in args.models if str(model).lower().endswith(".onnx")]
    if onnx:
        raise BertgraphError(f"diff compares models by their configs; {onnx[0]} is an .onnx file: give its config")
    implied = _suffix_format(args)
    if args.format and implied and args.format != implied:
        raise UsageError(f"--format {args.format} does not match the file name {args.output.name}; drop --format")
    fmt = args.format or implied or "text"
    if fmt in ("png", "pdf") and args.output is None:
        raise BertgraphError(f"a {fmt} figure is binary: write it to a file with -o diff.{fmt}")
    if args.output is not None:
        _check_output(args, args.output, models=args.models)
    if fmt in LAID_OUT:
        graphviz_run.require_dot(args.output)
    head = (args.head or ["base"])[0]
    heads = (args.head_a or head, args.head_b or head)
    specs = [_spec_of(args, model, model_head) for model, model_head in zip(args.models, heads)]
    seq_len = args.seq_len or min(spec.seq_len for spec in specs)
    comparison = compare_specs(specs[0], specs[1], seq_len, args.batch or 1, use_cache=not args.no_cache)
    if fmt in TABLE_FORMATS:
        _emit(args, diff.tables_text(comparison, fmt))
        return 0
    from bertgraph.render import diff_figure

    data = diff_figure.figure(comparison, fmt)
    if args.output is None:
        _print_out(data if isinstance(data, str) else data.decode("utf-8"))
        return 0
    write_atomic(args.output, data)
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


def _spec_of(args: argparse.Namespace, model: str, head: str) -> ModelSpec:
    """One model of a diff, resolved with the command's overrides, checked at the size asked for."""
    from bertgraph.model import resolve

    return resolve(
        model,
        head,
        overrides=_overrides(args),
        batch=args.batch or 1,
        seq_len=args.seq_len,
        allow_pickle=args.allow_pickle,
        attention=args.attention,
        revision=args.revision,
        offline=args.offline,
    )


def cmd_render(args: argparse.Namespace) -> int:
    from bertgraph.render import diagram_format, graphviz_run, write_diagram

    fmt = diagram_format(args.output, args.format)
    if args.theme == "auto" and fmt != "html":
        raise UsageError(f"--theme auto needs an .html page; a {fmt} file has one theme: use light or dark")
    _refuse_config_options_for_onnx(args)
    if fmt in ("graphml", "json"):
        drawing_options = (("--compare", args.compare), ("--theme", args.theme), ("--edge-labels", args.edge_labels))
        for option, value in drawing_options:
            if value is not None:
                raise UsageError(f"{option} applies to diagrams; a .{fmt} file holds the graph itself: leave it out")
    css = _style_sheet(args, fmt)
    _check_output(args, args.output)
    if fmt in LAID_OUT:
        graphviz_run.require_dot(args.output)
    arch = _architecture(args, args.head)
    compare = _architecture(args, args.compare) if args.compare else None
    write_diagram(
        arch.graph,
        args.output,
        depth=args.depth,
        fold=not args.unfold,
        theme=args.theme or ("auto" if fmt == "html" else "light"),
        compare=compare.graph if compare else None,
        fmt=fmt,
        warn=_warn,
        annotate=args.annotate,
        edge_labels=args.edge_labels or "changes",
        css=css,
    )
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


def _style_sheet(args: argparse.Namespace, fmt: str) -> str:
    """The checked text of ``--css`` (empty without it), refused for formats no style sheet reaches."""
    if args.css is None:
        return ""
    if fmt not in ("svg", "html"):
        raise UsageError(
            f"--css restyles an SVG or the .html page; a {fmt} file has its colours written in: "
            "write .svg or .html, or leave --css out"
        )
    from bertgraph.render.restyle import read_style_sheet

    return read_style_sheet(args.css)


def cmd_report(args: argparse.Namespace) -> int:
    from bertgraph.files import write_atomic
    from bertgraph.render import plot, report

    if args.output.suffix.lower() != ".md":
        raise UsageError(f"report writes Markdown: give an output ending in .md, not {args.output.name}")
    _refuse_config_options_for_onnx(args, allowed=("seq_len", "batch"))
    request = _deployment_request(args)
    plot_file = report.plot_path(args.output)
    # The memory figure is drawn for a GPU named: a report without one writes what it always wrote.
    memory_file = report.memory_plot_path(args.output) if request.gpu is not None else None
    companions = [plot_file, *([memory_file] if memory_file else [])]
    _check_output(args, args.output, *companions)
    for companion in companions:
        _refuse_foreign_companion(args.output, companion, "plot", "report")
    arch = _architecture(args, args.head)
    if _is_onnx(args):
        _size_onnx_dims(arch, args.batch, args.seq_len)
    base = _architecture(args, "base") if args.head != "base" and not _is_onnx(args) else None
    svg = args.output.with_suffix(".svg")
    image: bytes | None = None
    memory_image: bytes | None = None
    note = None
    if plot.available():
        image = plot.generate_flops_png(arch.graph)
        if memory_file is not None:
            memory_image = _memory_figure(arch.graph, request)
    else:
        note = plot.INSTALL_HINT
        _warn(note)
    text = report.generate_report(
        arch.graph,
        base=base.graph if base else None,
        depth=args.depth,
        svg_name=svg.name if svg.exists() else None,
        warn=_warn,
        plot_name=plot_file.name if image is not None else None,
        plot_note=note,
        deployment=request,
        memory_plot_name=memory_file.name if memory_file and memory_image is not None else None,
    )
    if image is not None:
        write_atomic(plot_file, image)
        print(f"wrote {plot_file}", file=sys.stderr)
    if memory_file is not None and memory_image is not None:
        write_atomic(memory_file, memory_image)
        print(f"wrote {memory_file}", file=sys.stderr)
    write_atomic(args.output, text)
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


def _memory_figure(graph: Any, request: Any) -> bytes:
    """The deployment's memory against context length at the example's batch, as PNG."""
    from bertgraph.graph import costbase
    from bertgraph.graph import schema as g
    from bertgraph.plan import deploy
    from bertgraph.render.memory_plot import generate_memory_png

    curve = deploy.memory_curve(graph, costbase.sizes_for(graph), request)
    title = f"{graph.graph.get(g.G_NAME, '')} on {request.gpu.name}"
    return generate_memory_png(curve, title)


def _refuse_foreign_companion(output: Path, companion: Path, what: str, page: str) -> None:
    """A page writes a file beside it, unasked (the report its FLOPs plot, the masks page its figure):
    it replaces only the file an earlier page of the same name shows (its link there), nothing else."""
    from bertgraph.files import path_kind
    from bertgraph.render.escape import markdown_url

    if path_kind(companion).kind == "missing":
        return
    try:
        earlier = output.read_text(encoding="utf-8", errors="replace") if path_kind(output).kind == "file" else ""
    except OSError:
        earlier = ""
    if f"]({markdown_url(companion.name)})" not in earlier:
        raise UsageError(
            f"{companion} exists and is not the {what} of an earlier {page} {output.name}; the {page} would "
            f"replace it with its {what}: move that file away or give the {page} another name"
        )


def cmd_graph(args: argparse.Namespace) -> int:
    from bertgraph.files import write_atomic
    from bertgraph.graph import io as graph_io

    suffix = args.output.suffix.lower()
    if suffix not in (".graphml", ".json"):
        raise UsageError(f"graph writes .graphml or .json, not {args.output.name}")
    if args.unfold and args.depth is None:
        raise UsageError("--unfold keeps repeated layers in a view: give --depth too (the operator graph is unfolded)")
    _refuse_config_options_for_onnx(args)
    _check_output(args, args.output)
    arch = _architecture(args, args.head)
    data = arch.graph if args.depth is None else arch.view(args.depth, fold=not args.unfold)
    text = graph_io.graph_file_text(data, suffix.lstrip("."))
    write_atomic(args.output, text)
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


def cmd_onnx(args: argparse.Namespace) -> int:
    from bertgraph.onnx.export import export_onnx_spec

    if args.output.suffix.lower() != ".onnx":
        raise UsageError(f"onnx writes an .onnx file, not {args.output.name}")
    if _is_onnx(args):
        raise UsageError("MODEL is already an ONNX file; give a preset, a checkpoint directory or config.json")
    _check_output(args, args.output)
    spec = _spec(args, args.head)
    start = time.perf_counter()
    result = export_onnx_spec(spec, args.output, opset=args.opset, verify=not args.no_verify, progress=_warn)
    for line in result.report_lines():
        print(line, file=sys.stderr)
    print(f"wrote {args.output} in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    return 0


def _output_format(args: argparse.Namespace, formats: tuple[str, ...], own: dict[str, str], suffixes: str) -> str:
    """The format --format names or the output's suffix implies (``own`` first, then the figures')."""
    from bertgraph.render import SUFFIX_FORMATS

    suffix = args.output.suffix.lower()
    implied = own.get(suffix) or SUFFIX_FORMATS.get(suffix)
    fmt = args.format or implied
    if fmt not in formats:
        raise UsageError(f"cannot tell the format of {args.output.name}; use {suffixes}, or pass --format")
    if args.format and implied and implied != args.format:
        raise UsageError(f"--format {args.format} does not match the file name {args.output.name}; drop --format")
    return str(fmt)


def cmd_families(args: argparse.Namespace) -> int:
    from bertgraph.api import load
    from bertgraph.model import resolve
    from bertgraph.render import graphviz_run
    from bertgraph.render.families import DEFAULT_MODELS, write_families

    fmt = _output_format(args, FAMILIES_FORMATS, {".md": "markdown"}, ".svg .png .pdf .dot .mmd .tex .drawio or .md")
    if args.table is not None:
        if args.table.suffix.lower() != ".md":
            raise UsageError(f"--table writes Markdown: name a .md file, not {args.table.name}")
        if fmt == "markdown":
            raise UsageError("a .md output already holds the table; leave out --table or write the figure as .svg")
        if args.table.resolve() == args.output.resolve():
            raise UsageError("--table and -o name the same file; give the table a name of its own")
    models = args.models or list(DEFAULT_MODELS)
    _check_output(args, *([args.output] if args.table is None else [args.output, args.table]), models=models)
    if fmt in LAID_OUT:
        graphviz_run.require_dot(args.output)
    # every reference checked (a hub id fetched) before any trace
    specs = [resolve(model, "base", revision=args.revision, offline=args.offline) for model in models]
    graphs = [load(spec, use_cache=not args.no_cache).graph for spec in specs]
    written = write_families(
        graphs,
        args.output,
        fmt,
        depth=args.depth,
        theme=args.theme or "light",
        table=args.table,
        warn=_warn,
        view=args.view,
    )
    for path in written:
        print(f"wrote {path}", file=sys.stderr)
    return 0


def cmd_masks(args: argparse.Namespace) -> int:
    from bertgraph.api import load
    from bertgraph.files import write_atomic
    from bertgraph.graph.masks import SEQ_LEN, example_for
    from bertgraph.model import resolve
    from bertgraph.render import graphviz_run
    from bertgraph.render import masks as draw

    fmt = _masks_format(args)
    svg = args.output.with_suffix(".svg") if fmt == "markdown" and args.output is not None else None
    if svg is not None and svg.resolve() == args.output.resolve():
        raise UsageError("the Markdown page needs a name ending in .md")
    if args.output is not None:
        _check_output(args, args.output, *([svg] if svg else []), models=args.models)
    if svg is not None:
        _refuse_foreign_companion(args.output, svg, "figure", "masks page")
    # every reference checked (a hub id fetched) before any trace
    specs = [resolve(model, "base", revision=args.revision, offline=args.offline) for model in args.models]
    if args.decoder_len is not None and not any("tgt" in spec.dim_names for spec in specs):
        raise UsageError(_no_decoder(args.models))
    # JSON lists every cell: its default example stays short; a drawing's is long enough to show every window
    fixed = args.seq_len or (SEQ_LEN if fmt == "json" else None)
    asked = example_for([], fixed, args.pad, args.decoder_len) if fixed else None
    if asked is not None:
        _check_pad(asked)
    _check_mask_lengths(args, specs, asked)  # the lengths asked, before any trace; a default one is made to fit
    if fmt in graphviz_run.FORMATS or svg is not None:
        graphviz_run.require_dot(args.output)
    graphs = [load(spec, use_cache=not args.no_cache).graph for spec in specs]
    example = example_for(graphs, fixed, args.pad, args.decoder_len)
    _check_pad(example)
    found = draw.masks_of(zip(args.models, graphs), example)
    if args.output is None:
        words = draw.example_words(found, example)
        _print_out(draw.json_text(found) if fmt == "json" else "\n".join(draw.markdown_section(found, words, "#")))
        return 0
    outputs: list[tuple[Path, str | bytes]] = []
    if fmt == "json":
        outputs.append((args.output, draw.json_text(found)))
    elif svg is not None:
        words = draw.example_words(found, example)
        outputs += [(svg, draw.figure(found, "svg")), (args.output, draw.markdown_page(found, svg.name, words))]
    else:
        outputs.append((args.output, draw.figure(found, fmt)))
    for path, data in outputs:  # everything computed before anything is written
        write_atomic(path, data)
        print(f"wrote {path}", file=sys.stderr)
    return 0


_MASKS_TEXT = ("json", "markdown")  # what masks writes to standard output without -o


def _masks_format(args: argparse.Namespace) -> str:
    """The format masks writes: from --format or -o's suffix; without -o only a text format."""
    if args.output is not None:
        return _output_format(
            args, MASKS_FORMATS, {".md": "markdown", ".json": "json"}, ".svg .png .pdf .dot .json or .md"
        )
    if args.format in _MASKS_TEXT:
        return str(args.format)
    if args.format is None:
        raise UsageError("give -o PATH for the figure, or --format json or markdown for standard output")
    raise UsageError(
        f"--format {args.format} is a figure, written to a file: give -o PATH "
        "(json and markdown can go to standard output)"
    )


def _check_mask_lengths(args: argparse.Namespace, specs: Sequence[ModelSpec], asked: Example | None) -> None:
    """Each model takes the lengths asked (``asked``: the example of the --seq-len given, or None with
    only --decoder-len or neither): its tokens, and its decoder's, within the model's positions."""
    from bertgraph.errors import ConfigError
    from bertgraph.model.spec import check_length

    decoder_flag = "--decoder-len" if args.decoder_len is not None else "--seq-len"
    decoder_len = asked.target_len if asked is not None else args.decoder_len
    for model, spec in zip(args.models, specs):
        try:
            if asked is not None:
                check_length(spec, asked.seq_len)
            if decoder_len is not None and "tgt" in spec.dim_names:
                check_length(spec, decoder_len, decoder_flag)
        except ConfigError as error:
            raise ConfigError(f"{model}: {error}") from None


def _check_pad(example: Example) -> None:
    if example.pad >= min(example.seq_len, example.target_len):
        raise UsageError(f"--pad {example.pad} leaves no real token; give a --pad below --seq-len (and --decoder-len)")


def cmd_gallery(args: argparse.Namespace) -> int:
    from bertgraph.gallery import build_gallery

    written = build_gallery(
        args.output,
        model=args.model,
        head=args.head,
        use_cache=not args.no_cache,
        warn=_warn,
        revision=args.revision,
        offline=args.offline,
    )
    for path in written:
        print(f"wrote {path}", file=sys.stderr)
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "summary": cmd_summary,
    "cost": cmd_cost,
    "params": cmd_params,
    "diff": cmd_diff,
    "render": cmd_render,
    "report": cmd_report,
    "graph": cmd_graph,
    "onnx": cmd_onnx,
    "families": cmd_families,
    "masks": cmd_masks,
    "gallery": cmd_gallery,
}


# One line at a time on stderr: progress also comes from the export's reference thread.
_STDERR_LOCK = threading.Lock()


def _warn(message: str) -> None:
    """A progress or warning line; none once a signal stopped the run, so "interrupted" stays the last."""
    from bertgraph import interrupts

    with _STDERR_LOCK:
        if interrupts.received() is None:
            sys.stderr.write(f"bertgraph: {message}\n")
            sys.stderr.flush()


def _say_interrupted() -> None:
    with _STDERR_LOCK:
        sys.stderr.write("bertgraph: interrupted\n")
        sys.stderr.flush()


def run() -> None:
    """The ``bertgraph`` executable: :func:`main`, then a quick exit.

    SIGINT, SIGTERM, SIGHUP and SIGQUIT all stop a command the same way: an exception in
    the main thread, so that every temporary file and staging folder is removed, one line
    on stderr ("interrupted") and exit status 128 + the signal's number (130 for Ctrl-C).

    Once torch and transformers are loaded, an orderly interpreter shutdown takes about
    a second (tearing down their modules), longer than many commands themselves. Every
    file bertgraph writes is complete and closed by then, so the process flushes its
    streams and leaves without that teardown.
    """
    # One command, then os._exit: no cyclic collection pays. The collector would walk the
    # millions of objects importing torch and transformers and tracing create, nearly all of
    # which live to the exit — measured: a cold render 3.76 → 3.14 s, an ONNX export of
    # bert-base 0.5 s less, for 7–15 MB more at the peak. Reference counting frees the rest.
    gc.disable()
    from bertgraph import interrupts

    interrupts.install()
    try:
        status = main()
    except KeyboardInterrupt:  # a signal before main() could catch it
        _say_interrupted()
        status = 130
    interrupts.disarm()  # the work is done: a late signal changes nothing
    signum = interrupts.received()
    if signum is not None:
        status = 128 + signum
    if "torch" in sys.modules:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    sys.exit(status)


def _silence_stdout() -> None:
    """Point standard output at /dev/null, so the flush at exit cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def _run_command(args: argparse.Namespace, debug: bool) -> int:
    """The command, with nothing on stderr but bertgraph's lines (everything with --debug) and
    nothing left behind but its output."""
    from bertgraph import quiet

    with quiet.no_leftovers(), contextlib.nullcontext() if debug else quiet.libraries_quiet():
        return COMMANDS[args.command](args)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in arguments
    parser = build_parser()
    try:
        args = parser.parse_args(arguments)
        if args.command is None:  # argparse's convention for a missing command: usage on stderr, status 2
            parser.print_help(sys.stderr)
            return 2
        return _run_command(args, debug)
    except UsageError as error:
        from bertgraph.errors import one_line

        print(f"bertgraph: error: {one_line(str(error))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        _say_interrupted()
        return 130
    except BrokenPipeError:
        # The reader went away (``| head -1``): nothing more to say, and nobody to say it to.
        _silence_stdout()
        return 141
    except Exception as error:
        from bertgraph.errors import BertgraphError, one_line

        if debug:
            raise
        if isinstance(error, BertgraphError):
            print(f"bertgraph: error: {error}", file=sys.stderr)
        elif isinstance(error, MemoryError):
            print(
                "bertgraph: error: out of memory; close other programs or choose a smaller model "
                "(fewer layers, smaller sizes)",
                file=sys.stderr,
            )
        elif isinstance(error, OSError):
            # The environment refused something (a file, a device, a limit): not a bertgraph bug.
            where = f" ({error.filename})" if error.filename else ""
            print(f"bertgraph: error: {one_line((error.strerror or str(error)).lower() + where)}", file=sys.stderr)
        else:
            detail = one_line(str(error).strip().splitlines()[0]) if str(error).strip() else ""
            print(
                f"bertgraph: internal error: {type(error).__name__}: {detail} "
                "(run again with --debug for the traceback, and please report it)",
                file=sys.stderr,
            )
        return 1
