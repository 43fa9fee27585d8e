"""The dataset store: one directory, memory-mapped by every component (docs/how-to/datasets-in-depth.md).

See :mod:`saintpipe.services.dataset.layout` for the files it holds. The public names import from
the package; they load on first use, so importing the package loads neither numpy nor Numba::

    from saintpipe.services.dataset import open_dataset, write_dataset

Modules. The store: ``store`` (``open_dataset``, ``write_dataset``, ``Dataset``), ``layout`` (file
names, shard ranges), ``manifest`` (``Manifest``, checksums), ``output`` (where a dataset is written),
``checks``, ``verify`` and ``info``. Graphs and what is stored with them: ``csr``, ``train_graph``,
``sample_graph`` (what samplers draw from), ``normalization`` (stored normalization: its files, reading, reuse or estimation),
``oriented`` (stored oriented lists), ``reshard``. Importers: the
``importers`` sub-package, one module per format. Generators: ``demo`` and ``kronecker`` (their
arguments checked by ``params``) (their benchmarks, ``saintpipe bench generate`` and ``import``, are in
:mod:`saintpipe.bench`).
"""

from __future__ import annotations

from saintpipe.core.lazy import lazy_exports

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (saintpipe.core.lazy)
if TYPE_CHECKING:  # pragma: no cover
    from saintpipe.services.dataset.manifest import FORMAT_VERSION, Manifest
    from saintpipe.services.dataset.store import Dataset, open_dataset, write_dataset

__all__ = ["FORMAT_VERSION", "Dataset", "Manifest", "open_dataset", "write_dataset"]
__getattr__, __dir__ = lazy_exports(__name__)
