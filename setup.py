"""Only the optional compiled fast path lives here; all metadata is in pyproject.toml.

The extension is optional: without a C compiler or zlib headers the install still succeeds and
rmqinspect falls back to its pure-Python scanner (same results, slower)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "rmqinspect.store._fastscan",
            sources=["rmqinspect/store/_fastscan.c"],
            libraries=["z"],
            extra_compile_args=["-O3"],
            optional=True,
        )
    ]
)
