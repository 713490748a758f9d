# Compiles through ccache when it is installed (scripts/setup.sh installs it),
# C, C++ and CUDA alike. The store lives outside the clone (ccache's default,
# ~/.cache/ccache), so a fresh clone elsewhere (CI) rebuilds from it: there
# base_dir makes paths inside the source tree relative in what ccache hashes
# and hash_dir off leaves the working directory out, so clones at different
# paths share entries (their debug info then names the first clone's paths,
# which nothing here reads). KVSCOPE_CCACHE=OFF compiles directly.
option(KVSCOPE_CCACHE "Compile through ccache when it is installed" ON)
find_program(KVSCOPE_CCACHE_PROGRAM ccache)
if(KVSCOPE_CCACHE AND KVSCOPE_CCACHE_PROGRAM)
    set(kvscope_launcher "${CMAKE_COMMAND}" -E env "CCACHE_BASEDIR=${PROJECT_SOURCE_DIR}"
        CCACHE_NOHASHDIR=true "${KVSCOPE_CCACHE_PROGRAM}")
    foreach(lang C CXX CUDA)
        if(NOT CMAKE_${lang}_COMPILER_LAUNCHER)
            set(CMAKE_${lang}_COMPILER_LAUNCHER ${kvscope_launcher})
        endif()
    endforeach()
endif()
