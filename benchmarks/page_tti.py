"""Open an interactive bertgraph page in headless Chromium; print its time to interactive in seconds.

The page records ``bertgraphReadyAt`` (milliseconds since navigation started) once the first
drawing is shown and every control answers. Used by the ``docs`` benchmark suite.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.cdp import Browser, file_url


def main(page: str) -> None:
    with Browser() as browser:
        browser.open(file_url(Path(page)))
        ready = browser.wait_for(
            "document.documentElement && document.documentElement.dataset.ready && bertgraphReadyAt"
        )
        problems = browser.problems()
        if problems:
            raise SystemExit(f"the page reported problems: {problems}")
    print(f"{float(ready) / 1000:.3f}")


if __name__ == "__main__":
    main(sys.argv[1])
