"""The published bert-base-uncased figures of the tutorial bertgraph started from, exactly."""

from __future__ import annotations

import json

import pytest

from bertgraph.cli import main

BASE_TOTAL = 109_482_240
GROUPS = {"embeddings": 23_837_184, "encoder": 85_054_464, "pooler": 590_592}
SHARES = {"embeddings": "21.77%", "encoder": "77.69%", "pooler": "0.54%"}
CLASSIFICATION_TOTAL = 109_483_778


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_params_json_of_bert_base(capsys: pytest.CaptureFixture[str]) -> None:
    data = run_json(capsys, "params", "bert-base-uncased", "--format", "json")
    assert data["model"] == "bert-base-uncased"
    assert data["head"] == "base"
    assert data["total"] == BASE_TOTAL
    assert data["trainable"] == BASE_TOTAL
    assert data["groups"] == GROUPS
    assert len(data["parameters"]) == 199
    assert sum(p["numel"] for p in data["parameters"]) == BASE_TOTAL
    first = data["parameters"][0]
    assert first == {
        "name": "embeddings.word_embeddings.weight",
        "shape": [30522, 768],
        "numel": 23_440_896,
        "trainable": True,
    }


def test_group_shares_in_text_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["params", "bert-base-uncased"]) == 0
    out = capsys.readouterr().out
    for group, count in GROUPS.items():
        line = next(line for line in out.splitlines() if line.startswith(group + " "))
        assert f"{count:,}" in line and SHARES[group] in line
    assert "199 parameter tensors" in out


def test_classification_head_total(capsys: pytest.CaptureFixture[str]) -> None:
    data = run_json(capsys, "params", "bert-base-uncased", "--head", "sequence-classification", "--format", "json")
    assert data["total"] == CLASSIFICATION_TOTAL
    assert data["groups"]["classifier"] == 1_538
    assert data["groups"]["dropout"] == 0
    assert {k: data["groups"][k] for k in GROUPS} == GROUPS


def test_diff_base_to_classification(capsys: pytest.CaptureFixture[str]) -> None:
    data = run_json(
        capsys, "diff", "bert-base-uncased", "--head", "base", "--head", "sequence-classification", "--format", "json"
    )
    assert data["delta"] == 1_538
    assert [(m["module"], m["type"], m["sizes"], m["params"]) for m in data["added"]] == [
        ("dropout", "Dropout", "p=0.1", 0),
        ("classifier", "Linear", "768 → 2", 1_538),
    ]
    assert data["removed"] == [] and data["changed"] == []
    assert [o["name"] for o in data["b"]["outputs"]] == ["logits"]


def test_diff_text_says_what_the_head_adds(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", "bert-base-uncased", "--head", "sequence-classification"]) == 0
    out = capsys.readouterr().out
    assert "+  classifier  Linear   768 → 2      +1,538" in out
    assert "net change: +1,538 parameters" in out


def test_summary_folds_layers_and_shows_shares(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["summary", "bert-base-uncased", "--head", "sequence-classification"]) == 0
    out = capsys.readouterr().out
    assert "(0-11): 12 × BertLayer" in out
    assert "85,054,464 (12 × 7,087,872)" in out
    assert "[batch, seq, 768]" in out and "[batch, 2]" in out
    embeddings = next(line for line in out.splitlines() if "embeddings: BertEmbeddings" in line)
    assert "23,837,184" in embeddings and "21.77%" in embeddings
    assert out.count("BertLayer") == 1  # folded: one row stands for twelve


def test_summary_json_rows_match_module(capsys: pytest.CaptureFixture[str]) -> None:
    data = run_json(capsys, "summary", "bert-base-uncased", "--format", "json", "--depth", "1")
    assert data["total"] == BASE_TOTAL
    rows = {row["path"]: row for row in data["rows"]}
    assert set(rows) == {"", "embeddings", "encoder", "pooler"}
    assert rows["encoder"]["params"] == GROUPS["encoder"]
    assert rows["pooler"]["shapes"] == [["batch", 768]]
    assert round(rows["embeddings"]["share"] * 100, 2) == 21.77
