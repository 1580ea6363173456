"""Saving and loading a trained model: weights, the configuration that rebuilds it, and its vocabularies.

The file is written to a temporary name and renamed into place, so a crash mid-save never leaves a
half-written checkpoint behind; loading uses `torch.load(weights_only=True)`, which refuses to run
code hidden in a pickle.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from .data import Vocab
from .model import Transformer, TransformerConfig

FORMAT = "transformer_course/1"


@dataclass
class Checkpoint:
    model: Transformer
    src_vocab: Vocab
    tgt_vocab: Vocab
    extra: dict = field(default_factory=dict)


def save_checkpoint(
    path: str | os.PathLike, model: Transformer, src_vocab: Vocab, tgt_vocab: Vocab, extra: dict | None = None
) -> Path:
    """Write model weights + config + vocabularies (+ `extra`, plain data only) to `path`, atomically."""
    if not isinstance(model, Transformer):
        raise TypeError(f"model must be a transformer_course.Transformer, got {type(model).__name__}")
    for name, vocab in (("src_vocab", src_vocab), ("tgt_vocab", tgt_vocab)):
        if not isinstance(vocab, Vocab):
            raise TypeError(f"{name} must be a transformer_course.data.Vocab, got {type(vocab).__name__}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "format": FORMAT,
        "config": asdict(model.config),
        "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
        "src_vocab": list(src_vocab.itos),
        "tgt_vocab": list(tgt_vocab.itos),
        "extra": dict(extra or {}),
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


def load_checkpoint(path: str | os.PathLike, device: torch.device | str | None = None) -> Checkpoint:
    """Rebuild the model saved at `path` (in eval mode, on `device`) with its vocabularies.

    A missing, truncated or foreign file raises a ValueError (FileNotFoundError if missing) that says so.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # truncated zip, random bytes, a pickle with code in it, ...
        raise ValueError(f"{path} is not a readable checkpoint ({type(e).__name__}: {str(e).splitlines()[0]})") from e
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise ValueError(f"{path} is not a transformer_course checkpoint (expected format {FORMAT!r})")
    try:
        model = Transformer.from_config(TransformerConfig(**payload["config"]))
        model.load_state_dict(payload["state_dict"])
        src_vocab, tgt_vocab = Vocab(payload["src_vocab"]), Vocab(payload["tgt_vocab"])
    except (KeyError, TypeError, RuntimeError, ValueError) as e:
        raise ValueError(f"{path} is a damaged checkpoint ({type(e).__name__}: {str(e).splitlines()[0]})") from e
    if device is not None:
        model.to(device)
    model.eval()
    return Checkpoint(model, src_vocab, tgt_vocab, payload.get("extra", {}))
