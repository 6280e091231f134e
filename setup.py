"""Builds the Produce hot path's C: codec/_native.c (its decoders and encoder),
nullbroker/handlers/_produce_lane.c (the common request answered whole) and
nullbroker/net/_lane_reader.c (a plain-TCP connection's reader, which hands its reads to the
lane through handlers/produce_lane.h); everything else about the package is in pyproject.toml.

Optional where a user installs: without a C compiler the build goes on without them, and the
pure-Python path serves alone (see codec/native.py). Required in a strict build -- CI's
(CI=true) or one asked for with NULLBROKER_STRICT=1 (`make test STRICT=1`): there a compile
error fails the install, instead of a suite that measures the Python path and calls it C."""

import os

from setuptools import Extension, setup

STRICT = any(
    os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}
    for name in ("CI", "NULLBROKER_STRICT")
)

LANE_HEADERS = ["codec/_kafka_wire.h", "nullbroker/handlers/produce_lane.h"]

setup(
    ext_modules=[
        Extension(
            name,
            [source],
            depends=depends,
            optional=not STRICT,
            extra_compile_args=["-O2"],
        )
        for name, source, depends in (
            ("codec._native", "codec/_native.c", ["codec/_kafka_wire.h"]),
            (
                "nullbroker.handlers._produce_lane",
                "nullbroker/handlers/_produce_lane.c",
                LANE_HEADERS,
            ),
            ("nullbroker.net._lane_reader", "nullbroker/net/_lane_reader.c", LANE_HEADERS),
        )
    ]
)
