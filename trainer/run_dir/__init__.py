"""What a trainer keeps in its run directory (the directory's whole layout: :mod:`saintpipe.pipeline.run_dir`).

* :mod:`~saintpipe.trainer.run_dir.outputs`: ``metrics.jsonl`` (one line per validation or epoch
  end, appended as training goes) and the best and final models, written by the loop.
* :mod:`~saintpipe.trainer.run_dir.model_file`: a model file (``best.pt``, ``final.pt``): weights and
  what rebuilds the model, loadable with ``weights_only=True``.
* :mod:`~saintpipe.trainer.run_dir.checkpoint`: ``checkpoints/latest.pt`` and numbered copies, written
  atomically; what a resumed run starts from.
"""

# The files' names, importable without torch (the run's driver finds them; the trainer writes them).
METRICS = "metrics.jsonl"
BEST = "best.pt"
FINAL = "final.pt"
LATEST = "latest.pt"
