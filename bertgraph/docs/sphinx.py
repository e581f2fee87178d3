"""The Sphinx extension: a ``bertgraph`` directive drawn at build time.

Add ``"bertgraph.sphinx"`` to ``extensions`` in ``conf.py``, then::

    .. bertgraph:: bert-base-uncased
       :head: sequence-classification
       :depth: 2
       :format: svg        (svg, mermaid, html, table, summary)
       :compare: base
       :theme: auto        (auto, light, dark)
       :edge-labels: none  (shapes, changes (default), none)
       :caption: BERT with its classification head

    .. bertgraph:: bert-base-uncased gpt2 t5-small
       :figure: schematic  (diagram, schematic, masks: a figure of the models named)

The directive only checks its options (reading the model's config, never torch) and
puts a node in the doctree; each builder draws it its own way: HTML inlines the SVG (or
the interactive page in an iframe), LaTeX includes a PNG, text builders get a
placeholder; tables become literal blocks every builder knows. Problems are warnings with
the document and line (type ``bertgraph``, so ``suppress_warnings = ["bertgraph"]``
silences them); the build goes on.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

from bertgraph.docs.request import (
    EDGE_LABELS,
    FIGURES,
    FORMATS,
    OPTIONS,
    SIZE_OPTIONS,
    TEXT_FORMATS,
    THEMES,
    DiagramRequest,
    join_models,
    model_names,
    parse,
)
from bertgraph.errors import BertgraphError, first_line
from bertgraph.model.spec import reference_files
from bertgraph.version import __version__

if TYPE_CHECKING:
    from sphinx.application import Sphinx
    from sphinx.builders import Builder
    from sphinx.writers.html5 import HTML5Translator
    from sphinx.writers.latex import LaTeXTranslator

    from bertgraph.docs.renderer import DiagramRenderer

logger = logging.getLogger(__name__)
# Bumped when the node's content changes, so Sphinx rereads every document once.
ENV_VERSION = 3


class bertgraph_diagram(nodes.General, nodes.Element):
    """A diagram to draw: ``request`` holds the checked options as plain data."""


def _choice(argument: str | None, values: tuple[str, ...]) -> str:
    return str(directives.choice(argument, values))


class BertgraphDirective(SphinxDirective):
    """``.. bertgraph:: MODEL`` with the options of :data:`bertgraph.docs.request.OPTIONS`."""

    required_arguments = 1
    optional_arguments = 0
    final_argument_whitespace = True  # a figure names several models
    has_content = False
    option_spec: ClassVar[dict[str, Any]] = {
        "figure": partial(_choice, values=FIGURES),
        "head": directives.unchanged_required,
        "depth": directives.nonnegative_int,
        "format": partial(_choice, values=FORMATS),
        "compare": directives.unchanged_required,
        "theme": partial(_choice, values=THEMES),
        "edge-labels": partial(_choice, values=EDGE_LABELS),
        "caption": directives.unchanged,
        "unfold": directives.flag,
        **dict.fromkeys(SIZE_OPTIONS, directives.positive_int),
        "seq-len": directives.positive_int,
        "batch": directives.positive_int,
        "css": directives.path,
        "alt": directives.unchanged,
        "align": partial(_choice, values=("left", "center", "right")),
        "name": directives.unchanged,
        "class": directives.class_option,
    }

    def _model(self) -> str:
        """Each model named: a path relative to this document when it names a local folder or file."""
        if self.options.get("figure", "diagram") == "diagram":
            return self._one(self.arguments[0])
        return join_models([self._one(name) for name in model_names(self.arguments[0])])

    def _one(self, reference: str) -> str:
        """A path relative to this document when it names a local folder or file, else the reference as written."""
        _, absolute = self.env.relfn2path(reference)
        path = Path(absolute)
        if path.exists():
            # Every file the drawing reads (the config, the checkpoint beside it, an index's shards): an edit
            # of one changes the drawing, so it rereads this document.
            for found in reference_files(str(path)):
                if found.is_file():
                    self.env.note_dependency(str(found))
            return str(path)
        return reference

    def run(self) -> list[nodes.Node]:
        options = {key: value for key, value in self.options.items() if key in _REQUEST_OPTIONS}
        if "unfold" in self.options:
            options["unfold"] = True
        if "css" in options:  # read from this document's folder (or the source folder for "/…"), as images are
            _, sheet = self.env.relfn2path(options["css"])
            self.env.note_dependency(sheet)  # an edit of the sheet rereads this document
            options["css"] = sheet
        defaults = {"theme": self.config.bertgraph_theme}
        try:
            request = parse({"model": self._model(), **options}, defaults)
        except BertgraphError as error:
            logger.warning("bertgraph: %s", first_line(error), location=self.get_location(), type="bertgraph")
            return []
        node = bertgraph_diagram()
        node["request"] = request.as_dict()
        alt = f"{self.arguments[0]} · {request.head} · depth {request.depth}"
        if request.figure != "diagram":  # the models as written, not the paths they were found at
            alt = f"{request.figure} of {', '.join(model_names(self.arguments[0]))}"
        node["alt"] = self.options.get("alt", alt)
        node["classes"] += self.options.get("class", [])
        self.set_source_info(node)
        if "caption" not in self.options:
            self.add_name(node)
            return [node]
        figure = nodes.figure("", node)
        if "align" in self.options:
            figure["align"] = self.options["align"]
        inline, messages = self.parse_inline(self.options["caption"])
        caption = nodes.caption(self.options["caption"], "", *inline)
        caption.extend(messages)
        self.set_source_info(caption)
        figure += caption
        self.add_name(figure)
        return [figure]


# The request's options but the model (the argument), the caption (the figure's) and unfold (a flag,
# passed on as True): derived, so an option the request learns reaches the directive too.
_REQUEST_OPTIONS = frozenset(OPTIONS) - {"model", "caption", "unfold"}

# --- drawing, per builder --------------------------------------------------------------


_RENDERERS: dict[str, DiagramRenderer] = {}


def renderer(app: Sphinx | Builder) -> DiagramRenderer:
    """The renderer of this build (``app`` or its builder): drawings kept beside Sphinx's own doctree cache."""
    from bertgraph.docs.renderer import DiagramRenderer

    folder = Path(app.doctreedir) / "bertgraph"
    if str(folder) not in _RENDERERS:
        _RENDERERS[str(folder)] = DiagramRenderer(
            folder,
            on_render=lambda what: logger.info("bertgraph: drew %s", what),
            on_trace=lambda what: logger.info("bertgraph: traced %s", what),
        )
    return _RENDERERS[str(folder)]


