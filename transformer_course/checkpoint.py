"""Saving and loading a trained model: weights, the kind and configuration that rebuild it, and its vocabularies.

Any model that registers itself with `register_model` (its class and its frozen config dataclass) can be saved:
the translator (`Transformer`, with its source and target vocabularies), `GPT` (chapter 14) and `BERT`
(chapter 15), with an optional vocabulary. The file records the model's kind; `load_checkpoint(path,
kind=tc.GPT)` refuses a checkpoint of another kind by name.

The file is written to a temporary name and renamed into place, so a crash mid-save never leaves a
half-written checkpoint behind; loading uses `torch.load(weights_only=True)`, which refuses to run
code hidden in a pickle.

The promise: a checkpoint that saves, loads; one that loads, translates. `save_checkpoint` therefore
refuses what its loader or the translator would refuse later: vocabularies whose sizes or padding ids
do not match the model (swapped source and target vocabularies, say), a target vocabulary without
<sos> and <eos>, and `extra` values that are not plain data.
"""

from __future__ import annotations

import os
import pickle
import tempfile
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .data import EOS, PAD, SOS, Vocab
from .model import Transformer, TransformerConfig

FORMAT = "transformer_course/2"  # /1: a Transformer only, without "kind"; still read
OLD_FORMATS = ("transformer_course/1",)
PLAIN = (str, int, float, bool, type(None))  # with lists, tuples and dicts of them: what weights_only loads

# kind -> (model class, its config class); GPT and BERT register themselves when their modules are imported.
MODELS: dict[str, tuple[type[nn.Module], type]] = {}


def register_model(model_class: type[nn.Module], config_class: type) -> None:
    """Let `save_checkpoint`/`load_checkpoint` handle `model_class`, built by `model_class.from_config(config)`."""
    MODELS[model_class.__name__] = (model_class, config_class)


register_model(Transformer, TransformerConfig)


@dataclass
class Checkpoint:
    """What `load_checkpoint` returns: the model (in eval mode) and what was saved with it.

    A translator has `src_vocab` and `tgt_vocab`; a language model (GPT, BERT) may have one `vocab`."""

    model: Any
    src_vocab: Vocab | None = None
    tgt_vocab: Vocab | None = None
    extra: dict = field(default_factory=dict)
    vocab: Vocab | None = None

    @property
    def kind(self) -> str:
        return type(self.model).__name__


