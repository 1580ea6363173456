"""Chapter 12's wrong answers (`WRONG_ANSWERS`) and the tests specific to its checkers.

The wrong answers below are written the way a reader might write them, independently of the
variants the checkers use to recognise the mistakes.

test_exercise_checkers.py runs every row of the table against its checker (the mistake's key and the
words of its message), with the reference solution and the checks common to every checker.
"""

import pytest
import torch

import transformer_course as tc
from transformer_course.course.exercises import check, solutions
from transformer_course.course.exercises.decoding import decoder_logits, post1_pairs_model


def test_the_package_passes_too():
    assert check.greedy(tc.greedy_decode).passed
    assert check.greedy(lambda m, s, n, b, e: tc.greedy_decode(m, s, n, b, e, use_cache=False)).passed


def test_greedy_solution_translates_the_five_pairs():
    model, corpus = post1_pairs_model()
    src = corpus.encode_source([s for s, _ in tc.POST1_PAIRS])
    out = solutions.greedy(model, src, 10, corpus.tgt_vocab.sos_id, corpus.tgt_vocab.eos_id)
    assert [" ".join(corpus.tgt_vocab.decode(row)) for row in out] == [t for _, t in tc.POST1_PAIRS]


def test_decoder_logits_with_the_causal_mask_is_the_models_decoder():
    model, corpus = post1_pairs_model()
    src = corpus.encode_source(["咖哥 喜欢 小冰", "自然语言处理 很 强大"])
    ys = torch.tensor([[1, 3, 4], [1, 14, 15]])
    with torch.no_grad():
        memory = model.encode(src)
        mine = decoder_logits(model, ys, memory, src, tc.causal_mask(3))
        torch.testing.assert_close(mine, model(src, ys))
        assert not torch.allclose(decoder_logits(model, ys, memory, src, None), mine)


def test_beam_step_solution_agrees_with_the_package_beam_search():
    # The solution's step, repeated until every hypothesis has finished, is tc.beam_search.
    model, corpus = post1_pairs_model()
    bos, eos = corpus.tgt_vocab.sos_id, corpus.tgt_vocab.eos_id
    for sentence in ["深度学习 改变 世界", "小冰 喜欢 咖哥"]:
        src = corpus.encode_source([sentence])
        memory = model.encode(src)
        seqs, scores, finished = torch.tensor([[bos]]), torch.zeros(1), torch.zeros(1, dtype=torch.bool)
        with torch.no_grad():
            while not finished.all() and seqs.shape[1] < 10:
                n = len(seqs)
                logits = model.decode(seqs, memory.expand(n, -1, -1), src.expand(n, -1))[:, -1]
                beam, token, scores = solutions.beam_step(scores, torch.log_softmax(logits, -1), finished, 3, 0)
                seqs = torch.cat([seqs[beam], token[:, None]], dim=1)
                finished = finished[beam] | (token == eos)
        expected = tc.beam_search(model, src, 3, 10, bos, eos)[0].tolist()
        assert seqs[scores.argmax()].tolist()[: len(expected)] == expected


# ---- exercise 12.1: greedy


@torch.no_grad()
def greedy_one_pass(model, src, max_len, bos, eos):
    # Post 1: fill the decoder input with <sos> and padding, run it once, read every position.
    memory = model.encode(src)
    dec_in = torch.zeros(src.shape[0], max_len - 1, dtype=torch.long)
    dec_in[:, 0] = bos
    predict = decoder_logits(model, dec_in, memory, src, tc.causal_mask(max_len - 1)).max(dim=-1).indices
    return torch.cat([dec_in[:, :1], predict], dim=1)


@torch.no_grad()
def greedy_reading_first_position(model, src, max_len, bos, eos):
    memory = model.encode(src)
    ys = torch.tensor([[bos]] * src.shape[0])
    done = torch.zeros(src.shape[0], dtype=torch.bool)
    for _ in range(max_len - 1):
        word = decoder_logits(model, ys, memory, src, tc.causal_mask(ys.size(1)))[:, 0, :].argmax(-1)
        word[done] = model.pad_id
        ys = torch.cat((ys, word.unsqueeze(1)), 1)
        done = done | (word == eos)
        if done.all():
            break
    return ys


