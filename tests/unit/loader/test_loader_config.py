"""The loader's settings: bounds split between DataLoader workers, bad values and missing addresses named,
and an import that loads neither torch nor Ray."""

from __future__ import annotations

import subprocess
import sys

import pytest

from saintpipe.core.errors import ConfigError
from saintpipe.loader.config import LoaderConfig


@pytest.mark.parametrize("steps,workers", [(7, 2), (10, 3), (1, 4), (100, 1)])
def test_steps_split_between_workers_add_up(steps, workers):
    config = LoaderConfig(steps=steps)
    shares = [config.worker_share(w, workers)[0] for w in range(workers)]
    assert sum(shares) == steps and max(shares) - min(shares) <= 1


def test_epochs_split_evenly_and_no_bound_stays_none():
    assert LoaderConfig(epochs=3).worker_share(1, 4) == (None, 0.75)
    assert LoaderConfig().worker_share(0, 2) == (None, None)


def test_bad_options_are_named_before_anything_is_contacted(tmp_path):
    from saintpipe.loader import SubgraphLoader

    with pytest.raises(ConfigError, match=r"SubgraphLoader option steps: .*greater than or equal to 1, got 0"):
        SubgraphLoader.connect("redis://127.0.0.1:1/0", "job", "127.0.0.1:2", tmp_path, steps=0)
    with pytest.raises(ConfigError, match=r"SubgraphLoader option name: .*got 'a b'"):
        SubgraphLoader.connect("redis://127.0.0.1:1/0", "job", "127.0.0.1:2", tmp_path, name="a b")
    with pytest.raises(ConfigError, match=r"SubgraphLoader option step: .*\(options: steps, epochs, name"):
        SubgraphLoader.embedded(tmp_path, step=3)  # refused before anything starts


def test_missing_addresses_are_named(tmp_path, monkeypatch):
    from saintpipe.loader import SubgraphLoader

    monkeypatch.delenv("SAINTPIPE_REDIS_URL", raising=False)
    with pytest.raises(ConfigError, match="needs redis_url, features, job"):
        SubgraphLoader.connect(data=tmp_path)


def test_a_directory_that_is_no_dataset_is_named(tmp_path):
    from saintpipe.loader import SubgraphLoader

    with pytest.raises(ConfigError, match=rf"data {tmp_path}: not a dataset directory"):
        SubgraphLoader.connect("redis://127.0.0.1:1/0", "job", "127.0.0.1:2", tmp_path)


def test_importing_the_package_loads_neither_torch_nor_ray():
    code = ("import sys, saintpipe.loader as L; assert 'torch' not in sys.modules and 'ray' not in sys.modules; "
            "L.SubgraphLoader; assert 'torch' in sys.modules and 'ray' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


@pytest.mark.parametrize("method", ["connect", "embedded"])
def test_the_options_are_keyword_arguments_with_the_config_defaults(method):
    import inspect

    from saintpipe.loader import SubgraphLoader

    params = inspect.signature(getattr(SubgraphLoader, method)).parameters
    for name, field in LoaderConfig.model_fields.items():
        assert params[name].kind is inspect.Parameter.KEYWORD_ONLY, name
        assert params[name].default == field.default, name