def _request(node: nodes.Element) -> DiagramRequest:
    return DiagramRequest.from_dict(node["request"])


def _warn(error: Exception, node: nodes.Node) -> None:
    logger.warning("bertgraph: %s", first_line(error), location=node, type="bertgraph")


def html_visit(self: HTML5Translator, node: bertgraph_diagram) -> None:
    try:
        fragment = renderer(self.builder).html(_request(node))
    except BertgraphError as error:
        _warn(error, node)
        raise nodes.SkipNode from None
    # The node's classes after bertgraph-figure; its ids (a :name: without a caption, a label above it)
    # for the references to it.
    self.body.append(f"{self.starttag(node, 'div', '', classes=['bertgraph-figure'])}{fragment}</div>\n")
    raise nodes.SkipNode


def latex_visit(self: LaTeXTranslator, node: bertgraph_diagram) -> None:
    from bertgraph.files import write_atomic

    try:
        name, image = renderer(self.builder).png(_request(node))
        write_atomic(Path(self.builder.outdir) / name, image)
    except (BertgraphError, OSError) as error:
        _warn(error, node)
        raise nodes.SkipNode from None
    self.body.append(f"\n\\sphinxincludegraphics[]{{{name}}}\n")
    raise nodes.SkipNode


def placeholder_visit(self: Any, node: bertgraph_diagram) -> None:
    """Text, manual pages, Texinfo: the alt text as a paragraph of its own, escaped as the writer escapes text."""
    self.visit_paragraph(node)
    self.visit_Text(nodes.Text(f"[diagram: {node['alt']}]"))
    self.depart_paragraph(node)
    raise nodes.SkipNode


def _note(message: str) -> None:
    logger.info("bertgraph: %s", message)


def resolve_diagrams(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """Swap in nodes the builder draws itself (tables as literal blocks, Mermaid for sphinxcontrib-mermaid),
    and draw the page's HTML pieces ahead of the writer."""
    mermaid_ready = app.builder.format == "html" and "sphinxcontrib.mermaid" in app.extensions
    for node in list(doctree.findall(bertgraph_diagram)):
        request = _request(node)
        try:
            if request.format in TEXT_FORMATS:
                text = renderer(app).text(request)
                block = nodes.literal_block(text, text, language="text", classes=["bertgraph-table"])
                node.replace_self(block)
            elif request.format == "mermaid" and mermaid_ready:
                from sphinxcontrib.mermaid import mermaid

                code = renderer(app).mermaid(request, warn=_note)
                replacement = mermaid()
                replacement["code"] = code
                replacement["options"] = {}
                node.replace_self(replacement)
            elif request.format == "mermaid" and app.builder.format == "html":
                logger.warning(
                    "bertgraph: format mermaid needs 'sphinxcontrib.mermaid' in extensions; drawing SVG instead",
                    location=node,
                    type="bertgraph",
                )
        except BertgraphError as error:
            _warn(error, node)
            node.parent.remove(node)
    if app.builder.format == "html":
        # The rest are drawn by html_visit; drawn here together, their layouts overlap. (With -j,
        # doctrees are resolved in the main process before the writers fork, so they inherit these.)
        # One that fails (a model that no longer resolves) is left for html_visit to report at its line.
        renderer(app).html_all([_request(node) for node in doctree.findall(bertgraph_diagram)])


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_node(
        bertgraph_diagram,
        html=(html_visit, None),
        latex=(latex_visit, None),
        text=(placeholder_visit, None),
        man=(placeholder_visit, None),
        texinfo=(placeholder_visit, None),
    )
    app.add_directive("bertgraph", BertgraphDirective)
    app.add_config_value("bertgraph_theme", "auto", "env", types=frozenset({str}))
    app.connect("doctree-resolved", resolve_diagrams)
    return {"version": __version__, "env_version": ENV_VERSION, "parallel_read_safe": True, "parallel_write_safe": True}
