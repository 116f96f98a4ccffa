"""Builds llmcc_torch: llmcc's static libraries (CMake, from the repository this folder is in)
and the extension module llmcc_torch._C (torch.utils.cpp_extension) that links them.

    pip install --no-build-isolation ./python

Environment:
    LLMCC_BUILD_DIR   an llmcc build directory to build the libraries in (default:
                      <repository>/build/python, configured here when it has no CMakeCache.txt)
    LLMCC_JOBS        parallel compile jobs (default: the CPU count)
"""
import os
import subprocess
import sys
from pathlib import Path

from setuptools import setup

try:
    import torch  # noqa: F401
    from torch.utils.cpp_extension import BuildExtension, CppExtension
except ImportError:
    sys.exit("llmcc_torch: torch is not importable in this Python. The extension is built against the "
             "installed torch: install torch first, then `pip install --no-build-isolation ./python`.")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if not (ROOT / "include" / "llmcc" / "tensor.h").exists():
    sys.exit(f"llmcc_torch: {HERE} is not inside an llmcc repository (no include/llmcc next to it). "
             "pip must build in place: pip >= 21.3 does for a local folder.")
BUILD = Path(os.environ.get("LLMCC_BUILD_DIR", ROOT / "build" / "python")).resolve()
JOBS = os.environ.get("LLMCC_JOBS", str(os.cpu_count() or 1))


def run(cmd):
    print("llmcc_torch:", " ".join(str(c) for c in cmd), flush=True)
    subprocess.run([str(c) for c in cmd], check=True)


def build_llmcc():
    """Configures (once) and builds llmcc_core and llmcc_models; returns the static libraries."""
    if not (BUILD / "CMakeCache.txt").exists():
        run(["cmake", "-S", ROOT, "-B", BUILD, "-DCMAKE_BUILD_TYPE=Release", "-DLLMCC_BUILD_TESTS=OFF",
             "-DLLMCC_BUILD_BENCH=OFF", "-DLLMCC_BUILD_ADGEN=OFF", "-DLLMCC_MPI=OFF", "-DLLMCC_INSTALL=OFF",
             "-DCMAKE_POSITION_INDEPENDENT_CODE=ON"])
    cache = (BUILD / "CMakeCache.txt").read_text()
    if "CMAKE_POSITION_INDEPENDENT_CODE:BOOL=OFF" in cache:
        sys.exit(f"llmcc_torch: {BUILD} builds llmcc without -fPIC, which a Python module cannot link; "
                 "configure it with -DCMAKE_POSITION_INDEPENDENT_CODE=ON or unset LLMCC_BUILD_DIR")
    run(["cmake", "--build", BUILD, "--target", "llmcc_models", "-j", JOBS])
    libs = [BUILD / "src" / "models" / "libllmcc_models.a", BUILD / "libllmcc_core.a"]
    for lib in libs:
        if not lib.exists():
            sys.exit(f"llmcc_torch: {lib} was not built")
    mpi = "LLMCC_MPI:BOOL=ON" in cache
    return libs, mpi


def generated_dir():
    """Where the build put adgen's code for the models, else the committed copy."""
    built = BUILD / "src" / "nn" / "adgen"
    return built if (built / "gpt2.grad.h").exists() else ROOT / "generated"


class Build(BuildExtension):
    def run(self):
        libs, mpi = build_llmcc()
        for ext in self.extensions:
            ext.include_dirs += [str(ROOT / "include"), str(ROOT / "src"), str(generated_dir())]
            ext.extra_objects += [str(lib) for lib in libs]
            if mpi:  # a build directory made with MPI (LLMCC_MPI=ON) links Open MPI
                ext.extra_link_args += subprocess.run(["mpicxx", "--showme:link"], check=True, capture_output=True,
                                                      text=True).stdout.split()
        super().run()


setup(
    ext_modules=[
        CppExtension(
            "llmcc_torch._C",
            sources=[f"csrc/{name}.cpp" for name in ("torch_bridge", "ops", "blocks", "optim", "module")],
            # -g0: no debug information (Python's own flags ask for -g), a smaller module, a faster build.
            extra_compile_args=["-std=c++20", "-O2", "-g0", "-fopenmp", "-Wall"],
            libraries=["sentencepiece", "pcre2-8", "icuuc"],
            extra_link_args=["-fopenmp"],
        )
    ],
    cmdclass={"build_ext": Build},
)
