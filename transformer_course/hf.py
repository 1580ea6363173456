"""Hugging Face `transformers` models in and out: the same weights in the package's GPT and ModernDecoder.

    model = tc.from_hf(GPT2LMHeadModel(config))     # -> tc.GPT, the same logits
    model = tc.from_hf(LlamaForCausalLM(config))    # -> tc.ModernDecoder, the same logits
    hf_model = tc.to_hf(model)                      # and back

`transformers` is not a dependency of the package: it is imported here, inside the functions, only when a
conversion back to it is asked for. A model this package cannot reproduce exactly (another architecture, or an
option such as biases in Llama's attention) is refused with an error that names what stands in the way.
GPT-2 stores its projections as `Conv1D` weights (in_features, out_features), the transpose of `nn.Linear`'s.
"""

from __future__ import annotations

from typing import Any, cast

import torch
from torch import nn

from .encoder import EncoderLayer
from .gpt import GPT
from .modern import ModernConfig, ModernDecoder
from .norm import LayerNorm
from .residual import SublayerConnection


def from_hf(hf_model: nn.Module) -> nn.Module:
    """The package's model equivalent to `hf_model`, its weights copied: GPT2LMHeadModel -> GPT,
    LlamaForCausalLM -> ModernDecoder. The new model is in eval mode, on hf_model's device and dtype (its RoPE
    frequencies stay in float32; transformers builds its own in float32, but a later `.to(dtype)` of the
    transformers model rounds them)."""
    kind = type(hf_model).__name__
    if kind == "GPT2LMHeadModel":
        model: nn.Module = _gpt_from_hf(hf_model)
    elif kind == "LlamaForCausalLM":
        model = _modern_from_hf(hf_model)
    else:
        raise TypeError(f"hf_model must be a GPT2LMHeadModel or a LlamaForCausalLM from transformers, got {kind}")
    weight = next(hf_model.parameters())
    return model.to(device=weight.device, dtype=weight.dtype).eval()


def to_hf(model: nn.Module) -> Any:
    """The `transformers` model equivalent to `model` (GPT -> GPT2LMHeadModel, ModernDecoder -> LlamaForCausalLM),
    its weights copied, in eval mode. Needs `transformers` installed."""
    if isinstance(model, GPT):
        return _gpt_to_hf(model)
    if isinstance(model, ModernDecoder):
        return _modern_to_hf(model)
    raise TypeError(f"model must be a transformer_course.GPT or ModernDecoder, got {type(model).__name__}")


def _refuse(kind: str, option: str, value: object, wanted: object) -> None:
    if value != wanted:
        raise ValueError(f"{kind} has {option}={value!r}; the package's model needs {option}={wanted!r}")


# ----------------------------------------------------------------------------------------- GPT-2


def _gpt_from_hf(hf_model: Any) -> GPT:  # Any: transformers' classes are not the package's to import
    config = hf_model.config
    kind = "GPT2LMHeadModel"
    # "gelu_new" is GPT-2's tanh approximation of GELU, which every released checkpoint uses.
    if config.activation_function not in ("gelu_new", "gelu_pytorch_tanh", "gelu"):
        raise ValueError(f"{kind} has activation_function={config.activation_function!r}; supported: gelu_new, gelu")
    _refuse(kind, "layer_norm_epsilon", config.layer_norm_epsilon, 1e-5)
    _refuse(kind, "scale_attn_weights", config.scale_attn_weights, True)
    _refuse(kind, "scale_attn_by_inverse_layer_idx", config.scale_attn_by_inverse_layer_idx, False)
    _refuse(kind, "add_cross_attention", getattr(config, "add_cross_attention", False), False)
    _refuse(kind, "tie_word_embeddings", getattr(config, "tie_word_embeddings", True), True)
    d_model = config.n_embd
    d_ff = config.n_inner or 4 * d_model
    with torch.random.fork_rng(devices=[]):  # every weight is overwritten: leave the caller's random state alone
        model = GPT(config.vocab_size, d_model, config.n_head, config.n_layer, d_ff, config.n_positions, dropout=0.0)
    if config.activation_function != "gelu":
        for layer in model.layers:
            layer.ffn.activation = nn.GELU(approximate="tanh")
    source = hf_model.transformer
    with torch.no_grad():
        model.token_embedding.weight.copy_(source.wte.weight)  # the head is tied to it
        model.positions.pe.copy_(source.wpe.weight)
        for layer, block in zip(model.layers, source.h):
            attn = layer.self_attn
            # Conv1D weights are (in, out): W_Q, W_K, W_V are the three column blocks of c_attn, transposed.
            for linear, w, b in zip(
                (attn.w_q, attn.w_k, attn.w_v),
                block.attn.c_attn.weight.chunk(3, dim=1),
                block.attn.c_attn.bias.chunk(3),
            ):
                linear.weight.copy_(w.t())  # (D, D) Conv1D (in, out) -> Linear (out, in)
                linear.bias.copy_(b)
            _copy_conv1d(attn.w_o, block.attn.c_proj)
            _copy_conv1d(layer.ffn.w_1, block.mlp.c_fc)
            _copy_conv1d(layer.ffn.w_2, block.mlp.c_proj)
            for norm, hf_norm in zip(_block_norms(layer), (block.ln_1, block.ln_2)):
                norm.weight.copy_(hf_norm.weight)
                norm.bias.copy_(hf_norm.bias)
        final = cast(LayerNorm, model.blocks.norm)
        final.weight.copy_(source.ln_f.weight)
        final.bias.copy_(source.ln_f.bias)
    return model


