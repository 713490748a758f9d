# Warning flags for every kvscope target. Third-party headers (Qt, CUDA, CLI11)
# come in through imported targets as system includes, so they stay quiet.
function(kvscope_target_warnings target)
    set(cxx_flags -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wcast-align
                  -Wunused -Woverloaded-virtual
                  -Wformat=2 -Wimplicit-fallthrough)
    if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
        # Clang reports `omp simd` loops it did not vectorise (at the fuzz
        # preset's -O1, most): a note on optimisation, not on the code.
        list(APPEND cxx_flags -Wno-pass-failed)
    endif()
    if(KVSCOPE_WERROR)
        list(APPEND cxx_flags -Werror)
    endif()
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${cxx_flags}>)
    if(KVSCOPE_HAVE_CUDA)
        set(cuda_flags -Xcompiler=-Wall,-Wextra)
        if(KVSCOPE_WERROR)
            list(APPEND cuda_flags -Werror=all-warnings)
        endif()
        target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:${cuda_flags}>)
    endif()
endfunction()
