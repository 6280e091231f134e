"""The fuzz target's check, without atheris: bytes as a client's stream, split into frames,
each answered by an in-process broker. tests/support/fuzz_requests.py drives it with atheris;
tests/tools/test_fuzz.py replays the inputs that once broke it."""

from __future__ import annotations

from pathlib import Path
from types import CoroutineType

from codec import FrameReader, ProtocolError
from nullbroker.broker import Broker
from nullbroker.dispatch import Dispatch
from nullbroker.sessions import Endpoint, Session
from nullbroker.settings import Config

FRAMES = Path(__file__).resolve().parent.parent / "vectors" / "frames"
MAX_FRAME_BYTES = 1 << 20

_broker = Broker(Config(brokers=3, partitions=2, max_frame_bytes=MAX_FRAME_BYTES))
_broker.cluster.ports.update({0: 9092, 1: 9093, 2: 9094})
_dispatch = Dispatch(_broker)
_session = Session("127.0.0.1:50000", Endpoint("127.0.0.1", 9092), node_id=0)


def answer_stream(data: bytes) -> None:
    """Answer every frame of `data` as the broker would on one connection. A refusal
    (codec.ProtocolError: the connection would be closed, with one log line) ends the
    stream; any other exception is a bug."""
    reader = FrameReader(MAX_FRAME_BYTES)
    try:
        reader.feed(data)
        for frame in reader.frames():
            answer = _dispatch.answer(frame, _session)
            if type(answer) is CoroutineType:  # a held request: never awaited here
                answer.close()
    except ProtocolError:
        return
