"""Choosing the trainer's torch device: auto, explicit names, and clear errors for devices that are not there."""

from __future__ import annotations

import pytest
import torch

from saintpipe.core.errors import ConfigError
from saintpipe.trainer.assemble import pick_device


def test_auto_and_cpu_pick_a_device_torch_has():
    assert pick_device("cpu") == torch.device("cpu")
    assert pick_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")


def test_a_name_that_is_no_device_is_a_config_error():
    with pytest.raises(ConfigError, match="device 'gpu7' is not a torch device"):
        pick_device("gpu7")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a machine without CUDA")
def test_cuda_without_a_gpu_is_a_config_error_not_a_traceback():
    with pytest.raises(ConfigError, match="sees no CUDA GPU; use cpu or auto"):
        pick_device("cuda")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_cuda_index_past_the_last_gpu_is_a_config_error():
    with pytest.raises(ConfigError, match="CUDA device"):
        pick_device(f"cuda:{torch.cuda.device_count()}")
