"""ONNX verification in-process, on a hand-made ONNX file and a matching PyTorch module.

The file computes ``input_ids × attention_mask`` as floats; the PyTorch side computes the
same, or something off by a chosen amount, so each check of ``bertgraph.onnx.verify`` is
seen to pass and to fail. Nothing is exported or traced; these tests also serve the
mutation run (docs/mutation.md).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnxruntime  # noqa: F401  (loaded once with the tests: the mutation run forks after collecting them)
import pytest
import torch
from onnx import TensorProto, helper

from bertgraph.errors import OnnxError
from bertgraph.model import ModelSpec, resolve
from bertgraph.onnx import verify

pytestmark = pytest.mark.onnx


def bert(head: str = "sequence-classification", **overrides: int) -> ModelSpec:
    return resolve("bert-tiny", head, overrides=overrides or None)


def small() -> ModelSpec:
    """bert-tiny with 8 tokens: the toy outputs stay below 8, where float32 resolves 1e-6."""
    return bert(vocab=8)


def family(family_dirs: dict[str, Path], model_type: str, head: str = "base") -> ModelSpec:
    return resolve(str(family_dirs[model_type]), head)


def write_model(path: Path, inputs: tuple[str, ...] = ("input_ids", "attention_mask", "token_type_ids")) -> Path:
    """An ONNX file whose output ``logits`` is float(input_ids) × float(attention_mask)."""
    graph = helper.make_graph(
        [
            helper.make_node("Cast", ["input_ids"], ["ids"], to=TensorProto.FLOAT),
            helper.make_node("Cast", ["attention_mask"], ["mask"], to=TensorProto.FLOAT),
            helper.make_node("Mul", ["ids", "mask"], ["logits"]),
        ],
        "toy",
        [helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "sequence"]) for name in inputs],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "sequence"])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


@pytest.fixture
def toy_file(tmp_path: Path) -> Path:
    return write_model(tmp_path / "toy.onnx")


def module(offset: float = 0.0, extra_dim: bool = False, fail: bool = False) -> Callable[..., object]:
    """The PyTorch side: the toy file's computation, ``offset`` added; or a model that fails."""

    class Toy(torch.nn.Module):
        def forward(
            self, input_ids: torch.Tensor, attention_mask: torch.Tensor, **rest: torch.Tensor
        ) -> tuple[torch.Tensor]:
            if fail:
                raise RuntimeError("index out of range in self\nmore detail")
            out = input_ids.double() * attention_mask.double() + offset
            return (out[..., None] if extra_dim else out,)

    return Toy()


def test_parity_checks_describe_their_size() -> None:
    check = verify.ParityCheck((3, 45), ("batch", "sequence"), 2, {})
    assert check.size_label() == "batch 3 × sequence 45 (2 rows padded)"
    assert (
        verify.ParityCheck((3, 45), ("batch", "sequence"), 1, {}).size_label() == "batch 3 × sequence 45 (1 row padded)"
    )
    assert verify.ParityCheck((1, 19), ("batch", "sequence"), 0, {}).size_label() == "batch 1 × sequence 19"


def test_tolerances_follow_the_dtype() -> None:
    assert verify.TOLERANCE == 1e-4
    assert verify.tolerance_for("float32") == 1e-4
    assert verify.tolerance_for("float16") == 3e-2
    assert verify.tolerance_for("float64") == 1e-8
    assert verify.tolerance_for("bfloat16") == 1e-4  # unknown: float32's
    import inspect

    assert inspect.signature(verify.verify_parity).parameters["tolerance"].default == 1e-4


def test_dimension_names(family_dirs: dict[str, Path]) -> None:
    assert verify.dim_names(bert()) == ("batch", "sequence")
    assert verify.dim_names(bert("multiple-choice")) == ("batch", "choices", "sequence")
    t5 = family(family_dirs, "t5")
    assert verify.dim_names(t5) == ("batch", "sequence", "decoder_sequence")
    assert verify.input_dims(t5)["decoder_input_ids"] == ("batch", "decoder_sequence")
    assert verify.input_dims(bert()) == {
        "input_ids": ("batch", "sequence"),
        "attention_mask": ("batch", "sequence"),
        "token_type_ids": ("batch", "sequence"),
    }


