"""Tests of the Mermaid browser harness itself, on hand-written diagrams.

Every browser test looks its diagram up in one shared batch, so the whole module costs a single Chromium launch.
Without Chromium or the npm-installed mermaid the browser tests skip locally but fail when ``CI`` is set.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

import pytest

from tests.mermaid_browser import (
    MAX_EDGES,
    MAX_TEXT_SIZE,
    SETUP_HINT,
    MermaidResult,
    _judge,
    browser_available,
    render_mermaid,
    svg_elements,
    svg_text,
)

# Mermaid's label entity codes and the character each should show as.
ENTITIES = {
    "#quot;": '"',
    "#35;": "#",
    "#lt;": "<",
    "#gt;": ">",
    "#amp;": "&",
    "#124;": "|",
    "#91;": "[",
    "#93;": "]",
    "#123;": "{",
    "#125;": "}",
    "#59;": ";",
    "#96;": "`",
}

VALID_FLOWCHART = """flowchart TD
  subgraph s_enc["Encoder #quot;layer#quot; #35;1<br/>#lt;block#gt;"]
    n_in["input_ids #91;1, 128#93;"] --> n_attn["attention #123;heads: 12#125; #124; q#59;k#59;v"]
    n_attn --> n_end["#lt;script#gt;alert(1)#lt;/script#gt; #amp; #96;code#96;<br/>second line"]
  end
  subgraph s_head["Head"]
    n_class["pooler"]
  end
  n_end --> n_class
  classDef hot fill:#f96,stroke:#333,stroke-width:2px;
  class n_attn hot
  style n_in fill:#bbf,stroke:#f66
"""


def _chain(edges: int) -> str:
    return "flowchart TD\n" + "".join(f"  a{i} --> a{i + 1}\n" for i in range(edges))


def _sized(length: int) -> str:
    # One long label, so the length is real diagram text and not a %% comment (mermaid drops those before measuring).
    head, tail = 'flowchart TD\n  A["', '"] --> B\n'
    return head + "x" * (length - len(head) - len(tail)) + tail


DIAGRAMS: dict[str, str] = {
    "valid flowchart": VALID_FLOWCHART,
    "syntax error": "flowchart TD\n  A[[[ --> B\n",
    "raw quote in label": 'flowchart TD\n  A["a 12" screen"] --> B\n',
    # Balanced raw quotes even parse, but mermaid silently drops them: the label shows `say hi`.
    "raw quotes dropped": 'flowchart TD\n  A["say "hi""] --> B\n',
    "raw markup in label": 'flowchart TD\n  A["<script>alert(1)</script>x"] --> B\n',
    "max edges": _chain(MAX_EDGES),
    "too many edges": _chain(MAX_EDGES + 1),
    "max text size": _sized(MAX_TEXT_SIZE),
    "text too large": _sized(MAX_TEXT_SIZE + 1),
    "keyword id end": 'flowchart TD\n  end["x"] --> B\n',
    **{f"safe id {nid}": f'flowchart TD\n  {nid}["x"] --> {nid}_2["y"]\n' for nid in ("n_end", "n_class", "n_style")},
    **{f"entity node {code}": f'flowchart TD\n  A["L{code}R"] --> B\n' for code in ENTITIES},
    **{f"entity subgraph {code}": f'flowchart TD\n  subgraph s1["L{code}R"]\n    A\n  end\n' for code in ENTITIES},
}


def _require_browser() -> None:
    reason = browser_available()
    if reason is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"browser rendering is required when CI is set: {reason}", pytrace=False)
    pytest.skip(reason)


def _use_fake_chromium(monkeypatch: pytest.MonkeyPatch, folder: Path, script: str) -> None:
    """``BERTGRAPH_CHROMIUM`` names a shell script standing in for the browser."""
    fake = folder / "fake-chromium"
    fake.write_text("#!/bin/sh\n" + script, encoding="utf-8")
    fake.chmod(0o755)
    monkeypatch.setenv("BERTGRAPH_CHROMIUM", str(fake))


@functools.cache
def _render_all() -> dict[str, MermaidResult]:
    return render_mermaid(DIAGRAMS)


def _result(name: str) -> MermaidResult:
    _require_browser()
    return _render_all()[name]


@pytest.mark.browser
def test_valid_flowchart_renders_with_decoded_labels() -> None:
    result = _result("valid flowchart")
    assert result.ok, result.error
    assert result.error == ""
    assert result.svg.startswith("<svg")
    text = svg_text(result.svg)
    for shown in (
        'Encoder "layer" #1',
        "<block>",
        "input_ids [1, 128]",
        "attention {heads: 12} | q;k;v",
        "<script>alert(1)</script> & `code`",
        "second line",
        "pooler",
        "Head",
    ):
        assert shown in text
    elements = svg_elements(result.svg)
    assert "script" not in elements  # the label is text that looks like a tag, not an element
    assert "block" not in elements
    assert "br" in elements and "<br" not in text  # <br/> became a line break, not literal text
    assert re.search(r'class="node default hot" id="[^"]*-n_attn-', result.svg)
    assert "fill:#bbf !important" in result.svg


@pytest.mark.browser
@pytest.mark.parametrize("place", ["node", "subgraph"])
@pytest.mark.parametrize("code", list(ENTITIES))
def test_entity_code_decodes(code: str, place: str) -> None:
    result = _result(f"entity {place} {code}")
    assert result.ok, result.error
    assert f"L{ENTITIES[code]}R" in svg_text(result.svg)


@pytest.mark.browser
def test_syntax_error_is_reported() -> None:
    result = _result("syntax error")
    assert not result.ok
    assert "Parse error on line 2" in result.error
    assert result.svg == ""


@pytest.mark.browser
def test_raw_double_quote_in_label_breaks_it() -> None:
    result = _result("raw quote in label")
    assert not result.ok
    assert "Parse error" in result.error
    dropped = _result("raw quotes dropped")
    assert dropped.ok, dropped.error
    assert "say hi" in svg_text(dropped.svg) and '"' not in svg_text(dropped.svg)


@pytest.mark.browser
def test_raw_markup_in_label_is_sanitised() -> None:
    result = _result("raw markup in label")
    assert result.ok, result.error
    assert "script" not in svg_elements(result.svg)
    assert "alert" not in svg_text(result.svg)


@pytest.mark.browser
def test_edge_limit() -> None:
    assert _result("max edges").ok
    result = _result("too many edges")
    assert not result.ok
    assert "Edge limit exceeded" in result.error
    assert f"the limit is {MAX_EDGES}" in result.error


@pytest.mark.browser
def test_text_size_limit() -> None:
    assert _result("max text size").ok
    result = _result("text too large")
    assert not result.ok
    assert "Maximum text size in diagram exceeded" in result.error


@pytest.mark.browser
def test_keyword_node_id_fails_but_prefixed_ids_work() -> None:
    assert not _result("keyword id end").ok
    for nid in ("n_end", "n_class", "n_style"):
        result = _result(f"safe id {nid}")
        assert result.ok, (nid, result.error)


@pytest.mark.browser
def test_results_keep_names_and_order() -> None:
    _require_browser()
    assert list(_render_all()) == list(DIAGRAMS)


@pytest.mark.browser
def test_missing_results_fail_clearly(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _require_browser()
    # A "browser" that prints nothing: the harness must say the page never finished, not return empty results.
    _use_fake_chromium(monkeypatch, tmp_path, "echo 'fake browser stderr' >&2\n")
    with pytest.raises(RuntimeError, match=r"never wrote its results(?s:.*)fake browser stderr"):
        render_mermaid({"a": "flowchart TD\n  A --> B\n"})


@pytest.mark.browser
def test_a_browser_that_closes_its_pipe_is_given_up_at_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The pipe's end comes before the process is reaped: the harness must not wait for an answer until its timeout."""
    import time

    _require_browser()
    _use_fake_chromium(monkeypatch, tmp_path, "exec 4>&-\necho 'closed its pipe' >&2\nsleep 5\n")
    started = time.monotonic()
    with pytest.raises(RuntimeError, match=r"never wrote its results(?s:.*)closed its pipe"):
        render_mermaid({"a": "flowchart TD\n  A --> B\n"}, timeout=30)
    assert time.monotonic() - started < 3