def make_greedy(mask=True, pad=True, stop_rule="all", drop_bos=False):
    """A reader's loop, written with a for loop and tensors indexed in place."""

    @torch.no_grad()
    def greedy(model, src, max_len, bos, eos):
        memory = model.encode(src)
        ys = torch.full((len(src), max_len), model.pad_id)
        ys[:, 0] = bos
        done = [False] * len(src)
        for t in range(1, max_len):
            tgt_mask = tc.causal_mask(t) if mask else None
            word = decoder_logits(model, ys[:, :t], memory, src, tgt_mask)[:, t - 1].argmax(-1)
            for i in range(len(src)):
                ys[i, t] = model.pad_id if (pad and done[i]) else word[i]
                done[i] = done[i] or int(word[i]) == eos
            if (stop_rule == "all" and all(done)) or (stop_rule == "any" and any(done)):
                ys = ys[:, : t + 1]
                break
        return ys[:, 1:] if drop_bos else ys

    return greedy


@torch.no_grad()
def greedy_feeding_only_bos(model, src, max_len, bos, eos):
    # The output grows, but the decoder is always given <sos> alone: the first word repeats.
    memory = model.encode(src)
    start = torch.full((src.shape[0], 1), bos)
    out = [start]
    for _ in range(max_len - 1):
        out.append(decoder_logits(model, start, memory, src, tc.causal_mask(1))[:, -1:].argmax(-1))
    return torch.cat(out, dim=1)


@torch.no_grad()
def greedy_one_pass_without_masks(model, src, max_len, bos, eos):
    # Post 1's one pass, but with no mask at all: not one of the named variants.
    memory = model.encode(src)
    dec_in = torch.zeros(src.shape[0], max_len - 1, dtype=torch.long)
    dec_in[:, 0] = bos
    return torch.cat([dec_in[:, :1], decoder_logits(model, dec_in, memory, src, None).argmax(-1)], dim=1)


# ---- exercise 12.2: beam_step


def step_without_scores(scores, log_probs, finished, k, pad_id):
    table = log_probs.clone()
    table[finished] = float("-inf")
    table[finished, pad_id] = scores[finished]
    best, where = torch.topk(table.reshape(-1), k)
    return torch.div(where, table.shape[1], rounding_mode="floor"), torch.remainder(where, table.shape[1]), best


def step_one_word_per_beam(scores, log_probs, finished, k, pad_id):
    results = []
    for b in range(len(scores)):
        if finished[b]:
            results.append((scores[b].item(), b, pad_id))
        else:
            value, word = (scores[b] + log_probs[b]).max(0)
            results.append((value.item(), b, word.item()))
    results.sort(reverse=True)
    results = results[:k]
    return (
        torch.tensor([b for _, b, _ in results]),
        torch.tensor([w for _, _, w in results]),
        torch.tensor([v for v, _, _ in results]),
    )


def step_ignoring_finished(scores, log_probs, finished, k, pad_id):
    total = scores.unsqueeze(1) + log_probs
    best, where = total.view(-1).topk(k)
    return where // total.shape[1], where % total.shape[1], best


def step_dropping_finished(scores, log_probs, finished, k, pad_id):
    total = scores.unsqueeze(1) + log_probs
    total[finished] = -1e30
    best, where = total.view(-1).topk(k)
    return where // total.shape[1], where % total.shape[1], best


def step_swapped(scores, log_probs, finished, k, pad_id):
    beam, token, score = solutions.beam_step(scores, log_probs, finished, k, pad_id)
    vocab = log_probs.shape[1]
    index = beam * vocab + token
    return index % vocab, index // vocab, score


def step_top_k_of_each_beam(scores, log_probs, finished, k, pad_id):
    total = (scores[:, None] + log_probs).masked_fill(finished[:, None], float("-inf"))
    total[finished, pad_id] = scores[finished]
    best, token = total.topk(k, dim=-1)  # (n, k): the k best of each hypothesis
    return torch.arange(len(scores))[:, None].expand_as(token), token, best


def step_unsorted(scores, log_probs, finished, k, pad_id):
    beam, token, score = solutions.beam_step(scores, log_probs, finished, k, pad_id)
    order = torch.argsort(beam * 1000 + token)  # grouped by hypothesis instead of best first
    return beam[order], token[order], score[order]


def step_index_true_division(scores, log_probs, finished, k, pad_id):
    total = (scores[:, None] + log_probs).masked_fill(finished[:, None], float("-inf"))
    total[finished, pad_id] = scores[finished]
    best, index = total.flatten().topk(k)
    vocab = log_probs.shape[1]
    return torch.floor(index / vocab), index % vocab, best  # a float tensor of hypothesis indices