def test_sequence_limits_and_position_offsets(family_dirs: dict[str, Path]) -> None:
    assert (verify.sequence_limit(bert()), verify.position_offset(bert())) == (512, 0)
    roberta = family(family_dirs, "roberta")
    assert roberta.config["pad_token_id"] == 1
    assert (verify.position_offset(roberta), verify.sequence_limit(roberta)) == (2, 64)
    mpnet = family(family_dirs, "mpnet")
    assert verify.position_offset(mpnet) == int(mpnet.config.get("pad_token_id", 1) or 0) + 1
    roberta.config["pad_token_id"] = None
    assert verify.position_offset(roberta) == 1
    del roberta.config["pad_token_id"]
    assert verify.position_offset(roberta) == 2
    assert verify.sequence_limit(family(family_dirs, "t5")) == verify.MAX_SEQUENCE == 4096
    short = family(family_dirs, "roberta")
    short.config["max_position_embeddings"] = 3
    assert verify.sequence_limit(short) == 2


def test_parity_sizes(family_dirs: dict[str, Path]) -> None:
    assert verify.parity_sizes(bert()) == [((1, 19), 0), ((3, 45), 2)]
    assert verify.parity_sizes(bert("multiple-choice")) == [((1, 3, 19), 0), ((3, 2, 45), 2)]
    assert verify.parity_sizes(family(family_dirs, "t5")) == [((1, 19, 11), 0), ((3, 45, 29), 2)]
    import dataclasses

    example = dataclasses.replace(bert(), batch=3, seq_len=45)  # the second size is the example: one shorter
    assert verify.parity_sizes(example) == [((1, 19), 0), ((3, 44), 2)]
    short = family(family_dirs, "roberta")
    short.config["max_position_embeddings"] = 22  # 20 positions
    assert verify.parity_sizes(short) == [((1, 19), 0), ((3, 20), 2)]
    tiny = family(family_dirs, "roberta")
    tiny.config["max_position_embeddings"] = 3  # 1 position, but never fewer than 2
    assert verify.parity_sizes(tiny) == [((1, 2), 0), ((3, 2), 2)]
    decoder = family(family_dirs, "bart")
    decoder.config["max_position_embeddings"] = 12
    assert verify.parity_sizes(decoder) == [((1, 12, 11), 0), ((3, 12, 12), 2)]


def test_parity_sizes_step_around_the_example_and_each_other() -> None:
    import dataclasses

    spec = dataclasses.replace(bert(), batch=1, seq_len=19)  # example (2, 19) after max(2, ·): no clash
    assert verify.parity_sizes(spec) == [((1, 19), 0), ((3, 45), 2)]
    one = resolve("bert-tiny", "sequence-classification")
    one.config["max_position_embeddings"] = 2
    assert verify.parity_sizes(one) == [((1, 2), 0), ((3, 2), 2)]
    # The example (2, 45) is not the second size (3, 45): no step back.
    assert verify.parity_sizes(dataclasses.replace(bert(), batch=2, seq_len=45)) == [((1, 19), 0), ((3, 45), 2)]
    # Two positions and the example at (3, 2): the second size steps down to one token, which has nothing to pad.
    cramped = dataclasses.replace(bert(), batch=3, seq_len=2)
    cramped.config["max_position_embeddings"] = 2
    assert verify.parity_sizes(cramped) == [((1, 2), 0), ((3, 1), 0)]


def test_padding_masks() -> None:
    mask = verify._padding_mask((3, 45), 2)
    assert mask.dtype == np.int64
    assert mask.sum(axis=-1).tolist() == [45, 34, 23]
    assert mask[1, 33] == 1 and mask[1, 34] == 0 and mask[2, 22] == 1 and mask[2, 23] == 0
    assert verify._padding_mask((3, 45), 0).sum() == 135
    assert verify._padding_mask((2, 8), 5).sum(axis=-1).tolist() == [8, 6]  # the first row is never padded
    assert verify._padding_mask((2, 3), 1).sum(axis=-1).tolist() == [3, 2]
    assert verify._padding_mask((3, 2, 4), 2).sum(axis=-1).tolist() == [[4, 4], [3, 3], [2, 2]]
    assert verify._padding_mask((2, 1), 1).tolist() == [[1], [1]]  # a row keeps one token
    assert verify._padding_mask((3, 2), 2).sum(axis=-1).tolist() == [2, 1, 1]  # one token, not two


