"""Sections that time the package against models built from PyTorch's own modules, of the same size and weights.

* `gpt_vs_nanogpt`: `tc.GPT`'s training step against `NanoGPT`, a model written here in the style of nanoGPT's
  `model.py` (`nn.Linear`, `nn.LayerNorm`, `nn.GELU`, `F.scaled_dot_product_attention(is_causal=True)`), holding
  the same weights, at nanoGPT's CPU example configuration (4 layers, 4 heads, d_model 128, block 64, batch 12).
* `transformer_vs_torch`: the encoder-decoder stacks of `tc.Transformer` (`tc.Encoder`, `tc.Decoder`) against
  `torch.nn.Transformer` with the same weights (`from_torch`), forward in eval mode under no_grad.

Each prints the package's ratio to the reference and the target it is held to (`GPT_TARGET`, `TRANSFORMER_TARGET`).
"""

from __future__ import annotations

import copy
import functools
import statistics
import warnings
from collections.abc import Callable
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn

from ...decoder import Decoder
from ...encoder import Encoder
from ...gpt import GPT
from ...masks import causal_mask
from ...model import count_parameters
from ._core import Table, median_ms, resolve_device, target_note, time_variants, use_fused

GPT_TARGET = 0.95  # tc.GPT's training throughput over the reference's: at least this
TRANSFORMER_TARGET = 1.05  # tc's forward time over nn.Transformer's: at most this
# nanoGPT's CPU example (README, "I only have a macbook"): the character-level Shakespeare model, shrunk.
NANOGPT_CPU = dict(vocab_size=65, n_layers=4, n_heads=4, d_model=128, block_size=64, batch_size=12)


# ---------------------------------------------------------------------------------------------- GPT


class NanoGPT(nn.Module):
    """A GPT as nanoGPT's `model.py` writes it, with biases: forward(ids (B, T)) -> logits (B, T, vocab_size).

    Pre-LN blocks (x + attn(ln_1(x)), x + mlp(ln_2(x))), Q, K and V from one stacked Linear, learned positions,
    a final LayerNorm and the output layer tied to the token embedding. No dropout: the benchmark trains at 0.
    """

    def __init__(self, vocab_size: int, d_model: int, n_heads: int, n_layers: int, block_size: int):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, d_model)
        self.wpe = nn.Embedding(block_size, d_model)
        self.h = nn.ModuleList(NanoBlock(d_model, n_heads) for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(ids.shape[1], device=ids.device)
        x = self.wte(ids) + self.wpe(positions)
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


class NanoBlock(nn.Module):
    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.n_heads = n_heads
        self.ln_1 = nn.LayerNorm(d_model)
        self.c_attn = nn.Linear(d_model, 3 * d_model)
        self.attn_proj = nn.Linear(d_model, d_model)
        self.ln_2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, d_model = x.shape
        q, k, v = self.c_attn(x).split(d_model, dim=2)
        # (B, T, D) -> (B, T, H, d_k) -> (B, H, T, d_k)
        q, k, v = (t.view(batch, length, self.n_heads, d_model // self.n_heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.attn_proj(y.transpose(1, 2).reshape(batch, length, d_model))  # (B, H, T, d_k) -> (B, T, D)


def nanogpt_like(model: GPT, vocab_size: int, d_model: int, n_heads: int, n_layers: int, block_size: int) -> NanoGPT:
    """A NanoGPT holding exactly the weights of the tc.GPT `model` (d_ff must be 4 * d_model)."""
    ref = NanoGPT(vocab_size, d_model, n_heads, n_layers, block_size)
    with torch.no_grad():
        ref.wte.weight.copy_(model.token_embedding.weight)
        ref.wpe.weight.copy_(model.positions.pe)
        for block, layer in zip(cast("list[NanoBlock]", list(ref.h)), model.layers, strict=True):
            attn, ffn = layer.self_attn, layer.ffn
            norm_1, norm_2 = (sublayer.norm for sublayer in layer.sublayers)
            block.c_attn.weight.copy_(torch.cat([attn.w_q.weight, attn.w_k.weight, attn.w_v.weight]))
            block.c_attn.bias.copy_(torch.cat([attn.w_q.bias, attn.w_k.bias, attn.w_v.bias]))
            pairs = [(block.attn_proj, attn.w_o), (block.mlp[0], ffn.w_1), (block.mlp[2], ffn.w_2),
                     (block.ln_1, norm_1), (block.ln_2, norm_2)]  # fmt: skip
            for theirs, ours in pairs:
                _copy_parameters(theirs, ours)
        _copy_parameters(ref.ln_f, model.blocks.norm)
    return ref


def _copy_parameters(theirs: nn.Module, ours: object) -> None:
    """Copy the weight and the bias of `ours` into `theirs` (two Linears, or two LayerNorms)."""
    for name in ("weight", "bias"):
        getattr(theirs, name).copy_(getattr(ours, name))


def _adamw(model: nn.Module, lr: float) -> torch.optim.AdamW:
    """nanoGPT's optimizer: AdamW, weight decay 0.1 on matrices only, betas (0.9, 0.99) as in its Shakespeare config."""
    params = list(model.parameters())
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]  # fmt: skip
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.99))


