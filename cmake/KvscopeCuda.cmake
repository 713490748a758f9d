# Decide whether the CUDA parts are built (KVSCOPE_CUDA = AUTO | ON | OFF) and
# set KVSCOPE_HAVE_CUDA accordingly.
#
# Architectures: SASS for sm_80 (A100) and sm_90 (H100/H200) plus PTX for
# compute_90 so newer GPUs can JIT the kernels. Override with
# -DCMAKE_CUDA_ARCHITECTURES=... when building for one GPU only.
set(KVSCOPE_HAVE_CUDA OFF)
string(TOUPPER "${KVSCOPE_CUDA}" _kvscope_cuda)

if(_kvscope_cuda STREQUAL "OFF")
    message(STATUS "CUDA backend: disabled (KVSCOPE_CUDA=OFF)")
    return()
elseif(NOT _kvscope_cuda MATCHES "^(AUTO|ON)$")
    message(FATAL_ERROR "KVSCOPE_CUDA must be AUTO, ON or OFF (got '${KVSCOPE_CUDA}')")
endif()

# The toolkit's usual home is not always on PATH; look there too.
if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    find_program(_kvscope_nvcc nvcc)
    if(NOT _kvscope_nvcc)
        set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc CACHE FILEPATH "CUDA compiler")
    endif()
endif()

include(CheckLanguage)
check_language(CUDA)
if(NOT CMAKE_CUDA_COMPILER)
    if(_kvscope_cuda STREQUAL "ON")
        message(FATAL_ERROR "KVSCOPE_CUDA=ON but no CUDA compiler (nvcc) was found. "
                            "Install the CUDA Toolkit, put nvcc on PATH or set CUDACXX, "
                            "or configure with -DKVSCOPE_CUDA=OFF.")
    endif()
    message(STATUS "CUDA backend: nvcc not found, building CPU only (KVSCOPE_CUDA=AUTO)")
    return()
endif()

if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 80-real 90-real 90-virtual)
endif()
enable_language(CUDA)
# CMake 3.25 knows no CUDA 20 dialect for nvcc; kernels are plain C++17.
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
find_package(CUDAToolkit REQUIRED)
set(KVSCOPE_HAVE_CUDA ON)
message(STATUS "CUDA backend: nvcc ${CMAKE_CUDA_COMPILER_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES}")