def test_random_inputs_are_seeded_and_within_the_vocabulary() -> None:
    feeds = verify.random_inputs(bert(), (3, 45), 2, seed=0)
    assert sorted(feeds) == ["attention_mask", "input_ids", "token_type_ids"]
    assert all(array.shape == (3, 45) and array.dtype == np.int64 for array in feeds.values())
    assert feeds["attention_mask"].tolist() == verify._padding_mask((3, 45), 2).tolist()
    assert feeds["input_ids"].min() >= 0 and feeds["input_ids"].max() < 30522
    assert feeds["input_ids"].max() > 30522 // 2
    assert set(np.unique(feeds["token_type_ids"]).tolist()) == {0, 1}
    again = verify.random_inputs(bert(), (3, 45), 2, seed=0)
    assert all((again[name] == feeds[name]).all() for name in feeds)
    other = verify.random_inputs(bert(), (3, 45), 2, seed=1)
    assert (other["input_ids"] != feeds["input_ids"]).any()
    rng = np.random.default_rng(0)
    assert (feeds["token_type_ids"] == rng.integers(0, 2, size=(3, 45), dtype=np.int64)).all() or (
        feeds["input_ids"] == np.random.default_rng(0).integers(0, 30522, size=(3, 45), dtype=np.int64)
    ).all()
    single = bert()
    single.config["type_vocab_size"] = 1
    assert verify.random_inputs(single, (1, 5), 0, seed=0)["token_type_ids"].tolist() == [[0] * 5]


def test_an_encoder_decoder_classifier_finds_one_end_token_per_row(family_dirs: dict[str, Path]) -> None:
    spec = family(family_dirs, "bart", "sequence-classification")
    spec.config["eos_token_id"] = 2
    eos = verify._eos_token(spec)
    assert eos == 2
    feeds = verify.random_inputs(spec, (3, 19, 11), 2, seed=0)
    ids = feeds["input_ids"]
    kept = feeds["attention_mask"].sum(axis=-1)
    assert ((ids == eos).sum(axis=-1) == 1).all()
    assert [ids[row, kept[row] - 1] for row in range(3)] == [eos] * 3
    # An end token drawn inside a row becomes the next id (mod the vocabulary); only the last kept one stays.
    drawn = np.random.default_rng(0).integers(0, int(spec.config["vocab_size"]), size=(3, 19), dtype=np.int64)
    assert (drawn == eos).any()
    expected = np.where(drawn == eos, (eos + 1) % int(spec.config["vocab_size"]), drawn)
    for row in range(3):
        expected[row, kept[row] - 1] = eos
    assert ids.tolist() == expected.tolist()
    base = family(family_dirs, "bart")
    base.config["eos_token_id"] = 2
    assert verify._eos_token(base) is None  # not a classifier
    assert verify._eos_token(bert()) is None  # not an encoder-decoder
    spec.config["eos_token_id"] = [5, 6]
    assert verify._eos_token(spec) == 5
    spec.config["eos_token_id"] = True
    assert verify._eos_token(spec) is None
    spec.config["eos_token_id"] = []
    assert verify._eos_token(spec) is None
    spec.config["eos_token_id"] = None
    assert verify._eos_token(spec) is None


def test_the_checker_accepts_a_sound_file_and_rejects_a_broken_one(toy_file: Path, tmp_path: Path) -> None:
    verify.check_file(toy_file)
    model = onnx.load(str(toy_file))
    model.graph.node[2].input[1] = "nowhere"
    broken = tmp_path / "broken.onnx"
    onnx.save(model, str(broken))
    with pytest.raises(OnnxError, match=r"^onnx.checker rejected the exported model: .*nowhere"):
        verify.check_file(broken)
    model = onnx.load(str(toy_file))
    model.graph.node[2].op_type = "Concat"  # type inference fails: Concat needs an axis
    mistyped = tmp_path / "mistyped.onnx"
    onnx.save(model, str(mistyped))
    with pytest.raises(OnnxError, match="onnx.checker rejected the exported model"):
        verify.check_file(mistyped)


def test_reference_outputs_run_pytorch_at_both_sizes() -> None:
    said: list[str] = []
    references = verify.reference_outputs(module(), bert(), said.append)
    assert said == [
        "running PyTorch at batch 1 × sequence 19",
        "running PyTorch at batch 3 × sequence 45 (2 rows padded)",
    ]
    assert [r.check.shape for r in references] == [(1, 19), (3, 45)]
    assert [r.check.padded_rows for r in references] == [0, 2]
    assert [r.check.dims for r in references] == [("batch", "sequence")] * 2
    assert all(r.kept is None and r.check.max_abs_diff == {} for r in references)
    first = verify.random_inputs(bert(), (1, 19), 0, seed=verify.SEED)
    assert (references[0].feeds["input_ids"] == first["input_ids"]).all()
    second = verify.random_inputs(bert(), (3, 45), 2, seed=verify.SEED + 1)
    assert (references[1].feeds["input_ids"] == second["input_ids"]).all()
    assert references[1].outputs[0].dtype == np.float32
    assert (
        references[1].outputs[0].tolist()
        == (second["input_ids"] * second["attention_mask"]).astype(np.float32).tolist()
    )
    assert verify.reference_outputs(module(), bert())  # no progress: quiet


