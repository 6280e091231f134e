"""Builds codec/_native.c, the Produce hot path's decoders in C; everything else about the
package is in pyproject.toml. Optional: without a C compiler the build goes on without it,
and the pure-Python decoders serve alone (see codec/native.py)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("codec._native", ["codec/_native.c"], optional=True, extra_compile_args=["-O2"])
    ]
)
