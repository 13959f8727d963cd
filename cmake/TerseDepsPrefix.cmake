# TERSE_DEPS_PREFIX (or the environment variable of that name): a folder of Debian packages
# unpacked by perf/gpu_deps.sh, searched before the system. It is how a GPU machine that has CUDA
# and a compiler but none of terse's libraries, and no network to fetch them, builds terse
# (perf/gpu_check.sh). The prefix's pkg-config files are relative to themselves, so it works
# wherever it was unpacked.
set(TERSE_DEPS_PREFIX "$ENV{TERSE_DEPS_PREFIX}" CACHE PATH
    "Unpacked Debian packages to build against (perf/gpu_deps.sh); empty for the system's")
if(TERSE_DEPS_PREFIX)
  set(_terse_deps_lib "${TERSE_DEPS_PREFIX}/usr/lib/x86_64-linux-gnu")
  if(NOT EXISTS "${_terse_deps_lib}/pkgconfig")
    message(FATAL_ERROR "TERSE_DEPS_PREFIX=${TERSE_DEPS_PREFIX} holds no usr/lib/x86_64-linux-gnu/"
                        "pkgconfig: not a prefix made by perf/gpu_deps.sh")
  endif()
  list(PREPEND CMAKE_PREFIX_PATH "${TERSE_DEPS_PREFIX}/usr")
  set(ENV{PKG_CONFIG_PATH}
      "${_terse_deps_lib}/pkgconfig:${TERSE_DEPS_PREFIX}/usr/share/pkgconfig:$ENV{PKG_CONFIG_PATH}")
  # The system's pkg-config first; the prefix carries one (and its library) for images without.
  find_program(PKG_CONFIG_EXECUTABLE NAMES pkg-config pkgconf
               NO_CMAKE_PATH NO_CMAKE_ENVIRONMENT_PATH)
  if(NOT PKG_CONFIG_EXECUTABLE)
    find_program(PKG_CONFIG_EXECUTABLE NAMES pkgconf PATHS "${TERSE_DEPS_PREFIX}/usr/bin"
                 NO_DEFAULT_PATH)
    set(ENV{LD_LIBRARY_PATH} "${_terse_deps_lib}:$ENV{LD_LIBRARY_PATH}")
  endif()
  # nccl.h of the NCCL version terse implements, before whatever older one the machine has.
  if(EXISTS "${TERSE_DEPS_PREFIX}/nccl/include/nccl.h")
    include_directories(BEFORE SYSTEM "${TERSE_DEPS_PREFIX}/nccl/include")
  endif()
  message(STATUS "terse: dependencies from ${TERSE_DEPS_PREFIX} before the system's")
endif()
