# A small Sphinx project that draws bertgraph diagrams at build time (built by tests/test_docs_sphinx.py).
project = "bertgraph docs test"
extensions = ["bertgraph.sphinx", "sphinxcontrib.mermaid"]
mermaid_use_local = "mermaid.esm.min.mjs"  # no script from a CDN; the test checks the page, not a browser
html_theme = "alabaster"
