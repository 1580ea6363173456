"""Shared test settings: deterministic seeds and a hypothesis profile that suits a 2-core CI machine."""

import os

import pytest
import torch
from hypothesis import HealthCheck, settings

settings.register_profile(
    "course",
    max_examples=int(os.environ.get("HYPOTHESIS_MAX_EXAMPLES", "25")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,  # the same examples on every run: a CI failure can be reproduced locally
)
settings.load_profile("course")

# Small models gain nothing from intra-op threads and lose a lot when the cores are shared (CI runs two
# test workers on two cores): one thread per test process.
torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