def _train_steps(model: nn.Module, optimizer: torch.optim.Optimizer, batches: list[torch.Tensor]) -> None:
    """nanoGPT's training step on each batch (B, T + 1) in turn: loss, backward, clip to norm 1, AdamW."""
    for ids in batches:
        logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten())  # (B, T, V) -> (B*T, V)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def gpt_vs_nanogpt(
    vocab_size: int = NANOGPT_CPU["vocab_size"],
    d_model: int = NANOGPT_CPU["d_model"],
    n_heads: int = NANOGPT_CPU["n_heads"],
    n_layers: int = NANOGPT_CPU["n_layers"],
    block_size: int = NANOGPT_CPU["block_size"],
    batch_size: int = NANOGPT_CPU["batch_size"],
    steps: int = 10,
    repeats: int = 9,
    warmup: int = 1,
    threads: int | None = 1,
    device=None,
) -> Table:
    """Training throughput of tc.GPT (the teaching attention path, and the fused kernel) against NanoGPT.

    All three start from the same weights (`max_abs_diff`: their logits on one batch before training) and train
    on the same random batches with the same step (AdamW, gradient clipping); one timed call runs `steps` steps.
    `threads`: torch threads during the section (1, as nanoGPT's CPU example; None: leave them as they are).
    """
    if steps < 1:
        raise ValueError(f"steps={steps} must be >= 1: the steps timed in one run")
    device = resolve_device(device)
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        table = _gpt_vs_nanogpt(vocab_size, d_model, n_heads, n_layers, block_size, batch_size, steps, repeats,
                                warmup, device)  # fmt: skip
        table.notes.insert(1, f"torch threads during the section: {torch.get_num_threads()}.")
    finally:
        torch.set_num_threads(before)
    return table


