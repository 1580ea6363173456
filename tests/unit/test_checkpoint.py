"""Checkpoints: a round trip gives identical logits; saving is atomic; loading is safe and fails clearly."""

import dataclasses
import os
import pickle
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import transformer_course as tc
from transformer_course import checkpoint, translate


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
    assert loaded.model.lm_head.weight is loaded.model.src_embed.weight  # tying survives the round trip
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
    with pytest.raises(ValueError, match=pattern) as error:
        tc.load_checkpoint(bad)
    assert "weights_only" not in str(error.value), "never advise loading an untrusted file with code enabled"


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoint at"):
        tc.load_checkpoint(tmp_path / "nope.pt")


# ---------------------------------------------------------------------------------------------------------
# The promise: a checkpoint that saves, loads; one that loads, translates.


def test_empty_file(tmp_path):
    empty = tmp_path / "empty.pt"
    empty.touch()
    with pytest.raises(ValueError, match=r"empty.pt is empty \(0 bytes\): not a checkpoint"):
        tc.load_checkpoint(empty)


class Opaque:
    pass


@pytest.mark.parametrize(
    ("extra", "exc", "message"),
    [
        ({"tags": {"a", "b"}}, TypeError, r"extra\['tags'\] is a builtins.set; a checkpoint's extra holds plain data"),
        ({"dir": Path("runs")}, TypeError, r"extra\['dir'\] is a pathlib\."),
        ({"loss": np.float64(0.5)}, TypeError, r"extra\['loss'\] is a numpy.float64"),
        ({"weights": torch.zeros(2)}, TypeError, r"extra\['weights'\] is a torch.Tensor"),
        ({"history": [1, 2, [3, Opaque()]]}, TypeError, r"extra\['history'\]\[2\]\[1\] is a .*Opaque"),
        ({"by_step": {1: 0.5}}, TypeError, r"extra\['by_step'\] has the key 1 \(int\); keys must be str"),
        ({3: "x"}, TypeError, r"extra has the key 3 \(int\); keys must be str"),
        (["steps", 3], TypeError, "extra must be a dict, got list"),
    ],
    ids=["set", "path", "numpy float", "tensor", "nested object", "int key inside", "int key", "list"],
)
def test_save_refuses_extra_values_its_loader_would_refuse(trained, tmp_path, extra, exc, message):
    model, corpus = trained
    with pytest.raises(exc, match=message):
        tc.save_checkpoint(tmp_path / "model.pt", model, corpus.src_vocab, corpus.tgt_vocab, extra=extra)
    assert list(tmp_path.iterdir()) == []  # refused before anything was written


plain = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3)
        | st.lists(children, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=3), children, max_size=3)
    ),
    max_leaves=8,
)


@given(extra=st.dictionaries(st.text(max_size=4), plain, max_size=4))
def test_every_extra_that_saves_loads_back_equal(extra):
    torch.manual_seed(0)
    corpus = tc.ParallelCorpus(tc.POST1_PAIRS)
    model = tc.Transformer(len(corpus.src_vocab), len(corpus.tgt_vocab), d_model=8, n_heads=2, n_layers=1, d_ff=16)
    with tempfile.TemporaryDirectory() as tmp:
        path = tc.save_checkpoint(Path(tmp) / "m.pt", model, corpus.src_vocab, corpus.tgt_vocab, extra=extra)
        assert tc.load_checkpoint(path).extra == extra


def test_save_refuses_swapped_vocabularies(tmp_path):
    corpus = tc.ParallelCorpus(tc.POST1_PAIRS)
    model = tc.Transformer(len(corpus.src_vocab), len(corpus.tgt_vocab), d_model=8, n_heads=2, n_layers=1, d_ff=16)
    with pytest.raises(ValueError, match=r"src_vocab has \d+ tokens but the model's src_vocab_size is \d+ "
                                         r"\(are src_vocab and tgt_vocab swapped\?\)"):  # fmt: skip
        tc.save_checkpoint(tmp_path / "m.pt", model, corpus.tgt_vocab, corpus.src_vocab)


def test_save_refuses_swapped_vocabularies_of_equal_size(tmp_path):
    """Equal sizes: the target vocabulary is the one with <sos> and <eos>."""
    src_vocab = tc.Vocab(["<pad>", "a", "b", "c", "d"])
    tgt_vocab = tc.Vocab(["<pad>", "<sos>", "<eos>", "x", "y"])
    model = tc.Transformer(5, 5, d_model=8, n_heads=2, n_layers=1, d_ff=16)
    tc.save_checkpoint(tmp_path / "ok.pt", model, src_vocab, tgt_vocab)
    with pytest.raises(ValueError, match=r"tgt_vocab has no <sos> or <eos>.*swapped"):
        tc.save_checkpoint(tmp_path / "m.pt", model, tgt_vocab, src_vocab)


