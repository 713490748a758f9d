// Scoped NVTX ranges in kvscope's own domain, "kvscope": the engine marks
// each step, its phase, each layer and each op, and the kernel launchers each
// launch, so Nsight Systems and kvscope's own CUPTI tracer show them nested in
// one domain. It sits with the kernels, the bottom layer, because both the
// launchers and the engine above them open ranges. With no tool attached a range
// costs two calls that return at once; in a build without the NVTX headers
// (no CUDA toolkit) it compiles to nothing.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#if KVSCOPE_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

namespace kvscope::nvtx {

#if KVSCOPE_HAVE_NVTX

inline nvtxDomainHandle_t domain() {
    static const nvtxDomainHandle_t handle = nvtxDomainCreateA("kvscope");
    return handle;
}

class Range {
public:
    // `message` must outlive the range (string literals, layer_name()).
    explicit Range(const char* message) {
        nvtxEventAttributes_t attributes{};
        attributes.version = NVTX_VERSION;
        attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
        attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
        attributes.message.ascii = message;
        nvtxDomainRangePushEx(domain(), &attributes);
    }
    // With a number Nsight shows beside the name (the step index).
    Range(const char* message, std::int64_t payload) {
        nvtxEventAttributes_t attributes{};
        attributes.version = NVTX_VERSION;
        attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
        attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
        attributes.message.ascii = message;
        attributes.payloadType = NVTX_PAYLOAD_TYPE_INT64;
        attributes.payload.llValue = payload;
        nvtxDomainRangePushEx(domain(), &attributes);
    }
    ~Range() { nvtxDomainRangePop(domain()); }
    Range(const Range&) = delete;
    Range& operator=(const Range&) = delete;
};

#else

class Range {
public:
    explicit Range(const char*) {}
    Range(const char*, std::int64_t) {}
    Range(const Range&) = delete;
    Range& operator=(const Range&) = delete;
};

#endif

// "layer 0", "layer 1", ...: names that live as long as the program, so a
// layer's range carries its number without formatting a string per call.
inline const char* layer_name(int layer) {
    constexpr int kNamed = 512;
    static const std::array<std::string, kNamed> names = [] {
        std::array<std::string, kNamed> all;
        for (int i = 0; i < kNamed; ++i) {
            all[static_cast<std::size_t>(i)] = "layer " + std::to_string(i);
        }
        return all;
    }();
    if (layer < 0 || layer >= kNamed) {
        return "layer";
    }
    return names[static_cast<std::size_t>(layer)].c_str();
}

} // namespace kvscope::nvtx
