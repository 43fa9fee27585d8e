"""The dataset store: one directory, memory-mapped by every component.

See :mod:`services.dataset.store` for the layout.
"""

from services.dataset.manifest import FORMAT_VERSION, Manifest
from services.dataset.store import Dataset, open_dataset, write_dataset

__all__ = ["FORMAT_VERSION", "Manifest", "Dataset", "open_dataset", "write_dataset"]