def _block_norms(layer: EncoderLayer) -> list[LayerNorm]:
    """A GPT block's two LayerNorms, before the attention and before the feed-forward network (ln_1, ln_2)."""
    return [cast(SublayerConnection, sublayer).norm for sublayer in layer.sublayers]


def _copy_conv1d(linear: nn.Linear, conv: Any, to_conv: bool = False) -> None:
    """Copy a Conv1D (weight (in, out)) into an nn.Linear (weight (out, in)), or back with to_conv=True."""
    if to_conv:
        conv.weight.copy_(linear.weight.t())  # (out, in) -> (in, out)
        conv.bias.copy_(linear.bias)
    else:
        linear.weight.copy_(conv.weight.t())  # (in, out) -> (out, in)
        linear.bias.copy_(conv.bias)


def _gpt_to_hf(model: GPT) -> Any:
    from transformers import GPT2Config, GPT2LMHeadModel

    c = model.config
    tanh = isinstance(model.layers[0].ffn.activation, nn.GELU) and model.layers[0].ffn.activation.approximate == "tanh"
    config = GPT2Config(
        vocab_size=c.vocab_size, n_embd=c.d_model, n_head=c.n_heads, n_layer=c.n_layers,
        n_inner=c.d_ff, n_positions=c.max_len, activation_function="gelu_new" if tanh else "gelu",
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=None, eos_token_id=None,
    )  # fmt: skip
    with torch.random.fork_rng(devices=[]):
        hf_model: Any = GPT2LMHeadModel(config)
    target = hf_model.transformer
    with torch.no_grad():
        target.wte.weight.copy_(model.token_embedding.weight)
        target.wpe.weight.copy_(model.positions.pe)
        for layer, block in zip(model.layers, target.h):
            attn = layer.self_attn
            weight = torch.cat([attn.w_q.weight, attn.w_k.weight, attn.w_v.weight]).t()  # (3D, D) -> (D, 3D)
            block.attn.c_attn.weight.copy_(weight)
            block.attn.c_attn.bias.copy_(torch.cat([attn.w_q.bias, attn.w_k.bias, attn.w_v.bias]))
            _copy_conv1d(attn.w_o, block.attn.c_proj, to_conv=True)
            _copy_conv1d(layer.ffn.w_1, block.mlp.c_fc, to_conv=True)
            _copy_conv1d(layer.ffn.w_2, block.mlp.c_proj, to_conv=True)
            for norm, hf_norm in zip(_block_norms(layer), (block.ln_1, block.ln_2)):
                hf_norm.weight.copy_(norm.weight)
                hf_norm.bias.copy_(norm.bias)
        final = cast(LayerNorm, model.blocks.norm)
        target.ln_f.weight.copy_(final.weight)
        target.ln_f.bias.copy_(final.bias)
    weight = model.token_embedding.weight
    return hf_model.to(device=weight.device, dtype=weight.dtype).eval()


# ----------------------------------------------------------------------------------------- Llama


