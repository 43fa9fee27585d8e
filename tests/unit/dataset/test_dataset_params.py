"""The generators' arguments: one model each gives their flags and their API checks the same ranges (issue 43)."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from saintpipe.cli import build_parser
from saintpipe.core.errors import InvalidArgument
from saintpipe.core.model_flags import field_bounds
from saintpipe.core.seeds import SEED_MAX
from saintpipe.services.dataset.demo import generate_demo
from saintpipe.services.dataset.kronecker import generate_kronecker
from saintpipe.services.dataset.params import DEMO_FLAGS, KRONECKER_FLAGS, DemoParams, KroneckerParams, check


@pytest.mark.parametrize("command,model,flags", [("demo", DemoParams, DEMO_FLAGS),
                                                 ("kronecker", KroneckerParams, KRONECKER_FLAGS)])
def test_the_flags_have_the_models_ranges_and_defaults(command, model, flags):
    root = build_parser()
    sub = next(a for a in root._actions if isinstance(a, argparse._SubParsersAction)).choices["data"]
    gen = next(a for a in sub._actions if isinstance(a, argparse._SubParsersAction)).choices["generate"]
    parser = next(a for a in gen._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    actions = {a.option_strings[0]: a for a in parser._actions if a.option_strings}
    for field, flag in flags.items():
        info = model.model_fields[field]
        assert actions[flag].type.bounds == field_bounds(info), flag
        assert actions[flag].default is None  # the generator's own default, which is the model's
        if not info.is_required():
            assert f"default {info.default}" in actions[flag].help


def test_the_api_checks_the_same_ranges_naming_the_flags():
    with pytest.raises(InvalidArgument, match="^--feature-dim must be at most 1,048,576, got 1,048,577$"):
        generate_kronecker(4, 4, feature_dim=2**20 + 1)
    with pytest.raises(InvalidArgument, match="^--degree must be greater than 0, got 0$"):
        generate_kronecker(4, 0)
    with pytest.raises(InvalidArgument, match=f"^--seed must be at most {SEED_MAX:,}, got {SEED_MAX + 1:,}$"):
        generate_demo(num_nodes=10, seed=SEED_MAX + 1)
    with pytest.raises(InvalidArgument, match="^noise must be at least 0, got -1$"):
        generate_demo(num_nodes=10, noise=-1)
    with pytest.raises(InvalidArgument, match="^--nodes must be an integer, got True$"):
        check(DemoParams, DEMO_FLAGS, num_nodes=True)
    assert check(DemoParams, DEMO_FLAGS, num_nodes=np.int64(5), homophily=1) == {"num_nodes": 5, "homophily": 1.0}
