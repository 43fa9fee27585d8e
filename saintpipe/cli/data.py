"""``saintpipe data …``: import, generate, inspect, verify and reshard datasets.

Handlers only parse flags and call :mod:`saintpipe.services.dataset`; heavy imports happen inside them.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import UserDict
from pathlib import Path

from saintpipe.core.argtypes import integer, seed
from saintpipe.core.model_flags import add_model_flags
from saintpipe.services.dataset.params import DEMO_FLAGS, KRONECKER_FLAGS, MAX_NODES, DemoParams, KroneckerParams

# 4096 shard files is far past any use.
MAX_SHARDS = 4096


def _writer_flags(parser: argparse.ArgumentParser, func, shards: int = 1, symmetrize: str = "") -> None:
    """Flags of every command that writes a dataset (``--symmetrize`` too where ``symmetrize`` says what of);
    ``func`` handles the command."""
    parser.set_defaults(func=func)
    if symmetrize:
        parser.add_argument("--symmetrize", action="store_true",
                            help=f"sort, deduplicate and symmetrize {symmetrize}")
    parser.add_argument("--out", type=Path, required=True, help="dataset directory to create")
    parser.add_argument("--force", action="store_true", help="replace an existing dataset at --out (once the new one is complete)")
    parser.add_argument("--shards", type=integer(1, MAX_SHARDS), default=shards,
                        help=f"number of feature shard files, 1 to {MAX_SHARDS} (default {shards})")
    parser.add_argument("--feature-dtype", choices=("float32", "float16"), default="float32",
                        help="how features are stored (default float32)")
    parser.add_argument("--name", help="dataset name (default: from the input)")
    _max_classes_flag(parser)


def _max_classes_flag(parser: argparse.ArgumentParser) -> None:
    """``--max-classes``: the bound on the number of classes labels may imply (writers and verify)."""
    # The default is checks.DEFAULT_MAX_CLASSES, spelled out to keep numpy out of parsing (a test ties the two).
    parser.add_argument("--max-classes", type=integer(1, MAX_NODES), default=100_000,
                        help="refuse labels that imply more classes than this (default 100000)")


def register(groups: argparse._SubParsersAction) -> None:
    parser = groups.add_parser("data", help="import, generate, inspect, verify and reshard datasets",
                               description="Dataset commands. Every command that writes a dataset takes --out DIR "
                               "(and --force to replace one); see docs/how-to/datasets-in-depth.md.")
    sub = parser.add_subparsers(dest="data_command", metavar="ACTION", required=True)
    _register_import(sub)
    _register_generate(sub)

    info = sub.add_parser("info", help="print a dataset's summary", description="Print a dataset's summary.")
    info.add_argument("dir", type=Path)
    info.set_defaults(func=_info)

    verify = sub.add_parser("verify", help="check a dataset's checksums, shapes, dtypes and graph invariants",
                            description="Check every file's checksum, each array's shape and dtype, CSR "
                            "sortedness, symmetry and id ranges, finite features, labels and splits.")
    verify.add_argument("dir", type=Path)
    verify.add_argument("--no-checksums", action="store_true", help="skip hashing the files (faster)")
    _max_classes_flag(verify)
    verify.set_defaults(func=_verify)

    shard = sub.add_parser("shard", help="change the number of feature shards",
                           description="Rewrite the feature shards as K contiguous node ranges. In place by "
                           "default (the old dataset stays intact until the new one is complete), or into --out.")
    shard.add_argument("dir", type=Path)
    shard.add_argument("--shards", type=integer(1, MAX_SHARDS), required=True,
                       help=f"new number of shards, 1 to {MAX_SHARDS}")
    shard.add_argument("--out", type=Path, help="write the resharded dataset here instead of in place")
    shard.add_argument("--force", action="store_true", help="replace an existing dataset at --out")
    shard.add_argument("--feature-dtype", choices=("float32", "float16"), help="also convert the features")
    shard.set_defaults(func=_shard)


IMPORT_FORMATS = ("graphsaint", "ogb", "npz", "edgelist", "arrays")


class _FormatsOrPath(UserDict):
    """A view of the format parsers by name in which any token passes argparse's choice check (a PATH)."""

    def __init__(self, parsers: dict) -> None:
        self.data = parsers  # the action's own map, not a copy: the formats are added to it later

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str)


