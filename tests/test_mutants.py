"""The mutation run (tests/mutants.py) as part of the suite: every planted bug must be caught by a fast test.

It runs in a subprocess, one mutant at a time, so that it leaves the other test worker its core: about two
minutes of CPU for 69 mutants (measured on the 2-core development machine).
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import mutants

ROOT = Path(__file__).resolve().parent.parent


def test_every_mutant_still_applies_to_the_source():
    """Each original snippet occurs exactly once: an edit to the package that moves one fails here, fast."""
    mutants.check_mutants()
    assert len(mutants.MUTANTS) >= 40
    assert all(mutant.tests for mutant in mutants.MUTANTS)


def test_the_issue_13_mutants_are_listed():
    names = {mutant.name for mutant in mutants.MUTANTS}
    assert {
        "decoding: length_penalty ignored",
        "attention: attention-weight dropout never applied",
        "multihead: attention dropout never applied",
        "embedding: positional-encoding dropout removed",
    } <= names


def test_every_mutant_is_killed():
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "mutants.py"), "--jobs", "1"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-3000:]
    score = re.search(r"mutation score: (\d+)/(\d+) killed", proc.stdout)
    assert score and score[1] == score[2] == str(len(mutants.MUTANTS)), proc.stdout[-3000:]