def _gpt_vs_nanogpt(vocab_size, d_model, n_heads, n_layers, block_size, batch_size, steps, repeats, warmup, device):
    with torch.random.fork_rng(devices=[]):  # fixed models and data, leaving the caller's random state alone
        torch.manual_seed(0)
        ours = GPT(vocab_size, d_model, n_heads, n_layers, 4 * d_model, max_len=block_size, dropout=0.0)
        data = torch.randint(vocab_size, (steps, batch_size, block_size + 1))
    models = {
        "nanogpt_style": nanogpt_like(ours, vocab_size, d_model, n_heads, n_layers, block_size),
        "tc.GPT": ours,
        "tc.GPT_fused": use_fused(copy.deepcopy(ours)),
    }
    batches = list(data.to(device).unbind())
    with torch.no_grad():
        logits = {name: m.to(device)(batches[0][:, :-1]) for name, m in models.items()}
    optimizers = {name: _adamw(m, lr=1e-3) for name, m in models.items()}
    times = time_variants(
        {name: functools.partial(_train_steps, m, optimizers[name], batches) for name, m in models.items()},
        repeats,
        warmup,
        device,
    )
    tokens = steps * batch_size * block_size
    reference = tokens / statistics.median(times["nanogpt_style"])
    table = Table(
        "gpt_vs_nanogpt",
        "Training a GPT: tc.GPT vs a nanoGPT-style model of torch.nn modules, same weights",
        ["model", "parameters", "step_ms", "tokens_per_s", "ratio", "max_abs_diff", "same_logits"],
        curves={"target": (GPT_TARGET, True)},
    )
    for name, m in models.items():
        diff = float((logits[name] - logits["nanogpt_style"]).abs().max())
        throughput = tokens / statistics.median(times[name])
        table.rows.append(
            dict(model=name, parameters=count_parameters(m), step_ms=median_ms(times[name]) / steps,
                 tokens_per_s=throughput, ratio=throughput / reference, max_abs_diff=diff,
                 same_logits=torch.allclose(logits[name], logits["nanogpt_style"], rtol=1e-4, atol=1e-5))
        )  # fmt: skip
    table.notes += [
        f"model: {n_layers} layers, {n_heads} heads, d_model {d_model}, d_ff {4 * d_model}, block {block_size}, "
        f"vocabulary {vocab_size}, dropout 0; batches of {batch_size} random sequences; float32 on {device.type}.",
        "nanogpt_style: nn.Linear, nn.LayerNorm, nn.GELU, F.scaled_dot_product_attention(is_causal=True), "
        "stacked QKV, tied output; tc.GPT_fused: the package's fused-kernel switches on (use_fused_attention, "
        "use_fused_norms).",
        "step: forward, cross-entropy, backward, clip_grad_norm_(1.0), AdamW (lr 1e-3, betas (0.9, 0.99), "
        "weight decay 0.1 on matrices), zero_grad: nanoGPT's train.py.",
        "tokens_per_s = batch x block / step time; ratio = tokens_per_s / nanogpt_style's (above 1: faster).",
        "max_abs_diff, same_logits: logits on one batch before training against nanogpt_style's (allclose, rtol "
        "1e-4, atol 1e-5).",
        f"median of {repeats} interleaved runs of {steps} steps each, after {warmup} warm-up run(s) each.",
        target_note("tc.GPT tokens_per_s / nanogpt_style's", table.column("ratio", model="tc.GPT")[0], GPT_TARGET),
        target_note("the same, fused kernel", table.column("ratio", model="tc.GPT_fused")[0], GPT_TARGET),
    ]  # fmt: skip
    return table


# ---------------------------------------------------------------------------------------------- Transformer