def _rope_theta(config: Any) -> float:
    """The RoPE base θ, refusing the scaled variants (Llama 3.1's "llama3", "yarn", ...) that the package lacks.

    transformers 5 keeps θ and the scaling in `config.rope_parameters`; 4.x keeps θ in `config.rope_theta` and the
    scaling in `config.rope_scaling`, under "rope_type" (or "type" before 4.45).
    """
    parameters = getattr(config, "rope_parameters", None) or {}
    scaling = getattr(config, "rope_scaling", None) or {}
    rope_type = parameters.get("rope_type") or scaling.get("rope_type") or scaling.get("type") or "default"
    if rope_type != "default":
        raise ValueError(f"LlamaForCausalLM has rope_type={rope_type!r}; the package implements only 'default' RoPE")
    return float(parameters.get("rope_theta", getattr(config, "rope_theta", 10000.0)))


def _modern_from_hf(hf_model: Any) -> ModernDecoder:
    config = hf_model.config
    kind = "LlamaForCausalLM"
    _refuse(kind, "hidden_act", config.hidden_act, "silu")
    _refuse(kind, "attention_bias", config.attention_bias, False)
    _refuse(kind, "mlp_bias", config.mlp_bias, False)
    _refuse(kind, "head_dim", config.head_dim, config.hidden_size // config.num_attention_heads)
    ours = ModernConfig(
        vocab_size=config.vocab_size, d_model=config.hidden_size, n_layers=config.num_hidden_layers,
        n_heads=config.num_attention_heads, n_kv_heads=config.num_key_value_heads, d_ff=config.intermediate_size,
        max_len=config.max_position_embeddings, rope_theta=_rope_theta(config), eps=config.rms_norm_eps,
        tie_weights=bool(config.tie_word_embeddings),
    )  # fmt: skip
    with torch.random.fork_rng(devices=[]):
        model = ModernDecoder(ours)
    with torch.no_grad():
        for name, tensor in _modern_names(model, hf_model):
            name.copy_(tensor)
    return model


def _modern_names(model: Any, hf_model: Any) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(package weight, transformers weight) pairs: the same layout, nn.Linear on both sides."""
    source = hf_model.model
    pairs = [(model.token_embedding.weight, source.embed_tokens.weight), (model.norm.weight, source.norm.weight)]
    if not model.config.tie_weights:
        pairs.append((model.lm_head.weight, hf_model.lm_head.weight))
    for block, layer in zip(model.blocks, source.layers):
        pairs += [
            (block.attn_norm.weight, layer.input_layernorm.weight),
            (block.attn.w_q.weight, layer.self_attn.q_proj.weight),
            (block.attn.w_k.weight, layer.self_attn.k_proj.weight),
            (block.attn.w_v.weight, layer.self_attn.v_proj.weight),
            (block.attn.w_o.weight, layer.self_attn.o_proj.weight),
            (block.ffn_norm.weight, layer.post_attention_layernorm.weight),
            (block.ffn.w_gate.weight, layer.mlp.gate_proj.weight),
            (block.ffn.w_up.weight, layer.mlp.up_proj.weight),
            (block.ffn.w_down.weight, layer.mlp.down_proj.weight),
        ]
    return pairs


def _modern_to_hf(model: ModernDecoder) -> Any:
    from transformers import LlamaConfig, LlamaForCausalLM

    c = model.config
    sizes: dict[str, Any] = dict(  # a dict: transformers' own annotations do not list every option
        vocab_size=c.vocab_size, hidden_size=c.d_model, intermediate_size=c.d_ff, num_hidden_layers=c.n_layers,
        num_attention_heads=c.n_heads, num_key_value_heads=c.n_kv_heads, max_position_embeddings=c.max_len,
        rope_theta=c.rope_theta, rms_norm_eps=c.eps, tie_word_embeddings=c.tie_weights,
        bos_token_id=None, eos_token_id=None, pad_token_id=None,
    )  # fmt: skip
    with torch.random.fork_rng(devices=[]):
        hf_model: Any = LlamaForCausalLM(LlamaConfig(**sizes))
    with torch.no_grad():
        for ours, theirs in _modern_names(model, hf_model):
            theirs.copy_(ours)
    weight = model.token_embedding.weight
    return hf_model.to(device=weight.device, dtype=weight.dtype).eval()