def test_a_model_that_cannot_run_is_reported() -> None:
    with pytest.raises(OnnxError) as caught:
        verify.reference_outputs(module(fail=True), bert())
    assert str(caught.value) == (
        "PyTorch cannot run BertForSequenceClassification at batch 1 × sequence 19 (index out of range in self), "
        "so the file cannot be verified; check the config's sizes, or export with --no-verify"
    )


def test_padded_positions_are_left_out_where_undefined(family_dirs: dict[str, Path]) -> None:
    spec = family(family_dirs, "modernbert")
    references = verify.reference_outputs(module(), spec)
    assert references[0].kept is not None and references[0].kept.dtype == bool
    assert references[1].kept.tolist() == references[1].feeds["attention_mask"].astype(bool).tolist()  # type: ignore[union-attr]
    assert "modernbert" in verify.UNDEFINED_AT_PADDING


def test_the_file_agrees_with_pytorch(toy_file: Path) -> None:
    said: list[str] = []
    checks = verify.verify_parity(toy_file, verify.reference_outputs(module(), small()), progress=said.append)
    assert [c.max_abs_diff for c in checks] == [{"logits": 0.0}, {"logits": 0.0}]
    assert [c.shape for c in checks] == [(1, 19), (3, 45)]
    assert [c.padded_rows for c in checks] == [0, 2]
    assert said == [
        "verifying with onnxruntime at batch 1 × sequence 19",
        "verifying with onnxruntime at batch 3 × sequence 45 (2 rows padded)",
    ]
    assert verify.verify_parity(toy_file, verify.reference_outputs(module(), small()))  # quiet without progress


def test_a_difference_within_the_tolerance_passes_and_is_measured(toy_file: Path) -> None:
    checks = verify.verify_parity(toy_file, verify.reference_outputs(module(offset=5e-5), small()))
    for check in checks:
        assert check.max_abs_diff["logits"] == pytest.approx(5e-5, rel=0.05)


def test_a_difference_beyond_the_default_tolerance_fails(toy_file: Path) -> None:
    references = verify.reference_outputs(module(offset=2e-4), small())
    with pytest.raises(OnnxError) as caught:
        verify.verify_parity(toy_file, references)
    assert str(caught.value) == (
        "onnxruntime and PyTorch disagree on logits at batch 1 × sequence 19: max abs difference 2.00e-04 > 0.0001; "
        "the file was not written"
    )
    assert verify.verify_parity(toy_file, references, tolerance=3e-4)  # a looser tolerance lets it pass
    with pytest.raises(OnnxError):
        verify.verify_parity(toy_file, verify.reference_outputs(module(offset=1e-6), small()), tolerance=0.0)


def test_a_value_that_is_not_a_number_fails(toy_file: Path) -> None:
    references = verify.reference_outputs(module(offset=float("nan")), small())
    with pytest.raises(OnnxError, match="max abs difference inf > 1"):
        verify.verify_parity(toy_file, references, tolerance=1.0)


def test_another_shape_fails(toy_file: Path) -> None:
    references = verify.reference_outputs(module(extra_dim=True), small())
    with pytest.raises(OnnxError) as caught:
        verify.verify_parity(toy_file, references)
    assert str(caught.value) == (
        "onnxruntime gives logits the shape [1, 19] at batch 1 × sequence 19, PyTorch [1, 19, 1]; "
        "the file was not written"
    )


def test_only_kept_positions_are_compared(toy_file: Path) -> None:
    references = verify.reference_outputs(module(), small())
    padded = references[1]
    outputs = padded.outputs[0].copy()
    outputs[~padded.feeds["attention_mask"].astype(bool)] += 1.0  # differs only where padded
    shifted = verify.Reference(padded.check, padded.feeds, (outputs,), None)
    with pytest.raises(OnnxError, match="max abs difference 1.00e"):
        verify.verify_parity(toy_file, [shifted])
    kept = verify.Reference(padded.check, padded.feeds, (outputs,), padded.feeds["attention_mask"].astype(bool))
    assert verify.verify_parity(toy_file, [kept])[0].max_abs_diff == {"logits": 0.0}
    other = verify.Reference(padded.check, padded.feeds, (outputs,), np.ones((2, 2), dtype=bool))  # does not fit
    with pytest.raises(OnnxError):
        verify.verify_parity(toy_file, [other])


