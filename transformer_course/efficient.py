"""Chapter 13: making attention fast — the fused kernel and the KV cache (键值缓存).

Two extensions of the chapters' code, each switched on from outside it:

* **Fused attention.** `F.scaled_dot_product_attention` computes chapter 2's formula in one kernel that
  never materialises the T_q × T_k weights: faster, O(T) extra memory instead of O(T²), but no weights to
  look at. `use_fused_attention(model)` makes every `MultiHeadAttention` in `model` use it.
* **The KV cache.** Generating token t, the decoder's self-attention needs the keys and values of
  positions 0..t-1, which do not change once computed (the causal mask keeps earlier positions from
  seeing later ones). A `KVCache` keeps them, so each step runs the decoder on the new position only;
  the cross-attention's keys and values of the encoder output are projected once. `CachedScorer` is the
  cached twin of chapter 12's `PrefixScorer`, which `greedy_decode` and `beam_search` use by default.

Both are strategies of the attention module, swapped in from outside: `MultiHeadAttention.attention` is the
kernel, `MultiHeadAttention.project` computes the heads' queries, keys and values. While a cache is attached
(`with cache.attached(layers)`), `project` reads and fills the cache; every layer runs its own `forward`,
unchanged, on the new positions. The translator (`decode_cached`) and GPT (chapter 14) decode through it.
"""

from __future__ import annotations

import contextlib
import functools
import warnings
from collections.abc import Iterable, Iterator

import torch
import torch.nn.functional as F
from torch import nn

from ._validate import check_bool, check_positive_int, check_tensor, checked, inside_the_door
from .attention import attention_scale, check_attention_inputs, scaled_dot_product_attention
from .masks import causal_mask, combine_masks, padding_mask
from .model import Transformer, check_decode_inputs
from .multihead import MultiHeadAttention, split_heads
from .multihead import _check_inputs as check_attention_module_inputs  # the module's own input check
from .norm import LayerNorm, RMSNorm
from .norm import _check_input as check_norm_input  # the norms' own input check, for their fused forwards

# Since PyTorch 2.5 (pytorch/pytorch#131060 and #133882, its "safe softmax") the kernel itself gives 0 for a query
# row that may attend to nothing, as the teaching path does: on the CPU, the extra pass over the output is skipped.
SDPA_ZEROES_MASKED_ROWS = torch.torch_version.TorchVersion(torch.__version__) >= "2.5"


@checked(check_attention_inputs)
def fused_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
) -> torch.Tensor:
    """The same result as `scaled_dot_product_attention`, computed by PyTorch's fused kernel.

    It never materialises the weights, so it is faster and, without a materialised mask, needs O(T)
    instead of O(T²) memory; it cannot return the weights. Fully masked rows give zeros, as in the
    teaching path.
    """
    scale = attention_scale(q.shape[-1])  # the teaching path's scale, from the one place it is written
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, scale=scale)
    if mask is not None and not (SDPA_ZEROES_MASKED_ROWS and q.device.type == "cpu"):
        # A row with no visible key: PyTorch before 2.5 returns NaN there; make it 0 as the teaching path does.
        out = out.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    return out


def _fused_without_weights(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, dropout_p: float
) -> tuple[torch.Tensor, None]:
    """`fused_attention` in the (output, weights) form that `MultiHeadAttention.attention` returns."""
    return fused_attention(q, k, v, mask, dropout_p), None


def use_fused_attention(model: nn.Module, on: bool = True) -> nn.Module:
    """Switch every MultiHeadAttention in `model` to the fused kernel (on=True), which is faster and keeps no
    weights, or back to the teaching path (on=False), which keeps its weights on `.attn_weights`."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    check_bool(on, "on")
    for module in model.modules():
        if isinstance(module, MultiHeadAttention):
            module.attention = _fused_without_weights if on else scaled_dot_product_attention
    return model


@checked(check_norm_input)
def fused_layer_norm(norm: LayerNorm, x: torch.Tensor) -> torch.Tensor:
    """`norm(x)` by PyTorch's one-kernel `F.layer_norm`: chapter 6's nine operations' values, up to float rounding."""
    return F.layer_norm(x, (norm.d_model,), norm.weight, norm.bias, norm.eps)