def save_checkpoint(
    path: str | os.PathLike,
    model: nn.Module,
    src_vocab: Vocab | None = None,
    tgt_vocab: Vocab | None = None,
    extra: dict | None = None,
    vocab: Vocab | None = None,
) -> Path:
    """Write the model's kind, config and weights, its vocabularies and `extra` (plain data only), atomically.

    A Transformer needs its src_vocab and tgt_vocab (a checkpoint that loads must translate); a GPT or BERT
    takes an optional `vocab` instead. A `torch.compile`d model is saved as the model it wraps.
    """
    path = _path(path)
    if path.is_dir():
        raise ValueError(f"{path} is a folder: give a file name, such as {path / 'model.pt'}")
    model = getattr(model, "_orig_mod", model)  # torch.compile's wrapper holds the model as _orig_mod
    kind = _kind_of(model)
    config: Any = model.config  # a registered model's config dataclass: TransformerConfig, GPTConfig, BERTConfig
    if kind == "Transformer":
        check_vocabularies(config, src_vocab, tgt_vocab)
        if vocab is not None:
            raise TypeError("vocab is for language models: a Transformer takes src_vocab and tgt_vocab")
    else:
        if src_vocab is not None or tgt_vocab is not None:
            raise TypeError(f"src_vocab and tgt_vocab are a translator's: give a {kind} its vocab=... instead")
        _check_lm_vocab(vocab, config.vocab_size)
    extra = {} if extra is None else extra
    check_plain(extra, "extra")
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "format": FORMAT,
        "kind": kind,
        "config": asdict(config),
        "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
        "src_vocab": None if src_vocab is None else list(src_vocab.itos),
        "tgt_vocab": None if tgt_vocab is None else list(tgt_vocab.itos),
        "vocab": None if vocab is None else list(vocab.itos),
        "extra": dict(extra),
    }
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(payload, f)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def load_checkpoint(
    path: str | os.PathLike, device: torch.device | str | None = None, kind: type[nn.Module] | None = None
) -> Checkpoint:
    """Rebuild the model saved at `path` (in eval mode, on `device`) with its vocabularies.

    `kind` (e.g. `tc.GPT`): the model class expected; a checkpoint of another kind is refused by name.
    A missing file raises FileNotFoundError; an empty, truncated, foreign or damaged one a ValueError that
    says which.
    """
    _check_device(device)
    if kind is not None and (not isinstance(kind, type) or kind.__name__ not in MODELS):
        raise TypeError(f"kind must be one of the model classes {sorted(MODELS)}, got {kind!r}")
    path = _path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}")
    if path.stat().st_size == 0:
        raise ValueError(f"{path} is empty (0 bytes): not a checkpoint")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        # PyTorch's message suggests weights_only=False, which would run the code in the file: never say that.
        raise ValueError(
            f"{path} is not a readable checkpoint: it holds Python objects other than tensors and plain data, "
            "which loading could run as code; a transformer_course checkpoint never does"
        ) from e
    except Exception as e:  # truncated zip, random bytes, ...
        raise ValueError(f"{path} is not a readable checkpoint ({_describe(e)})") from e
    if not isinstance(payload, dict) or payload.get("format") not in (FORMAT, *OLD_FORMATS):
        raise ValueError(f"{path} is not a transformer_course checkpoint (expected format {FORMAT!r})")
    saved = payload.get("kind", "Transformer")  # format 1 held translators only
    if kind is not None and saved != kind.__name__:
        raise ValueError(f"{path} holds a {saved}, not a {kind.__name__}: load it as what it is")
    try:
        if saved not in MODELS:
            raise ValueError(f"unknown model kind {saved!r}, expected one of {sorted(MODELS)}")
        model_class, config_class = MODELS[saved]
        if payload["format"] == FORMAT:  # format 1 predates some fields: those get their defaults
            _check_config_fields(payload["config"], config_class)
        # Building a model draws its initial weights from the global random stream; they are overwritten at
        # once, so draw them from a fork: loading in the middle of a seeded experiment changes nothing after it.
        with torch.random.fork_rng(devices=[]):
            model: Any = model_class.from_config(config_class(**payload["config"]))  # type: ignore[attr-defined]
        model.load_state_dict(payload["state_dict"])
        not_float = [(name, t.dtype) for name, t in payload["state_dict"].items() if not t.is_floating_point()]
        if not_float:  # an integer tensor loads into float weights as whole numbers: mostly zeros, silently
            name, dtype = not_float[0]
            raise ValueError(f"{len(not_float)} tensors are not floating point, e.g. {name} is {dtype}")
        broken = [name for name, tensor in payload["state_dict"].items() if not torch.isfinite(tensor).all()]
        if broken:
            raise ValueError(f"{len(broken)} tensors hold NaN or infinite values, e.g. {broken[0]}")
        src_vocab = tgt_vocab = vocab = None
        if saved == "Transformer":
            src_vocab = _vocab(payload["src_vocab"], "src_vocab")
            tgt_vocab = _vocab(payload["tgt_vocab"], "tgt_vocab")
            check_vocabularies(model.config, src_vocab, tgt_vocab)
        elif payload.get("vocab") is not None:
            vocab = _vocab(payload["vocab"], "vocab")
            _check_lm_vocab(vocab, model.config.vocab_size)
        extra = payload.get("extra", {})
        check_plain(extra, "extra")
    except (KeyError, TypeError, RuntimeError, ValueError) as e:
        raise ValueError(f"{path} is a damaged checkpoint ({_describe(e)})") from e
    if device is not None:
        model.to(device)
    model.eval()
    return Checkpoint(model, src_vocab, tgt_vocab, extra, vocab)


def _path(path: object) -> Path:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
    return Path(path)


def _check_device(device: object) -> None:
    """None or a device this machine has, refused before the file is read rather than deep inside `.to()`."""
    if device is None:
        return
    try:
        parsed = torch.device(device)  # type: ignore[call-overload]
    except (RuntimeError, TypeError) as e:
        raise ValueError(f"device={device!r} is not a device PyTorch knows") from e
    if parsed.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"device={str(parsed)!r} but this machine has no CUDA GPU (torch.cuda.is_available() is False): "
            "load on device='cpu' or leave device out"
        )


def _check_config_fields(config: object, config_class: type) -> None:
    """The saved config names exactly the config class's fields: a missing one would silently take its default."""
    if not isinstance(config, dict):
        raise TypeError(f"config must be a dict, got {type(config).__name__}")
    expected = {f.name for f in fields(config_class)}
    missing, unknown = sorted(expected - set(config)), sorted(set(config) - expected)
    problems = ([f"lacks {', '.join(missing)}"] if missing else []) + (
        [f"has unknown fields {', '.join(map(str, unknown))}"] if unknown else []
    )
    if problems:
        raise ValueError(f"config {' and '.join(problems)}: not the fields of a {config_class.__name__}")


