"""Chapter 14's wrong answers (`WRONG_ANSWERS`) and the tests specific to its checkers.

The wrong answers below are written the way a reader might write them, independently of the variants the
checkers use to recognise the mistakes; at least ten per exercise.

test_exercise_checkers.py runs every row of the table against its checker (the mistake's key and the
words of its message), with the reference solution and the checks common to every checker.
"""

import math

import torch
import torch.nn.functional as F

import transformer_course as tc
from transformer_course.course.exercises import check, solutions
from transformer_course.course.exercises.gpt import TableLM
from transformer_course.grammar import Language


def test_the_package_passes_too():
    assert check.top_k_filter(tc.gpt.top_k_logits).passed


def test_solutions_agree_with_the_package_and_the_chapter():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 17, generator=g)
    assert torch.equal(solutions.top_k_filter(logits, 4), tc.gpt.top_k_logits(logits, 4))
    # Equal weights give the chapter's floor of the uniform language: log N / (mean words + 1).
    language = Language.english()
    floor = solutions.floor_per_token(list(language.sentences), torch.ones(len(language), dtype=torch.float64))
    assert math.isclose(floor, language.floor, rel_tol=1e-9)


def test_table_lm_is_causal_and_greedy_matches_tc_generate_style_decoding():
    model = TableLM()
    ids = torch.tensor([[1, 4, 6, 5]])
    changed = ids.clone()
    changed[0, 3] = 8
    assert torch.equal(model(ids)[0, :3], model(changed)[0, :3])
    # Distinct whole-number scores in every row: greedy decoding never meets a tie.
    assert all(len(set(row.tolist())) == TableLM.VOCAB for row in model.table.detach().view(-1, TableLM.VOCAB))
    out = solutions.generate_until_eos(model, [torch.tensor([1]), torch.tensor([1, 3])], 2, 5)
    assert out[0].tolist() == [1, 6, 7, 3, 2] and len(out[1]) == 2 + 5 and 2 not in out[1].tolist()


# ---- exercise 14.1: greedy generation until <eos>


def greedy_never_stops_early(model, prompts, eos_id, max_new_tokens):
    outs = []
    for prompt in prompts:
        ids = prompt.unsqueeze(0)
        for _ in range(max_new_tokens):
            ids = torch.cat([ids, model(ids)[:, -1:].argmax(-1)], dim=1)
        outs.append(ids.squeeze(0))
    return outs


def greedy_checks_before_appending(model, prompts, eos_id, max_new_tokens):
    outs = []
    for prompt in prompts:
        tokens = prompt.tolist()
        for _ in range(max_new_tokens):
            nxt = model(torch.tensor([tokens]))[0, -1].argmax().item()
            if nxt == eos_id:
                break
            tokens.append(nxt)
        outs.append(torch.tensor(tokens))
    return outs


def greedy_batch_stops_at_first_eos(model, prompts, eos_id, max_new_tokens):
    rows = [p.tolist() for p in prompts]
    for _ in range(max_new_tokens):
        stop = False
        for row in rows:
            row.append(model(torch.tensor([row]))[0, -1].argmax().item())
            stop = stop or row[-1] == eos_id
        if stop:
            break
    return [torch.tensor(r) for r in rows]


def greedy_until_all_finished(model, prompts, eos_id, max_new_tokens):
    rows = [p.tolist() for p in prompts]
    finished = [False] * len(rows)
    for _ in range(max_new_tokens):
        if all(finished):
            break
        for i, row in enumerate(rows):
            row.append(model(torch.tensor([row]))[0, -1].argmax().item())
            finished[i] = finished[i] or row[-1] == eos_id
    return [torch.tensor(r) for r in rows]


def greedy_right_padded_batch(model, prompts, eos_id, max_new_tokens):
    batch = torch.nn.utils.rnn.pad_sequence(prompts, batch_first=True, padding_value=0)
    start = batch.shape[1]
    for _ in range(max_new_tokens):
        batch = torch.cat([batch, model(batch)[:, -1].argmax(-1, keepdim=True)], dim=1)
    outs = []
    for prompt, row in zip(prompts, batch):
        new = row[start:].tolist()
        if eos_id in new:
            new = new[: new.index(eos_id) + 1]
        outs.append(torch.tensor(prompt.tolist() + new))
    return outs


