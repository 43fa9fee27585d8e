"""A sweep against services that run already (``[sweep] features``): an embedded pipeline stands in for a
compose stack, whose trainer has read the job's default group and stopped. The sweep uses that pipeline's
Redis (no Redis of its own), shards and samplers; it removes the unread default group once its trials' groups
are registered, refuses while a consumer still reads that group, and hands the job back to its default group
at the end. One pipeline, two one-epoch trials: 93-151 s measured (four runs) on the shared two cores under a load of about
20."""

from __future__ import annotations

import logging
import threading
import time

import psutil
import pytest

from saintpipe.core.config import deep_merge
from saintpipe.core.errors import ConfigError
from saintpipe.loader.embedded import EmbeddedPipeline
from saintpipe.pipeline.config import PipelineConfig
from saintpipe.services.pool.keys import GROUP
from saintpipe.services.pool.pool import SubgraphPool
from saintpipe.sweep.config import SweepConfig
from saintpipe.sweep.driver import run_sweep

from tests.integration.loader.conftest import overrides, unique_job
from tests.support.pipeline import small_dataset

pytestmark = pytest.mark.serial  # a local Ray with pinned sampler workers

QUIET_S = 3.0  # [pool] visibility_timeout: how long a consumer stays quiet before its group is nobody's


def _redis_servers(seen: set[int], stop: threading.Event) -> None:
    """Adds the pids of this process's redis-server descendants to ``seen``, every 0.2 s until ``stop`` (once
    when it is set already)."""
    while True:
        for child in psutil.Process().children(recursive=True):
            try:
                if "redis-server" in child.name():
                    seen.add(child.pid)
            except psutil.Error:
                continue
        if stop.wait(0.2):
            return


def test_a_sweep_on_running_services_takes_the_unread_default_group_and_hands_it_back(tmp_path, caplog):
    data = small_dataset(tmp_path / "data")
    job = unique_job("sweep")
    stack = PipelineConfig.model_validate(deep_merge(overrides(job), {
        "run": {"data": data, "ray_num_cpus": 4}, "samplers": {"workers": 1}, "pool": {"capacity": 8}}))
    with EmbeddedPipeline(stack) as pipeline:  # no group registered: the samplers fill the default group
        with SubgraphPool.from_config(stack.pool, url=pipeline.redis_url) as trainer:  # the stack's trainer
            first = trainer.get("trainer-0", timeout=180)  # (the first run after a checkout compiles the kernels)
            assert first is not None
            trainer.ack(first.entry_id)
            assert trainer.get("trainer-0", timeout=30) is not None  # held when it stopped: pending
            trainer.stats()  # (a quiet consumer: it asks for nothing more)
        sweep = SweepConfig.model_validate(deep_merge(overrides(job), {
            "run": {"data": data, "progress": False}, "pool": {"url": pipeline.redis_url,
                                                               "visibility_timeout": QUIET_S},
            "trainer": {"epochs": 1, "patience": 0, "eval_every": 1, "feature_token_file": pipeline.feature_token_file,
                        "model": {"hidden": [16, 16]}},
            "sweep": {"features": ";".join(",".join(r) for r in pipeline.shards.addresses), "trials": 2, "concurrent": 2, "scheduler": "none",
                      "space": {"model.lr": {"choice": [0.01, 0.02]}}}}))

        # A consumer that still asks for subgraphs is a live trainer: refused, nothing changed.
        stop = threading.Event()

        def live_reader() -> None:
            with SubgraphPool.from_config(stack.pool, url=pipeline.redis_url) as live:
                while not stop.is_set():  # trains on what it gets: the samplers put more
                    entry = live.get("trainer-live", timeout=0.2)
                    if entry is not None:
                        live.ack(entry.entry_id)

        reader = threading.Thread(target=live_reader)
        reader.start()
        try:
            with pytest.raises(ConfigError, match=f"its default group '{GROUP}' is being read .*trainer-live"):
                run_sweep(sweep, tmp_path / "refused")
        finally:
            stop.set()
            reader.join()
        with SubgraphPool.from_config(stack.pool, url=pipeline.redis_url) as pool:
            assert pool.groups() == []  # still only the default group
            deadline = time.monotonic() + 60
            while pool.stats().held < stack.pool.capacity and time.monotonic() < deadline:
                time.sleep(0.2)
            assert pool.stats().held == stack.pool.capacity  # full, and nobody reads: the trials would starve

        # Redis servers running already (the pipeline's, and in one pytest process a session fixture's):
        # none other may appear while the sweep runs.
        before: set[int] = set()
        done = threading.Event()
        done.set()
        _redis_servers(before, done)
        seen: set[int] = set()
        watching = threading.Event()
        watcher = threading.Thread(target=_redis_servers, args=(seen, watching))
        watcher.start()
        caplog.set_level(logging.INFO, logger="saintpipe.sweep.services")
        try:
            summary = run_sweep(sweep, tmp_path / "sweep")
        finally:
            watching.set()
            watcher.join()
        assert pipeline.redis.pid in before and seen - before == set(), "the sweep started a Redis of its own"

        rows = {r.trial: r for r in summary.results.rows.values()}
        assert sorted(rows) == ["trial-000", "trial-001"]
        for row in rows.values():
            assert row.stopped_by == "finished" and row.steps > 0 and row.best_val == row.best_val
            p = row.pool
            assert p["produced"] > 0 and p["acknowledged"] > 0
            assert p["produced"] == p["acknowledged"] + p["waiting"] + p["pending"] + p["dead_lettered"]
        removed = [r.getMessage() for r in caplog.records if "had no active consumer" in r.getMessage()]
        assert len(removed) == 1 and f"group '{GROUP}'" in removed[0], removed
        assert "releasing" in removed[0] and "pending 1" in removed[0], removed[0]
        assert summary.groups_left == []
        with SubgraphPool.from_config(stack.pool, url=pipeline.redis_url) as pool:
            # handed back: the default group alone, reading from the sweep's end, and the samplers go on
            assert pool.groups() == [GROUP]
            consumers = pool.consumers()
            assert set(consumers) == {GROUP} and consumers[GROUP] == []
            entry = pool.get("trainer-next", timeout=30)
            assert entry is not None and pool.ack(entry.entry_id)
