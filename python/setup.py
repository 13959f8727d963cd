# Builds torch_terse._C with PyTorch's own extension tooling. CMake runs it (python/CMakeLists.txt)
# with TERSE_SOURCE_DIR and TERSE_LIBRARY_DIR set, and puts the package in build/python/.
import os

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

source = os.environ["TERSE_SOURCE_DIR"]
library_dir = os.environ["TERSE_LIBRARY_DIR"]
nccl_include = os.environ.get("TERSE_NCCL_INCLUDE_DIR", "/usr/local/cuda/include")
here = os.path.dirname(os.path.abspath(__file__))

setup(
    name="torch_terse",
    ext_modules=[
        CppExtension(
            "torch_terse._C",
            [os.path.join(here, "csrc", "extension.cpp")],
            include_dirs=[os.path.join(source, "include"), nccl_include],
            library_dirs=[library_dir],
            libraries=["terse"],
            runtime_library_dirs=[library_dir],
            extra_compile_args=["-O2"],
        )
    ],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=False)},
)