class _ImportFormat(argparse._SubParsersAction):
    """``data import``'s format subcommands, which may also be left out: ``import [FORMAT] PATH ...``.

    ``import npz FILE`` names the format; ``import PATH`` detects it from the path
    (:func:`saintpipe.services.dataset.importers.detect.detect_format`), and ``--format F`` (anywhere after
    ``import``) overrides detection. Either way the format's own parser takes the arguments, so its flags
    (``--symmetrize``, ``--split-name``, ...) work as in the explicit form.
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # argparse checks the first token against the choices before calling the action; a PATH must pass.
        # A Mapping, not the dict typeshed declares: argparse only looks names up and lists them.
        self.choices = _FormatsOrPath(self._name_parser_map)  # type: ignore[assignment]

    def __call__(self, parser, namespace, values, option_string=None):
        values = list(values)
        fmt = getattr(namespace, "format", None)
        for i, token in enumerate(values):
            if token == "--format" or token.startswith("--format="):
                given = token.partition("=")[2] if "=" in token else (values[i + 1] if i + 1 < len(values) else "")
                del values[i : i + (1 if "=" in token else 2)]
                if given not in IMPORT_FORMATS:
                    parser.error(f"argument --format: invalid choice: {given!r} (choose from {', '.join(IMPORT_FORMATS)})")
                fmt = given
                break
        if values and values[0] in IMPORT_FORMATS:
            if fmt is not None and fmt != values[0]:
                parser.error(f"--format {fmt} contradicts the format {values[0]!r} named before the path")
            fmt, values = values[0], values[1:]
        elif fmt is None:
            if not values or values[0].startswith("-"):
                parser.error("give the input PATH (and --out DIR): saintpipe data import PATH --out DIR")
            from saintpipe.core.errors import DatasetError
            from saintpipe.services.dataset.importers.detect import detect_format

            try:
                fmt = detect_format(values[0])
            except DatasetError as exc:
                parser.error(str(exc))
        namespace.format = fmt
        super().__call__(parser, namespace, [fmt, *values], option_string)


def _register_import(sub: argparse._SubParsersAction) -> None:
    imp = sub.add_parser(
        "import", help="import a dataset: GraphSAINT, OGB, npz, an edge list or numpy arrays",
        usage="saintpipe data import [FORMAT] PATH --out DIR [options of the format]",
        description="Import a dataset. The format is detected from PATH: a directory holding adj_full.npz is "
        "GraphSAINT's format, one holding raw/edge.csv.gz OGB's raw layout, one holding indptr.npy numpy "
        "arrays; an .npz file is npz, another text file an edge list. Name it before PATH (data import npz "
        "FILE) or with --format to skip detection. Each format's options: saintpipe data import FORMAT --help. "
        "Inputs are validated; errors name the file, and the line, key or node at fault.")
    imp.add_argument("--format", choices=IMPORT_FORMATS,
                     help="the input's format, instead of detecting it (also accepted after PATH)")
    isub = imp.add_subparsers(dest="importer", metavar="[FORMAT] PATH", required=True, action=_ImportFormat,
                              prog="saintpipe data import")

    saint = isub.add_parser("graphsaint", help="GraphSAINT's format: adj_full.npz, adj_train.npz, feats.npy, "
                            "class_map.json, role.json",
                            description="Import a GraphSAINT dataset directory (adj_full.npz and adj_train.npz as "
                            "scipy CSR, feats.npy, class_map.json, role.json). adj_train is kept as the training "
                            "graph, and samplers draw from it by default (GraphSAINT's inductive protocol; "
                            "[samplers] graph overrides).")
    saint.add_argument("dir", type=Path, help="the GraphSAINT dataset directory")
    _writer_flags(saint, _import_graphsaint, symmetrize="both adjacencies instead of refusing them")

    ogb = isub.add_parser("ogb", help="OGB's raw node property prediction layout (raw/*.csv.gz, split/NAME/)",
                          description="Import an OGB node property prediction directory as OGB downloads it: "
                          "raw/edge.csv.gz, raw/node-feat.csv.gz, raw/node-label.csv.gz, optional "
                          "raw/num-node-list.csv.gz, and split/NAME/{train,valid,test}.csv.gz. Edges are "
                          "symmetrized; empty or nan labels are unlabelled nodes.")
    ogb.add_argument("dir", type=Path, help="the OGB dataset directory (holding raw/ and split/)")
    ogb.add_argument("--split-name", help="which split/NAME/ to use (default: the only one)")
    _writer_flags(ogb, _import_ogb)

    npz = isub.add_parser("npz", help="a Planetoid-style .npz (cora, citeseer)",
                          description="Import an .npz holding indptr, indices, features, labels and "
                          "train_mask/val_mask/test_mask (or train/val/test id arrays).")
    npz.add_argument("file", type=Path)
    _writer_flags(npz, _import_npz, symmetrize="the adjacency instead of refusing it")

    edges = isub.add_parser("edgelist", help="a CSV/TSV edge list (integer ids, or strings with --string-ids)",
                            description="Import an edge list (first two columns: source, target; integer ids, "
                            "or any strings with --string-ids; remapped to 0..N-1, originals saved as "
                            "node_ids.npy). Side files are .npy indexed by integer id, or tables keyed by id in "
                            "column 0.")
    edges.add_argument("file", type=Path)
    edges.add_argument("--string-ids", action="store_true",
                       help="read every node id as a string (also numeric-looking ones); without it a token that "
                            "is not an integer is an error naming its line")
    edges.add_argument("--features", type=Path, help=".npy [ids, F] or table: id, f1, f2, ...")
    edges.add_argument("--labels", type=Path, help=".npy class ids or table: id, label (id or class name)")
    edges.add_argument("--split", type=Path, help=".npy codes (0/1/2/-1) or table: id, train|val|test")
    edges.add_argument("--train", type=Path, help="node ids of the training split (.npy or one id per line)")
    edges.add_argument("--val", type=Path, help="node ids of the validation split")
    edges.add_argument("--test", type=Path, help="node ids of the test split")
    edges.add_argument("--delimiter", help="column delimiter (default: from the extension, else sniffed)")
    header = edges.add_mutually_exclusive_group()
    header.add_argument("--header", dest="header", action="store_true", default=None,
                        help="the first row is a header")
    header.add_argument("--no-header", dest="header", action="store_false", help="there is no header row")
    edges.add_argument("--seed", type=seed(), default=0, help="seed of the random split used without split files")
    _writer_flags(edges, _import_edgelist)

    arrays = isub.add_parser("arrays", help="raw .npy arrays (indptr, indices, features, labels, split)",
                             description="Import one .npy per array. With DIR, looks for DIR/indptr.npy, "
                             "indices.npy, features.npy, labels.npy and train/val/test.npy (ids or masks; "
                             "*_mask.npy too) or split.npy (codes 0 train, 1 val, 2 test, -1 none); flags override.")
    arrays.add_argument("dir", type=Path, nargs="?", help="directory holding the arrays")
    for role in ("indptr", "indices", "features", "labels", "train", "val", "test", "split"):
        arrays.add_argument(f"--{role}", type=Path, help=f"the {role} .npy file")
    _writer_flags(arrays, _import_arrays, symmetrize="the adjacency instead of refusing it")


def _register_generate(sub: argparse._SubParsersAction) -> None:
    gen = sub.add_parser("generate", help="generate a synthetic dataset", description="Generate a synthetic dataset.")
    gen_sub = gen.add_subparsers(dest="generator", metavar="GENERATOR", required=True)

    demo = gen_sub.add_parser("demo", help="the built-in demo dataset (planted communities)",
                              description="A labelled graph with planted communities whose labels can be learned.")
    # The generators' flags are made from their parameter models (services/dataset/params.py), which the
    # generators check their arguments against too: one range, default and help for both.
    demo.set_defaults(_model_flags=add_model_flags(demo, DemoParams, DEMO_FLAGS))
    _writer_flags(demo, _generate_demo, shards=2)
    _keep_existing_flag(demo)

    kron = gen_sub.add_parser("kronecker", help="a Kronecker (R-MAT) graph, GraphSAINT section 7.1",
                              description="R-MAT graph with initiator [[0.9, 0.5], [0.5, 0.1]]: 2^SCALE nodes, "
                              "mean degree DEGREE, undirected, random features and labels.")
    kron.set_defaults(_model_flags=add_model_flags(kron, KroneckerParams, KRONECKER_FLAGS,
                                                   required=("scale", "degree")))
    _writer_flags(kron, _generate_kronecker)
    _keep_existing_flag(kron)


def _keep_existing_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--keep-existing", action="store_true",
                        help="a dataset already at --out is kept: checked that it opens, not regenerated "
                             "(a deployment's data step, run on every start)")


def _kept(args: argparse.Namespace) -> bool:
    """With --keep-existing and a dataset at --out: open it (errors name what is wrong), report it, True."""
    if not getattr(args, "keep_existing", False):
        return False
    from saintpipe.core.errors import InvalidArgument
    from saintpipe.services.dataset.store import open_dataset

    if args.force:
        raise InvalidArgument("--keep-existing and --force contradict each other: give one")
    if not os.path.lexists(args.out):
        return False
    if not args.out.is_dir():  # a file, a FIFO (never opened), a dangling link: an error naming what it is
        from saintpipe.services.dataset.output import replaceable

        replaceable(args.out)
    m = open_dataset(args.out).manifest
    print(f"kept {args.out}: {m.num_nodes:,} nodes, {m.num_edges:,} directed edges, {m.num_shards} feature shard(s) "
          "(--keep-existing: not regenerated)")
    return True


def _check_out(args: argparse.Namespace, *inputs: Path | None) -> None:
    """Refuse --out before any work: not a dataset under --force, existing without it, overlapping an input."""
    from saintpipe.services.dataset.output import check_output

    check_output(args.out, overwrite=args.force, inputs=inputs)


def _write(args: argparse.Namespace, data: dict) -> int:
    from saintpipe.core.errors import InvalidArgument
    from saintpipe.services.dataset.layout import TRAIN_GRAPH_FILES
    from saintpipe.services.dataset.store import write_dataset

    if args.name:
        data["name"] = args.name
    num_nodes = data["indptr"].size - 1
    if args.shards > num_nodes:
        raise InvalidArgument(f"--shards {args.shards}: the dataset has {num_nodes:,} node(s), so at most "
                              f"{num_nodes:,} feature shard(s)")
    manifest = write_dataset(args.out, num_shards=args.shards, feature_dtype=args.feature_dtype,
                             overwrite=args.force, max_classes=args.max_classes, **data)
    print(f"wrote {args.out}: {manifest.num_nodes:,} nodes, {manifest.num_edges:,} directed edges, "
          f"{manifest.num_shards} feature shard(s)")
    if manifest.sample_graph == "train":
        extra = data["extra"]
        print(f"training graph: {extra[TRAIN_GRAPH_FILES['nodes']].size:,} nodes, "
              f"{extra[TRAIN_GRAPH_FILES['indices']].size:,} directed edges (samplers draw from it unless "
              "[samplers] graph = \"full\")")
    return 0


def _import_graphsaint(args: argparse.Namespace) -> int:
    from saintpipe.services.dataset.importers.graphsaint import import_graphsaint

    _check_out(args, args.dir)
    return _write(args, import_graphsaint(args.dir, symmetrize=args.symmetrize, max_classes=args.max_classes))


def _import_ogb(args: argparse.Namespace) -> int:
    from saintpipe.services.dataset.importers.ogb import import_ogb

    _check_out(args, args.dir)
    return _write(args, import_ogb(args.dir, split_name=args.split_name, max_classes=args.max_classes))


def _import_npz(args: argparse.Namespace) -> int:
    from saintpipe.services.dataset.importers.npz import import_npz

    _check_out(args, args.file)
    return _write(args, import_npz(args.file, symmetrize=args.symmetrize, max_classes=args.max_classes))


def _import_edgelist(args: argparse.Namespace) -> int:
    from saintpipe.services.dataset.importers.edgelist import import_edgelist

    from saintpipe.services.dataset.importers.edge_stream import scratch_beside

    delimiter = "\t" if args.delimiter in ("\\t", "tab") else args.delimiter
    _check_out(args, args.file, args.features, args.labels, args.split, args.train, args.val, args.test)
    # The streamed CSR's indices stay a file in the scratch directory until the dataset is written.
    with scratch_beside(args.out) as scratch:
        return _write(args, import_edgelist(args.file, features=args.features, labels=args.labels, split=args.split,
                                            train=args.train, val=args.val, test=args.test, delimiter=delimiter,
                                            header=args.header, seed=args.seed, max_classes=args.max_classes,
                                            string_ids=args.string_ids, scratch=scratch))


def _import_arrays(args: argparse.Namespace) -> int:
    from saintpipe.core.errors import InvalidArgument
    from saintpipe.services.dataset.importers.arrays import ROLES, find_array_files, import_arrays

    overrides = {role: getattr(args, role) for role in ROLES}
    if args.dir is None and not any(overrides.values()):
        raise InvalidArgument("give a directory of arrays or the --indptr, --indices, ... files")
    if args.dir is not None and not args.dir.is_dir():
        raise InvalidArgument(f"{args.dir}: not a directory")
    files = find_array_files(args.dir, overrides) if args.dir else {r: p for r, p in overrides.items() if p}
    name = (args.dir.resolve().name if args.dir else "arrays")
    _check_out(args, args.dir, *files.values())
    return _write(args, import_arrays(files, name=name, symmetrize=args.symmetrize, max_classes=args.max_classes))


def _generate_demo(args: argparse.Namespace) -> int:
    from saintpipe.services.dataset.demo import generate_demo

    if _kept(args):
        return 0
    _check_out(args)
    return _write(args, generate_demo(**args._model_flags.values(args)))


def _generate_kronecker(args: argparse.Namespace) -> int:
    from saintpipe.services.dataset.kronecker import generate_kronecker

    if _kept(args):
        return 0
    _check_out(args)
    return _write(args, generate_kronecker(**args._model_flags.values(args), progress=sys.stderr.isatty()))


def _info(args: argparse.Namespace) -> int:
    from saintpipe.services.dataset.info import describe
    from saintpipe.services.dataset.store import open_dataset

    print(describe(open_dataset(args.dir)))
    return 0


def _verify(args: argparse.Namespace) -> int:
    from saintpipe.services.dataset.verify import verify_dataset

    m = verify_dataset(args.dir, checksums=not args.no_checksums, progress=sys.stderr.isatty(),
                       max_classes=args.max_classes)
    checked = "" if args.no_checksums else f", {len(m.files)} checksums match"
    print(f"{args.dir}: OK ({m.num_nodes:,} nodes, {m.num_edges:,} directed edges, {m.num_shards} shard(s){checked})")
    return 0


def _shard(args: argparse.Namespace) -> int:
    from saintpipe.services.dataset.reshard import reshard_dataset

    m = reshard_dataset(args.dir, args.shards, out=args.out, feature_dtype=args.feature_dtype,
                        overwrite=args.force, progress=sys.stderr.isatty())
    print(f"{args.out or args.dir}: {m.num_shards} feature shard(s) "
          + ", ".join(f"[{a}, {b})" for a, b in m.shards))
    return 0
