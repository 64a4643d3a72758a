"""Build rankwise's compiled kernels: every ``src/rankwise/**/*.pyx`` becomes a C++ extension module
of the same dotted name (Cython, then the machine's C++ compiler), at ``pip install .`` and
``pip install -e .`` time. Everything else about the package is in ``pyproject.toml``.

The flags keep the kernels' arithmetic IEEE-exact, as the equality tests require: no ``-ffast-math``
and no fused multiply-add contraction (``-ffp-contract=off``; gcc contracts by default wherever the
target has FMA). No OpenMP: the kernels release the GIL and Python threads run them
(``rankwise._validation.kernel_threads``), so no second OpenMP runtime sits beside torch's and
LightGBM's.
"""
import glob
import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

NO_COMPILER = """
rankwise's kernels are compiled when the package is installed, and no working C++ compiler was found
({error}).
Install one, then run the install again:
  Debian/Ubuntu:  sudo apt-get install g++        (or build-essential)
  Fedora/RHEL:    sudo dnf install gcc-c++
  macOS:          xcode-select --install
  Windows:        Microsoft C++ Build Tools (https://visualstudio.microsoft.com/visual-cpp-build-tools/)
"""


class BuildKernels(build_ext):
    """build_ext that says what to install when the compiler is missing or cannot compile C++."""

    def finalize_options(self):
        super().finalize_options()
        if self.parallel is None:  # the extensions are independent: compile them side by side
            self.parallel = max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                                else (os.cpu_count() or 1))

    def run(self):
        try:
            super().run()
        except Exception as exc:  # distutils' CCompilerError / PlatformError / ExecError and OSError
            if type(exc).__name__ in {"CompileError", "LinkError", "DistutilsExecError", "DistutilsPlatformError",
                                      "CCompilerError", "FileNotFoundError", "PermissionError"}:
                sys.stderr.write(NO_COMPILER.format(error=f"{type(exc).__name__}: {exc}"))
                raise SystemExit(1) from exc
            raise


def extensions():
    from Cython.Build import cythonize

    here = os.path.dirname(os.path.abspath(__file__))
    sources = sorted(glob.glob(os.path.join("src", "rankwise", "**", "*.pyx"), recursive=True))
    if os.name == "nt":
        args = ["/O2", "/std:c++17", "/fp:precise"]
    else:
        args = ["-O3", "-std=c++17", "-ffp-contract=off"]
    exts = [Extension(os.path.splitext(os.path.relpath(src, "src"))[0].replace(os.sep, "."), [src], language="c++",
                      include_dirs=[os.path.join(here, "src", "rankwise", "_native")], extra_compile_args=args)
            for src in sources]
    return cythonize(exts, include_path=["src"], nthreads=os.cpu_count() or 0, quiet=True,
                     compiler_directives={"language_level": 3, "boundscheck": False, "wraparound": False,
                                          "initializedcheck": False, "cdivision": True, "embedsignature": True})


setup(ext_modules=extensions(), cmdclass={"build_ext": BuildKernels})