@checked(check_norm_input)
def fused_rms_norm(norm: RMSNorm, x: torch.Tensor) -> torch.Tensor:
    """`norm(x)` by PyTorch's `F.rms_norm`: chapter 6's RMSNorm's values, up to float rounding."""
    return F.rms_norm(x, (norm.d_model,), norm.weight, norm.eps)


def use_fused_norms(model: nn.Module, on: bool = True) -> nn.Module:
    """Switch every LayerNorm and RMSNorm in `model` to PyTorch's own functions (on=True), or back to chapter 6's
    written-out forward (on=False). `F.layer_norm` is one kernel (`F.rms_norm`, on the CPU, still several
    operations), where the teaching forward launches an operation per step of the formula (and autograd records
    each of them)."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    check_bool(on, "on")
    for module in model.modules():
        if isinstance(module, (LayerNorm, RMSNorm)):
            # An instance attribute shadows the class's forward; deleting it shows the class's again.
            vars(module).pop("forward", None)
            if on and isinstance(module, LayerNorm):
                vars(module)["forward"] = functools.partial(fused_layer_norm, module)
            elif on and isinstance(module, RMSNorm):
                vars(module)["forward"] = functools.partial(fused_rms_norm, module)
    return model


def keep_attention_weights(model: nn.Module, keep: bool = True) -> nn.Module:
    """Deprecated: `use_fused_attention(model, on=not keep)`, whose name says what it switches."""
    warnings.warn(
        "keep_attention_weights(model, keep) is deprecated: use use_fused_attention(model, on=not keep)",
        DeprecationWarning,
        stacklevel=2,
    )
    check_bool(keep, "keep")
    return use_fused_attention(model, on=not keep)


def _check_append(cache: LayerCache, k: torch.Tensor, v: torch.Tensor) -> None:
    """k and v (B, H, t, d_k) of one shape, dtype and device, whose (B, H, d_k) match what the cache holds."""
    for name, x in (("k", k), ("v", v)):
        check_tensor(x, name, ndim=4, floating=True)
    if k.shape != v.shape or k.dtype != v.dtype or k.device != v.device:
        raise ValueError(f"k {tuple(k.shape)} and v {tuple(v.shape)} must share one shape, dtype and device")
    held = cache.keys
    if held is not None and (held.shape[:2] + held.shape[3:] != k.shape[:2] + k.shape[3:] or held.dtype != k.dtype):
        raise ValueError(
            f"k has shape {tuple(k.shape)} and dtype {k.dtype}, but the cache holds (B, H, length, d_k) = "
            f"{tuple(held.shape)} of {held.dtype}: append the same rows, heads and head size"
        )


def _check_project(
    cache: LayerCache,
    attn: MultiHeadAttention,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    cross: bool = False,
) -> None:
    """attn a MultiHeadAttention, and inputs it accepts (B, t, d_model)."""
    if not isinstance(attn, MultiHeadAttention):
        raise TypeError(f"attn must be a MultiHeadAttention, got {type(attn).__name__}")
    check_bool(cross, "cross")
    check_attention_module_inputs(attn, query, key, value)


class LayerCache:
    """One layer's keys and values of the positions decoded so far, (B, H, length, d_k) each.

    They are written into buffers with spare room along the time axis (16 positions at first, then twice
    the length they must hold whenever they are full). torch.cat would read and write every cached position
    again at every step, at least doubling the memory traffic on the cache (a step also reads the weights).
    `memory` holds a cross-attention's keys and values of the encoder output, projected once.
    """

    def __init__(self) -> None:
        self.length = 0
        self._keys: torch.Tensor | None = None  # (B, H, capacity, d_k)
        self._values: torch.Tensor | None = None
        self.memory: tuple[torch.Tensor, torch.Tensor] | None = None
        self.memory_of: torch.Tensor | None = None  # the encoder output `memory` was projected from

    @checked(_check_append)
    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Add the new positions' keys and values (B, H, t, d_k); return all of them so far (B, H, length, d_k)."""
        end = self.length + k.shape[2]
        if self._keys is None or self._values is None or end > self._keys.shape[2]:
            capacity = max(2 * end, 16)
            keys = k.new_empty(k.shape[0], k.shape[1], capacity, k.shape[3])  # (B, H, capacity, d_k)
            values = v.new_empty(v.shape[0], v.shape[1], capacity, v.shape[3])
            if self._keys is not None and self._values is not None:
                keys[:, :, : self.length] = self._keys[:, :, : self.length]
                values[:, :, : self.length] = self._values[:, :, : self.length]
            self._keys, self._values = keys, values
        self._keys[:, :, self.length : end] = k
        self._values[:, :, self.length : end] = v
        self.length = end
        return self._keys[:, :, :end], self._values[:, :, :end]

    @property
    def keys(self) -> torch.Tensor | None:
        """The cached keys (B, H, length, d_k), None before the first append."""
        return None if self._keys is None else self._keys[:, :, : self.length]

    @property
    def values(self) -> torch.Tensor | None:
        """The cached values (B, H, length, d_k), None before the first append."""
        return None if self._values is None else self._values[:, :, : self.length]

    @property
    def capacity(self) -> int:
        """Positions the buffers can hold before they must grow (0 before the first append)."""
        return 0 if self._keys is None else self._keys.shape[2]

    @checked(_check_project)  # while attached, inside the caller's door: checked only when called directly
    def project(
        self,
        attn: MultiHeadAttention,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        cross: bool = False,
    ) -> tuple[torch.Tensor, ...]:
        """`attn.project` while this cache is attached: Q of the new positions, K and V of every position so far.

        Self-attention (query, key and value (B, t, D) of the new positions): their keys and values join the
        cache. Cross-attention (`cross`: key and value the encoder output, which does not change while decoding):
        its keys and values are projected at the first step only. Returns (B, H, T, d_k) each.
        """
        heads = attn.n_heads
        q = split_heads(attn.w_q(query), heads)  # (B, t, D) -> (B, H, t, d_k)
        if not cross:
            # Three products, not project_qkv: stacking W_Q, W_K, W_V copies all three matrices at every call,
            # which for one new token can take longer than the products themselves (chapter 13 measures it).
            k, v = split_heads(attn.w_k(key), heads), split_heads(attn.w_v(value), heads)  # (B, H, t, d_k)
            return (q, *self.append(k, v))  # (B, H, length, d_k) keys and values
        if self.memory is None:
            self.memory = (split_heads(attn.w_k(key), heads), split_heads(attn.w_v(value), heads))  # (B, H, S, d_k)
            self.memory_of = key
        return (q, *self.memory)

    def select(self, rows: torch.Tensor) -> None:
        """Keep the batch rows `rows` (a LongTensor of row indices, repeats allowed), in that order."""
        if self._keys is not None and self._values is not None:
            self._keys, self._values = self._keys.index_select(0, rows), self._values.index_select(0, rows)
        if self.memory is not None:
            self.memory = (self.memory[0].index_select(0, rows), self.memory[1].index_select(0, rows))
            self.memory_of = None  # the rows of another tensor now: no longer comparable by identity


