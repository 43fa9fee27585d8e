"""Pure logic of the sampler service: seeds, core choice, counters, the metrics rendering."""

from __future__ import annotations

import argparse

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from saintpipe.services.sampler_service.counters import SAMPLE_SECONDS_BUCKETS, WorkerCounters
from saintpipe.services.sampler_service.metrics import MetricsSnapshot, SamplerCollector
from saintpipe.services.sampler_service.slots import split_range


@pytest.mark.parametrize("total,parts", [(10, 3), (0, 2), (5, 8), (100, 1)])
def test_split_range_covers_everything_once(total, parts):
    ranges = split_range(total, parts)
    assert len(ranges) == parts
    assert [i for a, b in ranges for i in range(a, b)] == list(range(total))
    assert max(b - a for a, b in ranges) - min(b - a for a, b in ranges) <= 1


def test_counters_buckets_and_sum():
    c = WorkerCounters()
    c.observe(10, 20, SAMPLE_SECONDS_BUCKETS[0], 0.5)  # on the bound: counted in that bucket (le)
    c.observe(5, 7, 1e9, 0.0)                          # above every bound: only +Inf
    buckets = c.cumulative_buckets()
    assert buckets[0] == (str(SAMPLE_SECONDS_BUCKETS[0]), 1)
    assert buckets[-2][1] == 1 and buckets[-1] == ("+Inf", 2)
    total = c.add(c)
    assert (total.subgraphs, total.nodes, total.edges, total.pool_wait_seconds) == (4, 30, 54, 1.0)


def test_collector_renders_contract_names_and_parses():
    c = WorkerCounters()
    c.observe(100, 400, 0.003, 0.25)
    snap = MetricsSnapshot({0: c, 1: WorkerCounters()}, {0: 2})

    class _Registry:
        def collect(self):
            return SamplerCollector(lambda: snap).collect()

    families = {f.name: f for f in text_string_to_metric_families(generate_latest(_Registry()).decode())}
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families.values() for s in f.samples}
    assert samples[("saintpipe_sampler_subgraphs_total", (("worker", "0"),))] == 1
    assert samples[("saintpipe_sampler_nodes_total", (("worker", "0"),))] == 100
    assert samples[("saintpipe_sampler_edges_total", (("worker", "0"),))] == 400
    assert samples[("saintpipe_sampler_pool_wait_seconds_total", (("worker", "0"),))] == 0.25
    assert samples[("saintpipe_sampler_restarts_total", (("worker", "0"),))] == 2
    assert samples[("saintpipe_sampler_restarts_total", (("worker", "1"),))] == 0
    assert samples[("saintpipe_sampler_sample_seconds_count", (("worker", "0"),))] == 1
    assert samples[("saintpipe_sampler_sample_seconds_bucket", (("le", "0.005"), ("worker", "0")))] == 1
    assert samples[("saintpipe_sampler_sample_seconds_bucket", (("le", "0.0025"), ("worker", "0")))] == 0


def test_cli_sampler_flags_kind_replaces_file_params(tmp_path):
    from saintpipe.services.sampler_service.cli import sampler_flags

    path = tmp_path / "s.yaml"
    path.write_text("sampler:\n  kind: edge\n  num_edges: 100\n")
    args = argparse.Namespace(sampler_config=path, sampler_kind=None, param=["seed_extra=3"])
    assert sampler_flags(args) == {"kind": "edge", "num_edges": 100, "seed_extra": 3}
    args = argparse.Namespace(sampler_config=path, sampler_kind="node", param=["budget=50"])
    assert sampler_flags(args) == {"kind": "node", "budget": 50}
    args = argparse.Namespace(sampler_config=None, sampler_kind=None, param=[])
    assert sampler_flags(args) is None


def test_claim_core_takes_free_cores_first_then_shares(tmp_path):
    from saintpipe.services.sampler_service.pinning import claim_core

    first = claim_core(0, [4, 5], tmp_path)
    other_index_same_slot = claim_core(2, [4, 5], tmp_path)  # 2 mod 2 = 0 is taken: moves on to core 5
    third = claim_core(1, [4, 5], tmp_path)
    assert (first.core, first.shared) == (4, False)
    assert (other_index_same_slot.core, other_index_same_slot.shared) == (5, False)
    assert (third.core, third.shared) == (5, True)
    first.release()  # a dead worker's core (the kernel drops its flock) is free again
    again = claim_core(3, [4, 5], tmp_path)
    assert (again.core, again.shared) == (4, False)


def test_keep_off_cores_moves_every_thread_of_a_helper_off_the_busy_cores():
    import os
    import subprocess
    import sys

    from saintpipe.services.sampler_service.pinning import keep_off_cores

    available = set(os.sched_getaffinity(0))
    # A helper with a second thread, as redis-server has its background threads.
    code = ("import threading, time; threading.Thread(target=time.sleep, args=(30,), daemon=True).start(); "
            "print('ready', flush=True); time.sleep(30)")
    helper = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert helper.stdout.readline().strip() == "ready"
        busy = {min(available)}
        expected = (available - busy) or available
        assert keep_off_cores(helper.pid, busy) == expected
        threads = os.listdir(f"/proc/{helper.pid}/task")
        assert len(threads) >= 2
        assert all(os.sched_getaffinity(int(tid)) == expected for tid in threads)
        # Every core busy (one worker per core): the helper shares them all rather than having none.
        assert keep_off_cores(helper.pid, available) == available
        assert all(os.sched_getaffinity(int(tid)) == available for tid in threads)
    finally:
        helper.kill()
        helper.wait()