@pytest.mark.browser
def test_hung_browser_times_out(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _require_browser()
    _use_fake_chromium(monkeypatch, tmp_path, "sleep 60\n")
    with pytest.raises(RuntimeError, match="did not finish within"):
        render_mermaid({"a": "flowchart TD\n  A --> B\n"}, timeout=1)


def test_no_diagrams_needs_no_browser() -> None:
    assert render_mermaid({}) == {}


def test_unavailable_reason_names_the_fix(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("BERTGRAPH_CHROMIUM", str(tmp_path / "missing"))
    reason = browser_available()
    assert reason is not None
    assert "Chromium not found" in reason and SETUP_HINT in reason


def test_judge_flags_mermaid_error_output() -> None:
    text = "flowchart TD\n  A --> B\n"
    good = '<svg id="x"><g><text>A</text></g></svg>'
    assert _judge(text, {"error": "", "svg": good, "console": []}).ok
    placeholder = '<svg id="x"><p>Maximum text size in diagram exceeded</p></svg>'
    assert "Maximum text size" in _judge(text, {"error": "", "svg": placeholder, "console": []}).error
    bomb = '<svg aria-roledescription="error"><text>Syntax error in text</text></svg>'
    assert not _judge(text, {"error": "", "svg": bomb, "console": []}).ok
    assert "boom" in _judge(text, {"error": "", "svg": good, "console": ["boom"]}).error
    assert "characters" in _judge("x" * (MAX_TEXT_SIZE + 1), {"error": "", "svg": good, "console": []}).error


def test_svg_text_decodes_and_skips_style() -> None:
    svg = "<svg><style>.a{fill:red}</style><foreignObject><p>&lt;b&gt; &amp; &quot;<br>x</p></foreignObject></svg>"
    assert svg_text(svg) == '<b> & "x'
    assert svg_elements(svg) == {"svg", "style", "foreignobject", "p", "br"}
