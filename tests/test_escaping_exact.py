"""Escapers give exactly the documented text, and a Markdown reader shows the input back."""

from __future__ import annotations

from markdown_it import MarkdownIt

from bertgraph.render import escape


def test_markdown_text_spells_out_ampersands_and_angle_brackets() -> None:
    text = "&amp; & <b> x>y"
    assert escape.markdown_text(text) == "&amp;amp; &amp; &lt;b&gt; x&gt;y"
    html = MarkdownIt("commonmark").render(escape.markdown_text(text))
    assert html == "<p>&amp;amp; &amp; &lt;b&gt; x&gt;y</p>\n"  # the reader sees the input as written
