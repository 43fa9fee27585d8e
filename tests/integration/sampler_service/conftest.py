"""Fixtures of the sampler service tests: one local Ray, a small dataset, a Redis, a running service."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

import pytest

from tests.support.ray_local import start_local_ray

HERE = Path(__file__).resolve().parent
_OWN_RAY = []  # set while this directory's fixture holds a Ray it started


@pytest.fixture(scope="session")
def ray_local():
    """A real local Ray with 2 CPUs (two one-core workers), shared by this directory's tests only.

    It is shut down after the last test of this directory (see pytest_runtest_teardown), so test
    directories that start their own Ray later in the session are not disturbed.
    """
    import ray

    if not ray.is_initialized():
        start_local_ray()
        _OWN_RAY.append(True)
    yield


@pytest.hookimpl(trylast=True)  # after the test's own fixtures (services on this Ray) are torn down
def pytest_runtest_teardown(item, nextitem):
    if _OWN_RAY and (nextitem is None or HERE not in Path(str(nextitem.path)).resolve().parents):
        import ray

        ray.shutdown()
        _OWN_RAY.clear()


@pytest.fixture(scope="session")
def svc_dataset(tmp_path_factory) -> Path:
    """A small demo graph written as a dataset directory (the workers memory-map it)."""
    from saintpipe.services.dataset.demo import generate_demo
    from saintpipe.services.dataset.store import write_dataset

    out = tmp_path_factory.mktemp("samplersvc") / "demo"
    write_dataset(out, **generate_demo(num_nodes=3000, feature_dim=8, seed=3))
    return out


def wait_for(predicate: Callable[[], object], timeout: float, what: str, interval: float = 0.1):
    """Poll ``predicate`` until it returns something truthy; fail naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout} s waiting for {what}")


@pytest.fixture
def make_service(ray_local, svc_dataset, redis_server_session, request):
    """Build and start a SamplerService on a fresh job; stopped (and the job deleted) after the test."""
    from saintpipe.services.pool.pool import SubgraphPool
    from saintpipe.services.sampler_service.config import SamplerServiceConfig
    from saintpipe.services.sampler_service.service import SamplerService

    started = []

    def make(workers: int = 2, capacity: int = 16, transport: str = "auto", wire: str = "auto",
             **overrides) -> SamplerService:
        job = f"{request.node.name[:60]}-{len(started)}".replace("[", "-").replace("]", "")
        # The pre-sampling estimator by default: most tests here check its parallel counts and their storage.
        fields = dict(data=svc_dataset, workers=workers, seed=11, metrics_port=0, norm_subgraphs=8,
                      normalization="reference",
                      sampler={"kind": "random_walk", "roots": 40, "walk_length": 2},
                      pool={"url": redis_server_session.url, "job_id": job, "capacity": capacity,
                            "transport": transport, "wire": wire},
                      health_interval_s=0.2, push_poll_s=0.2)
        fields.update(overrides)
        service = SamplerService(SamplerServiceConfig(**fields))
        started.append(service)
        service.start()
        return service

    yield make
    for service in started:
        service.stop()
        SubgraphPool(redis_server_session.url, service.config.job).delete_job()


@pytest.fixture
def wait():
    """``wait(predicate, timeout, what)``: poll until truthy, else fail the test."""
    return wait_for


def scrape(url: str) -> dict[tuple[str, tuple], float]:
    """GET a metrics endpoint and parse it with the Prometheus text parser: {(sample, labels): value}."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


@pytest.fixture
def scrape_metrics():
    return scrape


def drain(pool, count: int, timeout: float = 60.0) -> list:
    """Get and acknowledge ``count`` subgraphs from ``pool``; return them."""
    out, deadline = [], time.monotonic() + timeout
    while len(out) < count:
        if time.monotonic() > deadline:
            pytest.fail(f"only {len(out)} of {count} subgraphs arrived within {timeout} s")
        entry = pool.get("test-consumer", timeout=1.0)
        if entry is not None:
            out.append(entry.subgraph)
            pool.ack(entry.entry_id)
    return out


@pytest.fixture
def drain_pool():
    return drain
