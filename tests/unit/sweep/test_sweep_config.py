"""The sweep file: each bad input refused before anything starts, in one line naming its key; the space's
expansion (grid x random draws) seeded and deterministic."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from saintpipe.core.errors import ConfigError
from saintpipe.sweep.config import SweepConfig, check_space, expand, load_sweep_config


def sweep_file(tmp_path: Path, space: str, sweep: str = "", extra: str = "") -> Path:
    path = tmp_path / "sweep.toml"
    path.write_text(f"{extra}\n[sweep]\n{sweep}\n[sweep.space]\n{space}\n")
    return path


def refused(tmp_path: Path, space: str, sweep: str = "", extra: str = "") -> str:
    with pytest.raises(ConfigError) as info:
        load_sweep_config(sweep_file(tmp_path, space, sweep, extra), environ={})
    message = str(info.value)
    assert "\n" not in message
    return message


def test_a_good_file_loads_with_its_shared_sections(tmp_path):
    config = load_sweep_config(sweep_file(tmp_path, '"model.lr" = {loguniform = [1e-3, 1e-1]}', "trials = 3",
                                          "[trainer]\nepochs = 2\n[samplers]\nworkers = 1"), environ={})
    assert config.sweep.trials == 3 and config.trainer.epochs == 2 and config.samplers.workers == 1
    assert config.sweep.scheduler == "asha" and config.sweep.metric == "val_score"


@pytest.mark.parametrize("space, words", [
    ('"model.lrr" = {choice = [0.1]}', ['"model.lrr"', "not a [trainer] field"]),
    ('"optimizer" = {choice = [1]}', ['"optimizer"', "not a [trainer] field"]),
    ('"sampler.roots" = {choice = [100, 200]}', ['"sampler.roots"', "sampler settings are shared by the sweep's "
                                                                    "trials: set them in [samplers]"]),
    ('"samplers.workers" = {choice = [1]}', ['"samplers.workers"', "set them in [samplers]"]),
    ('"capacity" = {choice = [1]}', ['"capacity"', "set them in [pool]"]),
    ('"model" = {choice = [1]}', ['"model"', "a section, not a field"]),
    ('"epochs.x" = {choice = [1]}', ['"epochs.x"', "no fields of its own"]),
    ('"checkpoint_dir" = {choice = ["/tmp"]}', ['"checkpoint_dir"', "set by the sweep"]),
    ('"model.dropout" = {choice = []}', ['"model.dropout"', "non-empty list"]),
    ('"model.hidden" = {grid = []}', ['"model.hidden"', "non-empty list"]),
    ('"model.lr" = {uniform = [0.1, 0.01]}', ['"model.lr"', "low 0.1 >= high 0.01"]),
    ('"model.lr" = {uniform = [0.1, 0.1]}', ['"model.lr"', "cannot be sampled"]),
    ('"model.lr" = {loguniform = [0.0, 0.1]}', ['"model.lr"', "loguniform cannot be sampled: low 0.0 <= 0"]),
    ('"model.lr" = {loguniform = [-1.0, 0.1]}', ['"model.lr"', "<= 0"]),
    ('"model.lr" = {uniform = [0.1]}', ['"model.lr"', "[low, high]"]),
    ('"epochs" = {randint = [1.5, 3]}', ['"epochs"', "integer bounds"]),
    ('"model.lr" = {uniform = [0.1, 0.2], choice = [1]}', ['"model.lr"', "exactly one of"]),
    ('"model.lr" = {between = [0.1, 0.2]}', ['"model.lr"', "exactly one of"]),
    ('"model.dropout" = {choice = [0.0, 1.5]}', ['"model.dropout"', "1.5 is refused by [trainer] model.dropout"]),
    ('"model.arch" = {choice = ["sage", "transformer"]}', ['"model.arch"', "'transformer' is refused"]),
    ('"model.lr" = {uniform = [-0.1, 0.1]}', ['"model.lr"', "-0.1 is refused"]),
    ('"model.hidden" = {grid = [[128, 128], [0]]}', ['"model.hidden"', "[0] is refused"]),
])
def test_bad_space_keys_and_values_are_refused_naming_the_key(tmp_path, space, words):
    message = refused(tmp_path, space)
    for word in words:
        assert word in message, message


def test_an_empty_space_is_refused(tmp_path):
    assert "sweep.space: empty" in refused(tmp_path, "")


@pytest.mark.parametrize("sweep, key", [("trials = 0", "sweep.trials"), ("concurrent = 0", "sweep.concurrent"),
                                        ('scheduler = "hyperband"', "sweep.scheduler"),
                                        ('metric = "loss"', "sweep.metric"), ("reduction_factor = 1",
                                                                               "sweep.reduction_factor"),
                                        ("grace_period = 0", "sweep.grace_period"), ("tirals = 2", "sweep.tirals")])
def test_bad_sweep_settings_are_refused_naming_the_key(tmp_path, sweep, key):
    assert key in refused(tmp_path, '"model.lr" = {choice = [0.1]}', sweep)


def test_every_problem_is_named_on_the_one_line(tmp_path):
    message = refused(tmp_path, '"model.lr" = {uniform = [1, 0]}\n"sampler.roots" = {choice = [1]}')
    assert '"model.lr"' in message and '"sampler.roots"' in message


def config_of(space: dict, **sweep) -> SweepConfig:
    return SweepConfig.model_validate({"sweep": {"space": space, **sweep}})


def test_grid_times_random_draws_in_order():
    config = config_of({"model.hidden": {"grid": [[128, 128], [256, 256]]}, "model.lr": {"loguniform": [1e-3, 1e-1]},
                        "model.dropout": {"choice": [0.0, 0.1, 0.3]}, "epochs": {"randint": [2, 4]},
                        "model.weight_decay": {"uniform": [0.0, 0.01]}}, trials=3)
    trials = expand(config)
    assert [t.trial_id for t in trials] == [f"trial-{i:03d}" for i in range(6)]
    assert [t.settings["model.hidden"] for t in trials] == [[128, 128]] * 3 + [[256, 256]] * 3
    for t in trials:
        assert 1e-3 <= t.settings["model.lr"] <= 1e-1 and t.settings["model.dropout"] in (0.0, 0.1, 0.3)
        assert t.settings["epochs"] in (2, 3) and 0.0 <= t.settings["model.weight_decay"] <= 0.01
        # each trial's trainer config is the defaults with its settings
        assert t.trainer.model.lr == t.settings["model.lr"] and t.trainer.model.hidden == t.settings["model.hidden"]
        assert t.trainer.epochs == t.settings["epochs"]
    assert len({t.settings["model.lr"] for t in trials}) == 6  # drawn anew for each trial


def test_the_same_seed_draws_the_same_trials_and_another_seed_others():
    space = {"model.lr": {"loguniform": [1e-4, 1.0]}, "model.dropout": {"uniform": [0.0, 0.5]}}
    first = [t.settings for t in expand(config_of(space, trials=5, seed=7))]
    assert first == [t.settings for t in expand(config_of(space, trials=5, seed=7))]
    assert first != [t.settings for t in expand(config_of(space, trials=5, seed=8))]


def test_a_grid_alone_runs_every_combination_once():
    trials = expand(config_of({"model.hidden": {"grid": [[64], [128]]}, "model.arch": {"grid": ["gcn", "sage"]}}))
    assert [(t.settings["model.hidden"], t.settings["model.arch"]) for t in trials] == [
        ([64], "gcn"), ([64], "sage"), ([128], "gcn"), ([128], "sage")]


def test_loguniform_draws_spread_over_the_decades():
    trials = expand(config_of({"model.lr": {"loguniform": [1e-4, 1.0]}}, trials=200))
    logs = [math.log10(t.settings["model.lr"]) for t in trials]
    assert min(logs) < -3 and max(logs) > -1


def test_a_combination_the_trainer_refuses_names_the_keys():
    # each value alone passes; together sage's halves do not divide 3
    config = SweepConfig.model_validate({"trainer": {"model": {"arch": "gcn", "hidden": [4]}}, "sweep": {"space": {
        "model.arch": {"grid": ["gcn", "sage"]}, "model.hidden": {"grid": [[3]]}}}})
    with pytest.raises(ConfigError, match="model.arch.*sage.*refused by"):
        expand(config)


def test_check_space_returns_one_dimension_per_key():
    dims = check_space(config_of({"model.lr": {"uniform": [0.01, 0.1]}, "seed": {"grid": [1, 2]}}))
    assert [(d.key, d.kind) for d in dims] == [("model.lr", "uniform"), ("seed", "grid")]


def test_concurrent_defaults_to_the_cores_the_samplers_leave():
    assert config_of({}, concurrent=3).trials_at_a_time() == 3
    assert SweepConfig.model_validate({"run": {"ray_num_cpus": 8}, "samplers": {"workers": 3}}).trials_at_a_time() == 5
    assert SweepConfig.model_validate({"run": {"ray_num_cpus": 8}}).trials_at_a_time() == 1
    services = SweepConfig.model_validate({"run": {"ray_num_cpus": 4}, "sweep": {"concurrent": 2}}).services_config()
    assert services.run.trainers == 2 and services.samplers.workers == 2 and services.ray_cpus() == 4


def test_on_running_services_the_trials_take_the_cores_and_need_redis_and_the_dataset(tmp_path):
    from saintpipe.sweep.driver import load_sweep

    running = {"run": {"ray_num_cpus": 6}, "sweep": {"features": "shard-0:50051"}}
    assert SweepConfig.model_validate(running).trials_at_a_time() == 6  # the samplers run elsewhere
    path = sweep_file(tmp_path, '"model.lr" = {choice = [0.01]}')
    features = {"sweep": {"features": "shard-0:50051;shard-1:50051"}}
    with pytest.raises(ConfigError) as info:
        load_sweep(path, None, None, environ={}, flags=features)
    message = str(info.value)
    assert message.startswith("--features shard-0:50051;shard-1:50051: a sweep on running services also needs")
    assert "--redis-url (or SAINTPIPE_REDIS_URL)" in message and "--data" in message and "\n" not in message
    config = load_sweep(path, Path("/data/demo"), None, environ={"SAINTPIPE_REDIS_URL": "redis://r:6379/0"},
                        flags={**features, "pool": {"job_id": "demo"}})
    assert config.sweep.features == "shard-0:50051;shard-1:50051" and config.pool.job_id == "demo"
    # the flags sit over the environment: SAINTPIPE_SWEEP__FEATURES names them too
    config = load_sweep(path, Path("/data/demo"), None, environ={"SAINTPIPE_SWEEP__FEATURES": "x:1",
                                                                 "SAINTPIPE_POOL__URL": "redis://r:6379/0"})
    assert config.sweep.features == "x:1"
    assert load_sweep(path, None, None, environ={}).sweep.features is None  # its own services: nothing needed
