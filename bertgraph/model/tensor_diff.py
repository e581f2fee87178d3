"""Two checkpoints compared tensor by tensor, from their safetensors files, without torch.

Each file's header says where every tensor's bytes lie (:mod:`bertgraph.model.checkpoint`
validates it); the bytes of each tensor both checkpoints hold with one shape and dtype are
streamed through a SHA-256 hash in a fixed buffer, never loaded whole, so two 500 MB
checkpoints are compared in a few megabytes. The two checkpoints are read side by side, one
thread each (hashlib and file reads release the GIL). Names are compared without the family's
base-model prefix, so a fine-tuned ``BertForSequenceClassification`` (``bert.embeddings…``,
``classifier…``) lines up with the ``BertModel`` it started from (``embeddings…``).
"""

from __future__ import annotations

import hashlib
import os
import struct
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

from bertgraph.errors import CheckpointError
from bertgraph.model.checkpoint import read_header, read_index

BUFFER_BYTES = 4 * 1024 * 1024  # per checkpoint: large reads are fast, and two of them are a small peak


class Located(NamedTuple):
    """Where one tensor's bytes lie: the file and the byte range in it (from the file's start)."""

    file: Path
    start: int
    end: int
    dtype: str
    shape: list[int]


def locate(path: Path) -> dict[str, Located]:
    """Every tensor of a safetensors file, or of the shards an ``index.json`` names, with its bytes' place."""
    if path.name.endswith(".index.json"):
        weight_map = read_index(path)
        shards = sorted(set(weight_map.values()))
        files = [path.parent / shard for shard in shards]
    else:
        weight_map, files = {}, [path]
    found: dict[str, Located] = {}
    for file in files:
        entries = read_header(file)  # validated: offsets tile the data area up to the file's end
        with file.open("rb") as handle:
            (length,) = struct.unpack("<Q", handle.read(8))
        for name, entry in entries.items():
            if weight_map and weight_map.get(name) != file.name:
                continue  # a shard may hold a tensor the index gives to another shard: the index decides
            found[name] = Located(file, 8 + length + entry.begin, 8 + length + entry.end, entry.dtype, entry.shape)
    absent = sorted(set(weight_map) - set(found))
    if absent:
        raise CheckpointError(
            f"{path} lists tensor {absent[0]!r}, which its shard does not hold; save the checkpoint again"
        )
    return found


def digests(tensors: Mapping[str, Located], names: Iterable[str], buffer_bytes: int = BUFFER_BYTES) -> dict[str, str]:
    """SHA-256 of the bytes of each named tensor, read file by file in offset order through one
    buffer of ``buffer_bytes``."""
    buffer = bytearray(max(1, buffer_bytes))
    view = memoryview(buffer)
    wanted = sorted(names, key=lambda name: (str(tensors[name].file), tensors[name].start))
    found: dict[str, str] = {}
    handle = None
    try:
        for name in wanted:
            where = tensors[name]
            if handle is None or handle.name != str(where.file):
                if handle is not None:
                    handle.close()
                handle = open(where.file, "rb")  # noqa: SIM115 (one handle per file, closed below)
            handle.seek(where.start)
            digest = hashlib.sha256()
            left = where.end - where.start
            while left:
                read = handle.readinto(view[: min(left, len(buffer))])
                if not read:
                    raise CheckpointError(f"{where.file} ends inside tensor {name!r}; save the checkpoint again")
                digest.update(view[:read])
                left -= read
            found[name] = digest.hexdigest()
    except OSError as error:
        raise CheckpointError(f"cannot read {error.filename or 'a checkpoint'}: {error.strerror or error}") from error
    finally:
        if handle is not None:
            handle.close()
    return found


def _keys(tensors: Mapping[str, Located], prefix: str) -> dict[str, str]:
    """Name without the base-model prefix → name (the first when two names meet)."""
    keys: dict[str, str] = {}
    for name in sorted(tensors):
        keys.setdefault(name[len(prefix) + 1 :] if prefix and name.startswith(prefix + ".") else name, name)
    return keys


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def compare_checkpoints(
    a: Path, b: Path, prefixes: tuple[str, str] = ("", ""), buffer_bytes: int = BUFFER_BYTES
) -> dict[str, Any]:
    """What changed from checkpoint ``a`` to ``b``: ``{"changed", "reshaped", "added", "removed", "same"}``.

    ``changed``: tensors of one shape whose bytes differ (or whose dtype does): ``{"tensor", "shape",
    "dtypes"}``; ``reshaped``: ``{"tensor", "shapes"}``; ``added`` / ``removed``: ``{"tensor", "shape",
    "dtype"}``; ``same``: how many tensors are byte for byte equal. A tensor is named as ``a`` names it
    (``b`` for an added one). ``prefixes``: each model's base-model prefix (``bert``), left out when
    names are matched.
    """
    left, right = locate(a), locate(b)
    keys_a, keys_b = _keys(left, prefixes[0]), _keys(right, prefixes[1])
    common = [key for key in keys_a if key in keys_b]
    reshaped, candidates, changed = [], [], []
    for key in common:
        x, y = left[keys_a[key]], right[keys_b[key]]
        if x.shape != y.shape:
            reshaped.append({"tensor": keys_a[key], "shapes": [x.shape, y.shape]})
        elif x.dtype != y.dtype:
            changed.append({"tensor": keys_a[key], "shape": x.shape, "dtypes": [x.dtype, y.dtype]})
        else:
            candidates.append(key)
    if _same_file(a, b):
        hashes_a = hashes_b = dict.fromkeys((keys_a[key] for key in candidates), "")
    else:
        with ThreadPoolExecutor(max_workers=2) as pool:
            first = pool.submit(digests, left, [keys_a[key] for key in candidates], buffer_bytes)
            second = pool.submit(digests, right, [keys_b[key] for key in candidates], buffer_bytes)
            hashes_a, hashes_b = first.result(), second.result()
    same = 0
    for key in candidates:
        if hashes_a[keys_a[key]] == hashes_b[keys_b[key]]:
            same += 1
        else:
            x = left[keys_a[key]]
            changed.append({"tensor": keys_a[key], "shape": x.shape, "dtypes": [x.dtype, x.dtype]})

    def listed(
        tensors: Mapping[str, Located], keys: Mapping[str, str], others: Mapping[str, str]
    ) -> list[dict[str, Any]]:
        return [
            {"tensor": keys[key], "shape": tensors[keys[key]].shape, "dtype": tensors[keys[key]].dtype}
            for key in keys
            if key not in others
        ]

    return {
        "changed": sorted(changed, key=lambda entry: entry["tensor"]),
        "reshaped": reshaped,
        "added": listed(right, keys_b, keys_a),
        "removed": listed(left, keys_a, keys_b),
        "same": same,
    }
