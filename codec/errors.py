"""Errors the codec raises. A ProtocolError means the peer broke the protocol; a
ResponseSchemaError means we did.

Like h11's RemoteProtocolError and LocalProtocolError: the broker answers a ProtocolError by
closing the connection with one log line, since after a framing or header error the byte
stream cannot be trusted; a ResponseSchemaError is a bug of ours, which costs the
connection it happened on (logged with its traceback), never a client's trust in a field.
"""


class ProtocolError(Exception):
    """The peer sent bytes that are not a valid Kafka request."""


class FrameTooLarge(ProtocolError):
    """A size prefix above the configured maximum frame size."""


class InvalidFrameSize(ProtocolError):
    """A negative size prefix, or one too small to hold a request header."""


class TruncatedHeader(ProtocolError):
    """A frame ends inside its request header."""


class UnsupportedApi(ProtocolError):
    """A request for an API key this broker does not serve."""


class UnsupportedVersion(ProtocolError):
    """A request for a served API key at a version outside the advertised range."""


class UndecodableRequest(ProtocolError):
    """A request body that does not decode under its schema, or has bytes left over."""


class InvalidRecordBatch(ProtocolError):
    """Bytes that do not frame a RecordBatch v2.

    Raised by the batch view; the broker turns it into a per-partition error code, not a
    closed connection.
    """


class ResponseSchemaError(ValueError):
    """A response the schema does not allow: None for a field that is not nullable.

    kio's writer would send it as null, and the Java client trusts the schema: a
    non-nullable array read as null is a NullPointerException in the client, not an error
    it can report. So the encoder refuses to write it.
    """