@pytest.mark.parametrize(
    ("vocabs", "exc", "message"),
    [
        ((tc.Vocab(["a", "<pad>", "b"]), tc.Vocab(["<pad>", "<sos>", "<eos>"])), ValueError,
         r"src_vocab must hold <pad> at the model's pad_id=0, got 1"),
        ((tc.Vocab(["<pad>", "a", "b"]), tc.Vocab(["<pad>", "<sos>", "x"])), ValueError, "tgt_vocab has no <eos>"),
        ((["<pad>", "a", "b"], tc.Vocab(["<pad>", "<sos>", "<eos>"])), TypeError,
         "src_vocab must be a transformer_course.data.Vocab, got list"),
    ],
    ids=["pad elsewhere", "no eos", "not a Vocab"],
)  # fmt: skip
def test_save_refuses_vocabularies_the_translator_cannot_use(tmp_path, vocabs, exc, message):
    model = tc.Transformer(3, 3, d_model=8, n_heads=2, n_layers=1, d_ff=16)
    with pytest.raises(exc, match=message):
        tc.save_checkpoint(tmp_path / "m.pt", model, *vocabs)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda p: p.update(src_vocab=p["tgt_vocab"], tgt_vocab=p["src_vocab"]), "swapped"),
        (lambda p: p.update(extra=["not", "a", "dict"]), "extra must be a dict"),
        (lambda p: p["config"].update(d_model=12), "size mismatch"),
        (lambda p: p.pop("tgt_vocab"), "KeyError"),
        (lambda p: p["src_vocab"].__setitem__(3, 7), "src_vocab must be a list of str tokens"),
        (lambda p: next(iter(p["state_dict"].values())).fill_(float("nan")), "NaN or infinite"),
    ],
    ids=[
        "swapped vocabularies",
        "extra a list",
        "config and weights disagree",
        "no target vocabulary",
        "a number in the vocabulary",
        "NaN weights",
    ],
)
def test_load_refuses_a_file_written_by_other_code(tmp_path, edit, message):
    """A file this package's save would not write (made by hand or by another version) fails clearly on load."""
    corpus = tc.ParallelCorpus(tc.POST1_PAIRS)
    model = tc.Transformer(len(corpus.src_vocab), len(corpus.tgt_vocab), d_model=8, n_heads=2, n_layers=1, d_ff=16)
    path = tc.save_checkpoint(tmp_path / "m.pt", model, corpus.src_vocab, corpus.tgt_vocab)
    payload = torch.load(path, weights_only=True)
    edit(payload)
    torch.save(payload, path)
    with pytest.raises(ValueError, match=f"is a damaged checkpoint .*{message}"):
        tc.load_checkpoint(path)


def test_a_checkpoint_that_loads_translates(trained, tmp_path):
    model, corpus = trained
    loaded = tc.load_checkpoint(tc.save_checkpoint(tmp_path / "m.pt", model, corpus.src_vocab, corpus.tgt_vocab))
    sentences = [s for s, _ in tc.POST1_PAIRS]
    assert translate.translate_batch(loaded.model, loaded, sentences) == translate.translate_batch(
        model, corpus, sentences
    )
    assert translate.translate_sentence(loaded.model, loaded, sentences[0]).tokens is not None


def test_loading_leaves_the_global_random_stream_alone(trained, tmp_path):
    # A seeded experiment that loads a checkpoint halfway must draw the same numbers after it as without it.
    model, corpus = trained
    path = tc.save_checkpoint(tmp_path / "model.pt", model, corpus.src_vocab, corpus.tgt_vocab)
    torch.manual_seed(123)
    expected = torch.rand(5)
    torch.manual_seed(123)
    tc.load_checkpoint(path)
    assert torch.equal(torch.rand(5), expected)


# ----------------------------------------------------------------------------------------- any model, by kind


def _gpt() -> tc.GPT:
    torch.manual_seed(0)
    return tc.GPT(12, d_model=16, n_heads=2, n_layers=2, d_ff=32, max_len=10, dropout=0.0).eval()


