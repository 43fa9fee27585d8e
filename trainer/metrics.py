"""The trainer's Prometheus metrics (names from docs/metrics.md), labelled by trainer name."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram, start_http_server

STEPS = Counter("saintpipe_trainer_steps", "Optimizer steps taken", ["trainer"])
STEP_SECONDS = Histogram(
    "saintpipe_trainer_step_seconds",
    "Compute time of one step (forward, backward, all-reduce, optimizer)",
    ["trainer"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)
DATA_WAIT = Counter(
    "saintpipe_trainer_data_wait_seconds", "Time steps waited for their subgraph and features", ["trainer"]
)
FETCH = Counter("saintpipe_trainer_fetch_seconds", "Time spent fetching features", ["trainer"])
LOSS = Gauge("saintpipe_trainer_loss", "Last training loss", ["trainer"])
VAL_SCORE = Gauge("saintpipe_trainer_val_score", "Last validation accuracy / F1-micro", ["trainer"])


class TrainerMetrics:
    """The metric children of one trainer."""

    def __init__(self, trainer: str) -> None:
        self.steps = STEPS.labels(trainer=trainer)
        self.step_seconds = STEP_SECONDS.labels(trainer=trainer)
        self.data_wait = DATA_WAIT.labels(trainer=trainer)
        self.fetch = FETCH.labels(trainer=trainer)
        self.loss = LOSS.labels(trainer=trainer)
        self.val = VAL_SCORE.labels(trainer=trainer)

    def observe_step(self, compute_s: float, data_wait_s: float, fetch_s: float, loss: float) -> None:
        self.steps.inc()
        self.step_seconds.observe(compute_s)
        self.data_wait.inc(data_wait_s)
        self.fetch.inc(fetch_s)
        self.loss.set(loss)

    def val_score(self, score: float) -> None:
        self.val.set(score)


def serve_metrics(port: int, host: str = "127.0.0.1"):
    """Start the /metrics endpoint on ``port`` (0: a free one) on a daemon thread.

    Returns:
        The HTTP server; its port is ``server.server_address[1]``; ``server.shutdown()`` stops it.
    """
    server, _thread = start_http_server(port, addr=host)
    return server
