"""``saintpipe serve samplers`` as a process: fills the pool, serves metrics, stops cleanly on SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from saintpipe.services.pool.pool import SubgraphPool
from tests.support.cli import ROOT, free_port


def test_cli_serves_until_sigterm(svc_dataset, redis_server_session, wait, scrape_metrics, drain_pool):
    port = free_port()
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "saintpipe", "serve", "samplers", "--data", str(svc_dataset), "--workers", "1",
         "--redis-url", redis_server_session.url, "--job", "cli-job", "--metrics-port", str(port),
         "--norm-subgraphs", "4", "--sampler", "random_walk", "--param", "roots=30", "--pool-capacity", "6",
         "--ray-address", "local"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT)
    try:
        pool = SubgraphPool(redis_server_session.url, "cli-job", capacity=6)
        subgraphs = drain_pool(pool, 10, timeout=120)
        assert {sg.job_id for sg in subgraphs} == {"cli-job"}
        url = f"http://127.0.0.1:{port}/metrics"
        wait(lambda: scrape_metrics(url).get(("saintpipe_sampler_subgraphs_total", (("worker", "0"),)), 0) >= 10,
             30, "the CLI's metrics to count the subgraphs")
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        SubgraphPool(redis_server_session.url, "cli-job").delete_job()
    assert proc.returncode == 0, out
    assert "sampler service running: 1 worker," in out
    assert out.rstrip().endswith("sampler service stopped"), out[-2000:]
    assert "Traceback" not in out


def test_cli_reports_a_bad_sampler_parameter_in_one_line(svc_dataset, cli):
    result = cli("serve", "samplers", "--data", str(svc_dataset), "--param", "roots=0", check=False)
    assert result.returncode != 0
    assert "roots" in result.stderr and "Traceback" not in result.stderr
