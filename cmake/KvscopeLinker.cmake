# Links with mold when it is installed (scripts/setup.sh installs it): about a
# hundred test executables link against the same large libraries, and mold
# links each several times faster than GNU ld. KVSCOPE_MOLD=OFF keeps the
# compiler's default linker. CUDA-language links (nvcc) are left alone.
option(KVSCOPE_MOLD "Link with mold when it is installed" ON)
find_program(KVSCOPE_MOLD_PROGRAM mold)
if(KVSCOPE_MOLD AND KVSCOPE_MOLD_PROGRAM)
    add_link_options("$<$<LINK_LANGUAGE:C,CXX>:-fuse-ld=mold>")
    message(STATUS "Linker: mold (${KVSCOPE_MOLD_PROGRAM})")
endif()
