"""Every text model type of the installed transformers, through bertgraph's generic path.

For each ``model_type`` without a hand-written record: refused (with its one-line reason), or
built from its shrunk default config (``generic.built_config``: shrunk and repaired), traced, its parameter total
held to transformers' own count of the same config dict (``sum(p.numel())`` of the unique parameters
of the model ``AutoConfig.for_model`` and the type's auto class build on meta, without bertgraph:
``tests/transformers_counts.py``), and its default diagram laid out by the real ``dot -Tjson`` and
read back: the drawn graph must be acyclic. Mixture-of-experts types also record their active
parameters per token. A config as people write one, naming only the depth
(``{"model_type": T, "num_hidden_layers": 2}``), is counted too (the module tree ``params`` reads)
and held to transformers' count of it, or refused where transformers cannot build it either. Each
type runs in a process of its own (a crash or a hang costs one row), at most ``--timeout`` seconds.

    make reach            # writes benchmarks/reach.csv and benchmarks/reach.md
    PYTHONPATH=. .venv/bin/python benchmarks/reach.py --types mistral,mixtral --merge   # rerun two rows
    PYTHONPATH=. .venv/bin/python benchmarks/reach.py --depth-only   # the depth-only columns alone, a minute
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import networkx as nx

FIELDS = (
    "model_type",
    "outcome",
    "level",
    "cause",
    "reason",
    "traced_total",
    "tree_total",
    "model_total",
    "total_exact",
    "drawing_acyclic",
    "drawn_nodes",
    "experts",
    "experts_per_token",
    "active",
    "minimal_total",
    "minimal_transformers",
    "minimal_exact",
    "seconds",
)
# A config naming only the depth: every other field is the config class's default.
MINIMAL_LAYERS = 2
HERE = Path(__file__).resolve().parent


def check_type(model_type: str, folder: Path) -> dict[str, Any]:
    """One row: is the type refused (why), or traced with an exact total and an acyclic drawing?"""
    from bertgraph.errors import BertgraphError, TraceError, first_line
    from bertgraph.model.families.generic import LEVELS, built_config, small_config, text_refusal
    from bertgraph.tracing.causes import cause_of

    started = time.perf_counter()
    row: dict[str, Any] = {"model_type": model_type}
    try:
        refusal = text_refusal(model_type)
        if refusal is not None:
            return {**row, "outcome": "not text", "reason": refusal}
        row.update(_minimal(model_type, folder))
        first: tuple[str, str, BertgraphError] | None = None  # the smallest shrink's failure is the one told
        for level in LEVELS:
            try:
                config, _ = built_config(model_type, level)
            except Exception:  # the trace below reports why transformers cannot build it
                config = small_config(model_type, level)
            text = json.dumps(config, default=str)
            (folder / "config.json").write_text(text)
            try:
                row.update(_traced(folder), level=level)
                break
            except BertgraphError as error:  # a shallower shrink keeps the type's own widths
                first = first or (level, text, error)
                if level == LEVELS[-1]:
                    row["level"] = first[0]
                    (folder / "config.json").write_text(first[1])
                    raise first[2] from None
        exact = row["total_exact"] and row["drawing_acyclic"] and row["minimal_exact"]
        row["outcome"] = "traced" if exact else "wrong"
    except TraceError as error:
        # The module tree built: what summary and params show without a trace is still held to the model.
        row.update(outcome="refused", cause=error.cause, reason=first_line(error), **_tree(folder))
    except BertgraphError as error:
        row.update(outcome="refused", cause=cause_of(str(error)), reason=first_line(error))
    except Exception as error:  # what the generic path does not yet turn into a one-line reason
        row.update(outcome="failed", reason=f"{type(error).__name__}: {first_line(error)}"[:300])
    row["seconds"] = round(time.perf_counter() - started, 2)
    if row.get("reason"):
        row["reason"] = named(str(row["reason"]), folder.name, model_type)
    return row


def named(reason: str, folder: str, model_type: str) -> str:
    """A reason that names the type, not the temporary folder its config was written to.

    >>> named("/tmp/tmpab12/config.json: cannot trace tmpab12 (XModel): …", "tmpab12", "x")
    'config.json: cannot trace x (XModel): …'
    """
    reason = re.sub(rf"\S*/{re.escape(folder)}/config\.json", "config.json", reason)
    return re.sub(rf"\b{re.escape(folder)}\b", model_type, reason)


def _minimal(model_type: str, folder: Path) -> dict[str, Any]:
    """The config naming only the depth: bertgraph's module-tree total and transformers' count of the
    same dict; exact when they agree, or when both refuse it (a default transformers cannot build)."""
    from bertgraph.errors import BertgraphError
    from bertgraph.model.spec import resolve
    from bertgraph.tracing import skeleton
    from tests.transformers_counts import transformers_total

    config = {"model_type": model_type, "num_hidden_layers": MINIMAL_LAYERS}
    place = folder / "minimal"
    place.mkdir(exist_ok=True)
    (place / "config.json").write_text(json.dumps(config))
    try:
        theirs: int | str = transformers_total(config)
    except Exception as error:  # transformers' own refusal: bertgraph must refuse too
        theirs = f"refused: {type(error).__name__}"
    try:
        from bertgraph.graph import stats

        ours: int | str = stats.parameter_stats(skeleton(resolve(str(place))))["total"]
    except BertgraphError:
        ours = "refused"
    exact = ours == theirs or (isinstance(theirs, str) and ours == "refused")
    return {"minimal_total": ours, "minimal_transformers": theirs, "minimal_exact": exact}


def _traced(folder: Path) -> dict[str, Any]:
    import bertgraph
    from bertgraph.graph import stats
    from bertgraph.model.spec import resolve
    from bertgraph.render.diagram import build_diagram
    from tests.layout import lay_out
    from tests.transformers_counts import transformers_total

    resolve(str(folder))  # a config bertgraph refuses (as transformers does) tries the next shrink
    # transformers' own count of the config written, not the model bertgraph builds from it
    model_total = transformers_total(json.loads((folder / "config.json").read_text()))
    graph = bertgraph.trace(str(folder), cache=False).graph
    params = stats.parameter_stats(graph)
    layout = lay_out(build_diagram(graph))
    drawn = nx.DiGraph([(source, target) for source, target, _ in layout.edges])
    return {
        "traced_total": params["total"],
        "model_total": model_total,
        "total_exact": params["total"] == model_total,
        "drawing_acyclic": nx.is_directed_acyclic_graph(drawn),
        "drawn_nodes": len(layout.centres),
        "experts": params.get("experts", ""),
        "experts_per_token": params.get("experts_per_token", ""),
        "active": params.get("active", ""),
        "reason": "",
    }


def _tree(folder: Path) -> dict[str, Any]:
    """The parameter total ``summary`` and ``params`` give without a trace, and the model's own."""
    from bertgraph.api import Architecture
    from bertgraph.model.spec import resolve
    from bertgraph.tracing import skeleton
    from tests.transformers_counts import transformers_total

    model_total = transformers_total(json.loads((folder / "config.json").read_text()))
    tree = Architecture(skeleton(resolve(str(folder)))).params()["total"]
    return {"tree_total": tree, "model_total": model_total, "total_exact": tree == model_total}


