"""`pip install .`: the analyser (pyproject.toml says what) and libmemdump_core.so, its replay in C
(analyzer/native/, which CMake builds too). The library is a plain C library that the analyser
loads with ctypes (memdump_analyzer/native.py), built here as a setuptools extension so that it
lands next to the package: no Python module of its own, and no Python API used.
"""

from __future__ import annotations

import os

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class _CtypesLibrary(build_ext):
    """An extension named as native.py looks for it, without a PyInit_ function to export."""

    def get_ext_filename(self, fullname: str) -> str:
        *package, name = fullname.split(".")
        return os.path.join(*package, name + ".so")

    def get_export_symbols(self, ext: Extension) -> list[str]:
        return []


setup(
    ext_modules=[
        Extension(
            "memdump_analyzer.libmemdump_core",
            sources=[f"analyzer/native/{name}.c" for name in ("memdump_core", "records", "heap",
                                                               "tables", "figures", "series",
                                                               "tagviews", "moments", "snapshots", "groups",
                                                               "pagedata",
                                                               "compact",
                                                               "compactdec", "compactfeed", "pprof",
                                                               "htexport")],
            libraries=["z", "lzma"],  # the compact encoding (compact.c): zlib's crc32, xz
            define_macros=[("_GNU_SOURCE", None)],
            extra_compile_args=["-std=c11", "-O2", "-fvisibility=hidden", "-Wall", "-Wextra"],
            # without a C compiler the analyser installs all the same, and replays in Python
            optional=True,
        )
    ],
    cmdclass={"build_ext": _CtypesLibrary},
    # setuptools' own build tree, apart from CMake's in build/
    options={"build": {"build_base": "build/setuptools"}},
)