class KVCache:
    """A `LayerCache` per layer; `length` is the number of positions cached (the same in every layer)."""

    def __init__(self, n_layers: int):
        self.layers = [LayerCache() for _ in range(check_positive_int(n_layers, "n_layers"))]
        # The attention modules found at the first attach, each with its cache's `project`: a decoding loop
        # attaches the cache at every step, and looking them up again each time would cost more than the swap.
        self._swaps: list[tuple[MultiHeadAttention, functools.partial]] = []
        self._attached_to: list[nn.Module] = []

    @property
    def length(self) -> int:
        return self.layers[0].length

    @property
    def batch(self) -> int | None:
        """The number of rows cached (None before the first step)."""
        keys = self.layers[0].keys
        return None if keys is None else keys.shape[0]

    @checked(lambda cache, rows: check_rows(rows, cache.batch))
    def select(self, rows: torch.Tensor) -> None:
        """Keep the batch rows `rows` in every layer (beam search follows the hypotheses it keeps)."""
        for layer in self.layers:
            layer.select(rows)

    @contextlib.contextmanager
    def attached(self, layers: Iterable[nn.Module]) -> Iterator[KVCache]:
        """Inside the block, the attention modules of layer i read and fill `self.layers[i]`.

        Each MultiHeadAttention's `project` is swapped for the cache's: the layers' own `forward`s then run
        on the new positions only, and nothing outside the attention module changes. Afterwards the modules
        get their own `project` back. The calls inside the block are not checked: check the inputs before it.
        """
        layers = _check_layers(layers, len(self.layers))
        if any(a is not b for a, b in zip(layers, self._attached_to)) or not self._attached_to:
            if self.length:
                raise ValueError("cache was filled by another model's layers: make one with that model's new_cache()")
            self._attached_to = layers
            self._swaps = [
                (
                    module,
                    functools.partial(layer_cache.project, module, cross=module is getattr(layer, "cross_attn", None)),
                )
                for layer, layer_cache in zip(layers, self.layers)
                for module in layer.modules()
                if isinstance(module, MultiHeadAttention)
            ]
        if any("project" in vars(module) for module, _ in self._swaps):
            raise ValueError("a cache is already attached to these layers: leave its `with` block first")
        for module, project in self._swaps:
            # Straight into the instance's dict: nn.Module.__setattr__'s checks for parameters and submodules
            # would cost more than the rest of the swap, and a decoding loop attaches at every step.
            vars(module)["project"] = project
        try:
            # The layers' own checks would compare the new positions' mask with their keys alone, not with the
            # cached ones: inside, nothing is checked, and the caller (decode_cached, GPT.forward) checks at its door.
            with inside_the_door():
                yield self
        finally:
            for module, _ in self._swaps:
                del vars(module)["project"]  # the instance attribute goes; the class's method shows through again


