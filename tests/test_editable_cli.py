"""``-o x.tex`` and ``-o x.drawio`` from the command line: render and families, byte for byte the same
every run, and the mistakes around them refused in one line with nothing written."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bertgraph import cli
from tests.editable_models import t5_folder, t5_graph
from tests.helpers import one_line_error

pytestmark = pytest.mark.dot


@pytest.fixture(scope="module")
def t5(once: Callable[..., Any], tmp_path_factory: pytest.TempPathFactory) -> str:
    t5_graph(once, tmp_path_factory)  # traced once, into the run's graph cache
    return str(t5_folder(once, tmp_path_factory))


def test_families_write_tikz_and_drawio_the_same_every_run(t5: str, tmp_path: Path) -> None:
    for attempt in ("first", "again"):
        assert cli.main(["families", t5, "bert-tiny", "-o", str(tmp_path / f"{attempt}.tex")]) == 0
        argv = ["families", t5, "bert-tiny", "--view", "diagrams", "--depth", "1"]
        assert cli.main([*argv, "-o", str(tmp_path / f"{attempt}.drawio")]) == 0
    for suffix in (".tex", ".drawio"):
        assert (tmp_path / f"first{suffix}").read_bytes() == (tmp_path / f"again{suffix}").read_bytes()
    tex = (tmp_path / "first.tex").read_text(encoding="utf-8")
    assert "\\begin{tikzpicture}" in tex and "cluster-layer/.style=" in tex and "kind-causal/.style=" in tex
    root = ET.parse(tmp_path / "first.drawio").getroot()
    classes = {cell.get("class") for cell in root.iter("UserObject")}
    assert {"cluster-variant", "edge-cross", "role-io"} <= classes  # both models, stitched, with the cross edges


def test_render_writes_the_format_its_suffix_or_format_names(t5: str, tmp_path: Path, capsys: Any) -> None:
    argv = ["render", t5, "--head", "seq2seq-lm", "--depth", "1"]
    assert cli.main([*argv, "--format", "drawio", "-o", str(tmp_path / "t5.drawio")]) == 0
    assert ET.parse(tmp_path / "t5.drawio").getroot().tag == "mxfile"
    capsys.readouterr()
    message = one_line_error([*argv, "--format", "tex", "-o", str(tmp_path / "t5.svg")], capsys)
    assert "--format tex does not match the file name t5.svg" in message and not (tmp_path / "t5.svg").exists()


def test_without_graphviz_the_editable_formats_say_what_to_install(
    t5: str, tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no dot on it
    for suffix in ("tex", "drawio"):
        output = tmp_path / f"t5.{suffix}"
        message = one_line_error(["render", t5, "-o", str(output)], capsys)
        assert "install the graphviz package" in message and not output.exists()
        output = tmp_path / f"families.{suffix}"
        message = one_line_error(["families", t5, "-o", str(output)], capsys)
        assert "install the graphviz package" in message and not output.exists()
