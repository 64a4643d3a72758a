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


#: the module holding the Cython utility code every kernel shares (generated at build time, not in git)
SHARED = "rankwise._native._cyutility"


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
    # Cython's utility code (typed memoryviews: ~1 MB of C per module, the larger part of every kernel's
    # compile) lives once, in a shared module the kernels import, instead of in each of them: the build
    # costs ~40 CPU s instead of ~90 (measured, 10 kernels). Written as C: Cython 3.1-3.3 refuse a
    # `language` on this extension; the code is the same in both languages and called through C pointers.
    exts.append(Extension(SHARED, [os.path.join("src", *SHARED.split(".")) + ".c"],
                          extra_compile_args=[a for a in args if "c++" not in a]))
    return cythonize(exts, include_path=["src"], nthreads=os.cpu_count() or 0, quiet=True,
                     shared_utility_qualified_name=SHARED,
                     compiler_directives={"language_level": 3, "boundscheck": False, "wraparound": False,
                                          "initializedcheck": False, "cdivision": True, "embedsignature": True})


setup(ext_modules=extensions(), cmdclass={"build_ext": BuildKernels})
