"""A :class:`ModelSpec` → an ``nn.Module``: the only place that imports transformers model classes.

Models are built on the meta device unless real weights are asked for; weights load
from safetensors only (a pickle needs an explicit opt-in) and never run remote code.
"""

from __future__ import annotations

import importlib
import pickle
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bertgraph.errors import CheckpointError, ConfigError, first_line
from bertgraph.model.checkpoint import check_checkpoint, read_checkpoint
from bertgraph.model.families.record import ENCODER_ONLY
from bertgraph.model.spec import ModelSpec, config_kwargs, zero_divisors
from bertgraph.model.stored import stored_shapes

if TYPE_CHECKING:
    import torch


def build_model(
    spec: ModelSpec, *, weights: bool = False, seed: int = 0, fake: bool = False, dtype: str = "float32"
) -> torch.nn.Module:
    """Instantiate the spec's model in eval mode.

    Parameters:
        weights: load real weights from the spec's checkpoint. Without a checkpoint the
            model gets seeded random weights on the CPU. ``False`` builds on the meta
            device: no memory for weights, so any size works.
        seed: the seed for random initialisation (heads a checkpoint lacks, or no checkpoint).
        fake: (without ``weights``) build with fake CPU tensors instead of meta ones: no
            memory either, but exporters treat the model exactly as a CPU model (a
            meta-device model takes other paths in the ONNX exporter).
        dtype: (with ``fake``) the floating dtype of the parameters, as a name (``float16``).

    Raises:
        ConfigError: a config transformers rejects (an unknown activation, say).
        CheckpointError: a pickled checkpoint without ``allow_pickle``, or tensors that do
            not fit the config.
    """
    import torch

    model_class = model_class_of(spec)
    checkpoint = spec.weights_file()
    if weights:
        refuse_pickle(spec)
    # The config is the only input here: whatever transformers refuses in it is the user's to fix.
    config = make_config(spec, model_class)
    try:
        with torch.device("meta"):
            meta_model = model_class(config)
    except Exception as error:
        raise ConfigError(
            f"{spec.config_path or spec.name}: transformers cannot build {spec.model_class} from this config: "
            f"{first_line(error)}{zero_divisors(spec.config, error)}"
        ) from error
    if spec.weights is not None or spec.checkpoint is not None:
        _check_stored(spec, meta_model)
    if not weights:
        return _fake_model(model_class, config, getattr(torch, dtype)) if fake else _in_dtype(meta_model, spec)
    torch.manual_seed(seed)
    if checkpoint is None:
        return _in_dtype(model_class(make_config(spec, model_class)), spec)
    return _in_dtype(_load_pretrained(model_class, make_config(spec, model_class), checkpoint), spec)


def _check_stored(spec: ModelSpec, meta_model: Any) -> None:
    """Every tensor the checkpoint stores for the model has the shape the config gives it (and in a
    file that may be loaded, a floating dtype where the model holds floats). Headers without the
    file (a hub model) are held to shapes alone: a quantized weight has shapes of its own."""
    state = meta_model.state_dict()
    expected = {name: list(t.shape) for name, t in state.items()}
    prefix = spec.family.backbone(spec.head) or spec.family.prefix
    if spec.weights is not None:
        entries = read_checkpoint(spec.weights)
        floating = frozenset(name for name, t in state.items() if t.is_floating_point())
        shapes = {name: entry.shape for name, entry in entries.items()}
        dtypes = {name: entry.dtype for name, entry in entries.items()}
        check_checkpoint(expected, shapes, spec.weights, prefix, floating, dtypes)
    elif spec.checkpoint is not None:
        check_checkpoint(expected, stored_shapes(spec.checkpoint), spec.checkpoint.source, prefix)


def _in_dtype(model: Any, spec: ModelSpec) -> Any:
    """The model in eval mode, converted to the spec's dtype when it names one (as ``model.to(torch.bfloat16)``)."""
    import torch

    return (model.to(getattr(torch, spec.dtype)) if spec.dtype else model).eval()


def model_class_of(spec: ModelSpec) -> Any:
    """The transformers class of the spec's head, from the family's modeling module.

    Importing ``transformers.models.bert.modeling_bert`` directly skips the lazy
    ``transformers`` namespace and its auto classes.
    """
    variant = spec.family.variants[spec.model_type]
    module = importlib.import_module(variant.module)
    return getattr(module, spec.model_class)


def refuse_pickle(spec: ModelSpec) -> None:
    """A command that loads weights refuses a pickled-only checkpoint before any work (unless allowed)."""
    if spec.weights is None and spec.pickle_weights is not None and not spec.allow_pickle:
        raise CheckpointError(
            f"{spec.pickle_weights} is a pickled checkpoint, which can run code when loaded; "
            "convert it to model.safetensors or pass --allow-pickle if you trust it"
        )


def make_config(spec: ModelSpec, model_class: Any) -> Any:
    """A fresh config object for ``model_class`` (some classes change the config they are given).

    Decoders and encoder-decoders are built without a key/value cache: a cache in the
    outputs cannot be exported and is not part of the architecture.
    """
    from transformers.activations import ACT2FN

    origin = spec.config_path or spec.name
    activation = spec.family.activation
    act = spec.config.get(activation) if activation else None
    if act is not None and act not in ACT2FN:
        raise ConfigError(
            f"{origin}: {activation} {act!r} is not an activation transformers knows "
            f"(e.g. {', '.join(sorted(ACT2FN)[:5])})"
        )
    kwargs = config_kwargs(spec.config)
    if spec.family.structure != ENCODER_ONLY:
        kwargs["use_cache"] = False
    if spec.attention is not None:
        kwargs["attn_implementation"] = spec.attention
    try:
        config = config_class_of(spec, model_class)(**kwargs)
    except Exception as error:
        raise ConfigError(
            f"{origin}: transformers cannot build {spec.model_class} from this config: {first_line(error)}"
            + zero_divisors(spec.config, error)
        ) from error
    if kwargs.get("use_cache") is False:
        _cache_off(config)
    return config


