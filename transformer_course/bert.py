"""Chapter 15: an encoder-only model (BERT, 仅编码器模型): masked-language-model pre-training, then fine-tuning.

    ids (B, T) ─ embedding + learned positions ─ LayerNorm ─ Encoder (no causal mask) ─ hidden (B, T, D)
        hidden ─ MLM head (Linear, GELU, LayerNorm, ·Eᵀ + b) ─ logits (B, T, V)       pre-training
        hidden[:, 0] (<cls>) ─ pooler (Linear, tanh) ─ Linear ─ class logits (B, C)  fine-tuning

BERT keeps the other half of the Transformer: the encoder, where every position sees every other one.
A model that sees the whole sentence cannot be trained to predict the next token (it would read it), so
BERT hides some tokens and predicts them from both sides: the masked language model (掩码语言模型,
Devlin et al. 2019, §3.1). `mask_tokens` picks 15 % of the positions; of those, 80 % become <mask>,
10 % a random token and 10 % stay as they were, and only the picked positions count in the loss.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence, Sized
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ._modes import evaluating
from ._validate import (
    at_the_door,
    check_device,
    check_positive_int,
    check_probability,
    check_tensor,
    check_token_ids,
    checked,
)
from .checkpoint import register_model
from .embedding import LearnedPositionalEncoding
from .encoder import BlockConfig, Encoder
from .masks import padding_mask
from .norm import LayerNorm
from .training import History, train_steps

IGNORE_INDEX = -100  # F.cross_entropy's default ignore_index: a label that counts for nothing


def _check_masking_args(
    ids: torch.Tensor, mask_id: int, vocab_size: int, p: float, special_ids: Sequence[int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """The special ids as a tensor and a (vocab_size,) bool mask of the ordinary ones; errors name the argument."""
    check_tensor(ids, "ids", floating=False)
    check_positive_int(vocab_size, "vocab_size")
    if isinstance(mask_id, bool) or not isinstance(mask_id, int) or not 0 <= mask_id < vocab_size:
        raise ValueError(f"mask_id={mask_id!r} must be a token id in [0, {vocab_size - 1}]")
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p <= 1:
        raise ValueError(f"p={p!r} must be a probability in [0, 1]")
    special = torch.tensor(sorted({int(i) for i in special_ids}), dtype=torch.long)
    ordinary = torch.ones(vocab_size, dtype=torch.bool)
    ordinary[special[(special >= 0) & (special < vocab_size)]] = False
    if not ordinary.any():
        raise ValueError("special_ids covers the whole vocabulary: there is no token to pick")
    return special, ordinary


def mask_tokens(
    ids: torch.Tensor,
    mask_id: int,
    vocab_size: int,
    p: float = 0.15,
    special_ids: Sequence[int] = (),
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masking: returns (inputs, labels), both shaped like ids (B, T).

    Each position whose id is not in `special_ids` is picked with probability p. A picked position
    becomes mask_id with probability 0.8, a random non-special token with probability 0.1, and keeps its
    token with probability 0.1. labels holds the original id at picked positions and -100 elsewhere.
    """
    special, ordinary = _check_masking_args(ids, mask_id, vocab_size, p, special_ids)
    # Draw on the generator's device (CPU by default), then move: the results do not depend on the device.
    device = generator.device if generator is not None else ids.device
    shape = ids.shape
    pick_draw = torch.rand(shape, generator=generator, device=device).to(ids.device)
    action_draw = torch.rand(shape, generator=generator, device=device).to(ids.device)
    candidates = ordinary.nonzero().squeeze(1)  # (n, 1) -> (n,): the ids a random replacement is drawn from
    random_tokens = candidates[torch.randint(len(candidates), shape, generator=generator, device=device)].to(ids.device)

    picked = (pick_draw < p) & ~torch.isin(ids, special.to(ids.device))
    labels = ids.masked_fill(~picked, IGNORE_INDEX)
    inputs = torch.where(picked & (action_draw < 0.8), torch.full_like(ids, mask_id), ids)  # 80 %: <mask>
    inputs = torch.where(picked & (action_draw >= 0.8) & (action_draw < 0.9), random_tokens, inputs)  # 10 %
    return inputs, labels  # the last 10 % of picked positions keep their token


class MaskedLMHead(nn.Module):
    """BERT's output layer for the MLM: Linear, GELU, LayerNorm, then the tied embedding matrix and a bias.

    forward(hidden (B, T, D)) -> logits (B, T, V).
    """

    def __init__(self, embedding: nn.Embedding):
        super().__init__()
        vocab_size, d_model = embedding.weight.shape
        self.transform = nn.Linear(d_model, d_model)
        self.activation = nn.GELU()
        self.norm = LayerNorm(d_model)
        self.embedding = embedding  # shared with the input: the weight is tied, not copied
        self.bias = nn.Parameter(torch.zeros(vocab_size))

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return F.linear(self.norm(self.activation(self.transform(hidden))), self.embedding.weight, self.bias)


