"""The newest surfaces (``masks``, ``cost --generate``, table outputs, the docs figures) against a
careless or malicious user, end to end.

Data loss and hangs run the command line as a process with a time limit, as a user would; the
rest run ``main`` in this process. Models are tiny configs written here, so a refusal never waits
on a trace and an accepted run traces a few small layers.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bertgraph.cli import main
from bertgraph.model.fields import LIMITS
from tests.helpers import one_line_error

BERT = {
    "model_type": "bert",
    "vocab_size": 99,
    "hidden_size": 24,
    "num_hidden_layers": 2,
    "num_attention_heads": 3,
    "intermediate_size": 40,
    "max_position_embeddings": 48,
}
GPT2 = {"model_type": "gpt2", "vocab_size": 99, "n_embd": 24, "n_layer": 2, "n_head": 3, "n_positions": 12}
BART = {
    "model_type": "bart",
    "vocab_size": 99,
    "d_model": 24,
    "encoder_layers": 2,
    "decoder_layers": 3,
    "encoder_attention_heads": 3,
    "decoder_attention_heads": 2,
    "encoder_ffn_dim": 40,
    "decoder_ffn_dim": 36,
    "max_position_embeddings": 12,
}
# Top-k above the experts: torch's fake tensors fail inside topk and log their traceback.
MIXTRAL = {
    "model_type": "mixtral",
    "num_hidden_layers": 2,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 1000,
    "num_local_experts": 4,
    "num_experts_per_tok": 10,
}


def model(folder: Path, config: dict[str, Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def bertgraph(*argv: str, timeout: float = 60, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """The command line as a process, as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "bertgraph", *argv], capture_output=True, text=True, timeout=timeout, **kwargs
    )


def refused_in_one_line(result: subprocess.CompletedProcess[str], status: int) -> str:
    assert result.returncode == status, result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("bertgraph: error: "), result.stderr
    return result.stderr.strip()


# --- masks: its outputs are checked like every other command's ----------------------------------------


def test_masks_never_writes_over_the_config_it_reads_under_any_name(tmp_path: Path) -> None:
    folder = model(tmp_path / "b", BERT)
    config = folder / "config.json"
    before = config.read_bytes()
    (tmp_path / "sub").mkdir()
    (tmp_path / "link.json").symlink_to(config)
    for name in ("b/config.json", "./b//config.json", "sub/../b/config.json", "link.json"):
        result = bertgraph("masks", "b", "-o", name, cwd=tmp_path)
        assert "which this command reads" in refused_in_one_line(result, 1), name
        assert config.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b", "link.json", "sub"]


def test_the_masks_page_replaces_only_its_own_figure_beside_it(tmp_path: Path) -> None:
    folder = model(tmp_path / "b", BERT)
    config = folder / "config.json"
    before = config.read_bytes()
    figure = tmp_path / "m.svg"
    figure.write_text("the user's own drawing")
    line = refused_in_one_line(bertgraph("masks", "b", "-o", "m.md", cwd=tmp_path), 2)
    assert "m.svg exists and is not the figure of an earlier masks page m.md" in line
    assert figure.read_text() == "the user's own drawing" and not (tmp_path / "m.md").exists()
    figure.unlink()
    figure.symlink_to(config)  # a figure that leads to the config: writing it would replace the config
    assert "which this command reads" in refused_in_one_line(bertgraph("masks", "b", "-o", "m.md", cwd=tmp_path), 1)
    assert config.read_bytes() == before and figure.is_symlink()
    figure.unlink()
    # Its own figure, which the page it wrote shows, it replaces on the next run.
    assert main(["masks", str(folder), "-o", str(tmp_path / "m.md")]) == 0
    first = figure.read_bytes()
    assert main(["masks", str(folder), "-o", str(tmp_path / "m.md")]) == 0
    assert figure.read_bytes() == first and first.startswith(b"<?xml")


# --- masks: every size checked before any work ------------------------------------------------------------

