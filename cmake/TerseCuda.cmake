# TERSE_CUDA=AUTO|ON|OFF decides whether the CUDA kernels are built. AUTO builds them wherever
# nvcc exists; the library still runs with no GPU present (device calls then fail cleanly).
# Sets TERSE_HAVE_CUDA (ON/OFF).
set(TERSE_HAVE_CUDA OFF)
if(TERSE_CUDA STREQUAL "AUTO" OR TERSE_CUDA STREQUAL "ON")
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS "${CUDAToolkit_BIN_DIR}/nvcc")
    set(CMAKE_CUDA_COMPILER "${CUDAToolkit_BIN_DIR}/nvcc")
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # A few architectures keep the build short: sm_80 machine code, sm_90 machine code and
    # compute_90 PTX that newer GPUs compile at load time.
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES "80-real;90")
    endif()
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    set(TERSE_HAVE_CUDA ON)
  elseif(TERSE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "TERSE_CUDA=ON but no CUDA compiler was found (set CUDACXX)")
  endif()
elseif(NOT TERSE_CUDA STREQUAL "OFF")
  message(FATAL_ERROR "TERSE_CUDA must be AUTO, ON or OFF, not '${TERSE_CUDA}'")
endif()