def test_a_gpt_round_trip_gives_identical_logits_and_its_vocab(tmp_path):
    model = _gpt()
    vocab = tc.Vocab([f"w{i}" for i in range(12)])
    path = tc.save_checkpoint(tmp_path / "gpt.pt", model, vocab=vocab, extra={"steps": 7})
    loaded = tc.load_checkpoint(path, kind=tc.GPT)
    ids = torch.randint(0, 12, (2, 6))
    assert isinstance(loaded.model, tc.GPT) and loaded.kind == "GPT" and loaded.model.config == model.config
    assert torch.equal(loaded.model(ids), model(ids))
    assert loaded.vocab == vocab and loaded.src_vocab is None and loaded.extra == {"steps": 7}
    assert loaded.model.lm_head.weight is loaded.model.token_embedding.weight  # tied after loading too
    assert tc.load_checkpoint(tc.save_checkpoint(tmp_path / "bare.pt", model)).vocab is None


def test_a_checkpoint_of_another_kind_is_refused_by_name(trained, tmp_path):
    translator, corpus = trained
    gpt_path = tc.save_checkpoint(tmp_path / "gpt.pt", _gpt())
    with pytest.raises(ValueError, match=r"gpt.pt holds a GPT, not a Transformer"):
        tc.load_checkpoint(gpt_path, kind=tc.Transformer)
    path = tc.save_checkpoint(tmp_path / "t.pt", translator, corpus.src_vocab, corpus.tgt_vocab)
    with pytest.raises(ValueError, match=r"t.pt holds a Transformer, not a GPT"):
        tc.load_checkpoint(path, kind=tc.GPT)
    with pytest.raises(TypeError, match="kind must be one of the model classes"):
        tc.load_checkpoint(path, kind=tc.MLP)


def test_saving_refuses_the_wrong_vocabularies_for_the_kind(trained, tmp_path):
    translator, corpus = trained
    with pytest.raises(TypeError, match=r"give a GPT its vocab=\.\.\. instead"):
        tc.save_checkpoint(tmp_path / "g.pt", _gpt(), corpus.src_vocab, corpus.tgt_vocab)
    with pytest.raises(ValueError, match="vocab has 3 tokens but the model's vocab_size is 12"):
        tc.save_checkpoint(tmp_path / "g.pt", _gpt(), vocab=tc.Vocab(["a", "b", "c"]))
    with pytest.raises(TypeError, match=r"model must be one of .* got MLP"):
        tc.save_checkpoint(tmp_path / "m.pt", tc.MLP([2, 3]))
    with pytest.raises(TypeError, match="vocab is for language models"):
        tc.save_checkpoint(tmp_path / "t.pt", translator, corpus.src_vocab, corpus.tgt_vocab, vocab=corpus.src_vocab)


def test_a_format_1_checkpoint_with_the_old_output_name_still_loads(trained, tmp_path):
    # Written before the redesign: no "kind", and the output layer saved as generator.weight.
    model, corpus = trained
    state = {("generator.weight" if k == "lm_head.weight" else k): v for k, v in model.state_dict().items()}
    payload = {
        "format": "transformer_course/1",
        "config": dataclasses.asdict(model.config),
        "state_dict": state,
        "src_vocab": list(corpus.src_vocab.itos),
        "tgt_vocab": list(corpus.tgt_vocab.itos),
        "extra": {},
    }
    torch.save(payload, tmp_path / "old.pt")
    loaded = tc.load_checkpoint(tmp_path / "old.pt", kind=tc.Transformer)
    batch = corpus.batch()
    assert torch.equal(loaded.model(batch.src, batch.tgt_in), model(batch.src, batch.tgt_in))


def test_a_bert_round_trip_gives_identical_hidden_states(tmp_path):
    torch.manual_seed(0)
    model = tc.BERT(15, d_model=16, n_heads=2, n_layers=2, d_ff=32, max_len=12, pad_id=1, norm_first=True).eval()
    loaded = tc.load_checkpoint(tc.save_checkpoint(tmp_path / "bert.pt", model), kind=tc.BERT)
    ids = torch.randint(0, 15, (2, 7))
    assert loaded.model.config == model.config == tc.BERTConfig(15, 16, 2, 2, 32, 12, 0.1, 1, True)
    assert torch.equal(loaded.model(ids), model(ids))
    with pytest.raises(ValueError, match=r"bert.pt holds a BERT, not a GPT"):
        tc.load_checkpoint(tmp_path / "bert.pt", kind=tc.GPT)


# ------------------------------------------------------------------------- findings of the adversarial pass


