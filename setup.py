"""Builds the Produce hot path's C: codec/_native.c (its decoders and encoder) and
nullbroker/handlers/_produce_lane.c (the common request answered whole); everything else about the
package is in pyproject.toml. Optional: without a C compiler the build goes on without them,
and the pure-Python path serves alone (see codec/native.py)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            name,
            [source],
            depends=["codec/_kafka_wire.h"],
            optional=True,
            extra_compile_args=["-O2"],
        )
        for name, source in (
            ("codec._native", "codec/_native.c"),
            ("nullbroker.handlers._produce_lane", "nullbroker/handlers/_produce_lane.c"),
        )
    ]
)
