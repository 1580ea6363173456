"""Checkpoints: a round trip gives identical logits; saving is atomic; loading is safe and fails clearly."""

import os
import pickle

import pytest
import torch

import transformer_course as tc
from transformer_course import checkpoint


@pytest.fixture
def trained(tmp_path):
    torch.manual_seed(0)
    corpus = tc.ParallelCorpus(tc.POST1_PAIRS, shared_vocab=True)
    model = tc.Transformer(len(corpus.src_vocab), len(corpus.tgt_vocab), d_model=16, n_heads=2, n_layers=1,
                           d_ff=32, share_embeddings=True, norm_first=True).eval()  # fmt: skip
    return model, corpus


def test_round_trip_gives_identical_logits(trained, tmp_path):
    model, corpus = trained
    path = tc.save_checkpoint(tmp_path / "model.pt", model, corpus.src_vocab, corpus.tgt_vocab, extra={"steps": 3})
    loaded = tc.load_checkpoint(path)
    batch = corpus.batch()
    assert torch.equal(loaded.model(batch.src, batch.tgt_in), model(batch.src, batch.tgt_in))
    assert loaded.src_vocab == corpus.src_vocab and loaded.tgt_vocab == corpus.tgt_vocab
    assert loaded.extra == {"steps": 3}
    assert loaded.model.config == model.config
    assert loaded.model.generator.weight is loaded.model.src_embed.weight  # tying survives the round trip
    assert not loaded.model.training


def test_save_is_atomic(trained, tmp_path, monkeypatch):
    """A crash while writing leaves the previous checkpoint untouched and no temporary file behind."""
    model, corpus = trained
    path = tc.save_checkpoint(tmp_path / "model.pt", model, corpus.src_vocab, corpus.tgt_vocab)
    before = path.read_bytes()

    def crash(obj, f):
        f.write(b"half a file")
        raise OSError("disk full")

    monkeypatch.setattr(checkpoint.torch, "save", crash)
    with pytest.raises(OSError, match="disk full"):
        tc.save_checkpoint(path, model, corpus.src_vocab, corpus.tgt_vocab)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["model.pt"]


def test_load_uses_weights_only(monkeypatch, trained, tmp_path):
    model, corpus = trained
    path = tc.save_checkpoint(tmp_path / "model.pt", model, corpus.src_vocab, corpus.tgt_vocab)
    seen = {}
    real_load = torch.load

    def spy(*args, **kwargs):
        seen.update(kwargs)
        return real_load(*args, **kwargs)

    monkeypatch.setattr(checkpoint.torch, "load", spy)
    tc.load_checkpoint(path)
    assert seen.get("weights_only") is True


class Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


@pytest.mark.parametrize(
    ("content", "pattern"),
    [
        (lambda p, good: p.write_bytes(good[: len(good) // 2]), r"is not a readable checkpoint"),
        (lambda p, good: p.write_bytes(os.urandom(256)), r"is not a readable checkpoint"),
        (lambda p, good: torch.save({"weights": torch.zeros(3)}, p), r"is not a transformer_course checkpoint"),
        (lambda p, good: p.write_bytes(pickle.dumps(Evil(), protocol=2)), r"is not a readable checkpoint"),
    ],
    ids=["truncated", "random bytes", "foreign torch file", "pickle with code"],
)
def test_bad_files_raise_a_clear_error(trained, tmp_path, content, pattern):
    model, corpus = trained
    good = tc.save_checkpoint(tmp_path / "good.pt", model, corpus.src_vocab, corpus.tgt_vocab).read_bytes()
    bad = tmp_path / "bad.pt"
    content(bad, good)
    with pytest.raises(ValueError, match=pattern):
        tc.load_checkpoint(bad)


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoint at"):
        tc.load_checkpoint(tmp_path / "nope.pt")
