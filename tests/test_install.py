"""What ``pip install bertgraph`` gives: ONNX export and verification without any extra.

The slow test builds a fresh virtual environment, installs the project from this source
tree with no extras (pinned by constraints.txt, with pip's ordinary configuration) and
runs ``bertgraph onnx`` in it: export, full checker and onnxruntime parity.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].strip().lower().replace("_", "-")


def _pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            pins[_name(name)] = version
    return pins


def test_every_dependency_is_pinned_in_constraints() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    required = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        required += [r for r in extra if not r.startswith("bertgraph")]
    pins = _pins()
    missing = sorted({_name(r) for r in required} - set(pins))
    assert missing == [], f"add pins to constraints.txt for: {missing}"
    base = {_name(r) for r in project["dependencies"]}
    assert {"onnx", "onnxruntime", "onnxscript", "onnx-ir", "numpy"} <= base  # ONNX for every install
    assert pins["torch"] == "2.13.0"


def _base_closure() -> list[str]:
    """The distributions ``pip install bertgraph`` (no extras) pulls in: pyproject.toml's base
    requirements and, transitively, theirs, as installed in this environment."""
    import importlib.metadata

    from packaging.requirements import Requirement

    base = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    wanted = [Requirement(r) for r in base]
    found: dict[str, str] = {}
    while wanted:
        requirement = wanted.pop()
        name = _name(requirement.name)
        if name in found or (requirement.marker is not None and not requirement.marker.evaluate({"extra": ""})):
            continue
        found[name] = requirement.name
        wanted += [Requirement(r) for r in importlib.metadata.distribution(requirement.name).requires or []]
    return sorted(found.values())


def _link_distribution(name: str, env_dir: Path) -> None:
    """The installed files of distribution ``name`` (its RECORD, dist-info included), hard-linked into
    ``env_dir``'s site-packages (copied where the two are on different file systems)."""
    import importlib.metadata
    import os
    import sysconfig

    dist = importlib.metadata.distribution(name)
    site = Path(sysconfig.get_path("purelib", vars={"base": str(env_dir), "platbase": str(env_dir)}))
    here = Path(str(dist.locate_file("")))
    for entry in dist.files or []:
        source = here / entry
        if ".." in entry.parts or not source.is_file():
            continue  # scripts outside site-packages, bytecode RECORD lists but nothing wrote
        target = site / entry
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(source, target)
        except OSError:
            shutil.copy2(source, target)


@pytest.mark.slow
@pytest.mark.onnx
def test_base_install_exports_and_verifies_onnx(tmp_path: Path) -> None:
    source = tmp_path / "source"  # a copy: pip builds in the source tree
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(".*", "build", "*.egg-info", "node_modules", "outputs", "__pycache__"),
    )
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    # What the base requirements need, as this run has them installed, is linked in (what pip would
    # unpack from its cache, in seconds rather than a minute); pip still resolves every requirement
    # against the pins, and a requirement pyproject.toml forgot is not linked, so the export fails.
    for name in _base_closure():
        _link_distribution(name, env_dir)
    install = [str(python), "-m", "pip", "install", "-q", "-c", str(ROOT / "constraints.txt")]
    done = subprocess.run([*install, "torch==2.13.0", str(source)], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    listed = subprocess.run([str(python), "-m", "pip", "list"], capture_output=True, text=True).stdout.lower()
    assert "pytest" not in listed and "hypothesis" not in listed  # no extras came along

    target = tmp_path / "m.onnx"
    run = subprocess.run(
        [str(env_dir / "bin" / "bertgraph"), "onnx", "bert-tiny", "-o", str(target)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr
    assert "full_check passed" in run.stderr and "parity" in run.stderr
    assert target.stat().st_size > 1_000_000
    # The install is separate from this one: it imports its own copy of everything the export needs.
    where = subprocess.run(
        [str(python), "-c", "import bertgraph, onnx, onnx_ir, onnxscript, onnxruntime; print(bertgraph.__file__)"],
        capture_output=True,
        text=True,
        cwd=tmp_path,  # not this source tree
    )
    assert where.returncode == 0 and where.stdout.startswith(str(env_dir)), where.stdout + where.stderr
    assert sys.prefix != str(env_dir)