def check_rows(rows: object, batch: int | None) -> None:
    """Row indices for `select`: a 1-D integer tensor with values in [0, batch) (repeats allowed)."""
    if not isinstance(rows, torch.Tensor) or rows.dtype not in (torch.long, torch.int) or rows.dim() != 1:
        shape = tuple(rows.shape) if isinstance(rows, torch.Tensor) else type(rows).__name__
        raise TypeError(f"rows must be a 1-D integer tensor of row indices, got {shape}")
    if batch is not None and rows.numel() and not (int(rows.min()) >= 0 and int(rows.max()) < batch):
        raise ValueError(
            f"rows must lie in [0, {batch - 1}] (the rows cached), got [{int(rows.min())}, {int(rows.max())}]"
        )


def _check_layers(layers: object, n_layers: int) -> list[nn.Module]:
    """The layers a cache attaches to: an iterable (model.layers, model.decoder.layers) of n_layers modules."""
    if isinstance(layers, nn.Module) and not isinstance(layers, (nn.ModuleList, nn.Sequential)):
        raise TypeError(
            f"layers must be the model's layers (model.layers or model.decoder.layers), got a {type(layers).__name__}"
        )
    try:
        found = list(layers)  # type: ignore[call-overload]
    except TypeError:
        raise TypeError(f"layers must be an iterable of layers, got {type(layers).__name__}") from None
    if len(found) != n_layers:
        raise ValueError(f"cache has {n_layers} layers, the model has {len(found)}")
    return found


