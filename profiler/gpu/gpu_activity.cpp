#include "profiler/gpu/gpu_activity.h"

#include <iterator>

namespace kvscope::profiler {
namespace {

template <typename T>
void move_append(std::vector<T>& to, std::vector<T>& from) {
    to.insert(to.end(), std::make_move_iterator(from.begin()), std::make_move_iterator(from.end()));
}

} // namespace

void GpuActivityBatch::append(GpuActivityBatch&& other) {
    move_append(kernels, other.kernels);
    move_append(memcpys, other.memcpys);
    move_append(memsets, other.memsets);
    move_append(memory, other.memory);
    move_append(nvtx, other.nvtx);
    move_append(overhead, other.overhead);
    dropped_records += other.dropped_records;
}

std::string_view memcpy_kind_name(MemcpyKind kind) {
    switch (kind) {
    case MemcpyKind::unknown:
        return "CUDA_MEMCPY_KIND_UNKNOWN";
    case MemcpyKind::htod:
        return "CUDA_MEMCPY_KIND_HTOD";
    case MemcpyKind::dtoh:
        return "CUDA_MEMCPY_KIND_DTOH";
    case MemcpyKind::htoa:
        return "CUDA_MEMCPY_KIND_HTOA";
    case MemcpyKind::atoh:
        return "CUDA_MEMCPY_KIND_ATOH";
    case MemcpyKind::atoa:
        return "CUDA_MEMCPY_KIND_ATOA";
    case MemcpyKind::atod:
        return "CUDA_MEMCPY_KIND_ATOD";
    case MemcpyKind::dtoa:
        return "CUDA_MEMCPY_KIND_DTOA";
    case MemcpyKind::dtod:
        return "CUDA_MEMCPY_KIND_DTOD";
    case MemcpyKind::htoh:
        return "CUDA_MEMCPY_KIND_HTOH";
    case MemcpyKind::ptop:
        return "CUDA_MEMCPY_KIND_PTOP";
    }
    return "CUDA_MEMCPY_KIND_UNKNOWN";
}

std::string_view memory_kind_name(MemoryKind kind) {
    switch (kind) {
    case MemoryKind::unknown:
        return "CUDA_MEMOPR_MEMORY_KIND_UNKNOWN";
    case MemoryKind::pageable:
        return "CUDA_MEMOPR_MEMORY_KIND_PAGEABLE";
    case MemoryKind::pinned:
        return "CUDA_MEMOPR_MEMORY_KIND_PINNED";
    case MemoryKind::device:
        return "CUDA_MEMOPR_MEMORY_KIND_DEVICE";
    case MemoryKind::array:
        return "CUDA_MEMOPR_MEMORY_KIND_ARRAY";
    case MemoryKind::managed:
        return "CUDA_MEMOPR_MEMORY_KIND_MANAGED";
    case MemoryKind::device_static:
        return "CUDA_MEMOPR_MEMORY_KIND_DEVICE_STATIC";
    case MemoryKind::managed_static:
        return "CUDA_MEMOPR_MEMORY_KIND_MANAGED_STATIC";
    }
    return "CUDA_MEMOPR_MEMORY_KIND_UNKNOWN";
}

std::string_view memory_operation_name(MemoryOperation operation) {
    switch (operation) {
    case MemoryOperation::invalid:
        return "CUDA_DEV_MEM_EVENT_OPR_INVALID";
    case MemoryOperation::allocation:
        return "CUDA_DEV_MEM_EVENT_OPR_ALLOCATION";
    case MemoryOperation::release:
        return "CUDA_DEV_MEM_EVENT_OPR_DEALLOCATION";
    }
    return "CUDA_DEV_MEM_EVENT_OPR_INVALID";
}

} // namespace kvscope::profiler