def greedy_left_padded_batch(model, prompts, eos_id, max_new_tokens):
    longest = max(len(p) for p in prompts)
    batch = torch.stack([F.pad(p, (longest - len(p), 0), value=0) for p in prompts])
    for _ in range(max_new_tokens):
        batch = torch.cat([batch, model(batch)[:, -1].argmax(-1, keepdim=True)], dim=1)
    outs = []
    for prompt, row in zip(prompts, batch):
        new = row[longest:].tolist()
        if eos_id in new:
            new = new[: new.index(eos_id) + 1]
        outs.append(torch.cat([prompt, torch.tensor(new, dtype=torch.long)]))
    return outs


def greedy_total_length(model, prompts, eos_id, max_new_tokens):
    outs = []
    for prompt in prompts:
        ids = prompt[None]
        while ids.shape[1] < max_new_tokens:
            nxt = model(ids)[0, -1].argmax()
            ids = torch.cat([ids, nxt.view(1, 1)], dim=1)
            if nxt == eos_id:
                break
        outs.append(ids[0])
    return outs


def greedy_range_from_one(model, prompts, eos_id, max_new_tokens):
    outs = []
    for prompt in prompts:
        ids = prompt[None]
        for _ in range(1, max_new_tokens):
            nxt = model(ids)[0, -1].argmax()
            ids = torch.cat([ids, nxt.view(1, 1)], dim=1)
            if nxt == eos_id:
                break
        outs.append(ids[0])
    return outs


def greedy_new_tokens_only(model, prompts, eos_id, max_new_tokens):
    outs = []
    for prompt in prompts:
        ids, new = prompt[None], []
        for _ in range(max_new_tokens):
            nxt = model(ids)[0, -1].argmax()
            ids = torch.cat([ids, nxt.view(1, 1)], dim=1)
            new.append(nxt.item())
            if nxt == eos_id:
                break
        outs.append(torch.tensor(new, dtype=torch.long))
    return outs


def greedy_feeds_last_token(model, prompts, eos_id, max_new_tokens):
    outs = []
    for prompt in prompts:
        ids = prompt[None]
        for _ in range(max_new_tokens):
            nxt = model(ids[:, -1:])[0, -1].argmax()  # "the model only needs the newest token"
            ids = torch.cat([ids, nxt.view(1, 1)], dim=1)
            if nxt == eos_id:
                break
        outs.append(ids[0])
    return outs


def greedy_reads_position_zero(model, prompts, eos_id, max_new_tokens):
    outs = []
    for prompt in prompts:
        ids = prompt[None]
        for _ in range(max_new_tokens):
            nxt = model(ids)[:, 0].argmax(-1)
            ids = torch.cat([ids, nxt[:, None]], dim=1)
            if nxt.item() == eos_id:
                break
        outs.append(ids[0])
    return outs


def greedy_while_no_limit(model, prompts, eos_id, max_new_tokens):
    outs = []
    for prompt in prompts:
        ids = prompt[None]
        while ids[0, -1] != eos_id:  # no max_new_tokens: a row that never writes <eos> never ends
            ids = torch.cat([ids, model(ids)[:, -1].argmax(-1, keepdim=True)], dim=1)
        outs.append(ids[0])
    return outs


def greedy_sampled(model, prompts, eos_id, max_new_tokens):
    outs = []
    for prompt in prompts:
        ids = prompt[None]
        for _ in range(max_new_tokens):
            nxt = torch.multinomial(model(ids)[0, -1].softmax(-1), 1)
            ids = torch.cat([ids, nxt.view(1, 1)], dim=1)
            if nxt.item() == eos_id:
                break
        outs.append(ids[0])
    return outs


def greedy_padded_tensor(model, prompts, eos_id, max_new_tokens):
    rows = solutions.generate_until_eos(model, prompts, eos_id, max_new_tokens)
    return torch.nn.utils.rnn.pad_sequence(list(rows), batch_first=True)


def greedy_hardcoded_eos(model, prompts, eos_id, max_new_tokens):
    return solutions.generate_until_eos(model, prompts, 2, max_new_tokens)  # "<eos> is 2"


def greedy_as_a_list(model, prompts, eos_id, max_new_tokens):
    return list(solutions.generate_until_eos(model, prompts, eos_id, max_new_tokens))  # a list is fine


# {checker name: [(wrong answer, expected mistake key or None, words of the diagnosis)]}: every exercise
# has at least ten (test_exercise_checkers.py counts them).
WRONG_ANSWERS: dict[str, list] = {}