@dataclass(frozen=True)
class BERTConfig:
    """Everything that builds a `BERT`: `BERT.from_config(config)` rebuilds it, and a checkpoint stores it.
    Every field is checked once, when the config is made; `block` is what every encoder layer is built from."""

    vocab_size: int
    d_model: int = 256
    n_heads: int = 4
    n_layers: int = 4
    d_ff: int = 1024
    max_len: int = 512
    dropout: float = 0.1
    pad_id: int = 0
    norm_first: bool = False

    def __post_init__(self) -> None:
        if at_the_door():  # inside a checked call (BERT's constructor), the fields were checked at its door
            self.block  # noqa: B018 -- building the BlockConfig checks the layers' fields
            for name in ("vocab_size", "n_layers", "max_len"):
                check_positive_int(getattr(self, name), name)
            pad_id = self.pad_id
            if isinstance(pad_id, bool) or not isinstance(pad_id, int) or not 0 <= pad_id < self.vocab_size:
                raise ValueError(f"pad_id={pad_id!r} must be a token id in [0, {self.vocab_size - 1}]")

    @functools.cached_property
    def block(self) -> BlockConfig:
        """Every layer's sizes and options: GELU as in BERT, post-LN unless norm_first."""
        return BlockConfig(self.d_model, self.n_heads, self.d_ff, self.dropout, self.norm_first, activation="gelu")


def _check_config(model: BERT, *args: Any, **kwargs: Any) -> None:
    BERTConfig(*args, **kwargs)


def _check_ids(model: BERT, ids: torch.Tensor) -> None:
    check_device(check_tensor(ids, "ids", ndim=2, floating=False), "ids", model)
    check_token_ids(ids, "ids", model.vocab_size)


class BERT(nn.Module):
    """A BERT-style encoder. forward(ids (B, T)) -> hidden states (B, T, d_model); `mlm_logits(ids)` -> (B, T, V).

    Padding (pad_id) is masked as a key; every other position sees every other one. Post-LN layers with
    GELU as in BERT (norm_first=False); norm_first=True gives pre-LN layers and a final LayerNorm.
    """

    @checked(_check_config)  # every argument checked once, here; the modules built inside skip their checks
    def __init__(
        self,
        vocab_size: int,
        d_model: int = 256,
        n_heads: int = 4,
        n_layers: int = 4,
        d_ff: int = 1024,
        max_len: int = 512,
        dropout: float = 0.1,
        pad_id: int = 0,
        norm_first: bool = False,
    ):
        super().__init__()
        self.config = config = BERTConfig(vocab_size, d_model, n_heads, n_layers, d_ff, max_len, dropout, pad_id,
                                          norm_first)  # fmt: skip
        self.vocab_size, self.pad_id, self.d_model = vocab_size, pad_id, d_model
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        self.positions = LearnedPositionalEncoding(d_model, max_len)
        # BERT normalises the sum of the embeddings before the first layer (then dropout).
        self.embedding_norm = LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.encoder = Encoder.from_config(config.block, n_layers)
        self.mlm_head = MaskedLMHead(self.token_embedding)
        self._init_weights()

    @classmethod
    def from_config(cls, config: BERTConfig) -> BERT:
        if not isinstance(config, BERTConfig):
            raise TypeError(f"config must be a BERTConfig, got {type(config).__name__}")
        return cls(**asdict(config))

    def _init_weights(self) -> None:
        # BERT's initialisation: N(0, 0.02) for every matrix and embedding, zero biases.
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)

    @checked(_check_ids)
    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.dropout(self.embedding_norm(self.positions(self.token_embedding(ids))))
        return self.encoder(x, padding_mask(ids, self.pad_id))

    def mlm_logits(self, ids: torch.Tensor) -> torch.Tensor:
        """Logits (B, T, V) for the token at every position of ids (B, T)."""
        return self.mlm_head(self(ids))


register_model(BERT, BERTConfig)


class BERTClassifier(nn.Module):
    """A sentence classifier on a BERT: the <cls> position's hidden state, BERT's pooler (Linear, tanh), a Linear.

    forward(ids (B, T), ids[:, 0] = <cls>) -> logits (B, n_classes).
    """

    def __init__(self, bert: BERT, n_classes: int, dropout: float = 0.1):
        super().__init__()
        if not isinstance(bert, BERT):
            raise TypeError(f"bert must be a transformer_course.BERT, got {type(bert).__name__}")
        d_model = bert.d_model
        self.bert = bert
        self.pooler = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(check_probability(dropout, "dropout"))
        self.classifier = nn.Linear(d_model, check_positive_int(n_classes, "n_classes"))
        for linear in (self.pooler, self.classifier):
            nn.init.normal_(linear.weight, std=0.02)
            nn.init.zeros_(linear.bias)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if check_tensor(ids, "ids", ndim=2, floating=False).shape[1] == 0:
            raise ValueError("ids is empty: expected shape (B, T) with T >= 1, ids[:, 0] = <cls>")
        cls = self.bert(ids)[:, 0]  # (B, D): the summary position
        return self.classifier(self.dropout(torch.tanh(self.pooler(cls))))


