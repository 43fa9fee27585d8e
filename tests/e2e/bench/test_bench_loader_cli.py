"""``saintpipe bench loader`` (before: ``python -m saintpipe.loader.bench``) runs end to end on a small demo
dataset and prints its lines: the embedded pipeline's start-up, a rate per ``num_workers``, its close."""

from __future__ import annotations

import re

from tests.support.pipeline import small_dataset


def test_bench_loader_prints_start_up_rate_and_close(cli, tmp_path):
    data = small_dataset(tmp_path / "small")
    proc = cli("bench", "loader", "--data", str(data), "--steps", "10", "--roots", "150", "--workers",
               timeout=300)
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 3, proc.stdout
    assert re.fullmatch(r"embedded pipeline start-up +\d+\.\d\d s", lines[0]), lines[0]
    assert re.fullmatch(r"num_workers=0  first minibatch +\d+\.\d\d s, then +\d+\.\d minibatches/s \(10 minibatches\)",
                        lines[1]), lines[1]
    assert re.fullmatch(r"close \(everything stopped\) +\d+\.\d\d s", lines[2]), lines[2]


def test_bench_loader_needs_its_data(cli):
    proc = cli("bench", "loader", check=False)
    assert proc.returncode == 2 and "--data" in proc.stderr and "Traceback" not in proc.stderr
