// A scoped NVTX range in kvscope's own domain. Costs next to nothing when no
// tool (Nsight Systems, kvscope's CUPTI tracer) is listening.
#pragma once

#include <nvtx3/nvToolsExt.h>

namespace kvscope::kernels {

class NvtxRange {
public:
    explicit NvtxRange(const char* message) {
        nvtxEventAttributes_t attributes{};
        attributes.version = NVTX_VERSION;
        attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
        attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
        attributes.message.ascii = message;
        nvtxDomainRangePushEx(domain(), &attributes);
    }
    ~NvtxRange() { nvtxDomainRangePop(domain()); }
    NvtxRange(const NvtxRange&) = delete;
    NvtxRange& operator=(const NvtxRange&) = delete;

private:
    static nvtxDomainHandle_t domain() {
        static const nvtxDomainHandle_t handle = nvtxDomainCreateA("kvscope");
        return handle;
    }
};

} // namespace kvscope::kernels
