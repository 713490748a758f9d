# Reads bench/results/gpu-verification.json, the one place that says whether
# the CUDA backend has run on GPU hardware, into variables for build_info.h:
#
#   KVSCOPE_CUDA_VERIFIED_BOOL     true | false
#   KVSCOPE_CUDA_VERIFIED_DATE     YYYY-MM-DD, empty when not verified
#   KVSCOPE_CUDA_VERIFIED_DEVICE   the GPU's name, empty when not verified
#   KVSCOPE_CUDA_VERIFIED_RESULTS  the committed results folder, likewise
#   KVSCOPE_CUDA_NOT_YET_VERIFIED  what the backend gained since that check
#                                  (written without a GPU); empty when nothing
#
# A claim of verification must name its date, device and an existing results
# folder, so the file cannot say "verified" without the evidence.
set(_kvscope_verification_file "${PROJECT_SOURCE_DIR}/bench/results/gpu-verification.json")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${_kvscope_verification_file}")

if(NOT EXISTS "${_kvscope_verification_file}")
    message(FATAL_ERROR "${_kvscope_verification_file} is missing: it states whether the CUDA "
                        "backend has been verified on a GPU (see docs/building.md)")
endif()
file(READ "${_kvscope_verification_file}" _kvscope_verification)

function(_kvscope_verification_field out key type)
    string(JSON _type ERROR_VARIABLE _error TYPE "${_kvscope_verification}" ${key})
    if(_error)
        message(FATAL_ERROR "${_kvscope_verification_file}: no '${key}': ${_error}")
    elseif(NOT _type STREQUAL type)
        message(FATAL_ERROR "${_kvscope_verification_file}: '${key}' must be a ${type}, "
                            "not a ${_type}")
    endif()
    string(JSON _value GET "${_kvscope_verification}" ${key})
    set(${out} "${_value}" PARENT_SCOPE)
endfunction()

_kvscope_verification_field(_verified verified_on_gpu BOOLEAN)
_kvscope_verification_field(KVSCOPE_CUDA_VERIFIED_DATE date STRING)
_kvscope_verification_field(KVSCOPE_CUDA_VERIFIED_DEVICE device STRING)
_kvscope_verification_field(KVSCOPE_CUDA_VERIFIED_RESULTS results STRING)
_kvscope_verification_field(KVSCOPE_CUDA_NOT_YET_VERIFIED not_yet_on_gpu STRING)

if(_verified)
    set(KVSCOPE_CUDA_VERIFIED_BOOL true)
    if(NOT KVSCOPE_CUDA_VERIFIED_DATE MATCHES "^[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]$")
        message(FATAL_ERROR "${_kvscope_verification_file}: 'date' must be YYYY-MM-DD when "
                            "verified_on_gpu is true (got '${KVSCOPE_CUDA_VERIFIED_DATE}')")
    endif()
    if(KVSCOPE_CUDA_VERIFIED_DEVICE STREQUAL "")
        message(FATAL_ERROR "${_kvscope_verification_file}: 'device' must name the GPU when "
                            "verified_on_gpu is true")
    endif()
    if(KVSCOPE_CUDA_VERIFIED_RESULTS STREQUAL "" OR
       NOT EXISTS "${PROJECT_SOURCE_DIR}/${KVSCOPE_CUDA_VERIFIED_RESULTS}")
        message(FATAL_ERROR "${_kvscope_verification_file}: 'results' must name the committed "
                            "GPU results (relative to the repository root) when verified_on_gpu "
                            "is true (got '${KVSCOPE_CUDA_VERIFIED_RESULTS}')")
    endif()
else()
    set(KVSCOPE_CUDA_VERIFIED_BOOL false)
    set(KVSCOPE_CUDA_VERIFIED_DATE "")
    set(KVSCOPE_CUDA_VERIFIED_DEVICE "")
    set(KVSCOPE_CUDA_VERIFIED_RESULTS "")
endif()

# The strings go into C++ string literals.
foreach(_var KVSCOPE_CUDA_VERIFIED_DATE KVSCOPE_CUDA_VERIFIED_DEVICE KVSCOPE_CUDA_VERIFIED_RESULTS
             KVSCOPE_CUDA_NOT_YET_VERIFIED)
    string(REPLACE "\\" "\\\\" ${_var} "${${_var}}")
    string(REPLACE "\"" "\\\"" ${_var} "${${_var}}")
endforeach()
