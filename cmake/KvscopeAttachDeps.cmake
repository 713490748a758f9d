# What attaching to serving engines (vLLM, SGLang, TensorRT-LLM KV events)
# needs: ZeroMQ (libzmq and its C++ header cppzmq) for the sockets,
# msgpack-cxx for the payloads, and libcurl to poll the engines' Prometheus
# metrics (--metrics). All come from Debian (scripts/setup.sh).
#
# Defines kvscope::msgpack, an interface target that carries msgpack's headers
# with MSGPACK_NO_BOOST: we only read and write plain msgpack objects, so none
# of msgpack's Boost adaptors are needed.

set(_kvscope_attach_packages "libzmq3-dev cppzmq-dev libmsgpack-cxx-dev libcurl4-openssl-dev")

# msgpack-cxx 6 and later install msgpack-cxx-config.cmake (target
# msgpack-cxx); Debian 12's 4.1 installs msgpack-config.cmake under
# msgpackc-cxx/ (target msgpackc-cxx). Either will do.
find_package(msgpack-cxx CONFIG QUIET)
if(TARGET msgpack-cxx)
    set(_kvscope_msgpack_target msgpack-cxx)
else()
    find_package(msgpack CONFIG QUIET)
    if(TARGET msgpackc-cxx)
        set(_kvscope_msgpack_target msgpackc-cxx)
    endif()
endif()
if(NOT _kvscope_msgpack_target)
    message(FATAL_ERROR
        "msgpack-cxx not found (needed to decode KV events of attached engines). "
        "Install the Debian packages ${_kvscope_attach_packages} "
        "(scripts/setup.sh does), or point CMAKE_PREFIX_PATH at msgpack-cxx.")
endif()

# cppzmq's config finds libzmq itself (its own config, else pkg-config).
find_package(cppzmq CONFIG QUIET)
if(NOT TARGET cppzmq)
    message(FATAL_ERROR
        "cppzmq/libzmq not found (needed to attach to serving engines' ZeroMQ KV "
        "events). Install the Debian packages ${_kvscope_attach_packages} "
        "(scripts/setup.sh does), or point CMAKE_PREFIX_PATH at cppzmq and libzmq.")
endif()

# libcurl: CMake's FindCURL (Debian's package also installs CURLConfig.cmake).
find_package(CURL QUIET)
if(NOT TARGET CURL::libcurl)
    message(FATAL_ERROR
        "libcurl not found (needed to poll attached engines' Prometheus metrics, "
        "kvscope attach --metrics). Install the Debian package libcurl4-openssl-dev "
        "(scripts/setup.sh does; all attach packages: ${_kvscope_attach_packages}), "
        "or point CMAKE_PREFIX_PATH at libcurl.")
endif()

if(NOT TARGET kvscope::msgpack)
    add_library(kvscope_msgpack INTERFACE)
    add_library(kvscope::msgpack ALIAS kvscope_msgpack)
    target_link_libraries(kvscope_msgpack INTERFACE ${_kvscope_msgpack_target})
    target_compile_definitions(kvscope_msgpack INTERFACE MSGPACK_NO_BOOST)
endif()