def config_class_of(spec: ModelSpec, model_class: Any) -> Any:
    """The config class transformers makes a config of the spec's type with: the type's own (AutoConfig's),
    which for a type read off transformers need not be its model class's (EXAONE's LlamaModel, ExaoneConfig)."""
    if spec.family.inferred:
        from bertgraph.model.families.generic import config_class

        return config_class(spec.model_type)
    return model_class.config_class


def _cache_off(config: Any) -> None:
    """``use_cache`` off in every sub-config too: a config class may turn it back on in one it makes
    (T5Gemma's decoder), and that part's forward then returns a cache export cannot flatten."""
    for name in getattr(config, "sub_configs", None) or ():
        sub = getattr(config, name, None)
        if sub is not None and hasattr(sub, "use_cache"):
            sub.use_cache = False
            _cache_off(sub)


def _fake_model(model_class: Any, config: Any, dtype: Any) -> Any:
    """Built in ``dtype`` as ``from_pretrained`` does (the default dtype), since fake parameters cannot be converted."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with FakeTensorMode(allow_non_fake_inputs=True):
            return model_class(config).eval()
    finally:
        torch.set_default_dtype(default)


def _load_pretrained(model_class: Any, config: Any, checkpoint: Path) -> Any:
    from transformers.utils import logging as hf_logging

    use_safetensors = checkpoint.name.startswith("model.safetensors")
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # missing head weights are expected; we report them ourselves
    hf_logging.disable_progress_bar()  # a "Loading weights" bar is noise on our stderr
    try:
        model = model_class.from_pretrained(
            str(checkpoint.parent),
            config=config,
            local_files_only=True,
            use_safetensors=use_safetensors,
            trust_remote_code=False,
        )
    except (OSError, ValueError, RuntimeError, pickle.UnpicklingError) as error:
        if isinstance(error, pickle.UnpicklingError) and "Weights only load failed" in str(error):
            raise CheckpointError(_unsafe_pickle(checkpoint, str(error))) from error
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise CheckpointError(f"cannot load weights from {checkpoint}: {first}") from error
    finally:
        hf_logging.set_verbosity(verbosity)
        hf_logging.enable_progress_bar()
    return model.eval()


def _unsafe_pickle(checkpoint: Path, message: str) -> str:
    """What a pickle holding more than tensors is, and what to do, in place of torch's advice to run it."""
    found = re.search(r"Unsupported global: GLOBAL ([\w.]+)", message)
    what = f" (it names {found[1]})" if found else ""
    return (
        f"cannot load weights from {checkpoint}: the pickle holds objects other than tensors{what}, and loading "
        "them would run their code; bertgraph loads only tensors even with --allow-pickle: save the weights "
        "as model.safetensors with a tool you trust, or draw the model without them (give its config.json)"
    )


def example_inputs(
    spec: ModelSpec,
    device: str | torch.device = "meta",
    shape: tuple[int, ...] | None = None,
) -> dict[str, torch.Tensor]:
    """The example inputs of the spec's head (:attr:`ModelSpec.input_names`), for tracing.

    ``shape`` gives the size of each of :attr:`ModelSpec.dim_names`; without it, the
    spec's example size with every dimension at least 2: torch.export specialises a size-1
    dimension to a constant. Token ids are zeros and masks ones.
    """
    import torch

    if shape is None:
        shape = tuple(max(2, size) for size in spec.example_shape)
    sizes = dict(zip(spec.dim_names, shape))
    inputs = {}
    for name, dims in spec.input_dims.items():
        fill = torch.ones if name.endswith("attention_mask") else torch.zeros
        inputs[name] = fill(tuple(sizes[dim] for dim in dims), dtype=torch.long, device=device)
    return inputs


class _SortedIterationSet(set):
    """A set that iterates in sorted order. Modeling code that loops over ``set(...)``
    (ModernBERT's rotary embeddings per layer type) then runs its ops in one order whatever
    Python's string hashing is, so a trace, and every file made from it, is the same in every
    process."""

    def __iter__(self) -> Any:
        items = list(set.__iter__(self))
        try:
            return iter(sorted(items))
        except TypeError:  # items that do not compare keep the set's own order
            return iter(items)


@contextmanager
def ordered_sets(model: Any) -> Iterator[None]:
    """While tracing ``model``, ``set`` in its transformers modules iterates sorted (the builtin is
    shadowed in those modules' globals only, and put back after)."""
    import sys

    names = {type(module).__module__ for module in model.modules()}
    found = [sys.modules[name] for name in sorted(names) if name.startswith("transformers.") and name in sys.modules]
    patched = [module for module in found if "set" not in vars(module)]
    for module in patched:
        module.set = _SortedIterationSet  # type: ignore[attr-defined]
    try:
        yield
    finally:
        for module in patched:
            vars(module).pop("set", None)
