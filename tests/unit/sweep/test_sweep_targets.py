"""The sweep's Prometheus file_sd target files: what they list, in the format Prometheus reads, and that a trial's
goes with it."""

from __future__ import annotations

import json
import socket

from saintpipe.sweep import targets


def test_services_are_listed_with_compose_component_labels(tmp_path):
    path = targets.write_services(tmp_path, {"feature shard 0": "http://127.0.0.1:41001/metrics",
                                             "feature shard 1 replica 1": "http://127.0.0.1:41002/metrics",
                                             "samplers": "http://127.0.0.1:41003/metrics"})
    assert path == tmp_path / "prometheus" / "services.json"
    assert json.loads(path.read_text()) == [
        {"targets": ["127.0.0.1:41001"], "labels": {"component": "feature-shard"}},
        {"targets": ["127.0.0.1:41002"], "labels": {"component": "feature-shard"}},
        {"targets": ["127.0.0.1:41003"], "labels": {"component": "samplers"}}]
    assert targets.write_services(tmp_path / "none", {}) is None  # [run] metrics = false: no file
    assert not (tmp_path / "none").exists()


def test_a_trial_is_listed_while_it_runs_and_clear_leaves_no_target(tmp_path):
    targets.write_services(tmp_path, {"samplers": "http://127.0.0.1:41003/metrics"})
    a = targets.write_trial(tmp_path, "trial-000", "http://127.0.0.1:42000")
    targets.write_trial(tmp_path, "trial-001", "http://127.0.0.1:42001/metrics")
    assert json.loads(a.read_text()) == [{"targets": ["127.0.0.1:42000"], "labels": {"component": "trainer"}}]
    targets.remove_trial(tmp_path, "trial-000")
    targets.remove_trial(tmp_path, "trial-000")  # the trial, then the driver: the second changes nothing
    assert sorted(p.name for p in (tmp_path / "prometheus").iterdir()) == ["services.json", "trial-001.json"]
    targets.clear(tmp_path)
    assert list((tmp_path / "prometheus").iterdir()) == []
    targets.clear(tmp_path / "never")  # a sweep that never listed anything


def test_an_endpoint_bound_to_every_address_is_named_by_this_host():
    assert targets.target("http://0.0.0.0:9102/metrics") == f"{socket.gethostname()}:9102"
    assert targets.target("http://10.1.2.3:9102/metrics") == "10.1.2.3:9102"
    assert targets.target("http://[fd00::1]:9102/metrics") == "[fd00::1]:9102"
