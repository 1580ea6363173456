"""`python -m transformer_course.translate`: train chapter 12's translator, then translate with it.

    python -m transformer_course.translate train            # train, save checkpoints/zh_en.pt
    python -m transformer_course.translate "咖哥 不 喜欢 他们"  # -> KaGe does not like them
    torchrun --standalone --nproc-per-node 2 -m transformer_course.translate train  # on 2 processes

The work is done by the library's `transformer_course.translate`; this module reads the command line,
checks it, and reports every problem in one line.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import cast

from .. import checkpoint, data, datasets, distributed, model, training, translate
from ._common import CLIError, Parser, add_device_option, join_processes, report_errors, seed_argument

DEFAULT_CHECKPOINT = Path("checkpoints") / "zh_en.pt"
CLI = "python -m transformer_course.translate"

USAGE = f"""
  {CLI} train [--steps N] [--seed S] [--checkpoint PATH] [--quiet] [--dropout P] [--batch-size B]
        [--accumulate K] [--precision {{fp32,bf16,fp16}}] [--device {{cpu,cuda}}]
  {CLI} SENTENCE [--beam K] [--checkpoint PATH]
  {CLI} --words [--checkpoint PATH]"""

DESCRIPTION = f"""Translate Chinese into English with a small Transformer trained on the course's generated corpus.

commands:
  train        train on the generated corpus (seconds on a laptop CPU, with a progress bar), report
               exact match and BLEU on held-out sentences, and save the model to the checkpoint
  SENTENCE     load the checkpoint and print the English translation of SENTENCE, words separated by
               spaces (or not: "咖哥不喜欢他们" is segmented by longest match)
  --words      list the Chinese words the checkpoint knows

The corpus's sentences: subject [不|非常] verb object [吗], subject 昨天 verb 了 object [吗] and
subject 昨天 没有 verb object, with subjects and objects {" ".join(datasets.SUBJECTS)}
(objects also {datasets.REFLEXIVE_WORD}) and verbs {" ".join(datasets.VERBS)}."""

EPILOG = f"""examples:
  {CLI} train
  torchrun --standalone --nproc-per-node 2 -m transformer_course.translate train   (2 processes)
  {CLI} "咖哥 不 喜欢 他们"          -> KaGe does not like them
  {CLI} "他 非常 喜欢 她 吗" --beam 4 -> does he like her very much ?

