"""Builds the Produce hot path's C: codec/_native.c (its decoders and encoder),
nullbroker/handlers/_produce_lane.c (the common request answered whole) and
nullbroker/net/_lane_reader.c (a plain-TCP connection's reader, which hands its reads to the
lane through handlers/produce_lane.h); everything else about the package is in pyproject.toml.
Optional: without a C compiler the build goes on without them, and the pure-Python path serves
alone (see codec/native.py)."""

from setuptools import Extension, setup

LANE_HEADERS = ["codec/_kafka_wire.h", "nullbroker/handlers/produce_lane.h"]

setup(
    ext_modules=[
        Extension(
            name,
            [source],
            depends=depends,
            optional=True,
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