def step_fixed_k(scores, log_probs, finished, k, pad_id):
    return solutions.beam_step(scores, log_probs, finished, 3, pad_id)


def step_added_in_place(scores, log_probs, finished, k, pad_id):
    log_probs += scores[:, None]  # the caller's log-probabilities change
    log_probs[finished] = float("-inf")
    log_probs[finished, pad_id] = scores[finished]
    best, index = log_probs.flatten().topk(k)
    return index // log_probs.shape[1], index % log_probs.shape[1], best


def step_worst_first(scores, log_probs, finished, k, pad_id):
    beam, token, score = solutions.beam_step(scores, log_probs, finished, k, pad_id)
    return beam.flip(0), token.flip(0), score.flip(0)


def step_without_scores_returned(scores, log_probs, finished, k, pad_id):
    beam, token, _ = solutions.beam_step(scores, log_probs, finished, k, pad_id)
    return beam, token


@torch.no_grad()
def greedy_sampling(model, src, max_len, bos, eos):
    # Sampling from the softmax instead of taking the argmax: a different decoder.
    memory = model.encode(src)
    ys = torch.full((src.shape[0], 1), bos)
    finished = torch.zeros(src.shape[0], dtype=torch.bool)
    while ys.shape[1] < max_len and not finished.all():
        probs = decoder_logits(model, ys, memory, src, tc.causal_mask(ys.shape[1]))[:, -1].softmax(-1)
        word = torch.multinomial(probs, 1)[:, 0].masked_fill(finished, model.pad_id)
        ys = torch.cat([ys, word[:, None]], dim=1)
        finished |= word == eos
    return ys


def greedy_stub(model, src, max_len, bos, eos):
    raise NotImplementedError("greedy: replace this line with your code")


# Each exercise's wrong answers and the diagnosis each must get: (answer, mistake key or None, words of the message).
WRONG_ANSWERS = {
    "greedy": [
        (greedy_one_pass, "one_pass", "post 1's test"),
        (greedy_reading_first_position, "first_position", "logits[:, -1]"),
        (greedy_feeding_only_bos, "first_position", "predicts from <sos> alone"),
        (make_greedy(mask=False), "no_causal_mask", "without the causal mask"),
        (make_greedy(pad=False, stop_rule="never"), "never_stops", "does not stop at <eos>"),
        (make_greedy(pad=False), "no_pad_after_eos", "masked_fill(finished, model.pad_id)"),
        (make_greedy(stop_rule="never"), "runs_to_max_len", "always has max_len columns"),
        (make_greedy(stop_rule="any"), "stops_at_first_eos", "not .any()"),
        (make_greedy(drop_bos=True), "no_bos", "must start with bos"),
        (greedy_one_pass_without_masks, None, "a row repeats one word: is the prediction fed back in?"),
        (lambda model, src, max_len, bos, eos: [[bos]], None, "returned an object of type list"),
        (lambda model, src, max_len, bos, eos: model.decode(src), None, "raised TypeError"),
        (greedy_sampling, "nondeterministic", "dropout or random noise"),
    ],
    "beam_step": [
        (step_without_scores, "score_not_added", "add each hypothesis' score"),
        (step_one_word_per_beam, "best_per_hypothesis", "a beam never branches"),
        (step_ignoring_finished, "finished_extended", "was extended like the others"),
        (step_dropping_finished, "finished_dropped", "finished hypotheses disappeared"),
        (step_swapped, "div_mod_swapped", "hypothesis is i // V and the token i % V"),
        (step_top_k_of_each_beam, None, "top-k per hypothesis"),
        (step_unsorted, None, "not sorted best first"),
        (lambda scores, log_probs, finished, k, pad_id: (scores, log_probs), None, "expected 3 values"),
        (step_index_true_division, "dtype", "value 0: returned dtype torch.float32 on the first step"),
        (step_fixed_k, None, "value 0: returned shape (3,) on 4 hypotheses, the best one finished, k=4, V=8"),
        (step_added_in_place, "in_place", "changes its input `log_probs` in place"),
        (step_worst_first, None, "not sorted best first"),
        (step_without_scores_returned, None, "expected 3 values"),
    ],
}


def test_a_correct_reader_loop_passes():
    assert check.greedy(make_greedy()).passed


def test_greedy_stub_shows_not_implemented():
    with pytest.raises(NotImplementedError, match="replace this line"):
        check.greedy(greedy_stub)
