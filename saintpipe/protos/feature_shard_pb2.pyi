from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GatherRequest(_message.Message):
    __slots__ = ("ids", "transfer_dtype", "shared_memory")
    IDS_FIELD_NUMBER: _ClassVar[int]
    TRANSFER_DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHARED_MEMORY_FIELD_NUMBER: _ClassVar[int]
    ids: bytes
    transfer_dtype: str
    shared_memory: SharedMemoryTarget
    def __init__(self, ids: _Optional[bytes] = ..., transfer_dtype: _Optional[str] = ..., shared_memory: _Optional[_Union[SharedMemoryTarget, _Mapping]] = ...) -> None: ...

class SharedMemoryTarget(_message.Message):
    __slots__ = ("region", "offset", "capacity", "secret")
    REGION_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    region: str
    offset: int
    capacity: int
    secret: bytes
    def __init__(self, region: _Optional[str] = ..., offset: _Optional[int] = ..., capacity: _Optional[int] = ..., secret: _Optional[bytes] = ...) -> None: ...

class GatherChunk(_message.Message):
    __slots__ = ("offset", "rows", "dtype", "shape", "padding", "in_shared_memory")
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    PADDING_FIELD_NUMBER: _ClassVar[int]
    IN_SHARED_MEMORY_FIELD_NUMBER: _ClassVar[int]
    offset: int
    rows: bytes
    dtype: str
    shape: _containers.RepeatedScalarFieldContainer[int]
    padding: bytes
    in_shared_memory: bool
    def __init__(self, offset: _Optional[int] = ..., rows: _Optional[bytes] = ..., dtype: _Optional[str] = ..., shape: _Optional[_Iterable[int]] = ..., padding: _Optional[bytes] = ..., in_shared_memory: _Optional[bool] = ...) -> None: ...

class InfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ShardInfo(_message.Message):
    __slots__ = ("shard", "num_shards", "start", "stop", "num_nodes", "feature_dim", "dtype", "dataset", "version", "max_message_bytes", "shared_memory", "bulk_port")
    SHARD_FIELD_NUMBER: _ClassVar[int]
    NUM_SHARDS_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    STOP_FIELD_NUMBER: _ClassVar[int]
    NUM_NODES_FIELD_NUMBER: _ClassVar[int]
    FEATURE_DIM_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    DATASET_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    MAX_MESSAGE_BYTES_FIELD_NUMBER: _ClassVar[int]
    SHARED_MEMORY_FIELD_NUMBER: _ClassVar[int]
    BULK_PORT_FIELD_NUMBER: _ClassVar[int]
    shard: int
    num_shards: int
    start: int
    stop: int
    num_nodes: int
    feature_dim: int
    dtype: str
    dataset: str
    version: str
    max_message_bytes: int
    shared_memory: bool
    bulk_port: int
    def __init__(self, shard: _Optional[int] = ..., num_shards: _Optional[int] = ..., start: _Optional[int] = ..., stop: _Optional[int] = ..., num_nodes: _Optional[int] = ..., feature_dim: _Optional[int] = ..., dtype: _Optional[str] = ..., dataset: _Optional[str] = ..., version: _Optional[str] = ..., max_message_bytes: _Optional[int] = ..., shared_memory: _Optional[bool] = ..., bulk_port: _Optional[int] = ...) -> None: ...

class SharedMemoryProbe(_message.Message):
    __slots__ = ("region", "length", "secret")
    REGION_FIELD_NUMBER: _ClassVar[int]
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    region: str
    length: int
    secret: bytes
    def __init__(self, region: _Optional[str] = ..., length: _Optional[int] = ..., secret: _Optional[bytes] = ...) -> None: ...

class SharedMemoryProbeReply(_message.Message):
    __slots__ = ("readable", "token", "detail")
    READABLE_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    readable: bool
    token: bytes
    detail: str
    def __init__(self, readable: _Optional[bool] = ..., token: _Optional[bytes] = ..., detail: _Optional[str] = ...) -> None: ...
