"""Every benchmark figure the README and RESULTS.md show comes from benchmarks/results.json."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_reports_are_generated_from_results_json() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--check"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


def test_every_figure_in_the_readme_table_is_stored() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("<!-- benchmarks:", 1)[1].split("<!-- /benchmarks -->", 1)[0]
    results = json.loads((ROOT / "benchmarks" / "results.json").read_text(encoding="utf-8"))
    stored: set[str] = set()
    for record in results.values():
        for item in record["commands"].values():
            stored |= {f"{item['seconds']:.2f} s", f"{item['peak_mb']:.0f} MB"}
            if "span" in item:
                stored.add(f"{item['span']:.2f} s")
    shown = re.findall(r"\d+\.\d\d s|\d+ MB", block)
    assert shown, "the README's benchmark table shows no figures"
    assert set(shown) <= stored, set(shown) - stored
