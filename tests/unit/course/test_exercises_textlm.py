"""Chapter 18's wrong answers (`WRONG_ANSWERS`) and the tests specific to its checkers.

The wrong answers below are written the way a reader might write them, independently of the variants the
checkers use to recognise the mistakes; at least ten per exercise.

test_exercise_checkers.py runs every row of the table against its checker (the mistake's key and the
words of its message), with the reference solution and the checks common to every checker.
"""

import math

import torch

import transformer_course as tc
from transformer_course.course.exercises import check, solutions


def test_the_package_passes_too():
    assert check.heldout_blocks(tc.heldout_blocks).passed

    def from_the_mean(token_losses, text):
        return tc.textlm.bits_per_byte(token_losses.mean().item(), len(token_losses), len(text.encode()))

    assert check.bits_per_byte(from_the_mean).passed


def test_solutions_agree_with_the_package_on_fresh_inputs():
    data = torch.arange(300) % 17
    x1, y1 = solutions.heldout_blocks(data, 12)
    x2, y2 = tc.heldout_blocks(data, 12)
    assert torch.equal(x1, x2) and torch.equal(y1, y2)
    losses = torch.tensor([1.0, 2.0, 3.0])
    assert math.isclose(solutions.bits_per_byte(losses, "猫 sat"), tc.textlm.bits_per_byte(2.0, 3, 7))


# ---- exercise 18.1: the held-out blocks


