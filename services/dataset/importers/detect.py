"""Which importer reads a path: ``saintpipe data import PATH`` without ``--format``.

Rules, in order (the first that matches wins):

- a directory holding ``adj_full.npz``: ``graphsaint``;
- a directory holding ``raw/edge.csv.gz`` (or ``raw/edge.csv``): ``ogb``;
- a directory holding ``indptr.npy`` or ``indices.npy``: ``arrays``;
- a file named ``*.npz``, or any file starting with a zip signature: ``npz``;
- another file whose first bytes are text (UTF-8, no NUL byte): ``edgelist``.

Anything else is one error naming the path and what was looked for; the
importer's own checks then say what is wrong inside a detected input.
"""

from __future__ import annotations

from pathlib import Path

from saintpipe.core.errors import DatasetError
from saintpipe.services.dataset.importers.graphsaint import is_graphsaint_dir
from saintpipe.services.dataset.importers.ogb import is_ogb_dir

_SNIFF_BYTES = 4096
_ZIP_MAGIC = b"PK"
_GZIP_MAGIC = b"\x1f\x8b"
_LOOKED_FOR = ("a GraphSAINT directory (adj_full.npz), an OGB directory (raw/edge.csv.gz), a directory of "
               ".npy arrays (indptr.npy), an .npz file or a text edge list")


def _text_prefix(head: bytes) -> bool:
    if b"\0" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start >= len(head) - 3  # a multi-byte character cut by the sniff window
    return True


def detect_format(path: Path | str) -> str:
    """The format name (``graphsaint``, ``ogb``, ``npz``, ``edgelist`` or ``arrays``) for ``path``.

    Raises:
        DatasetError: the path does not exist, or matches none of the rules (the message lists them).
    """
    path = Path(path)
    if path.is_dir():
        if is_graphsaint_dir(path):
            return "graphsaint"
        if is_ogb_dir(path):
            return "ogb"
        if (path / "indptr.npy").is_file() or (path / "indices.npy").is_file():
            return "arrays"
        raise DatasetError(f"{path}: cannot tell the dataset format: the directory holds none of adj_full.npz "
                           "(graphsaint), raw/edge.csv.gz (ogb), indptr.npy (arrays); give --format")
    if not path.exists():
        raise DatasetError(f"{path}: file or directory not found")
    if not path.is_file():
        raise DatasetError(f"{path}: not a regular file or a directory; expected {_LOOKED_FOR}")
    if path.suffix.lower() == ".npz":
        return "npz"
    try:
        with open(path, "rb") as fh:
            head = fh.read(_SNIFF_BYTES)
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read: {exc}") from None
    if head.startswith(_ZIP_MAGIC):
        return "npz"
    if path.suffix.lower() == ".npy":
        raise DatasetError(f"{path}: a single .npy array; give the directory holding indptr.npy, indices.npy, "
                           "... (--format arrays)")
    if head.startswith(_GZIP_MAGIC):
        raise DatasetError(f"{path}: gzip-compressed; decompress it first (gzip -dk {path.name}): compressed CSV "
                           "files are read only inside an OGB directory")
    if head and _text_prefix(head):
        return "edgelist"
    what = "an empty file" if not head else "a binary file"
    raise DatasetError(f"{path}: cannot tell the dataset format ({what}); expected {_LOOKED_FOR}, or give --format")