def text_types() -> list[str]:
    """Every ``model_type`` of the installed transformers with a base class and no hand-written record."""
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    from bertgraph.model.families import family_of

    return sorted(t for t in MODEL_MAPPING_NAMES if family_of(t) is None)


def run_one(model_type: str, timeout: float) -> dict[str, Any]:
    """:func:`check_type` in a fresh process, so one type's crash, memory or hang stays its own."""
    code = (
        "import json, sys, tempfile, pathlib; sys.path.insert(0, sys.argv[2]); "
        "from benchmarks.reach import check_type; "
        "print(json.dumps(check_type(sys.argv[1], pathlib.Path(tempfile.mkdtemp()))))"
    )
    started = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "-c", code, model_type, str(HERE.parent)], capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return {
            "model_type": model_type,
            "outcome": "failed",
            "cause": "no answer in time",
            "reason": f"no answer within {timeout:g} s",
        }
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
        return {
            "model_type": model_type,
            "outcome": "failed",
            "reason": f"exit {done.returncode}: {tail}",
            "seconds": round(time.perf_counter() - started, 2),
        }
    return json.loads(lines[-1])


def table(rows: list[dict[str, Any]]) -> str:
    traced = [r for r in rows if r["outcome"] == "traced"]
    moe = [r for r in traced if r.get("experts")]
    counts = {outcome: sum(1 for r in rows if r["outcome"] == outcome) for outcome in ("traced", "wrong", "refused")}
    text = {r["model_type"] for r in rows if r["outcome"] != "not text"}
    lines = [
        "# Reach: every text model type of the installed transformers",
        "",
        f"model types without a record: {len(rows)} · text models: {len(text)} · traced with an exact total and "
        f"an acyclic drawing: {counts['traced']} · wrong: {counts['wrong']} · refused with a reason: "
        f"{counts['refused']} · failed: {sum(1 for r in rows if r['outcome'] == 'failed')} · "
        f"mixture of experts among the traced: {len(moe)} · configs naming only the depth counted as "
        f"transformers counts them (or refused where it cannot build them): "
        f"{sum(1 for r in rows if r.get('minimal_exact') is True)} of {len(text)}",
        "",
        "Made by `make reach` (`benchmarks/reach.py`); the rows are in `benchmarks/reach.csv`. A refused type's",
        "cause is the one `render` and `cost` name (`bertgraph/tracing/causes.py`); where its module tree builds,",
        "`summary` and `params` still count it (the tree's total, held to the model's). Every total is held to",
        "transformers' own count of the same config dict; the depth-only column is",
        f'`{{"model_type": T, "num_hidden_layers": {MINIMAL_LAYERS}}}`, counted by `params` (or refused).',
        "",
        *_causes_table(rows),
        "| model_type | outcome | parameters (shrunk config) | active per token | depth-only config | seconds "
        "| cause | reason |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r["outcome"] == "not text":
            continue
        total = f"{r['traced_total']:,}" if isinstance(r.get("traced_total"), int) else ""
        active = f"{r['active']:,} ({r['experts_per_token']} of {r['experts']})" if r.get("experts") else ""
        reason = str(r.get("reason", "")).replace("|", "\\|")
        if not total and isinstance(r.get("tree_total"), int):
            total = f"{r['tree_total']:,} (module tree)"
        cause = r.get("cause", "")
        minimal = _minimal_cell(r)
        lines.append(
            f"| {r['model_type']} | {r['outcome']} | {total} | {active} | {minimal} | {r.get('seconds', '')} | "
            f"{cause} | {reason} |"
        )
    lines += ["", "Not text models (refused before building):", ""]
    lines += [f"- {r['model_type']}: {r['reason']}" for r in rows if r["outcome"] == "not text"]
    return "\n".join(lines) + "\n"


def _minimal_cell(row: dict[str, Any]) -> str:
    """``855,658,496`` (exact), ``refused by both``, or both figures where they differ."""
    ours, theirs = row.get("minimal_total", ""), row.get("minimal_transformers", "")
    if ours == "" and theirs == "":
        return ""
    if row.get("minimal_exact") is True:
        return f"{ours:,}" if isinstance(ours, int) else "refused by both"
    show = [f"{v:,}" if isinstance(v, int) else str(v) for v in (ours, theirs)]
    return f"{show[0]} (transformers: {show[1]})"


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of a reach.csv, numbers and flags as :func:`check_type` gives them."""
    rows = []
    with path.open(newline="") as stream:
        for row in csv.DictReader(stream):
            parsed: dict[str, Any] = {}
            for key, value in row.items():
                if value in ("True", "False"):
                    parsed[key] = value == "True"
                elif value.isdigit() and key not in ("model_type", "reason"):
                    parsed[key] = int(value)
                else:
                    parsed[key] = value
            rows.append(parsed)
    return rows


def _causes_table(rows: list[dict[str, Any]]) -> list[str]:
    """How many text types each cause stops (or a trace gets wrong), and which."""
    by_cause: dict[str, list[str]] = {}
    for r in rows:
        if r["outcome"] in ("refused", "failed"):
            by_cause.setdefault(r.get("cause") or "other", []).append(r["model_type"])
        elif r["outcome"] == "wrong":
            if not r.get("total_exact"):
                wrong = "traced, total off"
            elif not r.get("drawing_acyclic"):
                wrong = "traced, but drawn with a cycle"
            else:
                wrong = "depth-only config counted off"
            by_cause.setdefault(wrong, []).append(r["model_type"])
    if not by_cause:
        return []
    lines = ["| cause | types | which |", "|---|---|---|"]
    for cause, types in sorted(by_cause.items(), key=lambda item: (-len(item[1]), item[0])):
        lines.append(f"| {cause} | {len(types)} | {', '.join(sorted(types))} |")
    return [*lines, ""]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--types", help="comma-separated model types (default: every one)")
    parser.add_argument("--timeout", type=float, default=240.0)
    parser.add_argument(
        "--merge", action="store_true", help="replace only these types' rows of the existing reach.csv, keep the rest"
    )
    parser.add_argument("--out", type=Path, default=HERE)
    parser.add_argument("--table", action="store_true", help="only write reach.md again from reach.csv")
    parser.add_argument(
        "--depth-only",
        action="store_true",
        help="only count the depth-only configs again (no trace; a minute) into the rows of reach.csv",
    )
    args = parser.parse_args()
    if args.table:
        (args.out / "reach.md").write_text(table(read_rows(args.out / "reach.csv")))
        return 0
    if args.depth_only:
        rows = [_with_depth_only(row, args.types) for row in read_rows(args.out / "reach.csv")]
        write_rows(rows, args.out)
        return 0
    types = args.types.split(",") if args.types else text_types()
    from bertgraph.errors import BertgraphError
    from bertgraph.model.families.generic import text_refusal

    rows = []
    for model_type in types:
        try:
            refusal = text_refusal(model_type)  # in this process: no model is built to decide it
        except BertgraphError as error:
            refusal = str(error)
        row = {"model_type": model_type, "outcome": "not text", "reason": refusal}
        if refusal is None:
            row = run_one(model_type, args.timeout)
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    if args.merge:
        fresh = {row["model_type"]: row for row in rows}
        kept = [fresh.pop(row["model_type"], row) for row in read_rows(args.out / "reach.csv")]
        rows = sorted(kept + list(fresh.values()), key=lambda row: str(row["model_type"]))
    write_rows(rows, args.out)
    return 0


def write_rows(rows: list[dict[str, Any]], out: Path) -> None:
    with (out / "reach.csv").open("w", newline="") as stream:
        writer = csv.DictWriter(stream, FIELDS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    (out / "reach.md").write_text(table(rows))


def _with_depth_only(row: dict[str, Any], types: str | None) -> dict[str, Any]:
    """A row with its depth-only columns counted again (a text type's, of ``types`` when given)."""
    import tempfile

    if row["outcome"] == "not text" or (types and row["model_type"] not in types.split(",")):
        return row
    found = _minimal(str(row["model_type"]), Path(tempfile.mkdtemp()))
    print(json.dumps({"model_type": row["model_type"], **found}), file=sys.stderr, flush=True)
    row = {**row, **found}
    if row["outcome"] in ("traced", "wrong"):
        exact = row.get("total_exact") is True and row.get("drawing_acyclic") is True and found["minimal_exact"]
        row["outcome"] = "traced" if exact else "wrong"
    return row


if __name__ == "__main__":
    sys.exit(main())
