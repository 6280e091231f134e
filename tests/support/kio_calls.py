"""Call a Broker in-process with kio entities: encode a request frame, decode the answer."""

from __future__ import annotations

import datetime
import io
from typing import Any
from weakref import WeakKeyDictionary

from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader

from codec.apis import (
    request_schema,
    response_header_version,
    response_schema,
)
from codec.entities import request_module
from codec.messages import encode_request
from nullbroker.broker import Broker
from nullbroker.dispatch import Dispatch
from nullbroker.sessions import Endpoint, Session

SESSION = Session(peer="127.0.0.1:50000", advertised=Endpoint("127.0.0.1", 9092))

_DISPATCHES: WeakKeyDictionary[Broker, Dispatch] = WeakKeyDictionary()


def dispatch_of(broker: Broker) -> Dispatch:
    """The one Dispatch that answers `broker`'s requests in a test, made on first use, as a
    server makes one for the broker it runs (nullbroker.workers.server)."""
    dispatch = _DISPATCHES.get(broker)
    if dispatch is None:
        dispatch = _DISPATCHES[broker] = Dispatch(broker)
    return dispatch


def request_frame(
    api_key: int, version: int, body: Any, correlation_id: int = 7, client_id: str = "tests"
) -> bytes:
    """A request frame (no size prefix) as a client would send it."""
    assert (body.__api_key__, body.__version__) == (api_key, version), "the body is another API's"
    return encode_request(body, correlation_id, client_id)


def decode_response(api_key: int, version: int, frame: bytes) -> tuple[int, Any]:
    """(correlation id, response entity) from a size-prefixed response frame."""
    size = int.from_bytes(frame[:4], "big")
    assert size == len(frame) - 4, "the size prefix must cover exactly the rest of the frame"
    header_type = (
        ResponseHeaderV1 if response_header_version(api_key, version) else ResponseHeaderV0
    )
    header, header_size = entity_reader(header_type)(frame, 4)
    body, body_size = entity_reader(response_schema(api_key, version))(frame, 4 + header_size)
    assert 4 + header_size + body_size == len(frame), "no bytes may follow the response body"
    return header.correlation_id, body


def answered(answer: object, why: str = "this request should have been answered at once") -> bytes:
    """A Dispatch.answer result that was not held, as one byte string: a Fetch answer comes as
    the buffers the connection writes with writev."""
    if isinstance(answer, list):
        return b"".join(answer)
    assert isinstance(answer, bytes), why
    return answer


def call(broker: Broker, api_key: int, version: int, **fields: Any) -> Any:
    """Send one request built from `fields` and return the decoded response entity."""
    return send(broker, request_schema(api_key, version)(**fields))


def send(broker: Broker, body: Any) -> Any:
    """Send one request entity and return the decoded response entity."""
    api_key, version = body.__api_key__, body.__version__
    answer = answered(dispatch_of(broker).answer(request_frame(api_key, version, body), SESSION))
    correlation_id, response = decode_response(api_key, version, answer)
    assert correlation_id == 7
    return response


def types(api_key: int, version: int) -> Any:
    """The kio module with the request entity and its nested types."""
    return request_module(api_key, version)


def record_batch(
    count: int,
    *,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    value: bytes = b"v" * 16,
    when: datetime.datetime = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
) -> bytes:
    """An uncompressed RecordBatch v2 of `count` records, all timestamped `when`, by kio."""
    from kio.records.schema import NewRecordBatch, Record
    from kio.records.writers import write_new_batch

    buffer = io.BytesIO()
    write_new_batch(
        buffer,
        NewRecordBatch(
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
            attributes=0,
            records=tuple(
                Record(attributes=0, timestamp=when, offset=i, key=None, value=value, headers=())
                for i in range(count)
            ),
        ),
    )
    return buffer.getvalue()


def fetch_frame(
    topic: str, offset: int, max_wait_ms: int, correlation_id: int = 7, partition: int = 0
) -> bytes:
    """A Fetch v12 request frame for one partition by name, as a Java 3.x client sends."""
    import datetime

    from codec.entities import make

    t = types(1, 12)
    body = make(
        t.FetchRequest,
        replica_id=-1,
        max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(
            make(
                t.FetchTopic,
                topic=topic,
                partitions=(
                    make(
                        t.FetchPartition,
                        partition=partition,
                        current_leader_epoch=-1,
                        fetch_offset=offset,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )
    return request_frame(1, 12, body, correlation_id=correlation_id)