def _resave(path: Path, edit) -> Path:
    payload = torch.load(path, weights_only=True)
    edit(payload)
    torch.save(payload, path)
    return path


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda c: c.pop("dropout"), r"config lacks dropout"),
        (lambda c: c.update(rope=True), r"config has unknown fields rope"),
    ],
    ids=["a field missing", "an unknown field"],
)
def test_load_refuses_a_config_with_missing_or_unknown_fields(tmp_path, edit, message):
    # Rebuilding from a config without dropout would silently use the default 0.1: refuse it by name instead.
    path = _resave(tc.save_checkpoint(tmp_path / "gpt.pt", _gpt()), lambda p: edit(p["config"]))
    with pytest.raises(ValueError, match=f"gpt.pt is a damaged checkpoint .*{message}"):
        tc.load_checkpoint(path)


def test_a_format_1_checkpoint_without_a_newer_field_gets_its_default(trained, tmp_path):
    model, corpus = trained
    config = dataclasses.asdict(model.config)
    del config["positional"]  # a field added after format 1
    vocabs = {"src_vocab": list(corpus.src_vocab.itos), "tgt_vocab": list(corpus.tgt_vocab.itos)}
    payload = {"format": "transformer_course/1", "config": config, "state_dict": model.state_dict(), **vocabs}
    torch.save(payload, tmp_path / "old.pt")
    assert tc.load_checkpoint(tmp_path / "old.pt").model.config == model.config


@pytest.mark.parametrize("build", [lambda: _gpt(), lambda: tc.BERT(15, d_model=16, n_heads=2, n_layers=1, d_ff=32)])
def test_no_model_has_an_integer_tensor_in_its_state_dict(trained, build):
    # What makes refusing non-floating tensors on load safe: every saved tensor of every kind is floating point.
    for model in (trained[0], build()):
        assert all(tensor.is_floating_point() for tensor in model.state_dict().values())


def test_load_refuses_integer_weights(tmp_path):
    # Integer weights load into float parameters as whole numbers: an all-zero model, without a word.
    def to_int(payload):
        name = next(iter(payload["state_dict"]))
        payload["state_dict"][name] = payload["state_dict"][name].long()

    path = _resave(tc.save_checkpoint(tmp_path / "gpt.pt", _gpt()), to_int)
    with pytest.raises(ValueError, match=r"is a damaged checkpoint .*token_embedding.weight is torch.int64"):
        tc.load_checkpoint(path)


def test_a_path_that_is_not_a_path_is_refused_by_name(tmp_path):
    message = "path must be a str or os.PathLike, got NoneType"
    with pytest.raises(TypeError, match=message):
        tc.load_checkpoint(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=message):
        tc.save_checkpoint(None, _gpt())  # type: ignore[arg-type]


def test_saving_to_a_folder_asks_for_a_file_name(tmp_path):
    with pytest.raises(
        ValueError, match=f"^{tmp_path} is a folder: give a file name, such as {tmp_path / 'model.pt'}$"
    ):
        tc.save_checkpoint(tmp_path, _gpt())
    assert list(tmp_path.iterdir()) == []  # no temporary file left behind


def test_a_compiled_model_saves_the_model_it_wraps(tmp_path):
    model = _gpt()
    compiled = torch.compile(model)  # the wrapper only: nothing is compiled until it is called
    loaded = tc.load_checkpoint(tc.save_checkpoint(tmp_path / "gpt.pt", compiled), kind=tc.GPT)
    ids = torch.randint(0, 12, (2, 6))
    assert type(loaded.model) is tc.GPT and torch.equal(loaded.model(ids), model(ids))


def test_load_refuses_a_device_it_cannot_use(tmp_path, monkeypatch):
    path = tc.save_checkpoint(tmp_path / "gpt.pt", _gpt())
    with pytest.raises(ValueError, match=r"^device='banana' is not a device PyTorch knows$"):
        tc.load_checkpoint(path, device="banana")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for device in ("cuda", "cuda:0", torch.device("cuda")):
        with pytest.raises(ValueError, match=r"^device='cuda(:0)?' but this machine has no CUDA GPU"):
            tc.load_checkpoint(path, device=device)
    assert tc.load_checkpoint(path, device="cpu").model.lm_head.weight.device.type == "cpu"


@pytest.mark.parametrize("value", [float("inf"), float("-inf")])
def test_load_refuses_infinite_weights(tmp_path, value):
    """Infinite weights are damage too, as the message says: not only NaN."""
    model = tc.GPT(12, d_model=8, n_heads=2, n_layers=1, d_ff=16, max_len=8)
    path = tc.save_checkpoint(tmp_path / "m.pt", model)
    payload = torch.load(path, weights_only=True)
    next(iter(payload["state_dict"].values()))[0, 0] = value
    torch.save(payload, path)
    with pytest.raises(ValueError, match=r"is a damaged checkpoint .*NaN or infinite"):
        tc.load_checkpoint(path)
