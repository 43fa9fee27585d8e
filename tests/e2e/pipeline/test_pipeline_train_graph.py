"""``saintpipe run`` with ``[samplers] graph = "train"``: GraphSAINT's inductive protocol end to end.

The samplers draw from the graph induced by the training nodes (built once and stored with the dataset),
the trainer evaluates on the full graph, and the accuracy is far above chance; ``saintpipe data verify``
then checks the stored training graph.
"""

from __future__ import annotations

import json

from tests.support.pipeline import small_dataset

RUN = """
[run]
progress = false
checkpoints = false
metrics = false
[trainer]
epochs = 5
patience = 0
[samplers]
graph = "train"
[samplers.sampler]
kind = "random_walk"
roots = 150
walk_length = 2
"""


def test_run_on_the_training_graph_ends_with_a_sane_accuracy(cli, tmp_path):
    data = small_dataset(tmp_path / "small")
    config = tmp_path / "run.toml"
    config.write_text(RUN)
    proc = cli("run", "--data", str(data), "--config", str(config), "--json", timeout=300,
               env={"SAINTPIPE_HOME": str(tmp_path / "home")})
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "training graph" in summary["normalization"], summary["normalization"]
    # 8 balanced classes (chance 0.125); the demo's communities are learnt from the training graph alone.
    assert summary["test_score"] > 0.5, summary["test_score"]
    assert summary["val_score"] > 0.5, summary
    assert (data / "train_graph" / "meta.json").is_file()  # built once, stored with the dataset
    verified = cli("data", "verify", str(data))
    assert verified.returncode == 0, verified.stdout + verified.stderr
