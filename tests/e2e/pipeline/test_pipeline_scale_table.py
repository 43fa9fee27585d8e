"""docs/benchmarks/scale.md's table at scale 16: every step of scripts/scale_table.py on a real Kronecker
graph, a real bounded run and its per-process PSS (the scale-24 figures come from the same script and
scripts/pss_monitor.py)."""

from __future__ import annotations

import json
import math
import subprocess
import sys

from tests.support.pipeline import ROOT


def test_the_scale_table_measures_every_step_at_scale_16(tmp_path):
    limit = 40
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "scale_table.py"), "--scales", "16", "--workdir",
                           str(tmp_path), "--max-seconds", str(limit), "--import-up-to", "16"],
                          capture_output=True, text=True, timeout=limit + 300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    assert lines[0].startswith("| scale | gen s") and lines[2].startswith("| 16 | ")
    (row,) = json.loads(lines[-1])
    for key in ("gen_s", "gen_peak_gb", "bytes_gb", "verify_s", "import_import_s", "import_read_s",
                "import_reader_s", "import_peak_rss_gb", "import_dataset_gb", "startup_s", "trained_per_s", "sampled_per_s", "evaluation_s", "pss_total_gb"):
        assert math.isfinite(row[key]) and row[key] > 0, (key, row)
    assert row["evaluation"] == "complete" and 0 <= row["wait_fraction"] <= 1
    assert row["wall_s"] <= 1.25 * limit  # max_seconds bounds the whole run
    # PSS per process kind, the components of the run each found in its tree
    assert {"trainer", "sampler worker", "feature shard", "saintpipe run (driver)"} <= set(row["pss_gb"]), row
