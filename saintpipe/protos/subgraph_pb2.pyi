from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Array(_message.Message):
    __slots__ = ("dtype", "shape", "padding", "data")
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    PADDING_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    dtype: str
    shape: _containers.RepeatedScalarFieldContainer[int]
    padding: bytes
    data: bytes
    def __init__(self, dtype: _Optional[str] = ..., shape: _Optional[_Iterable[int]] = ..., padding: _Optional[bytes] = ..., data: _Optional[bytes] = ...) -> None: ...

class Subgraph(_message.Message):
    __slots__ = ("format_version", "job_id", "worker", "sequence", "seed", "node_ids", "indptr", "indices", "edge_weights", "edge_weights_t", "loss_weights", "checksum", "nodes", "induction")
    FORMAT_VERSION_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    WORKER_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    NODE_IDS_FIELD_NUMBER: _ClassVar[int]
    INDPTR_FIELD_NUMBER: _ClassVar[int]
    INDICES_FIELD_NUMBER: _ClassVar[int]
    EDGE_WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    EDGE_WEIGHTS_T_FIELD_NUMBER: _ClassVar[int]
    LOSS_WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    CHECKSUM_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    INDUCTION_FIELD_NUMBER: _ClassVar[int]
    format_version: int
    job_id: str
    worker: int
    sequence: int
    seed: int
    node_ids: Array
    indptr: Array
    indices: Array
    edge_weights: Array
    edge_weights_t: Array
    loss_weights: Array
    checksum: int
    nodes: NodeSet
    induction: Induction
    def __init__(self, format_version: _Optional[int] = ..., job_id: _Optional[str] = ..., worker: _Optional[int] = ..., sequence: _Optional[int] = ..., seed: _Optional[int] = ..., node_ids: _Optional[_Union[Array, _Mapping]] = ..., indptr: _Optional[_Union[Array, _Mapping]] = ..., indices: _Optional[_Union[Array, _Mapping]] = ..., edge_weights: _Optional[_Union[Array, _Mapping]] = ..., edge_weights_t: _Optional[_Union[Array, _Mapping]] = ..., loss_weights: _Optional[_Union[Array, _Mapping]] = ..., checksum: _Optional[int] = ..., nodes: _Optional[_Union[NodeSet, _Mapping]] = ..., induction: _Optional[_Union[Induction, _Mapping]] = ...) -> None: ...

class NodeSet(_message.Message):
    __slots__ = ("count", "first", "gap_bytes", "gaps")
    COUNT_FIELD_NUMBER: _ClassVar[int]
    FIRST_FIELD_NUMBER: _ClassVar[int]
    GAP_BYTES_FIELD_NUMBER: _ClassVar[int]
    GAPS_FIELD_NUMBER: _ClassVar[int]
    count: int
    first: int
    gap_bytes: int
    gaps: bytes
    def __init__(self, count: _Optional[int] = ..., first: _Optional[int] = ..., gap_bytes: _Optional[int] = ..., gaps: _Optional[bytes] = ...) -> None: ...

class Induction(_message.Message):
    __slots__ = ("graph_nodes", "graph_edges", "normalization", "norm_subgraphs", "norm_seed", "train_nodes")
    GRAPH_NODES_FIELD_NUMBER: _ClassVar[int]
    GRAPH_EDGES_FIELD_NUMBER: _ClassVar[int]
    NORMALIZATION_FIELD_NUMBER: _ClassVar[int]
    NORM_SUBGRAPHS_FIELD_NUMBER: _ClassVar[int]
    NORM_SEED_FIELD_NUMBER: _ClassVar[int]
    TRAIN_NODES_FIELD_NUMBER: _ClassVar[int]
    graph_nodes: int
    graph_edges: int
    normalization: str
    norm_subgraphs: int
    norm_seed: int
    train_nodes: str
    def __init__(self, graph_nodes: _Optional[int] = ..., graph_edges: _Optional[int] = ..., normalization: _Optional[str] = ..., norm_subgraphs: _Optional[int] = ..., norm_seed: _Optional[int] = ..., train_nodes: _Optional[str] = ...) -> None: ...