WRONG_ANSWERS["generate_until_eos"] = [
    (greedy_never_stops_early, "no_stop", "max_new_tokens new tokens"),
    (greedy_checks_before_appending, "eos_dropped", "the <eos> itself is missing"),
    (greedy_batch_stops_at_first_eos, "stops_every_row", "the first one wrote <eos>"),
    (greedy_until_all_finished, "goes_on_after_eos", "went on generating"),
    (greedy_right_padded_batch, "reads_padding", "that column is padding"),
    (greedy_left_padded_batch, "left_padding", "padded on the left"),
    (greedy_total_length, "max_counts_prompt", "total length"),
    (greedy_range_from_one, "one_short", "one new token too few"),
    (greedy_new_tokens_only, "prompt_missing", "new tokens only"),
    (greedy_feeds_last_token, "last_token_only", "only the last token"),
    (greedy_reads_position_zero, "first_position", "position 0"),
    (greedy_while_no_limit, "time_limit", "stopped after 1 s"),
    (greedy_sampled, "nondeterministic", "different results on the same input"),
    (greedy_padded_tensor, None, "one 1-D tensor per prompt"),
    (greedy_hardcoded_eos, None, "expected"),
]


def test_generate_until_eos_accepts_a_list_of_rows():
    assert check.generate_until_eos(greedy_as_a_list).passed


# ---- exercise 14.2: top-k filtering


def top_k_strict(logits, k):
    kth = torch.topk(logits, min(k, logits.shape[-1])).values[..., -1:]
    return torch.where(logits > kth, logits, torch.full_like(logits, -math.inf))


def top_k_smallest(logits, k):
    kth = torch.topk(logits, min(k, logits.shape[-1]), largest=False).values[..., -1:]
    return logits.masked_fill(logits > kth, -math.inf)


def top_k_zeros(logits, k):
    kth = torch.topk(logits, min(k, logits.shape[-1])).values[..., -1:]
    return torch.where(logits >= kth, logits, torch.zeros_like(logits))


def top_k_slice(logits, k):
    out = logits.clone()
    out[..., k:] = -math.inf
    return out


def top_k_batch_threshold(logits, k):
    kth = torch.topk(logits, min(k, logits.shape[-1])).values.reshape(-1, min(k, logits.shape[-1]))[0, -1]
    return logits.masked_fill(logits < kth, -math.inf)


def top_k_softmax(logits, k):
    kth = torch.topk(logits, min(k, logits.shape[-1])).values[..., -1:]
    return torch.softmax(logits.masked_fill(logits < kth, -math.inf), dim=-1)


def top_k_unclamped(logits, k):
    values, _ = torch.topk(logits, k)
    return logits.masked_fill(logits < values[..., [-1]], -math.inf)


def top_k_nanogpt_style(logits, k):
    # nanoGPT writes into its own tensor; here it is the caller's.
    values, _ = torch.topk(logits, min(k, logits.size(-1)))
    logits[logits < values[..., [-1]]] = -float("inf")
    return logits


def top_k_index_mask(logits, k):
    # Keeps the right tokens, but their logits are replaced by 0: the kept tokens become equally likely.
    index = torch.topk(logits, min(k, logits.shape[-1])).indices
    out = torch.full_like(logits, -math.inf)
    return out.scatter(-1, index, 0.0)


def top_k_returns_indices(logits, k):
    return torch.topk(logits, min(k, logits.shape[-1])).indices


def top_k_with_the_package(logits, k):
    return tc.gpt.top_k_logits(logits, k)


def top_k_through_the_sampler(logits, k):
    # The package's sampler at temperature 1: it filters with gpt.top_k_logits, then draws.
    from transformer_course import gpt

    return gpt.sample_next(logits.reshape(-1, logits.shape[-1]), top_k=k)


def top_k_large_negative(logits, k):
    # -1e9 instead of -inf: the same probabilities, so this one is accepted.
    kth = torch.topk(logits, min(k, logits.shape[-1])).values[..., -1:]
    return logits.masked_fill(logits < kth, -1e9)