def test_an_empty_output_differs_by_nothing() -> None:
    check = verify.ParityCheck((0,), ("batch",), 0, {})
    assert verify._compare("x", np.zeros((0, 3)), np.zeros((0, 3)), check, 0.0, None) == 0.0


def test_a_file_onnxruntime_cannot_load_or_run(tmp_path: Path, toy_file: Path) -> None:
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"not a model")
    references = verify.reference_outputs(module(), small())
    with pytest.raises(OnnxError, match=r"^onnxruntime cannot load the exported model: ") as loading:
        verify.verify_parity(garbage, references)
    assert str(loading.value).rsplit(": ", 1)[-1] not in ("", "None")  # onnxruntime's own reason
    fewer = write_model(tmp_path / "fewer.onnx", ("input_ids", "attention_mask", "token_type_ids", "position_ids"))
    with pytest.raises(OnnxError, match=r"^onnxruntime failed at batch 1 × sequence 19: ") as running:
        verify.verify_parity(fewer, references)
    assert "position_ids" in str(running.value)  # onnxruntime's own reason: the input it was not given


def test_each_size_runs_in_onnxruntime_on_a_thread_of_its_own(toy_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The two sizes run at once; each result is still compared with its own reference."""
    import threading

    real_open = verify.open_session
    runs: list[tuple[int, tuple[int, ...]]] = []
    both_started = threading.Barrier(2, timeout=20)  # only two concurrent runs get past it

    class Watched:
        def __init__(self, path: Path) -> None:
            self.session = real_open(path)

        def get_outputs(self) -> list[object]:
            return self.session.get_outputs()

        def run(self, names: list[str], feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
            runs.append((threading.get_ident(), feeds["input_ids"].shape))
            both_started.wait()
            return self.session.run(names, feeds)

    monkeypatch.setattr(verify, "open_session", Watched)
    checks = verify.verify_parity(toy_file, verify.reference_outputs(module(offset=3e-6), small()))
    assert sorted(shape for _, shape in runs) == [(1, 19), (3, 45)]
    assert len({thread for thread, _ in runs} | {threading.get_ident()}) == 3
    assert [c.shape for c in checks] == [(1, 19), (3, 45)]
    assert [c.max_abs_diff["logits"] for c in checks] == pytest.approx([3e-6, 3e-6], rel=0.1)


def test_verification_sessions_run_the_file_as_written_on_one_thread(toy_file: Path) -> None:
    import onnxruntime as ort

    session = verify.open_session(toy_file)
    options = session.get_session_options()
    assert options.graph_optimization_level == ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    assert options.execution_order == ort.ExecutionOrder.PRIORITY_BASED
    assert (options.intra_op_num_threads, options.inter_op_num_threads) == (verify.VERIFY_THREADS,) * 2 == (1, 1)
    assert options.log_severity_level == 3
    assert session.get_providers() == ["CPUExecutionProvider"]


def test_the_full_check_infers_types(tmp_path: Path, toy_file: Path) -> None:
    model = onnx.load(str(toy_file))
    model.graph.node[2].input[1] = "attention_mask"  # float × int64: only type inference sees it
    onnx.checker.check_model(model)  # the plain check passes
    mixed = tmp_path / "mixed.onnx"
    onnx.save(model, str(mixed))
    with pytest.raises(OnnxError, match="onnx.checker rejected the exported model"):
        verify.check_file(mixed)


def test_a_checker_error_after_a_signal_is_the_interruption(
    tmp_path: Path, toy_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import signal

    from bertgraph import interrupts

    model = onnx.load(str(toy_file))
    model.graph.node[2].input[1] = "nowhere"
    broken = tmp_path / "broken.onnx"
    onnx.save(model, str(broken))
    monkeypatch.setattr(interrupts, "_received", [signal.SIGINT])
    with pytest.raises(interrupts.Interrupted) as caught:
        verify.check_file(broken)
    assert isinstance(caught.value.__cause__, onnx.checker.ValidationError)
    monkeypatch.setattr(onnx.checker, "check_model", lambda *args, **kwargs: (_ for _ in ()).throw(OSError("native")))
    with pytest.raises(interrupts.Interrupted) as caught:
        verify.check_file(broken)
    assert isinstance(caught.value.__cause__, OSError)
    monkeypatch.setattr(interrupts, "_received", [])
    with pytest.raises(OSError, match="native"):
        verify.check_file(broken)
