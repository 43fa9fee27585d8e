"""``saintpipe run`` as a user runs it: the real console script, a real Redis, shards, Ray, Prometheus.

One run (module fixture) trains on a small demo dataset with no epoch limit:
a real Prometheus scrapes every endpoint it announces and every dashboard
query must return data; then SIGINT must stop it with nothing left behind
(no descendant process, no listening port). A second run, with restarts
off, loses a feature shard (SIGKILL) and must exit non-zero naming it, again
leaving nothing (tests/e2e/faults has the restarts). A
third runs to the end and prints the summary.
"""

from __future__ import annotations

import json
import math
import re
import signal
import statistics
import time

import pytest
from tests.support.cli import free_port, saintpipe_command

from tests.support.pipeline import PipelineProcess, small_dataset, write_config
from tests.support.prometheus import Prometheus, dashboard_queries

ENDLESS = """
[run]
progress = true
[trainer]
epochs = 100000
patience = 0
[samplers]
norm_subgraphs = 16
[samplers.sampler]
roots = 150
"""

SHORT = """
[trainer]
epochs = 4
patience = 0
[samplers.sampler]
roots = 150
"""

STARTUP_S = 120


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return small_dataset(tmp_path_factory.mktemp("pipeline") / "small")


def start(tmp_path, dataset, config: str, *extra: str) -> PipelineProcess:
    cfg = write_config(tmp_path / "run.toml", config)
    return PipelineProcess(saintpipe_command(), ["run", "--data", str(dataset), "--config", str(cfg), *extra], tmp_path,
                           env={"SAINTPIPE_HOME": str(tmp_path / "home")})


