"""The BPE section: the package's tokenizer against Hugging Face ``tokenizers``, trained on the course corpus."""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Sequence

from ... import corpus
from ...bpe import BPETokenizer, huggingface_merges, train_huggingface
from ._core import Table


def bpe(vocab_sizes: Sequence[int] = (512, 1024, 2048, 4096), max_chars: int | None = None, device=None) -> Table:
    """Training and encoding throughput of tc.BPETokenizer vs ``tokenizers``, and held-out tokens per byte.

    Both train on the documents of the corpus's training split (each cut to its first `max_chars` characters
    when given) and encode the documents of the held-out split, which neither saw: the package one after the
    other, ``tokenizers`` with ``encode_batch``. `same_merges` and `same_ids` say whether the two agree exactly (they
    must; ids compared after a fixed renumbering: ``tokenizers`` numbers the special token 0 and the 256 bytes 1 to
    256, merged tokens keep their ids). Runs on the CPU:
    `device` is accepted and ignored, tokenization has no tensors. Without ``tokenizers`` installed (it is
    not a dependency of the package) the reference's columns are empty.
    """
    del device
    have_reference = importlib.util.find_spec("tokenizers") is not None
    train = [doc[:max_chars] for doc in corpus.load_documents("train")]
    heldout = [doc[:max_chars] for doc in corpus.load_documents("heldout")]
    n_train, n_heldout = (sum(len(doc.encode("utf-8")) for doc in docs) for docs in (train, heldout))
    table = Table(
        "bpe",
        "Byte-level BPE: the package (Python) vs tokenizers (Rust), same settings, same text",
        ["vocab_size", "train_s", "hf_train_s", "train_ratio", "encode_MB_s", "hf_encode_MB_s", "encode_ratio",
         "tokens_per_byte", "same_merges", "same_ids"],
    )  # fmt: skip
    special = "<|endoftext|>"
    for vocab_size in vocab_sizes:
        start = time.perf_counter()
        tok = BPETokenizer.train(train, vocab_size, special_tokens=[special])
        train_s = time.perf_counter() - start
        start = time.perf_counter()
        ids = [i for doc in heldout for i in tok.encode(doc)]  # a fresh tokenizer: its cache starts empty
        encode_s = time.perf_counter() - start
        row: dict[str, object] = dict.fromkeys(table.columns)
        row.update(vocab_size=vocab_size, train_s=train_s, encode_MB_s=n_heldout / encode_s / 1e6)
        row.update(tokens_per_byte=len(ids) / n_heldout)
        if have_reference:
            start = time.perf_counter()
            hf = train_huggingface(train, vocab_size, special_tokens=[special])
            hf_train_s = time.perf_counter() - start
            start = time.perf_counter()
            hf_ids = [i for encoding in hf.encode_batch(heldout) for i in encoding.ids]
            hf_encode_s = time.perf_counter() - start
            # tokenizers numbers the special token 0 and the bytes 1..256; this package, bytes 0..255 and it 256.
            mapped = [i + 1 if i < 256 else 0 if i == 256 else i for i in ids]
            row.update(hf_train_s=hf_train_s, train_ratio=train_s / hf_train_s)
            row.update(hf_encode_MB_s=n_heldout / hf_encode_s / 1e6, encode_ratio=encode_s / hf_encode_s)
            row.update(same_merges=[(tok.vocab[a], tok.vocab[b]) for a, b in tok.merges] == huggingface_merges(hf))
            row.update(same_ids=mapped == hf_ids)
        table.rows.append(row)
    if not have_reference:
        table.notes.append("tokenizers is not installed (pip install tokenizers): its columns are empty")
    table.notes += [
        f"trained on {n_train:,} bytes of the corpus's train split, encoded its {n_heldout:,} held-out bytes",
        "ratios are the package's time over tokenizers' (higher = the package is slower); tokenizers may use "
        "every core (Rayon) to count words, merge pairs and encode a batch, the package uses one",
    ]
    return table
