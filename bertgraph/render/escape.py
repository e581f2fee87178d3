"""All escaping, one function per format and purpose, each pure and tested by doctest.

Module names come from user checkpoints and ONNX files and may hold anything: quotes,
brackets, ``<script>``, ``#``, ``|``, ``%%{``, reserved words, newlines, control and
bidirectional-override characters, any unicode. Every label a renderer writes goes
through one of these functions. The module is a leaf (no bertgraph imports), so the
graph files of :mod:`bertgraph.graph.io` use it too.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

# Characters no reader should receive raw: C0 and C1 control characters other than tab
# and newline (XML forbids most; terminals act on them), the bidirectional embedding,
# override and isolate controls that reorder the text around them (U+202A-U+202E,
# U+2066-U+2069, "Trojan Source"), lone surrogates (not encodable as UTF-8), the invisible
# byte-order mark (U+FEFF, which JavaScript's trim() drops, so Mermaid would lose it) and the
# two noncharacters XML forbids. Each is shown as U+FFFD, the replacement character.
_HIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff\ufeff\ufffe\uffff]")
# What XML 1.0 cannot hold (GraphML): the characters it forbids, and the carriage return,
# which every XML parser turns into a line feed. Everything else stays as it is.
_NOT_XML = re.compile("[\x00-\x08\x0b-\x1f\ud800-\udfff\ufffe\uffff]")


def visible(text: str) -> str:
    r"""``text`` with carriage returns dropped and hidden characters (see ``_HIDDEN``) shown as U+FFFD.

    >>> visible("a\r\nb\x00c")
    'a\nb\ufffdc'
    >>> visible("user\u202e\u2066gpj.exe"), visible("\x1b[2J"), visible("\ud800")
    ('user\ufffd\ufffdgpj.exe', '\ufffd[2J', '\ufffd')
    >>> visible("עברית and العربية stay as they are")
    'עברית and العربية stay as they are'
    """
    return _HIDDEN.sub("\ufffd", text.replace("\r", ""))


# --- XML data (GraphML) ------------------------------------------------------------------


def xml_text(text: str) -> str:
    r"""Text XML 1.0 can hold: the characters it forbids become U+FFFD; nothing else changes.

    GraphML is data, not a picture, so names keep every character XML allows (bidi
    controls included); the XML writer escapes ``<``, ``&`` and quotes itself.

    >>> xml_text("a\x00b\x1b\tc\n<d>\r")
    'a\ufffdb\ufffd\tc\n<d>\ufffd'
    >>> xml_text("\u202e kept")
    '\u202e kept'
    """
    return _NOT_XML.sub("\ufffd", text)


# --- JSON data ---------------------------------------------------------------------------

_SURROGATE = re.compile("[\ud800-\udfff]")


def json_text(dumped: str) -> str:
    r"""JSON text from ``json.dumps(..., ensure_ascii=False)`` made encodable as UTF-8.

    JSON is data, so every character is kept; a lone surrogate (which UTF-8 cannot
    encode) is written as its ``\uXXXX`` escape, which JSON readers decode back.

    >>> import json
    >>> text = json_text(json.dumps({"name": "a\udc80b"}, ensure_ascii=False))
    >>> print(text)
    {"name": "a\udc80b"}
    >>> json.loads(text)["name"] == "a\udc80b"
    True
    """
    return _SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", dumped)


def shown_data(value: Any) -> Any:
    """Plain data a page shows (the interactive page's node details): every string made
    :func:`visible`, keys included; numbers and structure unchanged.

    >>> shown_data({"module": "a\u202eb", "tensors": [["w\x1b", [2, 3], 6]]})
    {'module': 'a\ufffdb', 'tensors': [['w\ufffd', [2, 3], 6]]}
    """
    if isinstance(value, str):
        return visible(value)
    if isinstance(value, dict):
        return {shown_data(key): shown_data(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [shown_data(item) for item in value]
    return value


# --- terminal ------------------------------------------------------------------------------


def terminal_text(text: str) -> str:
    r"""Text in a plain-text table: nothing a terminal would act on, on one line.

    >>> terminal_text("evil\x1b]0;title\x07"), terminal_text("two\nlines")
    ('evil\ufffd]0;title\ufffd', 'two\u2424lines')
    """
    return visible(text).replace("\n", "\u2424")


# --- Graphviz DOT ------------------------------------------------------------------------


def dot_string(text: str) -> str:
    r"""A DOT double-quoted string (ids, tooltips, URLs, plain labels).

    Backslashes are doubled, so Graphviz's escString sequences (``\N``, ``\l``) cannot be
    smuggled in; newlines become ``\n``.

    >>> print(dot_string('say "hi"'))
    "say \"hi\""
    >>> print(dot_string("a\\b\nc"))
    "a\\b\nc"
    >>> print(dot_string("node"))
    "node"
    """
    escaped = visible(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


_UNSAFE_DOT_ID = re.compile(r"[^A-Za-z0-9_.:\-]+")


def dot_id(name: str, taken: dict[str, str]) -> str:
    """A node or cluster id made of letters, digits and ``_.:-`` only, unique within ``taken``.

    Graphviz copies ids into SVG ``<title>`` elements and leaves text that looks like an
    entity (``&x;``) unescaped, so user text never becomes an id; labels and tooltips
    carry the names instead. ``taken`` maps names already seen to their ids.

    >>> seen = {}
    >>> dot_id("bert.encoder.layer.0-11", seen), dot_id("a&;b", seen), dot_id("a<>b", seen), dot_id("a&;b", seen)
    ('bert.encoder.layer.0-11', 'a_b', 'a_b_2', 'a_b')
    """
    if name in taken:
        return taken[name]
    base = _UNSAFE_DOT_ID.sub("_", name) or "_"
    candidate, number = base, 2
    used = set(taken.values())
    while candidate in used:
        candidate, number = f"{base}_{number}", number + 1
    taken[name] = candidate
    return candidate


def dot_html(text: str) -> str:
    """Text inside a Graphviz HTML-like label (``label=<...>``).

    >>> dot_html('<script>alert("x") & more</script>')
    '&lt;script&gt;alert(&quot;x&quot;) &amp; more&lt;/script&gt;'
    >>> dot_html("line\\nbreak")
    'line<br/>break'
    >>> print(dot_html("a\\\\b"))
    a\\\\b
    >>> dot_html("]] {} | #")
    '&#93;&#93; {} | #'
    """
    escaped = (
        visible(text)
        # Graphviz reads two backslashes in an HTML-like label as one, even when they are
        # written as character references: doubling each backslash shows it as written.
        .replace("\\", "\\\\")
        .replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
        .replace("'", "&#39;")
        # Graphviz 2.43 rejects "]" right after a tag (<b>]</b>); a character reference is safe.
        .replace("[", "&#91;")
        .replace("]", "&#93;")
    )
    return escaped.replace("\n", "<br/>")


# --- Mermaid -----------------------------------------------------------------------------

# Words the flowchart grammar reserves; an id equal to one of them breaks parsing.
MERMAID_RESERVED = frozenset(
    {
        "end",
        "graph",
        "flowchart",
        "subgraph",
        "style",
        "linkstyle",
        "classdef",
        "class",
        "click",
        "call",
        "href",
        "default",
        "direction",
        "tb",
        "bt",
        "rl",
        "lr",
        "td",
        "callback",
        "interpolate",
    }
)

_UNSAFE_ID = re.compile(r"[^A-Za-z0-9_]+")


def mermaid_id(name: str, taken: set[str] | None = None) -> str:
    """A Mermaid node id for ``name``: letters, digits and ``_``, never a reserved word.

    With ``taken`` the id is also made unique (and added to ``taken``).

    >>> mermaid_id("bert.encoder.layer.0-11")
    'n_bert_encoder_layer_0_11'
    >>> mermaid_id("end"), mermaid_id("")
    ('n_end', 'n_')
    >>> seen = set(); mermaid_id("a.b", seen), mermaid_id("a-b", seen)
    ('n_a_b', 'n_a_b_2')
    """
    base = "n_" + _UNSAFE_ID.sub("_", name).strip("_")
    candidate = base
    if taken is not None:
        number = 2
        while candidate in taken:
            candidate = f"{base}_{number}"
            number += 1
        taken.add(candidate)
    return candidate


def mermaid_text(text: str) -> str:
    """Text inside a double-quoted Mermaid label, shown literally.

    Mermaid's entity codes (``#quot;``, ``#35;``) stand for characters the grammar or the
    HTML renderer would otherwise interpret. Newlines become ``<br/>``.

    >>> mermaid_text('say "hi" <b>#1</b> & `x`')
    'say #quot;hi#quot; #lt;b#gt;#35;1#lt;/b#gt; #amp; #96;x#96;'
    >>> mermaid_text("a\\nb"), mermaid_text("end | [x] {y};"), mermaid_text("style:#")
    ('a<br/>b', 'end | [x] {y};', 'style#58;#35;')
    >>> print(mermaid_text('%%{init: {"theme": "dark"}}%%'))
    #37;#37;{init#58; {#quot;theme#quot;#58; #quot;dark#quot;}}#37;#37;
    """
    out = []
    for char in visible(text):
        if char == "\n":
            out.append("<br/>")
        elif char in _MERMAID_ENTITIES:
            out.append(_MERMAID_ENTITIES[char])
        else:
            out.append(char)
    return "".join(out)


_MERMAID_ENTITIES = {
    # Inside a double-quoted label these would end the label, open HTML, or start an entity
    # code; brackets, braces, pipes and semicolons show as they are.
    "#": "#35;",
    '"': "#quot;",
    "<": "#lt;",
    ">": "#gt;",
    "&": "#amp;",
    "`": "#96;",
    # Mermaid drops the last ";" of a line that has "style"/"classDef" then ":" then "#": with
    # no raw ":" in a label, a module named "style" cannot trigger that.
    ":": "#58;",
    # "%%" starts a comment and "%%{" a directive anywhere in the text, even inside quotes.
    "%": "#37;",
}


def mermaid_front_matter(text: str) -> str:
    """A value in Mermaid's YAML front matter (``title: ...``): a JSON string is valid YAML.

    >>> print(mermaid_front_matter('bert "base": #1'))
    "bert \\"base\\": #1"
    """
    import json

    return json.dumps(visible(text).replace("\n", " "), ensure_ascii=False)


# --- Markdown ----------------------------------------------------------------------------

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]|<>&#])")


def markdown_text(text: str) -> str:
    r"""Text in a Markdown table cell or paragraph, shown literally.

    >>> print(markdown_text("a|b <script> `x` *y* [z]"))
    a\|b &lt;script&gt; \`x\` \*y\* \[z\]
    >>> print(markdown_text("word_embeddings\nnext"))
    word\_embeddings<br>next
    """

    def replace(match: re.Match[str]) -> str:
        char = match.group(1)
        return {"<": "&lt;", ">": "&gt;", "&": "&amp;"}.get(char, "\\" + char)

    return _MARKDOWN_SPECIAL.sub(replace, visible(text)).replace("\n", "<br>")


def markdown_code(text: str) -> str:
    r"""Inline code (shapes, names) in a table cell; text a code span cannot hold is escaped instead.

    >>> print(markdown_code("[batch, seq, 768]"), markdown_code("a`b|c"), markdown_code("x\u202ey"))
    `[batch, seq, 768]` a\`b\|c `x�y`
    """
    shown = visible(text)
    if any(char in shown for char in "`|\n") or not shown.strip():
        return markdown_text(text)
    return f"`{shown}`"


def markdown_url(path: str) -> str:
    """A relative file name as a Markdown link destination, percent-encoded: spaces,
    parentheses and brackets in a file name cannot end the link early.

    >>> markdown_url("my model (v2).svg"), markdown_url("bert-depth2.svg")
    ('my%20model%20%28v2%29.svg', 'bert-depth2.svg')
    """
    return quote(visible(path), safe="/-_.~")


# --- element ids (SVG, the page, TikZ, draw.io) -------------------------------------------

# A module path's separators, spelt so that an id needs no escaping in CSS (``#bert-pooler``),
# XML (an id starts with a letter), TikZ (``.`` and ``:`` mean anchors and polar coordinates
# there) or draw.io: ``bert.encoder.layer.0-11`` → ``bert-encoder-layer-0-11``, own ops
# ``bert.embeddings:ops`` → ``bert-embeddings--ops``.
_ID_SEPARATORS = {".": "-", ":": "--", "/": "-", " ": "_"}
_ID_SAFE = re.compile(r"[A-Za-z0-9_-]")


def element_id(name: str) -> str:
    """A stable id for a drawn element, from its module path or node name.

    The same name always gives the same id (so a module keeps its id at every depth and in
    every run); letters, digits, ``-`` and ``_`` only, starting with a letter or ``_``; any
    other character is spelt by its code point, so different names rarely meet.

    >>> element_id("bert.encoder.layer.0-11.attention"), element_id("bert.embeddings:ops.1")
    ('bert-encoder-layer-0-11-attention', 'bert-embeddings--ops-1')
    >>> element_id(""), element_id("0.mlp"), element_id("a<b>\\"é"), element_id("layers.1-19/3")
    ('model', 'n0-mlp', 'a_3c_b_3e__22__e9_', 'layers-1-19-3')
    """
    spelt = "".join(
        _ID_SEPARATORS.get(char) or (char if _ID_SAFE.fullmatch(char) else f"_{ord(char):x}_") for char in name
    )
    if not spelt:
        return "model"
    return spelt if spelt[0].isascii() and (spelt[0].isalpha() or spelt[0] == "_") else "n" + spelt


# --- LaTeX (TikZ) ------------------------------------------------------------------------

# Characters TeX reads as commands, and those Computer Modern's OT1 encoding draws as something
# else (``<`` as ¡, ``"`` as ”, ``_`` as a rule no PDF reader sees as text): typewriter glyphs
# where the roman font has none, so the PDF says what the label says.
_TEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "{": r"\{",
    "}": r"\}",
    "#": r"\#",
    "%": r"\%",
    "&": r"\&",
    "$": r"{\ttfamily\char36}",
    "_": r"{\ttfamily\char95}",
    "~": r"{\ttfamily\char126}",
    "^": r"{\ttfamily\char94}",
    '"': r"{\ttfamily\char34}",
    "'": r"{\ttfamily\char13}",
    "`": r"{\ttfamily\char18}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "|": r"\textbar{}",
    "\n": " ",
    "\t": " ",
}
# Symbols the drawings use, in glyphs every TeX installation has (math fonts, no TS1 fonts).
_TEX_SYMBOLS = {
    "·": r"\ensuremath{\cdot}",
    "×": r"\ensuremath{\times}",
    "…": r"\ldots{}",
    "–": "--",
    "—": "---",
    "→": r"\ensuremath{\rightarrow}",
    "←": r"\ensuremath{\leftarrow}",
    "≤": r"\ensuremath{\leq}",
    "≥": r"\ensuremath{\geq}",
    "≠": r"\ensuremath{\neq}",
    "±": r"\ensuremath{\pm}",
    "−": r"\ensuremath{-}",
    "÷": r"\ensuremath{\div}",
    "°": r"\ensuremath{^\circ}",
    "ß": r"\ss{}",
    "æ": r"\ae{}",
    "Æ": r"\AE{}",
    "œ": r"\oe{}",
    "Œ": r"\OE{}",
    "ø": r"\o{}",
    "Ø": r"\O{}",
    "ł": r"\l{}",
    "Ł": r"\L{}",
    "ı": r"\i{}",
    "\u00a0": "~",
}
# Accents over a letter (NFD's combining marks) as LaTeX's accent commands.
_TEX_ACCENTS = {
    "\u0300": "`",
    "\u0301": "'",
    "\u0302": "^",
    "\u0303": "~",
    "\u0304": "=",
    "\u0306": "u",
    "\u0307": ".",
    "\u0308": '"',
    "\u030a": "r",
    "\u030b": "H",
    "\u030c": "v",
    "\u0327": "c",
}


