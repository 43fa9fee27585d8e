"""``saintpipe run``: the main job, on the built-in demo dataset by default."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

log = logging.getLogger(__name__)


def register(groups: argparse._SubParsersAction) -> None:
    parser = groups.add_parser(
        "run",
        help="run the whole pipeline locally (demo dataset by default)",
        description="Run the whole pipeline on this machine with no set-up: a private Redis, one feature-shard "
        "process per shard, a local Ray cluster with the sampler workers and the trainer, and a Prometheus "
        "endpoint per component. Without --data, the built-in demo dataset is generated on first use. "
        "Ctrl-C (or SIGTERM) stops every component. Settings: defaults < --config file (sections [run], "
        "[pool], [samplers], [trainer]) < SAINTPIPE_<SECTION>__<FIELD> < flags; see docs/local-run.md.",
    )
    parser.add_argument("--data", type=Path, help="dataset directory (default: the demo dataset)")
    parser.add_argument("--config", type=Path, help="config file (TOML, YAML or JSON)")
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON object as well")
    parser.set_defaults(func=_run)


def ensure_demo_dataset() -> Path:
    """Generate the demo dataset on first use and return its directory."""
    from saintpipe.core.paths import demo_dataset_dir
    from saintpipe.services.dataset.demo import generate_demo
    from saintpipe.services.dataset.store import write_dataset

    out = demo_dataset_dir()
    if not (out / "manifest.json").is_file():
        print(f"generating the demo dataset in {out} (first run only)")
        write_dataset(out, num_shards=2, overwrite=out.exists(), **generate_demo())
    return out


def _run(args: argparse.Namespace) -> int:
    from saintpipe.services.dataset.info import describe
    from saintpipe.services.dataset.store import open_dataset
    from saintpipe.pipeline.config import load_pipeline_config
    from saintpipe.pipeline.runner import LocalPipeline
    from saintpipe.pipeline.summary import format_summary

    config = load_pipeline_config(args.config, data=args.data)
    if config.run.data is None:
        config.run.data = ensure_demo_dataset()
    print(describe(open_dataset(config.run.data)), flush=True)
    pipeline = LocalPipeline(config)
    summary = pipeline.run()
    print(format_summary(summary), flush=True)
    if args.json:
        print(summary.to_json(), flush=True)
    return pipeline.supervisor.exit_code
