"""The cases of every test_exercises_*.py's wrong-answer test, one per (exercise, wrong answer)."""

import pytest

ARGNAMES = ("name", "reader", "mistake", "words")


def wrong_answer_cases(table):
    """pytest params from {exercise: [(reader's function, expected mistake key or None, words of the message)]}."""
    return [
        pytest.param(name, reader, mistake, words, id=f"{name}-{reader.__name__}-{mistake}-{i}")
        for name, rows in table.items()
        for i, (reader, mistake, words) in enumerate(rows)
    ]