MASK = LIMITS["mask"]  # the longest example a user may ask for, and why
ABOVE = str(MASK.maximum + 1)
BOUND = f"at most {MASK.maximum:,} ({MASK.why})"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--seq-len", ABOVE], f"argument --seq-len: must be {BOUND}, got {int(ABOVE):,}"),
        (["--seq-len", "99999999999999999999"], f"must be {BOUND}, got 99,999,999,999,999,999,999"),
        (["--seq-len", "8", "--decoder-len", ABOVE], f"argument --decoder-len: must be at most {MASK.maximum:,} "),
    ],
    ids=["just-above", "20-digits", "decoder"],
)
def test_a_masks_length_out_of_range_is_one_line_before_any_work(tmp_path: Path, argv: list[str], message: str) -> None:
    folder = model(
        tmp_path / "t",
        {
            "model_type": "t5",
            "vocab_size": 99,
            "d_model": 16,
            "d_kv": 4,
            "d_ff": 20,
            "num_layers": 2,
            "num_decoder_layers": 3,
            "num_heads": 4,
        },
    )
    result = bertgraph("masks", str(folder), *argv, "-o", str(tmp_path / "m.svg"), timeout=30)
    assert message in refused_in_one_line(result, 2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t"]


def test_a_masks_example_longer_than_the_models_positions_is_refused(tmp_path: Path, capsys: Any) -> None:
    folder = model(tmp_path / "b", {**BERT, "max_position_embeddings": 20})
    line = one_line_error(["masks", str(folder), "--seq-len", "21", "-o", str(tmp_path / "m.svg")], capsys)
    assert line == (
        f"bertgraph: error: {folder}: --seq-len 21 is above max_position_embeddings 20; use --seq-len 20 or less"
    )
    bart = model(tmp_path / "bart", BART)
    line = one_line_error(["masks", str(bart), "--seq-len", "8", "--decoder-len", "13", "--format", "json"], capsys)
    assert "--decoder-len 13 is above max_position_embeddings 12; use --decoder-len 12 or less" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b", "bart"]


def _sphinx(folder: Path, body: str) -> tuple[str, Path]:
    import io

    from sphinx.application import Sphinx
    from sphinx.util.docutils import docutils_namespace, patch_docutils

    source = folder / "src"
    source.mkdir(parents=True)
    (source / "conf.py").write_text('project = "demo"\nextensions = ["bertgraph.sphinx"]\n')
    (source / "index.rst").write_text(body)
    warning = io.StringIO()
    with patch_docutils(source), docutils_namespace():
        Sphinx(source, source, folder / "out", folder / "doctrees", "dummy", status=None, warning=warning).build()
    return re.sub(r"\x1b\[[0-9;]*m", "", warning.getvalue()), source / "index.rst"


def test_a_masks_figure_too_large_for_a_page_is_a_warning_at_its_line_in_sphinx(tmp_path: Path) -> None:
    page = "Page\n====\n\n" + "".join(
        f".. bertgraph:: bert-tiny\n   :figure: masks\n   :seq-len: {n}\n\n"
        for n in (100000, ABOVE, 99999999999999999999)
    )
    warnings, index = _sphinx(tmp_path, page)
    found = [line for line in warnings.splitlines() if "bertgraph:" in line]
    assert found == [
        f"{index}:{line}: WARNING: bertgraph: seq-len must be 1 to {MASK.maximum} ({MASK.why}), got {n} [bertgraph]"
        for line, n in ((4, 100000), (8, ABOVE), (12, 99999999999999999999))
    ]


def test_a_masks_fence_too_large_for_a_page_is_a_warning_at_its_line_in_mkdocs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    from mkdocs.config import load_config
    from mkdocs.structure.files import File
    from mkdocs.structure.pages import Page

    from bertgraph.docs.mkdocs import BertgraphPlugin

    (tmp_path / "docs").mkdir()
    (tmp_path / "mkdocs.yml").write_text("site_name: t\n")
    config = load_config(str(tmp_path / "mkdocs.yml"))
    fences = [f"```bertgraph\nmodel: bert-tiny\nfigure: masks\nseq-len: {n}\n```" for n in (100000, ABOVE)]
    markdown = "# masks\n\n" + "\n\n".join(fences) + "\n"
    (tmp_path / "docs" / "index.md").write_text(markdown)
    page = Page(None, File("index.md", str(tmp_path / "docs"), str(tmp_path / "site"), False), config)
    plugin = BertgraphPlugin()
    plugin.load_config({})
    with caplog.at_level(logging.WARNING, logger="mkdocs.plugins.bertgraph"):
        out = plugin.on_page_markdown(markdown, page=page, config=config, files=None)
    assert sorted(record.getMessage() for record in caplog.records) == [
        f"{Path('docs') / 'index.md'}:{line}: bertgraph: seq-len must be 1 to {MASK.maximum} ({MASK.why}), got {n}"
        for line, n in ((3, 100000), (9, ABOVE))
    ]
    assert "bertgraph" not in out and len(out) < 100  # the page goes on without them


# --- --decoder-len: one rule for masks and cost ------------------------------------------------------------


def test_a_decoder_length_for_a_model_without_a_decoder_is_refused_alike_by_masks_and_cost(
    tmp_path: Path, capsys: Any
) -> None:
    folder = str(model(tmp_path / "b", BERT))
    said = (
        f"bertgraph: error: --decoder-len applies to encoder-decoder models (t5-small, bart-base, …); {folder} has "
        "no decoder length: leave it out"
    )
    masks = ["masks", folder, "--seq-len", "8", "--pad", "2", "--decoder-len", "2", "-o", str(tmp_path / "m.svg")]
    assert one_line_error(masks, capsys, status=2) == said
    assert one_line_error(["cost", folder, "--decoder-len", "2"], capsys, status=2) == said
    gpt2 = str(model(tmp_path / "g", GPT2))
    both = one_line_error(["masks", folder, gpt2, "--decoder-len", "4", "--format", "json"], capsys, status=2)
    assert both.endswith(f"{folder}, {gpt2} have no decoder length: leave it out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b", "g"]


# --- --generate stays within the model's positions ----------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["gpt2", "--seq-len", "1000", "--generate", "100"],
            "--seq-len 1000 and --generate 100 run past n_positions 1024 (1,100 tokens); use --generate 24 or less",
        ),
        (["gpt2", "--seq-len", "8", "--generate", "5000"], "use --generate 1016 or less"),
        (["gpt2", "--seq-len", "1024", "--generate", "1"], "give a --seq-len below 1024 to leave room"),
        (
            ["gpt2", "--generate", "100000000"],
            "--generate 100000000 after the default example's 1 token runs past n_positions 1024",
        ),
        (
            ["bart-base", "--seq-len", "1000", "--decoder-len", "1000", "--generate", "100"],
            "--decoder-len 1000 and --generate 100 run past max_position_embeddings 1024",
        ),
        (["bart-base", "--seq-len", "1000", "--generate", "100"], "--seq-len 1000 and --generate 100 run past"),
        (
            ["t5-small", "--generate", "99999999999999999999"],
            "runs past the longest sequence bertgraph takes, 1,000,000",
        ),
    ],
    ids=["gpt2-1000+100", "gpt2-8+5000", "gpt2-full", "gpt2-1e8", "bart-decoder", "bart-input", "t5-relative"],
)
def test_generating_past_the_positions_is_refused_before_any_work(argv: list[str], message: str) -> None:
    result = bertgraph("cost", *argv, "--depth", "0", timeout=30)
    assert message in refused_in_one_line(result, 1)