WRONG_ANSWERS["top_k_filter"] = [
    (top_k_strict, "keeps_k_minus_1", "one token too few"),
    (top_k_smallest, "smallest_k", "smallest"),
    (top_k_zeros, "zero_fill", "set to 0"),
    (top_k_slice, "first_k_ids", "first k token ids"),
    (top_k_batch_threshold, "first_row_threshold", "first row's"),
    (top_k_softmax, "returns_probabilities", "returned probabilities"),
    (top_k_unclamped, "no_clamp", "clamp it first"),
    (top_k_nanogpt_style, "in_place", "in place"),
    (top_k_index_mask, None, "wrong probabilities"),
    (top_k_returns_indices, None, "shape"),
    (top_k_with_the_package, "package_called", "tc.gpt.top_k_logits"),
    (top_k_through_the_sampler, "package_called", "sample_next"),
]


def test_top_k_with_a_large_negative_fill_is_accepted():
    assert check.top_k_filter(top_k_large_negative).passed


# ---- exercise 14.3: the floor of a weighted language


def distribution(sentences, weights):
    p = {}
    for s, w in zip(sentences, weights.tolist()):
        p[s] = p.get(s, 0) + w / weights.sum().item()
    return p


def floor_uniform(sentences, weights):
    distinct = set(sentences)
    return math.log(len(distinct)) / (sum(len(s.split()) for s in distinct) / len(distinct) + 1)


def floor_entries_apart(sentences, weights):
    p = weights / weights.sum()
    lengths = torch.tensor([len(s.split()) + 1 for s in sentences], dtype=p.dtype)
    return (-(p * p.log()).sum() / (p * lengths).sum()).item()


def floor_raw_weights(sentences, weights):
    p = {}
    for s, w in zip(sentences, weights.tolist()):
        p[s] = p.get(s, 0) + w
    return -sum(v * math.log(v) for v in p.values()) / sum(v * (len(s.split()) + 1) for s, v in p.items())


def floor_without_eos(sentences, weights):
    p = distribution(sentences, weights)
    return -sum(v * math.log(v) for v in p.values()) / sum(v * len(s.split()) for s, v in p.items())


def floor_with_bos(sentences, weights):
    p = distribution(sentences, weights)
    return -sum(v * math.log(v) for v in p.values()) / sum(v * (len(s.split()) + 2) for s, v in p.items())


def floor_in_bits(sentences, weights):
    p = distribution(sentences, weights)
    return -sum(v * math.log2(v) for v in p.values()) / sum(v * (len(s.split()) + 1) for s, v in p.items())


def floor_per_sentence(sentences, weights):
    p = distribution(sentences, weights)
    return -sum(v * math.log(v) for v in p.values())


def floor_mean_of_ratios(sentences, weights):
    p = distribution(sentences, weights)
    return sum(-v * math.log(v) / (len(s.split()) + 1) for s, v in p.items())


def floor_plain_mean_length(sentences, weights):
    p = distribution(sentences, weights)
    mean_words = sum(len(s.split()) for s in p) / len(p)
    return -sum(v * math.log(v) for v in p.values()) / (mean_words + 1)


def floor_characters(sentences, weights):
    p = distribution(sentences, weights)
    return -sum(v * math.log(v) for v in p.values()) / sum(v * (len(s) + 1) for s, v in p.items())


def floor_as_tensor(sentences, weights):
    return torch.tensor(solutions.floor_per_token(sentences, weights))


def floor_normalised_in_place(sentences, weights):
    weights /= weights.sum()
    return solutions.floor_per_token(sentences, weights)


def floor_entropy_sign(sentences, weights):
    p = distribution(sentences, weights)
    return sum(v * math.log(v) for v in p.values()) / sum(v * (len(s.split()) + 1) for s, v in p.items())


WRONG_ANSWERS["floor_per_token"] = [
    (floor_uniform, "uniform_formula", "weights were ignored"),
    (floor_entries_apart, "duplicates_apart", "listed twice"),
    (floor_raw_weights, "not_normalised", "without normalising"),
    (floor_without_eos, "no_eos", "miss the <eos>"),
    (floor_with_bos, "bos_counted", "<bos> was counted"),
    (floor_in_bits, "bits", "in bits"),
    (floor_per_sentence, "per_sentence", "entropy per sentence"),
    (floor_mean_of_ratios, "mean_of_ratios", "not a mean of ratios"),
    (floor_plain_mean_length, "unweighted_length", "the mean length is not"),
    (floor_characters, "characters", "counts characters"),
    (floor_as_tensor, "dtype", "expected a Python float"),
    (floor_normalised_in_place, "in_place", "in place"),
    (floor_entropy_sign, None, "expected"),
]
