"""The dataset store: one directory, memory-mapped by every component.

See :mod:`saintpipe.services.dataset.layout` for the files it holds.
"""

from saintpipe.services.dataset.manifest import FORMAT_VERSION, Manifest
from saintpipe.services.dataset.store import Dataset, open_dataset, write_dataset

__all__ = ["FORMAT_VERSION", "Manifest", "Dataset", "open_dataset", "write_dataset"]
