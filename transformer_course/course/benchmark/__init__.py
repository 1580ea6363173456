"""How fast is the package? Timings and memory, measured side by side (chapter 13, "Making attention fast").

    python -m transformer_course.course.benchmark                        # every section: 2-3 minutes on 2 idle cores
    python -m transformer_course.course.benchmark --quick                # small sizes, a smoke test (about 10 s)
    python -m transformer_course.course.benchmark --only decoding copy   # some sections only
    python -m transformer_course.course.benchmark --figures figures      # also save one PNG per section
    python -m transformer_course.course.benchmark --only compile         # torch.compile vs eager: never run by default

Sections: `attention` (the teaching path against the fused kernel), `multihead` (the package's module
against `torch.nn.MultiheadAttention`), `decoding` (greedy decoding with and without the KV cache),
`memory` (peak memory as the length doubles), `copy` (The Annotated Transformer's copy task, trained
until it is solved), `post1` and `translation` (how fast chapter 12's models learn post 1's five pairs
and the generated corpus), `gpt_training` and `gpt_sampling` (chapter 14's GPT: how close to the known
floor it gets and how fast, and sampling with and without the KV cache), `gpt_vs_nanogpt` (tc.GPT's training
throughput against a nanoGPT-style model of torch.nn modules with the same weights, at nanoGPT's CPU example
configuration, on 1 thread unless --threads says otherwise), `transformer_vs_torch` (the encoder-decoder stacks'
forward time against torch.nn.Transformer with the same weights), `bpe` (chapter 17's tokenizer
against Hugging Face's `tokenizers`: training and encoding speed, tokens per byte). Three run only when
named: `compile` (torch.compile against eager mode: compiling takes minutes), `modern` (chapter 19's decoder
against `transformers`' Llama with the same weights, and the KV cache's bytes per token; needs
`transformers`) and `text_lm` (chapter 18's GPT trained on real text for 1, 2 and 5 CPU minutes, in bits
per byte against gzip, bz2 and lzma: about 8 CPU minutes). Each is a function that returns a `Table`, rows
of plain numbers with the shapes and the method in its notes, which `main` prints and chapter 13's notebook
plots.

How the timings are taken: all variants of a comparison run in one process, interleaved (A B A B ...,
the order rotated every round), so a burst of background load hits them alike; each variant first
runs `warmup` times untimed, then the median of `repeats` timed runs is reported. Torch uses one
thread per core unless OMP_NUM_THREADS or --threads says otherwise; on a busy machine, threads wait
for each other and small operations slow down many times over, so compare numbers measured under
the same load only (the load and the threads are printed).

The sections live in private modules (`_attention`, `_decoding`, ...); everything public is imported here.
"""

from ._attention import attention, memory, multihead
from ._bpe import bpe
from ._cli import FUNCTIONS, OPTIONAL_SECTIONS, QUICK, SECTIONS, choose_threads, main, run
from ._compiling import compiled
from ._copy_task import COPY_CONFIGS, CopyTask, copy_accuracy, copy_task
from ._core import MiB, Table, environment, peak_memory, time_variants
from ._decoding import decoding, functional_greedy
from ._figures import figure
from ._language_models import gpt_sampling, gpt_training
from ._modern import modern
from ._references import NanoGPT, gpt_vs_nanogpt, transformer_vs_torch
from ._text import text_lm
from ._translation import post1_pairs, translation

__all__ = [
    "COPY_CONFIGS", "FUNCTIONS", "MiB", "OPTIONAL_SECTIONS", "QUICK", "SECTIONS", "CopyTask", "NanoGPT", "Table",
    "attention", "choose_threads", "compiled", "copy_accuracy", "copy_task", "decoding", "environment", "figure",
    "functional_greedy",
    "gpt_sampling", "gpt_training", "gpt_vs_nanogpt", "main", "memory", "modern", "multihead", "peak_memory",
    "post1_pairs", "run", "text_lm", "time_variants", "transformer_vs_torch", "translation", "bpe",
]  # fmt: skip