def _kind_of(model: nn.Module) -> str:
    """The registered kind of `model`, or a TypeError that lists the kinds a checkpoint can hold."""
    kind = type(model).__name__
    if kind not in MODELS or not isinstance(model, MODELS[kind][0]):
        raise TypeError(f"model must be one of {sorted(MODELS)} from transformer_course, got {kind}")
    return kind


def _check_lm_vocab(vocab: Vocab | None, vocab_size: int) -> None:
    """None, or a Vocab with one token per row of the model's embedding."""
    if vocab is None:
        return
    if not isinstance(vocab, Vocab):
        raise TypeError(f"vocab must be a transformer_course.data.Vocab, got {type(vocab).__name__}")
    if len(vocab) != vocab_size:
        raise ValueError(f"vocab has {len(vocab)} tokens but the model's vocab_size is {vocab_size}")


def _vocab(tokens: object, name: str) -> Vocab:
    if not isinstance(tokens, list) or not all(isinstance(token, str) for token in tokens):
        raise TypeError(f"{name} must be a list of str tokens")
    return Vocab(tokens)


def check_vocabularies(config: TransformerConfig, src_vocab: Vocab | None, tgt_vocab: Vocab | None) -> None:
    """Vocabularies a model with `config` can translate with: one id per row of its embeddings, its pad_id
    at <pad> on both sides, and <sos> and <eos> in the target vocabulary."""
    src_vocab, tgt_vocab = _is_vocab(src_vocab, "src_vocab"), _is_vocab(tgt_vocab, "tgt_vocab")
    vocabs = {"src_vocab": (src_vocab, config.src_vocab_size), "tgt_vocab": (tgt_vocab, config.tgt_vocab_size)}
    swapped = SOS in src_vocab and SOS not in tgt_vocab  # only a target vocabulary has <sos>
    hint = " (are src_vocab and tgt_vocab swapped?)" if swapped else ""
    for name, (vocab, size) in vocabs.items():
        if len(vocab) != size:
            raise ValueError(f"{name} has {len(vocab)} tokens but the model's {name}_size is {size}{hint}")
        if vocab.stoi.get(PAD) != config.pad_id:
            raise ValueError(f"{name} must hold {PAD} at the model's pad_id={config.pad_id}, got {vocab.stoi.get(PAD)}")
    missing = [token for token in (SOS, EOS) if token not in tgt_vocab]
    if missing:
        raise ValueError(f"tgt_vocab has no {' or '.join(missing)}, which decoding starts and ends with{hint}")


def _is_vocab(vocab: object, name: str) -> Vocab:
    if not isinstance(vocab, Vocab):
        raise TypeError(f"{name} must be a transformer_course.data.Vocab, got {type(vocab).__name__}")
    return vocab


def check_plain(value: Any, name: str) -> None:
    """`value` must be plain data: str, int, float, bool, None, and lists, tuples and str-keyed dicts of them
    (what `torch.load(weights_only=True)` reads back). `name` is where it sits, for the error message."""
    if name == "extra" and type(value) is not dict:
        raise TypeError(f"extra must be a dict, got {type(value).__name__}")
    if type(value) in PLAIN:
        return
    if type(value) in (list, tuple):
        for i, item in enumerate(value):
            check_plain(item, f"{name}[{i}]")
    elif type(value) is dict:
        for key, item in value.items():
            if type(key) is not str:
                raise TypeError(f"{name} has the key {key!r} ({type(key).__name__}); keys must be str")
            check_plain(item, f"{name}[{key!r}]")
    else:
        raise TypeError(
            f"{name} is a {type(value).__module__}.{type(value).__qualname__}; a checkpoint's extra holds plain "
            "data only (str, int, float, bool, None, and lists, tuples and str-keyed dicts of them), the values "
            "that load_checkpoint can read back safely"
        )


def _describe(e: BaseException) -> str:
    """'TypeName: the message's first two lines, shortened', or the type name alone when it has no message."""
    text = " ".join(line.strip() for line in str(e).splitlines()[:2] if line.strip())
    text = text if len(text) <= 200 else text[:197] + "..."
    return f"{type(e).__name__}: {text}" if text else type(e).__name__
