from google.protobuf import descriptor_pb2 as _descriptor_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SerializerSnapshot(_message.Message):
    __slots__ = ("serializer_id", "version", "nested", "field_names", "protobuf", "custom_configuration", "engine", "symbols")
    SERIALIZER_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    NESTED_FIELD_NUMBER: _ClassVar[int]
    FIELD_NAMES_FIELD_NUMBER: _ClassVar[int]
    PROTOBUF_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_CONFIGURATION_FIELD_NUMBER: _ClassVar[int]
    ENGINE_FIELD_NUMBER: _ClassVar[int]
    SYMBOLS_FIELD_NUMBER: _ClassVar[int]
    serializer_id: str
    version: int
    nested: _containers.RepeatedCompositeFieldContainer[SerializerSnapshot]
    field_names: _containers.RepeatedScalarFieldContainer[str]
    protobuf: ProtobufMessageConfig
    custom_configuration: bytes
    engine: EngineSerializer
    symbols: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, serializer_id: _Optional[str] = ..., version: _Optional[int] = ..., nested: _Optional[_Iterable[_Union[SerializerSnapshot, _Mapping]]] = ..., field_names: _Optional[_Iterable[str]] = ..., protobuf: _Optional[_Union[ProtobufMessageConfig, _Mapping]] = ..., custom_configuration: _Optional[bytes] = ..., engine: _Optional[_Union[EngineSerializer, _Mapping]] = ..., symbols: _Optional[_Iterable[str]] = ...) -> None: ...

class EngineSerializer(_message.Message):
    __slots__ = ("engine", "class_name", "snapshot")
    ENGINE_FIELD_NUMBER: _ClassVar[int]
    CLASS_NAME_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    engine: str
    class_name: str
    snapshot: bytes
    def __init__(self, engine: _Optional[str] = ..., class_name: _Optional[str] = ..., snapshot: _Optional[bytes] = ...) -> None: ...

class ProtobufMessageConfig(_message.Message):
    __slots__ = ("file_descriptor_set", "message_name")
    FILE_DESCRIPTOR_SET_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_NAME_FIELD_NUMBER: _ClassVar[int]
    file_descriptor_set: _descriptor_pb2.FileDescriptorSet
    message_name: str
    def __init__(self, file_descriptor_set: _Optional[_Union[_descriptor_pb2.FileDescriptorSet, _Mapping]] = ..., message_name: _Optional[str] = ...) -> None: ...