def test_the_blocks_checker_has_streams_with_and_without_a_leftover_rest():
    def one_short_when_nothing_is_left(data, block_size):  # right only when T does not divide N - 1
        n = (len(data) - 2) // block_size
        return data[: n * block_size].view(n, block_size), data[1 : n * block_size + 1].view(n, block_size)

    def one_too_many_when_something_is_left(data, block_size):  # right only when T divides N - 1
        n = -(-(len(data) - 1) // block_size)
        padded = torch.cat([data, data.new_zeros(n * block_size + 1 - len(data))])
        return padded[: n * block_size].view(n, block_size), padded[1:].view(n, block_size)

    for answer in (one_short_when_nothing_is_left, one_too_many_when_something_is_left):
        assert not check.heldout_blocks(answer).passed, answer.__name__
    assert "with and without a leftover rest" in check.heldout_blocks(solutions.heldout_blocks).message


def blocks_n_over_t(data, block_size):
    n = len(data) // block_size
    return data[: n * block_size].view(n, block_size), data[1 : n * block_size + 1].view(n, block_size)


def blocks_minus_one(data, block_size):
    n = (len(data) - 1) // block_size - 1
    return data[: n * block_size].view(n, block_size), data[1 : n * block_size + 1].view(n, block_size)


def blocks_with_room_for_t_plus_one(data, block_size):
    n = (len(data) - block_size - 1) // block_size + 0
    xs = [data[i * block_size : (i + 1) * block_size] for i in range(n)]
    ys = [data[i * block_size + 1 : (i + 1) * block_size + 1] for i in range(n)]
    return torch.stack(xs), torch.stack(ys)


def blocks_of_t_plus_one(data, block_size):
    chunks = data[: len(data) // (block_size + 1) * (block_size + 1)].view(-1, block_size + 1)
    return chunks[:, :-1], chunks[:, 1:]


def blocks_cut_then_shifted(data, block_size):
    chunks = torch.stack(list(data.split(block_size))[: len(data) // block_size])
    return chunks[:, :-1], chunks[:, 1:]


def blocks_unshifted(data, block_size):
    n = (len(data) - 1) // block_size
    x = data[: n * block_size].view(n, block_size)
    return x, x.clone()


def blocks_two_ahead(data, block_size):
    n = (len(data) - 2) // block_size
    return data[: n * block_size].view(n, block_size), data[2 : n * block_size + 2].view(n, block_size)


def blocks_rolled(data, block_size):
    n = (len(data) - 1) // block_size
    x = data[: n * block_size].view(n, block_size)
    return x, torch.roll(x, -1, 1)


def blocks_from_token_one(data, block_size):
    n = (len(data) - 2) // block_size
    return data[1 : n * block_size + 1].view(n, block_size), data[2 : n * block_size + 2].view(n, block_size)


def blocks_sliding(data, block_size):
    xs = [data[i : i + block_size] for i in range(len(data) - block_size)]
    ys = [data[i + 1 : i + block_size + 1] for i in range(len(data) - block_size)]
    return torch.stack(xs), torch.stack(ys)


def blocks_targets_first(data, block_size):
    n = (len(data) - 1) // block_size
    return data[1 : n * block_size + 1].view(n, block_size), data[: n * block_size].view(n, block_size)


def blocks_view_t_first(data, block_size):
    n = (len(data) - 1) // block_size
    x = data[: n * block_size].view(n, block_size).t()
    return x, data[1 : n * block_size + 1].view(n, block_size).t()


def blocks_wrong_reshape(data, block_size):
    n = (len(data) - 1) // block_size
    return data[: n * block_size].view(block_size, n), data[1 : n * block_size + 1].view(block_size, n)


def blocks_as_floats(data, block_size):
    n = (len(data) - 1) // block_size
    x = data[: n * block_size].view(n, block_size).float()
    return x, data[1 : n * block_size + 1].view(n, block_size).float()


# ---- exercise 18.2: bits per byte


def bpb_per_character(token_losses, text):
    return token_losses.sum().item() / math.log(2) / len(text)


def bpb_per_token(token_losses, text):
    return token_losses.mean().item() / math.log(2)


def bpb_training_loss(token_losses, text):
    return token_losses.mean().item()


def bpb_in_nats(token_losses, text):
    return token_losses.sum().item() / len(text.encode("utf-8"))


def bpb_log10(token_losses, text):
    return token_losses.sum().item() / math.log(10) / len(text.encode("utf-8"))


def bpb_times_ln2(token_losses, text):
    return token_losses.sum().item() * math.log(2) / len(text.encode("utf-8"))


def bpb_mean_over_bytes(token_losses, text):
    return (token_losses.mean() / math.log(2)).item() / len(bytes(text, "utf-8"))


def bpb_total_bits(token_losses, text):
    return float(token_losses.sum() / math.log(2))


def bpb_eight_bits(token_losses, text):
    return 8 * token_losses.sum().item() / math.log(2) / len(text.encode())


def bpb_per_word(token_losses, text):
    return token_losses.sum().item() / math.log(2) / len(text.split())


def bpb_upside_down(token_losses, text):
    return len(text.encode()) / (token_losses.sum().item() / math.log(2))


def bpb_log2_of_losses(token_losses, text):
    return torch.log2(token_losses).sum().item() / len(text.encode())


def bpb_perplexity(token_losses, text):
    return math.exp(token_losses.mean().item())


def bpb_utf16(token_losses, text):
    return token_losses.sum().item() / math.log(2) / len(text.encode("utf-16-le"))


def bpb_as_tensor(token_losses, text):
    return token_losses.sum() / math.log(2) / len(text.encode())


WRONG_ANSWERS = {
    "heldout_blocks": [
        (blocks_n_over_t, "runs_past_the_end", "one block too many"),
        (blocks_minus_one, "drops_the_last_block", "last full block is missing"),
        (blocks_with_room_for_t_plus_one, "drops_the_last_block", "last full block is missing"),
        (blocks_of_t_plus_one, "skips_a_token", "never a target"),
        (blocks_cut_then_shifted, "block_one_short", "T - 1 predictions"),
        (blocks_unshifted, "not_shifted", "targets are the inputs themselves"),
        (blocks_two_ahead, "shifted_by_two", "two tokens ahead"),
        (blocks_rolled, "wrapped_targets", "wraps to its own first token"),
        (blocks_from_token_one, "starts_at_one", "starts at token 1"),
        (blocks_sliding, "sliding_windows", "overlapping windows"),
        (blocks_targets_first, "swapped", "x and y are swapped"),
        (blocks_view_t_first, "time_first", "(T, n)"),
        (blocks_wrong_reshape, None, "returned shape"),
        (blocks_as_floats, "dtype", "torch.int64"),
    ],
    "bits_per_byte": [
        (bpb_per_character, "characters", "number of characters"),
        (bpb_per_token, "bits_per_token", "bits per token"),
        (bpb_training_loss, "nats_per_token", "nats per token"),
        (bpb_in_nats, "nats", "nats per byte"),
        (bpb_log10, "log10", "ln 10"),
        (bpb_times_ln2, "times_ln2", "multiplied by ln 2"),
        (bpb_mean_over_bytes, "mean_over_bytes", "mean loss per token was divided by the bytes"),
        (bpb_total_bits, "total_bits", "total number of bits"),
        (bpb_eight_bits, "times_eight", "multiplied by 8"),
        (bpb_per_word, "words", "number of words"),
        (bpb_upside_down, "bytes_per_bit", "upside down"),
        (bpb_log2_of_losses, "log2_of_losses", "logarithm was taken of the losses"),
        (bpb_perplexity, None, "expected"),
        (bpb_utf16, None, "expected"),
        (bpb_as_tensor, "dtype", "a Python float"),
    ],
}


def test_at_least_ten_named_mistakes_per_exercise():
    for name, rows in WRONG_ANSWERS.items():
        assert len(rows) >= 10, name
        assert len({key for _, key, _ in rows if key is not None}) >= 10, name
