"""Mutation testing: realistic bugs planted in the core modules, one at a time; a fast test must catch each.

    python tests/mutants.py              # every mutant, two at a time; prints each result and the score
    python tests/mutants.py -k norm      # only the mutants whose name contains "norm"
    python tests/mutants.py --list       # the mutants and the tests that must kill them
    python tests/mutants.py --jobs 1     # one at a time

A mutant is (name, file, original snippet, mutated snippet, tests). For each, the package and the tests
are copied into a temporary directory, the snippet is replaced there (the working tree is never touched),
and the mutant's tests run with `pytest -x`. A failing test kills the mutant; passing tests let it
survive. The score is killed / total, and every mutant must be killed: a survivor is a bug the suite
would let through. Mutants that change nothing observable (say, the growth factor of the KV cache's
buffer) are left out, since no test could kill them.

To save the 2 s that `import torch` costs per mutant, the script imports torch, pytest and hypothesis
once and forks a child per mutant; each child imports the mutated package from its temporary directory.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "transformer_course"
TIMEOUT_S = 240  # a mutant that makes its tests hang (an endless loop) counts as killed after this long


@dataclass(frozen=True)
class Mutant:
    name: str
    file: str  # under transformer_course/
    original: str  # must occur exactly once in the file
    mutated: str
    tests: tuple[str, ...]  # pytest arguments: files, node ids, -k expressions


def m(name, file, original, mutated, *tests):
    return Mutant(name, file, original, mutated, tuple(tests))


ATTENTION = "tests/unit/test_attention.py"
MASKS = "tests/unit/test_masks.py"
MULTIHEAD = "tests/unit/test_multihead.py"
NORM = "tests/unit/test_norm.py"
EMBEDDING = "tests/unit/test_embedding.py"
ENCODER = "tests/unit/test_encoder.py"
DECODER = "tests/unit/test_decoder.py"
MODEL = "tests/unit/test_model.py"
EFFICIENT = "tests/unit/test_efficient.py"
DECODING = "tests/unit/test_decoding.py"
DATA = "tests/unit/test_data.py"
CKPT = "tests/unit/test_checkpoint.py"
TRANSLATE = "tests/unit/test_translate.py"
# -k expressions for the comparisons with PyTorch in float32 (a module's file also holds its from_torch grid and
# its half-precision tests, which these leave out: the mutants they guard are listed with their own tests).
TORCH_MHA = "multihead_equals or multihead_without or multihead_gradients"
TORCH_ENCODER_LAYER = "(encoder_layer_equals or encoder_layer_with) and not half_precision"
TORCH_ENCODER = "(encoder_layer_equals or encoder_layer_with or encoder_stack_equals) and not half_precision"
TORCH_DECODER_LAYER = "(decoder_layer_equals or decoder_layer_memory) and not half_precision"
TORCH_LAYERNORM = "layernorm_equals_torch and not half_precision"

MUTANTS = [
    # --- attention: chapter 2 ----------------------------------------------------------------------------
    m("attention: divide by d_k instead of its square root", "attention.py",
      "return 1.0 / math.sqrt(d_k)", "return 1.0 / d_k", ATTENTION, "-k", "sdpa"),
    m("attention: no scaling", "attention.py",
      "scores = (q * attention_scale(q.shape[-1])) @", "scores = q @", ATTENTION, "-k", "sdpa"),
    m("attention: mask inverted", "attention.py",
      "scores = scores.masked_fill(~mask,", "scores = scores.masked_fill(mask,", ATTENTION, "-k", "sdpa"),
    m("attention: fully masked rows not zeroed", "attention.py",
      "weights = weights.masked_fill(~mask, 0.0)", "weights = weights", ATTENTION, "-k", "fully_masked"),
    m("attention: softmax over the queries", "attention.py",
      "torch.softmax(scores, dim=-1)", "torch.softmax(scores, dim=-2)", ATTENTION, "-k", "sdpa"),
    m("attention: attention-weight dropout never applied", "attention.py",
      "weights = F.dropout(weights, p=dropout_p)", "weights = weights", ATTENTION, EMBEDDING, "-k", "dropout"),
    m("attention: computed in float16", "attention.py",
      "q, k, v = (x.to(torch.promote_types(dtype, torch.float32)) for x in (q, k, v))", "pass",
      ATTENTION, MULTIHEAD, "-k", "half_precision or float16"),
    m("attention: masks may enlarge the output", "attention.py",
      "broadcast_or_none(mask.shape, shape) != shape", "broadcast_or_none(mask.shape, shape) is None",
      ATTENTION, "-k", "enlarge"),
    # --- masks: chapter 3 --------------------------------------------------------------------------------
    m("masks: causal mask above the diagonal", "masks.py",
      "dtype=torch.bool, device=device).tril()", "dtype=torch.bool, device=device).triu()", MASKS, "-k", "masks"),
    m("masks: padding mask marks the padding", "masks.py",
      "return (tokens != pad_id)[:, None, None, :]", "return (tokens == pad_id)[:, None, None, :]",
      MASKS, "-k", "masks"),
    m("masks: combine with or", "masks.py", "combined = combined & m", "combined = combined | m",
      MULTIHEAD, "-k", "multihead_equals and both"),
    m("masks: hide-mask converter inverted", "masks.py",
      '"""Convert a "1 (or True) = hide" mask, as in post 1, to the package\'s True = may attend."""\n'
      '    check_tensor(mask, "mask")\n    return mask == 0',
      '"""Convert a "1 (or True) = hide" mask, as in post 1, to the package\'s True = may attend."""\n'
      '    check_tensor(mask, "mask")\n    return mask != 0', MASKS, "-k", "conventions"),
    # --- multi-head attention: chapter 4 -----------------------------------------------------------------
    m("multihead: split heads without the transpose", "multihead.py",
      "return x.view(batch, length, n_heads, d_model // n_heads).transpose(1, 2)",
      "return x.view(batch, n_heads, length, d_model // n_heads)", MULTIHEAD, "-k", TORCH_MHA),
    m("multihead: merge heads without the transpose", "multihead.py",
      "return x.transpose(1, 2).reshape(batch, length, n_heads * d_k)",
      "return x.reshape(batch, length, n_heads * d_k)", MULTIHEAD, "-k", TORCH_MHA),
    m("multihead: attention dropout in eval mode too", "multihead.py",
      "self.dropout if self.training else 0.0", "self.dropout", MULTIHEAD, "-k", "multihead_attention and eval"),
    m("multihead: attention dropout never applied", "multihead.py",
      "self.dropout if self.training else 0.0", "0.0", MULTIHEAD, "-k", "multihead_attention and train"),
    m("multihead: W_Q and W_K swapped when copied", "multihead.py",
      "for linear, w in zip((new.w_q, new.w_k, new.w_v), m.in_proj_weight.chunk(3)):",
      "for linear, w in zip((new.w_k, new.w_q, new.w_v), m.in_proj_weight.chunk(3)):", MULTIHEAD, "-k", TORCH_MHA),
    m("multihead: stacked projection in the wrong order", "multihead.py",
      "torch.cat([self.w_q.weight, self.w_k.weight, self.w_v.weight])",
      "torch.cat([self.w_k.weight, self.w_q.weight, self.w_v.weight])", MULTIHEAD, "-k", "self_attention"),
    m("multihead: from_torch ignores the source's mode", "multihead.py",
      "dtype=m.in_proj_weight.dtype).train(m.training)", "dtype=m.in_proj_weight.dtype)",
      MULTIHEAD, "-k", "multihead_attention and 0.0-eval"),
    # --- feed-forward: chapter 5 -------------------------------------------------------------------------
    m("ffn: dropout after the second layer", "ffn.py",
      "return self.w_2(self.dropout(self.activation(self.w_1(x))))",
      "return self.dropout(self.w_2(self.activation(self.w_1(x))))", ENCODER, "-k", "encoder_layer and p0.3-train"),
    m("ffn: no activation", "ffn.py",
      "self.w_2(self.dropout(self.activation(self.w_1(x))))", "self.w_2(self.dropout(self.w_1(x)))",
      ENCODER, "-k", TORCH_ENCODER_LAYER),
    # --- norms: chapter 6 --------------------------------------------------------------------------------
    m("layernorm: unbiased variance", "norm.py",
      "var = centered.pow(2).mean(dim=-1, keepdim=True)",
      "var = centered.pow(2).sum(dim=-1, keepdim=True) / (x.shape[-1] - 1)", NORM, "-k", TORCH_LAYERNORM),
    m("layernorm: eps outside the square root", "norm.py",
      "torch.sqrt(var + self.eps)", "(torch.sqrt(var) + self.eps)", NORM, "-k", TORCH_LAYERNORM),
    m("layernorm: statistics in float16", "norm.py",
      "h = x.to(torch.promote_types(x.dtype, torch.float32))\n        centered",
      "h = x\n        centered", NORM, "-k", "layernorm and (half_precision or float16 or bfloat16)"),
    m("rmsnorm: sum instead of mean", "norm.py",
      "torch.rsqrt(h.pow(2).mean(dim=-1, keepdim=True)", "torch.rsqrt(h.pow(2).sum(dim=-1, keepdim=True)",
      NORM, "-k", "rmsnorm_formula"),
    m("layernorm: from_torch drops eps", "norm.py",
      "cls(m.normalized_shape[0], eps=m.eps,", "cls(m.normalized_shape[0], eps=1e-5,", NORM, "-k", TORCH_LAYERNORM),
    m("layernorm: bias=False still trains beta", "norm.py",
      "torch.zeros(d_model), requires_grad=bias)", "torch.zeros(d_model), requires_grad=True)",
      NORM, "-k", "layernorm and (train or eval or refuses)"),
    # --- residual: chapter 7 -----------------------------------------------------------------------------
    m("residual: Pre-LN without its norm", "residual.py",
      "return x + self.dropout(sublayer(self.norm(x)))", "return x + self.dropout(sublayer(x))",
      ENCODER, "-k", TORCH_ENCODER_LAYER),
    m("residual: Post-LN normalises the branch only", "residual.py",
      "return self.norm(x + self.dropout(sublayer(x)))", "return x + self.norm(self.dropout(sublayer(x)))",
      ENCODER, "-k", TORCH_ENCODER_LAYER),
    m("residual: dropout removed", "residual.py",
      "return self.norm(x + self.dropout(sublayer(x)))", "return self.norm(x + sublayer(x))",
      ENCODER, "-k", "encoder_layer and postln and p0.3-train"),
    # --- embeddings: chapter 8 ---------------------------------------------------------------------------
    m("embedding: no scaling by sqrt(d_model)", "embedding.py",
      "return self.embedding(tokens) * self.scale", "return self.embedding(tokens)",
      EMBEDDING, "-k", "token_embedding"),
    m("embedding: cosines in the even columns", "embedding.py",
      "table[:, 0::2] = torch.sin(angle)", "table[:, 0::2] = torch.cos(angle)", EMBEDDING, "-k", "sinusoidal"),
    m("embedding: positional-encoding dropout removed", "embedding.py",
      "return self.dropout(x + self.table(x.shape[1], offset).to(x.dtype))",
      "return x + self.table(x.shape[1], offset).to(x.dtype)", EMBEDDING, "-k", "positional"),
    m("embedding: offset ignored", "embedding.py",
      "self.table(x.shape[1], offset)", "self.table(x.shape[1])", EMBEDDING, "-k", "offset"),
    m("embedding: id range check off by one", "_validate.py",
      "if low < 0 or high >= vocab_size:", "if low < 0 or high > vocab_size:", MODEL, "-k", "too and large"),
    # --- interop: from_torch -----------------------------------------------------------------------------
    m("interop: feed-forward biases not copied", "interop.py",
      "                ours.bias.copy_(theirs.bias)", "                pass", ENCODER, "-k", TORCH_ENCODER_LAYER),
    m("interop: dropout probabilities not copied", "interop.py",
      "        sublayer.dropout.p = dropout.p", "        pass", ENCODER, "-k", "encoder_layer and p0.3-eval and relu"),
    m("interop: gelu taken for relu", "interop.py", 'return "gelu"', 'return "relu"',
      ENCODER, DECODER, "-k", "gelu and equals_torch and not half_precision"),
    m("interop: stack loses its final norm", "interop.py",
      "new.norm = nn.Identity() if m.norm is None else", "new.norm = nn.Identity() if True else",
      ENCODER, DECODER, "-k", "stack"),
    # --- encoder and decoder: chapters 9 and 10 ----------------------------------------------------------
    m("encoder: bias=False layers keep their biases", "encoder.py",
      "bias = m.linear1.bias is not None", "bias = True", ENCODER, "-k", "encoder_layer and nobias and relu"),
    m("encoder: self-attention ignores the mask", "encoder.py",
      "lambda y: self.self_attn(y, y, y, mask)", "lambda y: self.self_attn(y, y, y, None)",
      ENCODER, "-k", TORCH_ENCODER),
    m("decoder: self-attention ignores the causal mask", "decoder.py",
      "lambda y: self.self_attn(y, y, y, tgt_mask)", "lambda y: self.self_attn(y, y, y, None)",
      DECODER, "-k", TORCH_DECODER_LAYER),
    m("decoder: cross-attention ignores the memory mask", "decoder.py",
      "self.cross_attn(y, memory, memory, memory_mask)", "self.cross_attn(y, memory, memory, None)",
      DECODER, "-k", TORCH_DECODER_LAYER),
    m("decoder: stack skips its final norm", "decoder.py", "        return self.norm(x)", "        return x",
      DECODER, "-k", "decoder_stack"),
    # --- the model: chapter 11 ---------------------------------------------------------------------------
    m("model: decoder not causal", "model.py",
      "tgt_mask = combine_masks(padding_mask(tgt_in, self.pad_id), causal_mask(tgt_in.shape[1], tgt_in.device))",
      "tgt_mask = padding_mask(tgt_in, self.pad_id)", EFFICIENT, "-k", "cached_decode"),
    m("model: source padding not masked", "model.py",
      "return self.encoder(x, padding_mask(src, self.pad_id))", "return self.encoder(x, None)",
      MODEL, "-k", "padding"),
    m("model: memory padding not masked", "model.py",
      "h = self.decoder(x, memory, tgt_mask, padding_mask(src, self.pad_id))",
      "h = self.decoder(x, memory, tgt_mask, None)", MODEL, "-k", "padding"),
    m("model: output projection not tied", "model.py",
      "            self.lm_head.weight = self.src_embed.weight\n", "", CKPT, "-k", "round_trip"),
    # --- chapter 13: the fused kernel and the KV cache ---------------------------------------------------
    m("fused: mask ignored", "efficient.py",
      "attn_mask=mask, dropout_p=dropout_p", "attn_mask=None, dropout_p=dropout_p", EFFICIENT, "-k", "fused"),
    m("cache: positions restart at 0", "efficient.py",
      "model.tgt_embed(tgt_in[:, start:]), offset=start)", "model.tgt_embed(tgt_in[:, start:]), offset=0)",
      EFFICIENT, "-k", "cached_decode"),
    m("cache: the new position sees the first row of the causal mask", "efficient.py",
      "causal_mask(length, tgt_in.device)[start:] if",
      "causal_mask(length, tgt_in.device)[: length - start] if",
      EFFICIENT, "tests/unit/test_seam.py", "-k", "cached_decode or several_positions"),
    m("cache: use_fused_attention inverted", "efficient.py",
      "_fused_without_weights if on else scaled_dot_product_attention",
      "scaled_dot_product_attention if on else _fused_without_weights", EFFICIENT, "-k", "fast_path"),
    # --- decoding: chapter 12 ----------------------------------------------------------------------------
    m("decoding: length_penalty ignored", "decoding.py",
      "best = int((scores / lengths.clamp(min=1).float() ** length_penalty).argmax())",
      "best = int(scores.argmax())", DECODING, "-k", "length_penalty"),
    m("decoding: finished rows not padded", "decoding.py",
      "next_token = scorer(ys).argmax(dim=-1).masked_fill(finished, pad_id)",
      "next_token = scorer(ys).argmax(dim=-1)", DECODING, "-k", "finished"),
    m("decoding: finished hypotheses dropped from the beam", "decoding.py",
      "        candidates[finished, pad_id] = scores[finished]\n", "", DECODING, "-k", "beam"),
    m("decoding: beam rows and columns swapped", "decoding.py",
      "index // log_probs.shape[-1], index % log_probs.shape[-1]",
      "index % log_probs.shape[-1], index // log_probs.shape[-1]", DECODING, "-k", "beam"),
    m("decoding: NaN logits let through", "decoding.py", "if torch.isnan(logits).any():", "if False:",
      DECODING, "-k", "nan"),
    m("decoding: max_len beyond the positional table allowed", "decoding.py",
      "if max_len > config.max_len:", "if False:", DECODING, "-k", "positional"),
    m("decoding: bos_id equal to pad_id allowed", "decoding.py", "if bos_id == model.pad_id:", "if False:",
      DECODING, "-k", "pad"),
    m("modes: only the top module's mode restored", "_modes.py",
      "for module, training in modes:  # parents before children: each child's own flag wins\n"
      "            module.train(training)",
      "model.train(modes[0][1])", DECODING, "-k", "mode"),
    # --- data, checkpoints and the translator ------------------------------------------------------------
    m("data: decoding a vocabulary ignores eos", "data.py",
      "            if strip and word == EOS:\n                break",
      "            if strip and word == EOS:\n                continue", DATA, "-k", "vocab"),
    m("data: the decoder input is the target itself", "data.py",
      "pad_rows([t[:-1] for t in tgt], tgt_vocab.pad_id, tgt_len)",
      "pad_rows([t[1:] for t in tgt], tgt_vocab.pad_id, tgt_len)", DATA, "-k", "batches"),
    m("data: batches never reshuffled", "data.py",
      "torch.randperm(n, generator=self.generator)", "torch.randperm(n, generator=torch.Generator().manual_seed(0))",
      DATA, "-k", "batches"),
    m("checkpoint: extra not checked on save", "checkpoint.py",
      '    extra = {} if extra is None else extra\n    check_plain(extra, "extra")\n',
      "    extra = {} if extra is None else extra\n", CKPT, "-k", "extra"),
    m("checkpoint: vocabularies not checked on save", "checkpoint.py",
      "        check_vocabularies(config, src_vocab, tgt_vocab)\n        if vocab", "        if vocab",
      CKPT, "-k", "vocabularies"),
    m("checkpoint: weights not loaded", "checkpoint.py",
      'model.load_state_dict(payload["state_dict"])', "pass", CKPT, "-k", "round_trip"),
    m("checkpoint: loaded model left in training mode", "checkpoint.py",
      "    model.eval()\n    return Checkpoint", "    return Checkpoint", CKPT, "-k", "round_trip"),
    m("translate: special tokens taken for words", "translate.py",
      "        if piece in known:", "        if piece in vocab.stoi:", TRANSLATE, "-k", "special"),
    m("translate: one budget for the whole batch", "translate.py",
      "tgt_vocab.decode(row[:n])", "tgt_vocab.decode(row)", TRANSLATE, "-k", "batch_size"),
    # --- a held-out run: four of twenty new bugs that no test caught, each with a test since -------------
    m("checkpoint: infinite weights loaded", "checkpoint.py",
      "if not torch.isfinite(tensor).all()]", "if torch.isnan(tensor).any()]", CKPT, "-k", "infinite"),
    m("gpt: residual projections initialised 1/sqrt(2) too wide", "gpt.py",
      "std=0.02 / math.sqrt(2 * n_layers))", "std=0.02 / math.sqrt(n_layers))", "tests/unit/test_gpt.py",
      "-k", "initialisation"),
    m("bpe: the shorter of two specials sharing a prefix wins", "bpe.py",
      "sorted(self.special_tokens, key=len, reverse=True)", "sorted(self.special_tokens, key=len)",
      "tests/unit/test_bpe.py", "-k", "extends_another"),
    m("textlm: held-out loss computed with dropout on", "textlm.py",
      "    with evaluating(model):  # each submodule", "    with torch.no_grad():  # each submodule",
      "tests/unit/test_textlm.py", "-k", "dropout_off"),
]  # fmt: skip


