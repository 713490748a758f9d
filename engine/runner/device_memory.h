// What a GPU backend holds on its device, for the memory samples a recording
// carries: the model, the KV pool's share of the device, the rest.
#pragma once

#include <cstdint>

namespace kvscope::runner {

struct DeviceMemory {
    std::int64_t weights = 0;     // the model's weights, bytes
    std::int64_t kv_pool = 0;     // the paged KV pool and KIVI's open blocks, bytes
    std::int64_t activations = 0; // per-step buffers, staging and workspaces, bytes
    std::int64_t free = 0;        // free on the device now (all processes), bytes
    std::int64_t total = 0;       // the device's memory, bytes
};

} // namespace kvscope::runner