def tex_text(text: str) -> str:
    r"""Text in a LaTeX document (a TikZ label), shown literally in the document's font.

    Letters with accents become accent commands and the drawings' symbols math glyphs, so
    pdflatex needs no font beyond Computer Modern; any other character is written as its
    code point (``U+4E2D``) rather than stop the document. Newlines become spaces.

    >>> print(tex_text("#$%&_{}~^\\"))
    \#{\ttfamily\char36}\%\&{\ttfamily\char95}\{\}{\ttfamily\char126}{\ttfamily\char94}\textbackslash{}
    >>> print(tex_text("50% <b>"))
    50\% \textless{}b\textgreater{}
    >>> print(tex_text("12 × layer · 1.2M — né 中 --x"))
    12 \ensuremath{\times} layer \ensuremath{\cdot} 1.2M --- n\'{e} U+4E2D -{}-x
    >>> print(tex_text("\\input{/etc/passwd}\x00"))
    \textbackslash{}input\{/etc/passwd\}U+FFFD
    """
    import unicodedata

    out = []
    shown = visible(text)
    for index, char in enumerate(shown):
        if char == "-" and shown[index + 1 : index + 2] == "-":
            out.append("-{}")  # two hyphens would join into an en dash (quotes are typewriter glyphs: no ligature)
        elif char in _TEX_SPECIAL:
            out.append(_TEX_SPECIAL[char])
        elif char.isascii():
            out.append(char)
        elif char in _TEX_SYMBOLS:
            out.append(_TEX_SYMBOLS[char])
        else:
            decomposed = unicodedata.normalize("NFD", char)
            base, marks = decomposed[0], decomposed[1:]
            if base.isascii() and base.isalpha() and len(marks) == 1 and marks in _TEX_ACCENTS:
                letter = r"\i" if base == "i" else r"\j" if base == "j" else base  # dotless under an accent
                out.append(f"\\{_TEX_ACCENTS[marks]}{{{letter}}}")
            else:
                out.append(f"U+{ord(char):04X}")
    return "".join(out)


# --- draw.io -----------------------------------------------------------------------------


def drawio_html(text: str) -> str:
    """Text inside a draw.io label (``html=1``: the label is HTML; the XML writer quotes it again).

    >>> drawio_html('<img src=x onerror="a()"> & b')
    '&lt;img src=x onerror=&quot;a()&quot;&gt; &amp; b'
    >>> drawio_html("two\\nlines")
    'two<br>lines'
    """
    import html

    return html.escape(visible(text), quote=True).replace("\n", "<br>")


def xml_attribute(text: str) -> str:
    r"""A double-quoted XML attribute value: markup, quotes and line breaks as references.

    >>> print(xml_attribute('a<b> & "c"\nd'))
    "a&lt;b&gt; &amp; &quot;c&quot;&#10;d"
    """
    escaped = (
        xml_text(text)
        .replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
        .replace("\n", "&#10;")
        .replace("\t", "&#9;")
    )
    return f'"{escaped}"'