The checkpoint defaults to {DEFAULT_CHECKPOINT} under the current directory (ignored by git)."""


def _train_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog=f"{CLI} train",
        description="Train on the generated zh→en corpus and save a checkpoint.",
        epilog="Under torchrun (torchrun --standalone --nproc-per-node N -m transformer_course.translate train) "
        "N processes share every batch: with --dropout 0 they train what one process trains.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    defaults = translate.TranslatorConfig()
    parser.add_argument(
        "--steps", type=int, default=defaults.steps,
        help=f"most training steps (default {defaults.steps}; stops early at 100%% validation exact match)",
    )  # fmt: skip
    parser.add_argument(
        "--seed", type=seed_argument, default=0, help="seed of the corpus split and the model (default 0)"
    )
    _add_checkpoint_option(parser, "where to save")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    add_device_option(parser)
    parser.add_argument(
        "--dropout", type=float, default=defaults.dropout, metavar="P",
        help=f"dropout probability in [0, 1) (default {defaults.dropout:g})",
    )  # fmt: skip
    parser.add_argument(
        "--batch-size", type=int, default=defaults.batch_size, metavar="B",
        help=f"sentence pairs per step, over all processes (default {defaults.batch_size})",
    )  # fmt: skip
    parser.add_argument(
        "--accumulate", type=int, default=defaults.accumulate, metavar="K",
        help="compute each step's gradient in K micro-batches: the same step in less memory (default 1)",
    )  # fmt: skip
    parser.add_argument(
        "--precision", choices=tuple(training.PRECISIONS), default=defaults.precision,
        help=f"the forward pass in float32, or under autocast in bfloat16 or float16 (default {defaults.precision})",
    )  # fmt: skip
    return parser


def _add_checkpoint_option(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--checkpoint", type=Path, default=DEFAULT_CHECKPOINT, metavar="PATH",
        help=f"{what} (default {DEFAULT_CHECKPOINT})",
    )  # fmt: skip


def _translate_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog=CLI,
        usage=USAGE,
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("sentence", nargs="*", help="the Chinese sentence (quoted, or as separate words)")
    parser.add_argument("--beam", type=int, default=1, metavar="K", help="beam size (default 1: greedy decoding)")
    _add_checkpoint_option(parser, "model to load")
    parser.add_argument("--words", action="store_true", help="list the known Chinese words and exit")
    return parser


def _known_words(vocab: data.Vocab) -> list[str]:
    return [w for w in vocab.itos if w not in (data.PAD, data.SOS, data.EOS)]


def _load(path: Path) -> checkpoint.Checkpoint:
    if path.is_dir():
        raise CLIError(f"--checkpoint {path} is a folder: give the checkpoint file, such as {path / 'zh_en.pt'}")
    if not path.is_file():
        raise CLIError(f"no checkpoint at {path}: run `{CLI} train` first (or pass --checkpoint PATH)")
    try:
        return checkpoint.load_checkpoint(path, kind=model.Transformer)
    except ValueError as e:
        raise CLIError(f"{e}; run `{CLI} train` to make a new one") from None
    except OSError as e:  # unreadable: permissions, a device error, ...
        raise CLIError(f"cannot read the checkpoint {path}: {e.strerror or e}") from None


def _check_checkpoint_path(path: Path) -> None:
    """Refuse, before training, a checkpoint path that could not be written after it."""
    if path.is_dir():
        raise CLIError(f"--checkpoint {path} is a folder: give a file name, such as {path / 'zh_en.pt'}", code=2)
    # The nearest existing ancestor must be a folder we may write in (save_checkpoint creates the rest).
    folder = next(parent for parent in path.parents if parent.exists())  # '.' ends a relative path's parents
    if not folder.is_dir():
        raise CLIError(f"cannot save the checkpoint to {path}: {folder} is a file, not a folder", code=2)
    if not os.access(folder, os.W_OK | os.X_OK):
        raise CLIError(f"cannot save the checkpoint to {path}: the folder {folder} is not writable", code=2)


def _cmd_train(args: argparse.Namespace) -> int:
    for name in ("steps", "batch_size", "accumulate"):
        if getattr(args, name) <= 0:
            raise CLIError(f"--{name.replace('_', '-')}={getattr(args, name)} must be a positive integer", code=2)
    if not 0.0 <= args.dropout < 1.0:
        raise CLIError(f"--dropout={args.dropout} must be in [0, 1)", code=2)
    _check_checkpoint_path(args.checkpoint)
    training.set_threads(1)  # a small model gains nothing from more threads and loses a lot under load
    process = join_processes(args.device)  # rank 0 of 1 without torchrun
    try:
        result = translate.train_translator(
            seed=args.seed, steps=args.steps, dropout=args.dropout, batch_size=args.batch_size,
            accumulate=args.accumulate, precision=args.precision, progress=not args.quiet, device=process.device,
        )  # fmt: skip
        if not process.is_main:
            return 0  # the other processes have the same weights: rank 0 alone evaluates, saves and reports
        test = translate.evaluate(result.model, result.corpus, result.dataset.test_pairs)
        extra = {"seed": args.seed, "steps": result.history.steps, "test_exact_match": test.exact_match,
                 "test_bleu": test.bleu, "processes": process.world_size, "precision": args.precision}  # fmt: skip
        vocabs = result.corpus.src_vocab, result.corpus.tgt_vocab
        try:
            path = checkpoint.save_checkpoint(args.checkpoint, result.model, *vocabs, extra=extra)
        except OSError as e:
            raise CLIError(f"cannot save the checkpoint to {args.checkpoint}: {e.strerror or e}") from None
    finally:
        distributed.cleanup()
    how = [f"{process.world_size} processes"] if process.world_size > 1 else []
    how += [args.precision] if args.precision != "fp32" else []
    how += [f"{args.accumulate} micro-batches per step"] if args.accumulate > 1 else []
    print(
        f"trained {model.count_parameters(result.model):,} parameters for {result.history.steps} steps "
        f"in {result.history.seconds:.1f} s on {process.device.type}" + (f" ({', '.join(how)})" if how else "")
    )
    print(
        f"held-out test set ({len(test.references)} sentences never seen in training): "
        f"exact match {100 * test.exact_match:.1f} %, BLEU {test.bleu:.1f}"
    )
    print(f"saved {path}")
    return 0


def _cmd_translate(args: argparse.Namespace) -> int:
    if args.beam <= 0:
        raise CLIError(f"--beam={args.beam} must be a positive integer", code=2)
    sentence = " ".join(args.sentence)
    if not args.words and not sentence.strip():
        raise CLIError(f'the sentence is empty: try {CLI} "咖哥 不 喜欢 他们" (or --help)', code=2)
    ckpt = _load(args.checkpoint)
    training.set_threads(1)
    known = _known_words(cast(data.Vocab, ckpt.src_vocab))  # a Transformer's checkpoint holds both vocabularies
    if args.words:
        print(" ".join(known))
        return 0
    try:
        result = translate.translate_sentence(ckpt.model, ckpt, sentence, beam_size=args.beam)
    except translate.UnknownWordsError as e:
        raise CLIError(f"{e}; known words include {' '.join(known[:12])} ... (see --words)") from None
    except ValueError as e:
        raise CLIError(str(e)) from None
    print(result.text)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line `argv` (default: sys.argv[1:]); returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["train"]:
        return report_errors(lambda: _cmd_train(_train_parser().parse_args(args[1:])))
    return report_errors(lambda: _cmd_translate(_translate_parser().parse_args(args)))


if __name__ == "__main__":
    raise SystemExit(main())