def mlm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of logits (B, T, V) at the picked positions only (labels != -100), averaged over them."""
    return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE_INDEX)


def pretrain_mlm(
    model: BERT,
    batches: Callable[[], torch.Tensor],
    steps: int,
    mask_id: int,
    special_ids: Sequence[int],
    p: float = 0.15,
    lr: float = 1e-3,
    warmup: int = 50,
    generator: torch.Generator | None = None,
    evaluate: Callable[[], float] | None = None,
    eval_every: int = 100,
) -> History:
    """Masked-language-model pre-training on `batches()`, a function returning fresh (B, T) ids.

    Each step masks a new 15 % of the tokens with `mask_tokens` (drawn from `generator`) and trains on
    `mlm_loss`. Returns the History of `train_steps` (AdamW, warm-up then cosine decay).
    """
    device = next(model.parameters()).device

    def step_loss() -> torch.Tensor:
        inputs, labels = mask_tokens(batches(), mask_id, model.vocab_size, p, special_ids, generator)
        return mlm_loss(model.mlm_logits(inputs.to(device)), labels.to(device))

    return train_steps(model, step_loss, steps, lr, warmup, 0.01, evaluate, eval_every)


def fine_tune(
    classifier: BERTClassifier,
    ids: torch.Tensor,
    labels: torch.Tensor,
    steps: int,
    batch_size: int = 32,
    lr: float = 1e-3,
    warmup: int = 10,
    generator: torch.Generator | None = None,
) -> History:
    """Train `classifier` on the labelled sentences ids (N, T), labels (N,): batches drawn with replacement."""
    check_labelled(classifier, ids, labels)
    check_positive_int(batch_size, "batch_size")
    device = next(classifier.parameters()).device

    def step_loss() -> torch.Tensor:
        rows = torch.randint(len(ids), (min(batch_size, len(ids)),), generator=generator)
        return F.cross_entropy(classifier(ids[rows].to(device)), labels[rows].to(device))

    return train_steps(classifier, step_loss, steps, lr, warmup, 0.01)


def accuracy(classifier: BERTClassifier, ids: torch.Tensor, labels: torch.Tensor) -> float:
    """The share of sentences ids (N, T) whose predicted class is labels (N,); in eval mode.

    Each submodule's train/eval flag is restored afterwards (`evaluating`), a frozen encoder's included.
    """
    check_labelled(classifier, ids, labels)
    with evaluating(classifier):
        device = next(classifier.parameters()).device
        predictions = classifier(ids.to(device)).argmax(dim=-1).cpu()
    return float((predictions == labels).float().mean())


def check_labelled(classifier: BERTClassifier, ids: torch.Tensor, labels: torch.Tensor) -> None:
    """Sentences ids (N, T), N, T >= 1, and labels (N,), classes of `classifier`; errors name the argument."""
    if not isinstance(classifier, BERTClassifier):
        raise TypeError(f"classifier must be a BERTClassifier(bert, n_classes), got {type(classifier).__name__}")
    for name, value, ndim, what in (("ids", ids, 2, "sentences"), ("labels", labels, 1, "labels")):
        # An empty list is a missing data set more than a wrong type: say so, as for an empty tensor.
        if isinstance(value, Sized) and not isinstance(value, torch.Tensor) and len(value) == 0:
            raise ValueError(f"{name} holds no {what}: give at least one labelled sentence")
        if len(check_tensor(value, name, ndim=ndim, floating=False)) == 0:
            raise ValueError(f"{name} holds no {what}: give at least one labelled sentence")
    if ids.shape[1] == 0:
        raise ValueError("ids is empty: expected shape (N, T) with T >= 1, ids[:, 0] = <cls>")
    if len(labels) != len(ids):
        raise ValueError(f"labels has {len(labels)} rows but ids has {len(ids)}: one label per sentence")
    if labels.dtype != torch.long:  # F.cross_entropy's class targets
        raise TypeError(f"labels must be a torch.long tensor of class ids, got dtype {labels.dtype}")
    # A label outside the classes would fail inside F.cross_entropy only when a batch draws it.
    n_classes = classifier.classifier.out_features
    outside = (labels < 0) | (labels >= n_classes)
    if outside.any():
        raise ValueError(f"labels holds class {int(labels[outside][0])}, expected classes in [0, {n_classes - 1}]")
