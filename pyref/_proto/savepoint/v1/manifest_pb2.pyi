from . import serializer_pb2 as _serializer_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class KeyGroupAssignment(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    KEY_GROUPS_HASHED: _ClassVar[KeyGroupAssignment]
    KEY_GROUPS_FROM_WRITER: _ClassVar[KeyGroupAssignment]

class DistributionMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DISTRIBUTION_MODE_UNSPECIFIED: _ClassVar[DistributionMode]
    SPLIT_DISTRIBUTE: _ClassVar[DistributionMode]
    UNION: _ClassVar[DistributionMode]
    BROADCAST: _ClassVar[DistributionMode]

class KeyedStateKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    KEYED_STATE_KIND_UNSPECIFIED: _ClassVar[KeyedStateKind]
    VALUE: _ClassVar[KeyedStateKind]
    LIST: _ClassVar[KeyedStateKind]
    MAP: _ClassVar[KeyedStateKind]
    REDUCING: _ClassVar[KeyedStateKind]
    AGGREGATING: _ClassVar[KeyedStateKind]

class TtlUpdateType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TTL_UPDATE_TYPE_UNSPECIFIED: _ClassVar[TtlUpdateType]
    ON_CREATE_AND_WRITE: _ClassVar[TtlUpdateType]
    ON_READ_AND_WRITE: _ClassVar[TtlUpdateType]

class TtlStateVisibility(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TTL_STATE_VISIBILITY_UNSPECIFIED: _ClassVar[TtlStateVisibility]
    NEVER_RETURN_EXPIRED: _ClassVar[TtlStateVisibility]
    RETURN_EXPIRED_IF_NOT_CLEANED_UP: _ClassVar[TtlStateVisibility]

class TimeDomain(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TIME_DOMAIN_UNSPECIFIED: _ClassVar[TimeDomain]
    EVENT_TIME: _ClassVar[TimeDomain]
    PROCESSING_TIME: _ClassVar[TimeDomain]

class Codec(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NONE: _ClassVar[Codec]
    ZSTD: _ClassVar[Codec]
KEY_GROUPS_HASHED: KeyGroupAssignment
KEY_GROUPS_FROM_WRITER: KeyGroupAssignment
DISTRIBUTION_MODE_UNSPECIFIED: DistributionMode
SPLIT_DISTRIBUTE: DistributionMode
UNION: DistributionMode
BROADCAST: DistributionMode
KEYED_STATE_KIND_UNSPECIFIED: KeyedStateKind
VALUE: KeyedStateKind
LIST: KeyedStateKind
MAP: KeyedStateKind
REDUCING: KeyedStateKind
AGGREGATING: KeyedStateKind
TTL_UPDATE_TYPE_UNSPECIFIED: TtlUpdateType
ON_CREATE_AND_WRITE: TtlUpdateType
ON_READ_AND_WRITE: TtlUpdateType
TTL_STATE_VISIBILITY_UNSPECIFIED: TtlStateVisibility
NEVER_RETURN_EXPIRED: TtlStateVisibility
RETURN_EXPIRED_IF_NOT_CLEANED_UP: TtlStateVisibility
TIME_DOMAIN_UNSPECIFIED: TimeDomain
EVENT_TIME: TimeDomain
PROCESSING_TIME: TimeDomain
NONE: Codec
ZSTD: Codec

class Manifest(_message.Message):
    __slots__ = ("savepoint_id", "required_features", "optional_features", "created_by", "created_at_ms", "bases", "data_files", "operators")
    SAVEPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    REQUIRED_FEATURES_FIELD_NUMBER: _ClassVar[int]
    OPTIONAL_FEATURES_FIELD_NUMBER: _ClassVar[int]
    CREATED_BY_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    BASES_FIELD_NUMBER: _ClassVar[int]
    DATA_FILES_FIELD_NUMBER: _ClassVar[int]
    OPERATORS_FIELD_NUMBER: _ClassVar[int]
    savepoint_id: str
    required_features: _containers.RepeatedScalarFieldContainer[str]
    optional_features: _containers.RepeatedScalarFieldContainer[str]
    created_by: str
    created_at_ms: int
    bases: _containers.RepeatedCompositeFieldContainer[BaseSavepoint]
    data_files: _containers.RepeatedCompositeFieldContainer[DataFile]
    operators: _containers.RepeatedCompositeFieldContainer[Operator]
    def __init__(self, savepoint_id: _Optional[str] = ..., required_features: _Optional[_Iterable[str]] = ..., optional_features: _Optional[_Iterable[str]] = ..., created_by: _Optional[str] = ..., created_at_ms: _Optional[int] = ..., bases: _Optional[_Iterable[_Union[BaseSavepoint, _Mapping]]] = ..., data_files: _Optional[_Iterable[_Union[DataFile, _Mapping]]] = ..., operators: _Optional[_Iterable[_Union[Operator, _Mapping]]] = ...) -> None: ...

class BaseSavepoint(_message.Message):
    __slots__ = ("directory", "savepoint_id", "path")
    DIRECTORY_FIELD_NUMBER: _ClassVar[int]
    SAVEPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    directory: str
    savepoint_id: str
    path: str
    def __init__(self, directory: _Optional[str] = ..., savepoint_id: _Optional[str] = ..., path: _Optional[str] = ...) -> None: ...

class DataFile(_message.Message):
    __slots__ = ("path", "size", "base")
    PATH_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    BASE_FIELD_NUMBER: _ClassVar[int]
    path: str
    size: int
    base: int
    def __init__(self, path: _Optional[str] = ..., size: _Optional[int] = ..., base: _Optional[int] = ...) -> None: ...

class Operator(_message.Message):
    __slots__ = ("operator_id", "name", "parallelism", "max_parallelism", "key_serializer", "list_states", "keyed_states", "timer_services", "broadcast_states", "coordinator_state", "uid", "engine_operator_id", "key_groups")
    OPERATOR_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARALLELISM_FIELD_NUMBER: _ClassVar[int]
    MAX_PARALLELISM_FIELD_NUMBER: _ClassVar[int]
    KEY_SERIALIZER_FIELD_NUMBER: _ClassVar[int]
    LIST_STATES_FIELD_NUMBER: _ClassVar[int]
    KEYED_STATES_FIELD_NUMBER: _ClassVar[int]
    TIMER_SERVICES_FIELD_NUMBER: _ClassVar[int]
    BROADCAST_STATES_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_STATE_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    ENGINE_OPERATOR_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_GROUPS_FIELD_NUMBER: _ClassVar[int]
    operator_id: str
    name: str
    parallelism: int
    max_parallelism: int
    key_serializer: _serializer_pb2.SerializerSnapshot
    list_states: _containers.RepeatedCompositeFieldContainer[ListState]
    keyed_states: _containers.RepeatedCompositeFieldContainer[KeyedState]
    timer_services: _containers.RepeatedCompositeFieldContainer[TimerService]
    broadcast_states: _containers.RepeatedCompositeFieldContainer[BroadcastState]
    coordinator_state: Chunk
    uid: str
    engine_operator_id: bytes
    key_groups: KeyGroupAssignment
    def __init__(self, operator_id: _Optional[str] = ..., name: _Optional[str] = ..., parallelism: _Optional[int] = ..., max_parallelism: _Optional[int] = ..., key_serializer: _Optional[_Union[_serializer_pb2.SerializerSnapshot, _Mapping]] = ..., list_states: _Optional[_Iterable[_Union[ListState, _Mapping]]] = ..., keyed_states: _Optional[_Iterable[_Union[KeyedState, _Mapping]]] = ..., timer_services: _Optional[_Iterable[_Union[TimerService, _Mapping]]] = ..., broadcast_states: _Optional[_Iterable[_Union[BroadcastState, _Mapping]]] = ..., coordinator_state: _Optional[_Union[Chunk, _Mapping]] = ..., uid: _Optional[str] = ..., engine_operator_id: _Optional[bytes] = ..., key_groups: _Optional[_Union[KeyGroupAssignment, str]] = ...) -> None: ...

class ListState(_message.Message):
    __slots__ = ("name", "mode", "element_serializer", "chunks", "partitions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    ELEMENT_SERIALIZER_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    mode: DistributionMode
    element_serializer: _serializer_pb2.SerializerSnapshot
    chunks: _containers.RepeatedCompositeFieldContainer[Chunk]
    partitions: _containers.RepeatedCompositeFieldContainer[Partition]
    def __init__(self, name: _Optional[str] = ..., mode: _Optional[_Union[DistributionMode, str]] = ..., element_serializer: _Optional[_Union[_serializer_pb2.SerializerSnapshot, _Mapping]] = ..., chunks: _Optional[_Iterable[_Union[Chunk, _Mapping]]] = ..., partitions: _Optional[_Iterable[_Union[Partition, _Mapping]]] = ...) -> None: ...

class Partition(_message.Message):
    __slots__ = ("ranges",)
    RANGES_FIELD_NUMBER: _ClassVar[int]
    ranges: _containers.RepeatedCompositeFieldContainer[ElementRange]
    def __init__(self, ranges: _Optional[_Iterable[_Union[ElementRange, _Mapping]]] = ...) -> None: ...

class ElementRange(_message.Message):
    __slots__ = ("chunk", "first", "count")
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    FIRST_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    chunk: int
    first: int
    count: int
    def __init__(self, chunk: _Optional[int] = ..., first: _Optional[int] = ..., count: _Optional[int] = ...) -> None: ...

class KeyedState(_message.Message):
    __slots__ = ("name", "kind", "value_serializer", "user_key_serializer", "chunks", "namespace_serializer", "ttl")
    NAME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    VALUE_SERIALIZER_FIELD_NUMBER: _ClassVar[int]
    USER_KEY_SERIALIZER_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_SERIALIZER_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    name: str
    kind: KeyedStateKind
    value_serializer: _serializer_pb2.SerializerSnapshot
    user_key_serializer: _serializer_pb2.SerializerSnapshot
    chunks: _containers.RepeatedCompositeFieldContainer[Chunk]
    namespace_serializer: _serializer_pb2.SerializerSnapshot
    ttl: TtlConfig
    def __init__(self, name: _Optional[str] = ..., kind: _Optional[_Union[KeyedStateKind, str]] = ..., value_serializer: _Optional[_Union[_serializer_pb2.SerializerSnapshot, _Mapping]] = ..., user_key_serializer: _Optional[_Union[_serializer_pb2.SerializerSnapshot, _Mapping]] = ..., chunks: _Optional[_Iterable[_Union[Chunk, _Mapping]]] = ..., namespace_serializer: _Optional[_Union[_serializer_pb2.SerializerSnapshot, _Mapping]] = ..., ttl: _Optional[_Union[TtlConfig, _Mapping]] = ...) -> None: ...

class TtlConfig(_message.Message):
    __slots__ = ("ttl_ms", "update_type", "visibility")
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TYPE_FIELD_NUMBER: _ClassVar[int]
    VISIBILITY_FIELD_NUMBER: _ClassVar[int]
    ttl_ms: int
    update_type: TtlUpdateType
    visibility: TtlStateVisibility
    def __init__(self, ttl_ms: _Optional[int] = ..., update_type: _Optional[_Union[TtlUpdateType, str]] = ..., visibility: _Optional[_Union[TtlStateVisibility, str]] = ...) -> None: ...

class TimerService(_message.Message):
    __slots__ = ("name", "domain", "namespace_serializer", "chunks")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DOMAIN_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_SERIALIZER_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    name: str
    domain: TimeDomain
    namespace_serializer: _serializer_pb2.SerializerSnapshot
    chunks: _containers.RepeatedCompositeFieldContainer[Chunk]
    def __init__(self, name: _Optional[str] = ..., domain: _Optional[_Union[TimeDomain, str]] = ..., namespace_serializer: _Optional[_Union[_serializer_pb2.SerializerSnapshot, _Mapping]] = ..., chunks: _Optional[_Iterable[_Union[Chunk, _Mapping]]] = ...) -> None: ...

class BroadcastState(_message.Message):
    __slots__ = ("name", "key_serializer", "value_serializer", "chunks", "partitions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    KEY_SERIALIZER_FIELD_NUMBER: _ClassVar[int]
    VALUE_SERIALIZER_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    key_serializer: _serializer_pb2.SerializerSnapshot
    value_serializer: _serializer_pb2.SerializerSnapshot
    chunks: _containers.RepeatedCompositeFieldContainer[Chunk]
    partitions: _containers.RepeatedCompositeFieldContainer[Partition]
    def __init__(self, name: _Optional[str] = ..., key_serializer: _Optional[_Union[_serializer_pb2.SerializerSnapshot, _Mapping]] = ..., value_serializer: _Optional[_Union[_serializer_pb2.SerializerSnapshot, _Mapping]] = ..., chunks: _Optional[_Iterable[_Union[Chunk, _Mapping]]] = ..., partitions: _Optional[_Iterable[_Union[Partition, _Mapping]]] = ...) -> None: ...

class FileRange(_message.Message):
    __slots__ = ("file", "offset", "length")
    FILE_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    file: int
    offset: int
    length: int
    def __init__(self, file: _Optional[int] = ..., offset: _Optional[int] = ..., length: _Optional[int] = ...) -> None: ...

class Chunk(_message.Message):
    __slots__ = ("key_group", "row_count", "range", "inline_data", "codec", "raw_length", "crc32c", "key_bounds")
    KEY_GROUP_FIELD_NUMBER: _ClassVar[int]
    ROW_COUNT_FIELD_NUMBER: _ClassVar[int]
    RANGE_FIELD_NUMBER: _ClassVar[int]
    INLINE_DATA_FIELD_NUMBER: _ClassVar[int]
    CODEC_FIELD_NUMBER: _ClassVar[int]
    RAW_LENGTH_FIELD_NUMBER: _ClassVar[int]
    CRC32C_FIELD_NUMBER: _ClassVar[int]
    KEY_BOUNDS_FIELD_NUMBER: _ClassVar[int]
    key_group: int
    row_count: int
    range: FileRange
    inline_data: bytes
    codec: Codec
    raw_length: int
    crc32c: int
    key_bounds: KeyBounds
    def __init__(self, key_group: _Optional[int] = ..., row_count: _Optional[int] = ..., range: _Optional[_Union[FileRange, _Mapping]] = ..., inline_data: _Optional[bytes] = ..., codec: _Optional[_Union[Codec, str]] = ..., raw_length: _Optional[int] = ..., crc32c: _Optional[int] = ..., key_bounds: _Optional[_Union[KeyBounds, _Mapping]] = ...) -> None: ...

class KeyBounds(_message.Message):
    __slots__ = ("min", "max")
    MIN_FIELD_NUMBER: _ClassVar[int]
    MAX_FIELD_NUMBER: _ClassVar[int]
    min: bytes
    max: bytes
    def __init__(self, min: _Optional[bytes] = ..., max: _Optional[bytes] = ...) -> None: ...
