# Builds every kvscope target, tests included, under the sanitizers named in
# KVSCOPE_SANITIZE: "address,undefined" (the sanitize preset) or "thread" (the
# tsan preset). A report fails the test that raised it: UBSan does not recover
# and ASan and TSan stop with a non-zero status (their options are in the
# presets). Tests that take the real model through many steps see the
# sanitizer through tests/support/sanitized_build.h and run a smaller workload.
#
# Third-party libraries (Qt, SQLite, ZeroMQ, the C++ runtime) are not rebuilt:
# ASan and UBSan need nothing from them; TSan cannot see the synchronisation
# inside the uninstrumented ones, which tests/sanitizers/tsan.supp explains.
set(KVSCOPE_SANITIZE "" CACHE STRING
    "Sanitizers for every target: address,undefined or thread (empty: none)")
if(KVSCOPE_SANITIZE)
    if(KVSCOPE_FUZZ)
        message(FATAL_ERROR "KVSCOPE_SANITIZE and KVSCOPE_FUZZ are separate builds: "
                            "the fuzz preset brings its own sanitizers")
    endif()
    if(KVSCOPE_SANITIZE MATCHES "thread" AND KVSCOPE_SANITIZE MATCHES "address")
        message(FATAL_ERROR "ThreadSanitizer and AddressSanitizer cannot share a build: "
                            "use the sanitize and tsan presets")
    endif()
    # nvcc compiles the CUDA sources without these flags and the CUDA runtime
    # maps device memory in ways ASan's shadow does not expect: a sanitized
    # build is a CPU build, as its presets are.
    string(TOUPPER "${KVSCOPE_CUDA}" _kvscope_sanitize_cuda)
    if(NOT _kvscope_sanitize_cuda STREQUAL "OFF")
        message(FATAL_ERROR "KVSCOPE_SANITIZE needs KVSCOPE_CUDA=OFF (a sanitized build is CPU "
                            "only): use the sanitize or tsan preset, or add -DKVSCOPE_CUDA=OFF")
    endif()
    add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=${KVSCOPE_SANITIZE};-fno-sanitize-recover=all;-fno-omit-frame-pointer>")
    add_link_options("-fsanitize=${KVSCOPE_SANITIZE}")
endif()
