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
        description="Run the whole pipeline on this machine with no set-up: without --data, the built-in "
        "demo dataset is generated on first use.",
    )
    parser.add_argument("--data", type=Path, help="dataset directory (default: the demo dataset)")
    parser.add_argument("--config", type=Path, help="config file (TOML, YAML or JSON)")
    parser.set_defaults(func=_run)


def ensure_demo_dataset() -> Path:
    """Generate the demo dataset on first use and return its directory."""
    from saintpipe.paths import demo_dataset_dir
    from services.dataset.demo import generate_demo
    from services.dataset.store import write_dataset

    out = demo_dataset_dir()
    if not (out / "manifest.json").is_file():
        print(f"generating the demo dataset in {out} (first run only)")
        write_dataset(out, num_shards=2, overwrite=out.exists(), **generate_demo())
    return out


def _run(args: argparse.Namespace) -> int:
    from services.dataset.info import describe
    from services.dataset.store import open_dataset

    data = args.data or ensure_demo_dataset()
    dataset = open_dataset(data)
    print(describe(dataset))
    return 0
