"""Build the optional compiled core, ``streambpe.core._native``.

Package metadata lives in ``pyproject.toml``; this file only declares the
extension. The extension is optional: without Cython or a working C++
compiler the install still succeeds, with a warning, and streambpe runs on its
pure-Python backend.
"""

from __future__ import annotations

import glob
import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import CCompilerError, CompileError, ExecError, LinkError, PlatformError

_FALLBACK = "installing the pure-Python backend"
_BUILD_ERRORS = (CCompilerError, CompileError, ExecError, LinkError, PlatformError, OSError)


def _warn(reason: str) -> None:
    print(
        f"WARNING: streambpe: the compiled core could not be built ({reason}); {_FALLBACK}",
        file=sys.stderr,
    )


class OptionalBuildExt(build_ext):
    """``build_ext`` that turns a failed build into a warning instead of a failed install."""

    def run(self) -> None:
        try:
            super().run()
        except _BUILD_ERRORS as error:  # no compiler at all, for instance
            _warn(str(error) or type(error).__name__)

    def build_extensions(self) -> None:
        # An extension that fails to build is dropped from the list, so later
        # steps (copying it into the source tree for -e installs, listing the
        # wheel's files) do not look for it.
        self.check_extensions_list(self.extensions)
        for ext in list(self.extensions):
            try:
                self.build_extension(ext)
            except _BUILD_ERRORS as error:
                _warn(str(error) or type(error).__name__)
                self.extensions.remove(ext)


def _sanitizer_flags() -> list[str]:
    """Compiler and linker flags for ``STREAMBPE_SANITIZE`` (e.g. ``address,undefined``).

    A sanitized core is for testing only (``tests/sanitizer/run.sh``): it is
    slower, and it loads only with the sanitizer runtimes preloaded.
    """
    sanitizers = os.environ.get("STREAMBPE_SANITIZE", "").strip()
    if not sanitizers:
        return []
    # -O1 keeps reports' stacks close to the source; undefined behaviour
    # aborts instead of printing and going on, so a test run fails on it.
    return [
        f"-fsanitize={sanitizers}",
        "-fno-sanitize-recover=all",
        "-fno-omit-frame-pointer",
        "-g",
        "-O1",
    ]


def _visibility_flags() -> list[str]:
    """Keep the module's own functions private to it (GCC and Clang; MSVC does so already).

    Only ``PyInit__native`` needs to be seen from outside. With default
    visibility every out-of-line helper of the headers was an exported,
    interposable symbol, reached through the PLT and never inlined across
    that boundary: the UTF-8 writer the encoder calls once per piece was one.
    """
    return [] if sys.platform == "win32" else ["-fvisibility=hidden"]


def _extensions() -> list[Extension]:
    sanitize = _sanitizer_flags()
    native = Extension(
        "streambpe.core._native",
        sources=["streambpe/core/_native.pyx"],
        # Every header and its .pxd: a change to one rebuilds the module, and
        # the source distribution carries them.
        depends=sorted(glob.glob("streambpe/core/*.hpp") + glob.glob("streambpe/core/*.pxd")),
        language="c++",
        extra_compile_args=["-O3", "-std=c++17", *_visibility_flags(), *sanitize],
        extra_link_args=sanitize,
    )
    try:
        from Cython.Build import cythonize
    except ImportError:
        _warn("Cython is not installed")
        return []
    return cythonize([native], compiler_directives={"language_level": "3"})


setup(
    ext_modules=_extensions(),
    cmdclass={"build_ext": OptionalBuildExt},
    # The generated C++ is a build intermediate, not something to install.
    exclude_package_data={"streambpe.core": ["_native.cpp"]},
)