def test_generating_up_to_the_last_position_runs_and_one_more_is_refused(tmp_path: Path, capsys: Any) -> None:
    gpt2, bart = str(model(tmp_path / "gpt2", GPT2)), str(model(tmp_path / "bart", BART))
    assert main(["cost", gpt2, "--seq-len", "8", "--generate", "4", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["generate"][0]["tokens"] == 4
    # Without --seq-len the example is as long as the positions leave room for: 12 - 4.
    assert main(["cost", gpt2, "--generate", "4", "--format", "json"]) == 0
    assert [size["seq"] for size in json.loads(capsys.readouterr().out)["sizes"]] == [8]
    line = one_line_error(["cost", gpt2, "--seq-len", "8", "--generate", "5"], capsys)
    assert line.endswith("--seq-len 8 and --generate 5 run past n_positions 12 (13 tokens); use --generate 4 or less")
    # An encoder-decoder generates on its decoder: its input may be as long as its positions allow.
    assert main(["cost", bart, "--seq-len", "12", "--decoder-len", "3", "--generate", "9", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["generate"][0]["tokens"] == 9
    line = one_line_error(["cost", bart, "--seq-len", "12", "--decoder-len", "3", "--generate", "10"], capsys)
    assert "--decoder-len 3 and --generate 10 run past max_position_embeddings 12" in line
    line = one_line_error(["cost", bart, "--seq-len", "4", "12", "--generate", "1"], capsys)
    assert "--seq-len 12 and --generate 1 run past" in line  # each column's decoder, as long as its input


# --- stderr holds bertgraph's lines alone ---------------------------------------------------------------------


# Runs each command line in one process (torch and transformers imported once), stderr marked after each.
_COMMANDS = """
import json, sys
from bertgraph.cli import main
for argv in json.loads(sys.argv[1]):
    status = main(argv)
    sys.stderr.write(f"=== {status}\\n")
    sys.stderr.flush()
"""


def test_library_log_lines_stay_off_stderr_unless_debug(tmp_path: Path) -> None:
    """transformers' note (Longformer pads its input) is not bertgraph's to print, nor anything torch logs
    on the way to a refusal: each refusal is its one line; --debug shows them all."""
    from bertgraph.model.families.generic import built_config

    mixtral = model(tmp_path / "mixtral", MIXTRAL)
    longformer = model(tmp_path / "lf", json.loads(json.dumps(built_config("longformer")[0], default=str)))
    draw = ["render", "--no-cache", "--layers", "1", "-o", str(tmp_path / "out.svg")]
    runs = [[*draw, str(mixtral)], [*draw, str(longformer)]]
    result = subprocess.run(
        [sys.executable, "-c", _COMMANDS, json.dumps(runs)], capture_output=True, text=True, timeout=180
    )
    first, second, rest = result.stderr.split("=== 1\n", 2)
    for said in (first, second):
        assert said.count("\n") == 1 and said.startswith("bertgraph: error: "), said
    assert "num_experts_per_tok 10 is more than num_local_experts 4" in first  # refused with its config
    assert second.startswith("bertgraph: error: cannot trace "), second  # refused after transformers spoke
    assert rest == "" and result.returncode == 0
    # transformers says its note once a process: --debug gets a process of its own.
    debug = bertgraph(*draw, str(longformer), "--debug", timeout=120)
    assert debug.returncode == 1 and debug.stderr.rstrip().endswith(second.split(": error: ", 1)[1].strip())
    assert "[transformers] Input ids are automatically padded" in debug.stderr  # --debug hides nothing
    assert not (tmp_path / "out.svg").exists()


# --- table outputs -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "name", "fmt"),
    [
        ("params", "x.svg", "json"),
        ("params", "x.svg", None),
        ("summary", "x.png", "markdown"),
        ("cost", "x.html", "text"),
        ("diff", "x.onnx", None),
    ],
)
def test_a_table_refuses_a_file_name_that_says_another_format(
    tmp_path: Path, capsys: Any, command: str, name: str, fmt: str | None
) -> None:
    target = tmp_path / name
    argv = [command, "bert-tiny", *(["--head", "masked-lm"] if command == "diff" else [])]
    line = one_line_error([*argv, *(["--format", fmt] if fmt else []), "-o", str(target)], capsys, status=2)
    assert f"the file name {name}" in line and (fmt is None or f"--format {fmt} does not match" in line)
    assert list(tmp_path.iterdir()) == []


def test_a_reader_that_goes_away_mid_table_gives_status_141(tmp_path: Path, capsys: Any) -> None:
    """A real pipe: ``head`` leaves after 10 bytes of a table larger than the pipe holds, so the
    write it interrupts has already handed part of the table over."""
    folder = model(tmp_path / "deep", {**BERT, "num_hidden_layers": 60})
    assert main(["params", str(folder), "--format", "json"]) == 0
    assert len(capsys.readouterr().out) > 2 * 65_536  # twice what a pipe holds
    command = f"{shlex.quote(sys.executable)} -m bertgraph params {shlex.quote(str(folder))} --format json"
    result = subprocess.run(
        ["bash", "-c", f"{command} | head -c 10; exit ${{PIPESTATUS[0]}}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.stdout == '{\n  "model'
    assert result.returncode == 141 and result.stderr == ""


# --- masks: text formats on standard output ---------------------------------------------------------------


def test_masks_writes_json_and_markdown_to_standard_output_without_o(tmp_path: Path, capsys: Any) -> None:
    folder = str(model(tmp_path / "b", BERT))
    target = tmp_path / "m.json"
    assert main(["masks", folder, "--seq-len", "5", "--pad", "1", "-o", str(target)]) == 0
    capsys.readouterr()
    assert main(["masks", folder, "--seq-len", "5", "--pad", "1", "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert out == target.read_text() and err == ""
    assert main(["masks", folder, "--seq-len", "5", "--pad", "1", "--format", "markdown"]) == 0
    page = capsys.readouterr().out
    assert page.startswith("# Attention masks\n") and page.endswith("```\n")
    # four real keys, one padding; the padding query's row blank (nothing reads it)
    assert "\n0   ■  ■  ■  ■  ░\n" in page and "\n4p\n" in page
    assert main(["masks", folder, "--format", "svg"]) == 2
    assert "--format svg is a figure, written to a file: give -o PATH" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b", "m.json"]


# --- nothing left outside the named output -----------------------------------------------------------------------


def test_a_traced_run_and_an_onnx_read_leave_nothing_in_the_temporary_folder(tmp_path: Path) -> None:
    """torch makes an empty compiler-cache folder when tracing imports it, onnxruntime a session
    file when imported: a run leaves neither, and nothing else but the file named."""
    import onnx
    from onnx import TensorProto, helper

    temporary, work = tmp_path / "tmp", tmp_path / "work"
    temporary.mkdir()
    folder = model(work / "b", BERT)
    # A reshape to sizes only known at run time: reading it asks onnxruntime's symbolic shape inference.
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"], name="/r/Reshape")],
        "reshape",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4]),
            helper.make_tensor_value_info("shape", TensorProto.INT64, [2]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), work / "r.onnx")
    env = {**os.environ, "TMPDIR": str(temporary)}
    env.pop("TORCHINDUCTOR_CACHE_DIR", None)
    traced = bertgraph("render", "b", "--no-cache", "-o", "b.svg", cwd=work, env=env, timeout=120)
    assert traced.returncode == 0, traced.stderr
    assert sorted(os.listdir(temporary)) == []
    read = bertgraph("summary", "r.onnx", cwd=work, env=env, timeout=120)
    assert read.returncode == 0 and "[?, ?]" in read.stdout, read.stderr  # what no inference could size
    assert sorted(os.listdir(temporary)) == []
    assert sorted(os.listdir(work)) == ["b", "b.svg", "r.onnx"] and sorted(os.listdir(folder)) == ["config.json"]


def test_the_quiet_block_drops_log_records_and_warnings_and_then_restores_both(capsys: Any) -> None:
    import logging
    import warnings

    from bertgraph import quiet

    # A logger of its own, not propagating: torch's and transformers' loggers keep handlers on whatever
    # stderr the worker had when they were set up, which another test's capture may have closed since.
    logger = logging.getLogger("a-library.fake_tensor")
    logger.propagate = False
    handler = logging.StreamHandler(sys.stderr)
    logger.addHandler(handler)
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            with quiet.libraries_quiet():
                logger.error("failed while attempting to run meta for aten.topk.default")
                warnings.warn("a library's warning", UserWarning, stacklevel=1)
            assert capsys.readouterr().err == "" and seen == []
            logger.error("after the block")
            warnings.warn("after the block", UserWarning, stacklevel=1)
        assert capsys.readouterr().err == "after the block\n" and [str(w.message) for w in seen] == ["after the block"]
    finally:
        logger.removeHandler(handler)
