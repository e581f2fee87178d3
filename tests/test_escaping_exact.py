"""Escapers give exactly the documented text, and a Markdown reader shows the input back."""

from __future__ import annotations

import pytest
from markdown_it import MarkdownIt

from bertgraph.render import escape


def test_markdown_text_spells_out_ampersands_and_angle_brackets() -> None:
    text = "&amp; & <b> x>y"
    assert escape.markdown_text(text) == "&amp;amp; &amp; &lt;b&gt; x&gt;y"
    html = MarkdownIt("commonmark").render(escape.markdown_text(text))
    assert html == "<p>&amp;amp; &amp; &lt;b&gt; x&gt;y</p>\n"  # the reader sees the input as written


def test_dot_ids_of_names_with_nothing_safe_and_of_many_clashes() -> None:
    assert escape.dot_id("&;", {}) == "_"
    seen: dict[str, str] = {}
    assert [escape.dot_id(name, seen) for name in ["a&b", "a<b", "a>b", "a b"]] == ["a_b", "a_b_2", "a_b_3", "a_b_4"]


def test_mermaid_ids_strip_underscores_and_number_clashes() -> None:
    assert escape.mermaid_id("__x__") == "n_x"
    assert escape.mermaid_id(" x ") == "n_x"
    taken: set[str] = set()
    assert [escape.mermaid_id(name, taken) for name in ["a.b", "a-b", "a b", "a:b"]] == [
        "n_a_b",
        "n_a_b_2",
        "n_a_b_3",
        "n_a_b_4",
    ]
    assert taken == {"n_a_b", "n_a_b_2", "n_a_b_3", "n_a_b_4"}


def test_mermaid_front_matter_keeps_letters_and_joins_lines() -> None:
    assert escape.mermaid_front_matter("modèle\nbase") == '"modèle base"'


def test_markdown_code_spans() -> None:
    assert escape.markdown_code("XY") == "`XY`"
    assert escape.markdown_code("a|b") == "a\\|b"
    assert escape.markdown_code("  ") == "  "


def test_dot_html_spells_out_quotes_and_brackets() -> None:
    assert escape.dot_html("it's [x]") == "it&#39;s &#91;x&#93;"


def test_ids_of_empty_names_and_names_starting_with_x() -> None:
    assert escape.dot_id("", {}) == "_"
    assert escape.mermaid_id("Xa_X") == "n_Xa_X"


# --- LaTeX (TikZ) and element ids -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "spelt"),
    [
        (
            "#$%&_{}~^\\",
            r"\#{\ttfamily\char36}\%\&{\ttfamily\char95}\{\}{\ttfamily\char126}{\ttfamily\char94}\textbackslash{}",
        ),
        ('<b>|"q"', r"\textless{}b\textgreater{}\textbar{}{\ttfamily\char34}q{\ttfamily\char34}"),
        ("it's `x`", r"it{\ttfamily\char13}s {\ttfamily\char18}x{\ttfamily\char18}"),
        ("a--b---c", r"a-{}-b-{}-{}-c"),
        (
            "12 × 3 · 4 → 5 – 6 … ≤",
            r"12 \ensuremath{\times} 3 \ensuremath{\cdot} 4 \ensuremath{\rightarrow} 5 -- 6 \ldots{} \ensuremath{\leq}",
        ),
        ("né çà ñ ï ß ø", r"n\'{e} \c{c}\`{a} \~{n} \"{\i} \ss{} \o{}"),
        ("模型 ✓", "U+6A21U+578B U+2713"),
        ("two\nlines\ttab", "two lines tab"),
        ("bell\x07 \u202eevil", "bellU+FFFD U+FFFDevil"),
    ],
)
def test_tex_text_spells_each_character_for_pdflatex(text: str, spelt: str) -> None:
    assert escape.tex_text(text) == spelt


@pytest.mark.parametrize(
    ("name", "ident"),
    [
        ("bert.encoder.layer.0-11.attention.self.query", "bert-encoder-layer-0-11-attention-self-query"),
        ("bert.embeddings:ops.1", "bert-embeddings--ops-1"),
        ("model.layers.1-19/3", "model-layers-1-19-3"),
        ("", "model"),
        ("0.weight", "n0-weight"),
        ("-x", "n-x"),
        ("_private", "_private"),
        ("a b<c>", "a_b_3c_c_3e_"),
        ("模", "_6a21_"),
    ],
)
def test_element_id_spells_a_path_in_letters_digits_hyphens_and_underscores(name: str, ident: str) -> None:
    assert escape.element_id(name) == ident
