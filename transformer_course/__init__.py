"""transformer_course: the Transformer built from scratch, one module per chapter of the course.

    import transformer_course as tc

Modules in chapter order: `transformer_course.course.notebook.CHAPTERS` lists them; each imports only modules
of its own or earlier chapters (tests/unit/course/test_notebook_helpers.py), except that chapter 12's decoding
uses chapter 13's KV cache by default. The command-line programs live in `transformer_course.cli`, the course's
tools (notebook helpers, exercise checkers, benchmark) in `transformer_course.course`.
Tensors are batch-first (B, T, D); masks are bool with True = may attend.
"""

from . import corpus
from .attention import attention_scale, scaled_dot_product_attention
from .bert import BERT, BERTClassifier, BERTConfig, mask_tokens
from .bpe import BPETokenizer
from .checkpoint import Checkpoint, load_checkpoint, save_checkpoint
from .data import POST1_PAIRS, Batch, ParallelCorpus, Vocab, make_batch
from .decoder import Decoder, DecoderLayer
from .decoding import beam_search, greedy_decode, sequence_log_prob
from .efficient import KVCache, fused_attention, keep_attention_weights, use_fused_attention, use_fused_norms
from .embedding import LearnedPositionalEncoding, PositionalEncoding, TokenEmbedding, sinusoidal_positional_encoding
from .encoder import BlockConfig, Encoder, EncoderLayer
from .ffn import PositionwiseFeedForward
from .gpt import GPT, GPTConfig, generate
from .hf import from_hf, to_hf
from .masks import causal_mask, combine_masks, from_hide_mask, from_keep_mask, padding_mask
from .mlp import MLP, collapse_linear
from .model import Transformer, TransformerConfig, count_parameters, summary
from .modern import ModernConfig, ModernDecoder, RotaryEmbedding, SwiGLU, apply_rope, repeat_kv
from .multihead import MultiHeadAttention, merge_heads, split_heads
from .norm import LayerNorm, RMSNorm
from .residual import SublayerConnection
from .textlm import bits_per_byte, compressed_bits_per_byte, get_batch, heldout_blocks, heldout_loss
from .training import (
    History,
    LabelSmoothingLoss,
    fit,
    get_device,
    noam_lr,
    noam_scheduler,
    set_seed,
    set_threads,
)

__version__ = "0.1.0"

__all__ = [
    "MLP", "collapse_linear",
    "scaled_dot_product_attention", "attention_scale", "fused_attention", "use_fused_attention", "use_fused_norms",
    "causal_mask", "padding_mask", "combine_masks", "from_hide_mask", "from_keep_mask",
    "MultiHeadAttention", "split_heads", "merge_heads", "keep_attention_weights",
    "PositionwiseFeedForward",
    "LayerNorm", "RMSNorm",
    "SublayerConnection",
    "TokenEmbedding", "sinusoidal_positional_encoding", "PositionalEncoding", "LearnedPositionalEncoding",
    "BlockConfig", "EncoderLayer", "Encoder",
    "DecoderLayer", "Decoder", "KVCache",
    "Transformer", "TransformerConfig", "count_parameters", "summary",
    "greedy_decode", "beam_search", "sequence_log_prob",
    "noam_lr", "noam_scheduler", "LabelSmoothingLoss", "fit", "History", "set_seed", "get_device", "set_threads",
    "Vocab", "ParallelCorpus", "Batch", "make_batch", "POST1_PAIRS",
    "Checkpoint", "save_checkpoint", "load_checkpoint",
    "GPT", "GPTConfig", "generate",
    "BERT", "BERTConfig", "BERTClassifier", "mask_tokens",
    "BPETokenizer", "corpus",
    "get_batch", "heldout_blocks", "heldout_loss", "bits_per_byte", "compressed_bits_per_byte",
    "ModernConfig", "ModernDecoder", "RotaryEmbedding", "apply_rope", "SwiGLU", "repeat_kv", "from_hf", "to_hf",
]  # fmt: skip