def check_mutants(mutants: list[Mutant] = MUTANTS) -> None:
    """Every original snippet occurs exactly once in its file and differs from its mutation."""
    names = [mutant.name for mutant in mutants]
    if len(set(names)) != len(names):
        raise ValueError("two mutants share a name")
    for mutant in mutants:
        source = (ROOT / PACKAGE / mutant.file).read_text(encoding="utf-8")
        count = source.count(mutant.original)
        if count != 1 or mutant.original == mutant.mutated:
            raise ValueError(f"{mutant.name}: the original snippet occurs {count} times in {mutant.file}")


def _copy(destination: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", ".hypothesis", "*.pyc")
    shutil.copytree(ROOT / PACKAGE, destination / PACKAGE, ignore=ignore)
    shutil.copytree(ROOT / "tests", destination / "tests", ignore=ignore)


def _child(directory: Path, args: list[str]) -> None:
    """In the forked child: run pytest on the copy in `directory`, quietly, and exit with its status."""
    signal.alarm(TIMEOUT_S)  # a hanging mutant dies of SIGALRM
    os.chdir(directory)
    sys.path.insert(0, str(directory))
    log = os.open(directory / "pytest.log", os.O_WRONLY | os.O_CREAT)
    os.dup2(log, 1)
    os.dup2(log, 2)
    import pytest

    options = ["-x", "-q", "-p", "no:cacheprovider", "-o", "addopts=", "--rootdir", str(directory)]
    os._exit(int(pytest.main([*options, *args], plugins=[_NoShrinking()])))


class _NoShrinking:
    """A failing property test would spend most of a mutant's run shrinking its example; a mutant needs a
    failure, not the smallest one. Loaded once the suite's conftest has chosen its hypothesis profile."""

    @staticmethod
    def pytest_configure(config) -> None:
        from hypothesis import Phase, settings

        settings.register_profile("mutants", parent=settings.default, phases=[Phase.explicit, Phase.generate])
        settings.load_profile("mutants")


@dataclass
class Result:
    mutant: Mutant | None  # None: the unmutated package (the baseline)
    status: str  # "killed", "survived", "timeout" (counts as killed), "passed"/"failed" for the baseline
    seconds: float
    log: str


def run(mutants: list[Mutant], jobs: int = 2, verbose: bool = True) -> list[Result]:
    """Every mutant, `jobs` at a time, after the baseline: the selected tests must pass unmutated."""
    import pytest  # noqa: F401  imported once here, so that every forked child has it already
    import torch  # (not hypothesis: pytest could not rewrite its plugin's asserts in the children)

    torch.set_num_threads(1)
    check_mutants(mutants)
    work = Path(tempfile.mkdtemp(prefix="mutants-"))
    running: dict[int, tuple[Mutant | None, Path, float]] = {}
    try:
        baseline = sorted({arg for mutant in mutants for arg in mutant.tests if arg.startswith("tests/")})
        _start(running, work / "baseline", None, baseline)
        result = _wait(running, verbose)
        if result.status != "passed":
            raise RuntimeError(f"the tests fail on the unmutated package:\n{result.log[-3000:]}")
        results = []
        for index, mutant in enumerate(mutants):
            if len(running) >= jobs:
                results.append(_wait(running, verbose))
            _start(running, work / f"mutant{index:03d}", mutant, list(mutant.tests))
        while running:
            results.append(_wait(running, verbose))
        return results
    finally:
        for pid in running:  # interrupted: stop the children still running
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(work, ignore_errors=True)


def _start(running: dict, directory: Path, mutant: Mutant | None, args: list[str]) -> None:
    """Copy the package and the tests to `directory`, plant `mutant` there and fork a child that tests it."""
    _copy(directory)
    if mutant is not None:
        path = directory / PACKAGE / mutant.file
        path.write_text(path.read_text(encoding="utf-8").replace(mutant.original, mutant.mutated, 1), encoding="utf-8")
    pid = os.fork()
    if pid == 0:
        _child(directory, args)
    running[pid] = (mutant, directory, time.perf_counter())


def _wait(running: dict, verbose: bool) -> Result:
    pid, status = os.wait()
    mutant, directory, start = running.pop(pid)
    seconds = time.perf_counter() - start
    log = (directory / "pytest.log").read_text(encoding="utf-8", errors="replace")
    if os.WIFSIGNALED(status):
        outcome = "timeout" if os.WTERMSIG(status) == signal.SIGALRM else f"crashed (signal {os.WTERMSIG(status)})"
    else:
        code = os.WEXITSTATUS(status)
        if mutant is None:
            outcome = "passed" if code == 0 else "failed"
        elif code == 1:
            outcome = "killed"
        elif code == 0:
            outcome = "survived"
        else:  # 2-5: interrupted, internal error, usage error, nothing collected
            outcome = f"error (pytest exit code {code})"
    if verbose:
        print(f"{outcome:>9}  {seconds:5.1f} s  {mutant.name if mutant else 'baseline: the unmutated package'}")
    return Result(mutant, outcome, seconds, log)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-k", default="", help="only the mutants whose name contains this text")
    parser.add_argument("--jobs", type=int, default=2, help="mutants run at once (default 2)")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    args = parser.parse_args(argv)
    mutants = [mutant for mutant in MUTANTS if args.k in mutant.name]
    if args.list:
        for mutant in mutants:
            print(f"{mutant.name}\n    {mutant.file}: {mutant.original!r} -> {mutant.mutated!r}\n    pytest "
                  + " ".join(mutant.tests))  # fmt: skip
        return 0
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    start = time.perf_counter()
    results = run(mutants, jobs=args.jobs)
    killed = [r for r in results if r.status in ("killed", "timeout")]
    print(f"\nmutation score: {len(killed)}/{len(results)} killed ({100 * len(killed) / len(results):.0f} %) "
          f"in {time.perf_counter() - start:.0f} s with {args.jobs} job(s)")  # fmt: skip
    for r in results:
        if r.status not in ("killed", "timeout"):
            print(f"\n{r.status}: {r.mutant.name if r.mutant else ''}\n{r.log[-2000:]}")
    return 0 if len(killed) == len(results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
