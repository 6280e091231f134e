"""Sans-IO Kafka wire protocol on top of kio: bytes in, requests out; responses in, bytes out.

Nothing here touches a socket, a clock or a thread, so all of it is testable and
benchmarkable in isolation.
"""

from .apis import (
    KAFKA_4_RANGES,
    NOT_SERVED,
    TELEMETRY_KEYS,
    ApiKey,
    ApiRange,
    advertised,
    api_name,
)
from .errors import (
    FrameTooLarge,
    InvalidFrameSize,
    InvalidRecordBatch,
    ProtocolError,
    TruncatedHeader,
    UndecodableRequest,
    UnsupportedApi,
    UnsupportedVersion,
)
from .framing import DEFAULT_MAX_FRAME_BYTES, FrameReader, size_prefixed
from .messages import (
    check_served,
    decode_header,
    decode_request,
    decode_response,
    encode_api_versions_fallback,
    encode_request,
    encode_request_header,
    encode_response,
    encode_response_body,
    encode_response_header,
    encode_response_parts,
    peek_header,
)
from .record_batch import RecordBatchHeader, crc_matches, iter_batches, read_batch_header
from .request_frames import Request, RequestHeader

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES",
    "KAFKA_4_RANGES",
    "NOT_SERVED",
    "TELEMETRY_KEYS",
    "ApiKey",
    "ApiRange",
    "FrameReader",
    "FrameTooLarge",
    "InvalidFrameSize",
    "InvalidRecordBatch",
    "ProtocolError",
    "RecordBatchHeader",
    "Request",
    "RequestHeader",
    "TruncatedHeader",
    "UndecodableRequest",
    "UnsupportedApi",
    "UnsupportedVersion",
    "advertised",
    "api_name",
    "check_served",
    "crc_matches",
    "decode_header",
    "decode_request",
    "decode_response",
    "encode_api_versions_fallback",
    "encode_request",
    "encode_request_header",
    "encode_response",
    "encode_response_body",
    "encode_response_header",
    "encode_response_parts",
    "iter_batches",
    "peek_header",
    "read_batch_header",
    "size_prefixed",
]