def _check_decode_cached(
    model: Transformer, tgt_in: torch.Tensor, memory: torch.Tensor, src: torch.Tensor, cache: KVCache
) -> None:
    if not isinstance(model, Transformer):
        raise TypeError(f"model must be a transformer_course.Transformer, got {type(model).__name__}")
    check_decode_inputs(model, tgt_in, memory, src)
    if not isinstance(cache, KVCache):
        raise TypeError(f"cache must be a KVCache, got {type(cache).__name__}")
    if cache.batch is not None and cache.batch != tgt_in.shape[0]:
        raise ValueError(f"cache holds {cache.batch} rows but tgt_in has {tgt_in.shape[0]}: use one cache per batch")
    memory_of = cache.layers[0].memory_of
    if memory_of is not None and memory_of is not memory:
        raise ValueError(
            "memory is not the encoder output this cache was filled with: use a new KVCache per source batch"
        )
    if len(cache.layers) != len(model.decoder.layers):
        raise ValueError(f"cache has {len(cache.layers)} layers, the decoder has {len(model.decoder.layers)}")
    if cache.length >= tgt_in.shape[1]:
        raise ValueError(f"tgt_in has {tgt_in.shape[1]} positions, all already in the cache (length {cache.length})")


@checked(_check_decode_cached)
def decode_cached(
    model: Transformer, tgt_in: torch.Tensor, memory: torch.Tensor, src: torch.Tensor, cache: KVCache
) -> torch.Tensor:
    """`model.decode` for the positions of tgt_in (B, T) not in `cache` yet: logits (B, T - cache.length, V).

    The same numbers as `model.decode(tgt_in, memory, src)[:, cache.length:]`, computed from the new
    positions alone: the decoder's layers run their own forward with the cache attached.
    """
    start, length = cache.length, tgt_in.shape[1]
    x = model.positions(model.tgt_embed(tgt_in[:, start:]), offset=start)  # (B, T - start, D)
    # Rows start.. of the causal mask: the new positions see every cached one and themselves (one new position
    # sees them all: its row of the causal mask is all True, so only the padding is masked).
    causal = causal_mask(length, tgt_in.device)[start:] if length - start > 1 else None
    tgt_mask = combine_masks(padding_mask(tgt_in, model.pad_id), causal)
    with cache.attached(model.decoder.layers):
        h = model.decoder(x, memory, tgt_mask, padding_mask(src, model.pad_id))
    return model.lm_head(h)


class CachedScorer:
    """Next-token logits for growing prefixes, like chapter 12's `PrefixScorer`, with a KV cache.

    Each call runs the decoder on the positions added since the last call only.
    """

    def __init__(self, model: Transformer, src: torch.Tensor):
        if not isinstance(model, Transformer):
            raise TypeError(f"model must be a transformer_course.Transformer, got {type(model).__name__}")
        self.model, self.src = model, src
        self.memory = model.encode(src)  # (B, S, D): the source is encoded once
        self.cache = KVCache(len(model.decoder.layers))

    def __call__(self, ys: torch.Tensor) -> torch.Tensor:
        """ys (N, t) prefixes -> (N, V) logits of the token after each."""
        return decode_cached(self.model, ys, self.memory, self.src, self.cache)[:, -1]  # (N, t', V) -> (N, V)

    # A door: inside beam search (itself a door) the rows come from topk and are not read back at every step.
    @checked(lambda scorer, rows: check_rows(rows, scorer.src.shape[0]))
    def select(self, rows: torch.Tensor) -> None:
        """Keep the prefixes `rows` (beam search keeps its best hypotheses)."""
        self.src, self.memory = self.src[rows], self.memory[rows]
        self.cache.select(rows)
