"""``saintpipe bench sweep --quick``: the same configurations as one sweep and as separate runs, as a user runs
them. A structure check: every figure there and finite, the ratios made of the rows, ASHA's stop and its
group's departure timed, every pool account adding up. No wall-clock target is asserted."""

from __future__ import annotations

import json
import math

import pytest
from tests.support.pipeline import small_dataset

# Five pipelines start one after another (the sweep, three runs, one more seed): minutes on a loaded machine.
pytestmark = pytest.mark.timeout(600)

FIGURES = ("wall_s", "sampler_cpu_s", "producing_cpu_s", "cpu_ms_per_step", "best_val", "best_test")


def test_bench_sweep_quick_reports_both_arms_the_noise_asha_and_the_accounts(cli, tmp_path):
    data = small_dataset(tmp_path / "small")
    proc = cli("bench", "sweep", "--quick", "--data", str(data), "--json", timeout=600)
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["benchmark"] == "sweep"
    assert report["params"]["lrs"] == "0.02 1e-05 0.01" and report["params"]["concurrent"] == 1
    sweep, separate = report["rows"]
    assert (sweep["arm"], separate["arm"]) == ("sweep", "separate")
    for row in (sweep, separate):
        for name in FIGURES:
            assert math.isfinite(row[name]) and row[name] > 0, (row["arm"], name, row[name])
        assert row["steps"] > 0
        assert row["producing_cpu_s"] <= row["sampler_cpu_s"]  # a part of the processes' CPU
    assert sweep["accounts_add_up"] == "3/3 groups" and separate["accounts_add_up"] == "3/3 runs"

    s = report["summary"]
    for name in ("sampler_cpu_per_step_ratio", "producing_cpu_per_step_ratio", "wall_ratio", "best_test_difference",
                 "seed_noise", "asha_group_gone_s"):
        assert math.isfinite(s[name]), (name, s[name])
    assert math.isclose(s["sampler_cpu_per_step_ratio"], sweep["cpu_ms_per_step"] / separate["cpu_ms_per_step"])
    assert math.isclose(s["wall_ratio"], sweep["wall_s"] / separate["wall_s"])
    assert math.isclose(s["best_test_difference"], sweep["best_test"] - separate["best_test"])
    seeds = s["seed_test_scores"]
    assert len(seeds) == 2 and seeds[0] == separate["best_test"]
    assert math.isclose(s["seed_noise"], max(seeds) - min(seeds))
    assert s["within_noise"] == (abs(s["best_test_difference"]) <= s["seed_noise"])
    # The hopeless lr runs second, one trial at a time: it meets trial-000's record at its first rung.
    assert "trial-001 (lr 1e-05" in s["asha_stopped"]
    assert s["asha_group_gone_s"] >= 0
    for target in ("sampler_cpu_per_step_target", "wall_target", "asha_group_gone_target"):
        assert s[target].split(": ")[1] in ("met", "NOT met")
    assert s["accounts_add_up"] is True and s["groups_left"] == 0
