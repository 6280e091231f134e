"""A coverage-guided fuzz target (atheris) for the codec's frame reader, every request decoder
and the broker's handlers: bytes as a client's stream, split into frames, each answered by an
in-process broker. A frame may be refused (codec.ProtocolError, or the SASL and budget errors
that derive from it: the connection would be closed, one log line); anything else escaping is
a bug, and libFuzzer saves the input that found it. `make fuzz` runs it so:

    python -m tests.support.fuzz_requests -max_total_time=600 -artifact_prefix=out/fuzz-

The seed corpus is every recorded request frame (tests/vectors/frames). Inputs that once
crashed it are kept in tests/vectors/fuzz/ and replayed by tests/tools/test_fuzz.py on every run.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import atheris

with atheris.instrument_imports():
    from tests.support.fuzz_target import FRAMES, answer_stream


def seed_corpus(folder: Path) -> None:
    """The recorded request frames, each with its size prefix, as the fuzzer's seeds."""
    for index, frame in enumerate(sorted(FRAMES.glob("*/*-request.bin"))):
        data = frame.read_bytes()
        (folder / f"seed-{index}").write_bytes(len(data).to_bytes(4, "big") + data)


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="fuzz-corpus-") as corpus:
        seed_corpus(Path(corpus))
        args = [arg for arg in sys.argv if not arg.startswith("-")] + [corpus]
        flags = [arg for arg in sys.argv[1:] if arg.startswith("-")]
        atheris.Setup([args[0], *flags, *args[1:]], answer_stream)
        atheris.Fuzz()


if __name__ == "__main__":
    main()
