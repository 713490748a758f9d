# Links with mold when the compiler can use it (scripts/setup.sh installs it):
# about a hundred test executables link against the same large libraries, and
# mold links each several times faster than GNU ld. KVSCOPE_MOLD=OFF keeps the
# compiler's default linker. CUDA-language links (nvcc) are left alone.
option(KVSCOPE_MOLD "Link with mold when the compiler can use it" ON)
if(KVSCOPE_MOLD)
    include(CheckLinkerFlag)
    check_linker_flag(CXX "-fuse-ld=mold" KVSCOPE_LINKER_MOLD_WORKS)
    if(KVSCOPE_LINKER_MOLD_WORKS)
        add_link_options("$<$<LINK_LANGUAGE:C,CXX>:-fuse-ld=mold>")
        message(STATUS "Linker: mold")
    endif()
endif()