def transformer_vs_torch(
    batch: int = 16,
    src_len: int = 40,
    tgt_len: int = 32,
    d_model: int = 256,
    n_heads: int = 8,
    n_layers: int = 3,
    d_ff: int = 1024,
    repeats: int = 7,
    warmup: int = 1,
    device=None,
) -> Table:
    """The forward pass of tc.Transformer's encoder-decoder stacks against torch.nn.Transformer with the same weights.

    The same embedded source (B, S, D) and target (B, T, D) and a causal target mask; eval mode under no_grad, where
    PyTorch takes its fused inference path. Two sets of inputs: every source of full length, and sources padded to
    random lengths, which PyTorch's encoder packs into a nested tensor, skipping the padding. `allclose` compares the
    decoder outputs (B, T, D) with nn.Transformer's.
    """
    device = resolve_device(device)
    with torch.random.fork_rng(devices=[]):  # fixed weights and inputs, leaving the caller's random state alone
        torch.manual_seed(0)
        reference = nn.Transformer(d_model, n_heads, n_layers, n_layers, d_ff, dropout=0.0, batch_first=True)
        src = torch.randn(batch, src_len, d_model)
        tgt = torch.randn(batch, tgt_len, d_model)
        lengths = {
            "full": torch.full((batch,), src_len),
            "padded": torch.randint(max(1, src_len // 2), src_len + 1, (batch,)),
        }
    reference = reference.to(device).eval()
    src, tgt = src.to(device), tgt.to(device)
    stacks = (Encoder.from_torch(reference.encoder), Decoder.from_torch(reference.decoder))
    models = {"nn.Transformer": reference, "tc": stacks, "tc_fused": tuple(use_fused(copy.deepcopy(m)) for m in stacks)}
    table = Table(
        "transformer_vs_torch",
        "Encoder-decoder forward: tc.Encoder + tc.Decoder vs torch.nn.Transformer, same weights, ms",
        ["source", "model", "forward_ms", "ratio", "max_abs_diff", "allclose"],
        curves={"target": (TRANSFORMER_TARGET, False)},
    )
    for source, length in lengths.items():
        valid = torch.arange(src_len, device=device) < length.to(device)[:, None]  # (B, S): True = a real token
        calls: dict[str, Callable[[], object]] = {
            name: functools.partial(_encode_decode, m, src, tgt, valid) for name, m in models.items()
        }
        with torch.no_grad(), warnings.catch_warnings():
            # PyTorch's fast path packs a padded source as a nested tensor, and says that API is a prototype.
            warnings.filterwarnings("ignore", message="The PyTorch API of nested tensors")
            outputs = {name: cast(torch.Tensor, call()) for name, call in calls.items()}
            times = time_variants(calls, repeats, warmup, device)
        expected, torch_ms = outputs["nn.Transformer"], median_ms(times["nn.Transformer"])
        for name, output in outputs.items():
            table.rows.append(
                dict(source=source, model=name, forward_ms=median_ms(times[name]),
                     ratio=median_ms(times[name]) / torch_ms, max_abs_diff=float((output - expected).abs().max()),
                     allclose=torch.allclose(output, expected, rtol=1e-4, atol=1e-5))
            )  # fmt: skip
    table.notes += [
        f"model: {n_layers}+{n_layers} post-LN layers (nn.Transformer's defaults, with its final LayerNorms), "
        f"d_model {d_model}, {n_heads} heads, d_ff {d_ff}, dropout 0, {count_parameters(reference):,} parameters; "
        f"float32 on {device.type}.",
        f"inputs: source (batch {batch}, {src_len}, {d_model}), full or padded to random lengths of "
        f"{int(lengths['padded'].min())} to {int(lengths['padded'].max())}; target (batch {batch}, {tgt_len}, "
        f"{d_model}) with a causal mask.",
        "tc: Encoder.from_torch and Decoder.from_torch of the same nn.Transformer (teaching attention path); "
        "tc_fused: with the fused-kernel switches on (use_fused_attention, use_fused_norms).",
        "ratio = forward_ms / nn.Transformer's on the same inputs (below 1: faster); allclose: rtol 1e-4, atol 1e-5 "
        "on the decoder output.",
        f"median of {repeats} interleaved runs after {warmup} warm-up run(s) each.",
    ]
    for name in ("tc", "tc_fused"):
        for source in lengths:
            ratio = table.column("ratio", source=source, model=name)[0]
            what = f"{name} forward_ms / nn.Transformer's, {source} source"
            table.notes.append(target_note(what, ratio, TRANSFORMER_TARGET, at_least=False))
    return table


def _encode_decode(model, src: torch.Tensor, tgt: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """The decoder output (B, T, D) of nn.Transformer `model`, or of the package's (encoder, decoder) pair, for the
    embedded src (B, S, D) and tgt (B, T, D), the source's padding given by `valid` (B, S) (True = a real token)."""
    if isinstance(model, nn.Transformer):
        causal = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1], device=tgt.device)  # -inf above
        return model(src, tgt, tgt_mask=causal, src_key_padding_mask=~valid, memory_key_padding_mask=~valid,
                     tgt_is_causal=True)  # fmt: skip
    encoder, decoder = model
    src_mask = valid[:, None, None, :]  # (B, S) -> (B, 1, 1, S): every head and query row
    return decoder(tgt, encoder(src, src_mask), causal_mask(tgt.shape[1], device=tgt.device), src_mask)
