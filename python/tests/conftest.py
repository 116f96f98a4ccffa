import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))  # reference.py


@pytest.fixture(autouse=True)
def seeded():
    torch.manual_seed(0)
    yield


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def threads(request):
    """Runs a test on 1 and on 2 threads (llmcc's kernels follow torch.set_num_threads)."""
    before = torch.get_num_threads()
    torch.set_num_threads(request.param)
    yield request.param
    torch.set_num_threads(before)