def assert_nothing_left(run: PipelineProcess) -> None:
    assert len(run.seen) >= 5, f"the process tree was not observed: {run.seen}"  # redis, 2 shards, ray...
    deadline = time.monotonic() + 10  # the kernel may take a moment to reap SIGTERMed grandchildren
    while (left := run.alive()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert left == [], "processes left behind:\n" + "\n".join(left)
    assert run.ports, "no listening port was observed"
    assert run.open_ports() == [], f"ports still open: {run.open_ports()}"
    assert job_slots() == [], f"shared-memory slots left behind: {job_slots()}"


def job_slots() -> list[str]:
    """The shared-memory slots of the run's job (the pool's same-host transport: the Redis is on loopback)."""
    from saintpipe.services.pool import shared_memory

    return sorted(p.name for p in shared_memory.SHM_DIR.glob(f"{shared_memory.PREFIX}*-local+*"))


@pytest.fixture(scope="module")
def training(tmp_path_factory, dataset):
    """A run that trains until it is stopped."""
    run = start(tmp_path_factory.mktemp("endless"), dataset, ENDLESS)
    try:
        run.wait_for_line(r"^training started", STARTUP_S)
        run.wait_for_steps(2, 60)
        run.sample_tree(ports=True)
        yield run
    finally:
        run.cleanup()


def test_run_announces_every_component(training):
    names = set(training.metrics_urls())
    assert {"feature shard 0", "feature shard 1", "samplers", "trainer 0"} <= names
    assert re.search(r"^redis\s+redis://:\*\*\*@127\.0\.0\.1:\d+/0$", training.stdout, re.M)  # password redacted
    for url in training.metrics_urls().values():
        assert training.scrape(url), url


def test_every_dashboard_query_returns_data_from_a_running_pipeline(training, tmp_path):
    targets = [url.removeprefix("http://").removesuffix("/metrics") for url in training.metrics_urls().values()]
    prom = Prometheus(targets, tmp_path, free_port())
    try:
        prom.wait_ready()
        queries = dashboard_queries()
        assert len(queries) >= 20
        missing: dict[str, str] = {}
        deadline = time.monotonic() + 60
        while True:  # rate() over [1m] needs two scrapes with activity in between
            missing = {}
            for panel, expr in queries:
                result = prom.query(expr)
                values = [float(r["value"][1]) for r in result]
                if not values or all(math.isnan(v) for v in values):
                    missing[panel] = expr
            if not missing or time.monotonic() > deadline:
                break
            time.sleep(2)
        assert training.proc.poll() is None, training.output()
        assert missing == {}, f"queries without data (targets {prom.targets_up()}):\n" + "\n".join(
            f"{p}: {e}" for p, e in missing.items())
    finally:
        prom.stop()


def test_sigint_stops_every_child_and_frees_every_port(training):
    training.sample_tree()
    assert job_slots(), "the samplers should leave subgraphs in shared memory (a loopback Redis)"
    training.signal(signal.SIGINT)
    code = training.wait(90)
    assert code == 130, training.output()
    assert "SIGINT received: stopping every component" in training.stderr
    assert "== saintpipe run: summary ==" in training.stdout  # what ran is still reported
    # ... the trainer's work included, though its loop never returned: steps, losses and times
    out = training.stdout
    assert int(re.search(r"^optimizer steps\s+([\d,]+)$", out, re.M).group(1).replace(",", "")) >= 2, out
    assert float(re.search(r"^\s+compute \(trainers\)\s+([\d.]+) s", out, re.M).group(1)) > 0, out
    assert re.search(r"^loss spike ratio\s+\S", out, re.M) and "final evaluation" in out, out
    assert re.search(r"^final evaluation\s+not run \(the run ended before it", out, re.M), out
    assert_nothing_left(training)


def test_max_seconds_bounds_the_whole_run_and_the_model_is_still_scored(tmp_path, dataset):
    # Long enough for start-up (8 to 14 s on 2 cores), some training, the final evaluation and the 4 s kept
    # back for the stop; each second more is a second of the suite.
    limit = 25
    run = start(tmp_path, dataset, ENDLESS.replace("[run]\n", f"[run]\nmax_seconds = {limit}\n"), "--json")
    try:
        run.wait_for_line(r"^training started", STARTUP_S)
        run.sample_tree(ports=True)
        code = run.wait(limit + 120)
        assert code == 0, run.output()
        data = json.loads(run.stdout.strip().splitlines()[-1])
        assert data["stopped_by"] == f"max_seconds ({limit} s, the final evaluation included)", data["stopped_by"]
        assert data["time_budget"].startswith(f"{limit} s: start-up "), data["time_budget"]
        assert data["evaluation"] == "complete" and 0 <= data["test_score"] <= 1 and data["steps"] > 0
        assert data["evaluation_estimate_s"] > 0
        # The limit covers start-up, training, the final evaluation and the stop (a generous bound for a
        # loaded machine: training ends when the time left is the evaluation's and the stop's).
        assert data["times"]["wall"] <= 1.25 * limit, data["times"]
        assert re.search(rf"^time budget\s+{limit} s: start-up [\d.]+ s, training until [\d.]+ s", run.stdout,
                         re.M)
        assert_nothing_left(run)
    finally:
        run.cleanup()


def test_with_restarts_off_a_killed_feature_shard_stops_the_run_with_a_clear_message(tmp_path, dataset):
    run = start(tmp_path, dataset, ENDLESS.replace("[run]\n", "[run]\nmax_restarts = 0\n"))
    try:
        run.wait_for_line(r"^training started", STARTUP_S)
        run.wait_for_steps(1, 60)
        run.sample_tree(ports=True)
        shard = run.pid_of("--shard 1")
        shard.kill()
        code = run.wait(90)
        assert code != 0, run.output()
        assert re.search(r"feature shard 1 \(pid \d+, 127\.0\.0\.1:\d+\) exited unexpectedly with signal SIGKILL",
                         run.stderr), run.output()
        assert "restarts are off ([run] max_restarts = 0)" in run.stderr
        errors = [line for line in run.stderr.splitlines() if line.startswith("saintpipe: error:")]
        assert len(errors) == 1 and "the pipeline was stopped; resume with: saintpipe run --resume" in errors[0]
        assert "== saintpipe run: summary ==" in run.stdout  # what ran is still reported
        assert "Traceback" not in run.stderr, run.output()
        assert_nothing_left(run)
    finally:
        run.cleanup()


def test_a_short_run_trains_to_the_end_and_prints_the_summary(tmp_path, dataset):
    run = start(tmp_path, dataset, SHORT, "--json")
    try:
        run.wait_for_line(r"^training started", STARTUP_S)
        run.sample_tree(ports=True)
        code = run.wait(120)
        assert code == 0, run.output()
        out = run.stdout
        score = float(re.search(r"^test accuracy\s+([0-9.]+)$", out, re.M).group(1))
        assert score > 0.25, out  # 8 balanced classes: chance is 0.125
        assert re.search(r"^epochs\s+4$", out, re.M), out
        for line in ("subgraphs trained on", "sampler throughput", "sampling (sampler workers)",
                     "feature fetch (trainers)", "compute (trainers)", "waiting for data (trainers)"):
            assert re.search(rf"^\s*{re.escape(line)}\s+\S", out, re.M), f"{line!r} missing\n{out}"
        trained = int(re.search(r"^subgraphs trained on\s+([\d,]+)", out, re.M).group(1).replace(",", ""))
        assert trained > 0
        # The training steps' feature gathers through the trainer's cache (on by default).
        assert re.search(r"^feature cache hit rate\s+\d+\.\d%  \(cache: [\d,]+ pinned \+ [\d,]+ LRU rows",
                         out, re.M), out
        assert re.search(r"^feature bytes per step\s+[\d.]+ [kMG]?B", out, re.M), out
        data = json.loads(out.strip().splitlines()[-1])
        assert 0 < data["feature_cache_hit_rate"] < 1 and data["feature_bytes_per_step"] > 0
        assert data["feature_rows"] > data["feature_cache_hits"] > 0 and data["subgraphs_trained"] == trained
        # Every step's loss, and the loss-spike ratio read from them (recomputed here from the JSON alone).
        losses, epochs = data["step_losses"], data["step_epochs"]
        assert len(losses) == len(epochs) == data["steps"] > 0 and all(math.isfinite(v) for v in losses)
        assert epochs == sorted(epochs) and epochs[0] == 0 and epochs[-1] == 3  # epochs 0..3 of 4
        after = [v for v, e in zip(losses, epochs, strict=True) if e >= 1]
        assert data["loss_spike_ratio"] == pytest.approx(max(after) / statistics.median(after))
        ratio = float(re.search(r"^loss spike ratio\s+([0-9.]+)  \(largest step loss", out, re.M).group(1))
        assert ratio == pytest.approx(data["loss_spike_ratio"], abs=0.05)
        assert [epoch for epoch, _ in data["val_history"]] == [1.0, 2.0, 3.0, 4.0]  # one validation per epoch
        assert data["best_val_epoch"] in (1.0, 2.0, 3.0, 4.0)
        assert "epoch 4/4" in run.stderr  # one progress bar per epoch
        # The local cluster asks for Ray's token authentication itself: Ray's line saying it turned it on is gone.
        assert "Token authentication" not in run.stderr, run.stderr
        assert_nothing_left(run)
    finally:
        run.cleanup()
