// What the CUPTI tracer hands the recorder, in plain structs free of CUPTI
// types, so recordings, tests and readers need no CUDA. Times are host-clock
// nanoseconds (engine/util/host_clock.h): the tracer has CUPTI stamp its
// records with that clock. Field meanings follow CUPTI's activity records;
// the recorder writes them under the Nsight Systems export's table names.
#pragma once

#include "engine/gpu_devices.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kvscope::profiler {

// Values of CUpti_ActivityMemcpyKind, CUpti_ActivityMemoryKind and
// CUpti_ActivityMemoryOperationType (the ENUM_* tables of a recording list
// their names).
enum class MemcpyKind : std::uint8_t {
    unknown = 0,
    htod = 1,
    dtoh = 2,
    htoa = 3,
    atoh = 4,
    atoa = 5,
    atod = 6,
    dtoa = 7,
    dtod = 8,
    htoh = 9,
    ptop = 10
};
enum class MemoryKind : std::uint8_t {
    unknown = 0,
    pageable = 1,
    pinned = 2,
    device = 3,
    array = 4,
    managed = 5,
    device_static = 6,
    managed_static = 7
};
enum class MemoryOperation : std::uint8_t { invalid = 0, allocation = 1, release = 2 };

struct GpuPlace {
    std::uint32_t device = 0;
    std::uint32_t context = 0;
    std::uint32_t stream = 0;
    std::uint32_t correlation = 0; // links the record to the API call that caused it
};

struct GpuKernel {
    std::int64_t start_ns = 0;
    std::int64_t end_ns = 0;
    GpuPlace place;
    std::string name; // as CUPTI reports it (mangled for C++ kernels)
    std::int32_t grid[3] = {0, 0, 0};
    std::int32_t block[3] = {0, 0, 0};
    std::int32_t static_shared_bytes = 0;
    std::int32_t dynamic_shared_bytes = 0;
    std::int32_t registers_per_thread = 0;
};

struct GpuMemcpy {
    std::int64_t start_ns = 0;
    std::int64_t end_ns = 0;
    GpuPlace place;
    std::uint64_t bytes = 0;
    MemcpyKind copy_kind = MemcpyKind::unknown;
    MemoryKind src_kind = MemoryKind::unknown;
    MemoryKind dst_kind = MemoryKind::unknown;
};

struct GpuMemset {
    std::int64_t start_ns = 0;
    std::int64_t end_ns = 0;
    GpuPlace place;
    std::uint64_t bytes = 0;
    std::uint32_t value = 0;
    MemoryKind memory_kind = MemoryKind::unknown;
};

// A device allocation or release (cudaMalloc, cudaFree, pools).
struct GpuMemoryEvent {
    std::int64_t time_ns = 0;
    GpuPlace place;
    std::uint64_t address = 0;
    std::uint64_t bytes = 0;
    std::uint64_t pc = 0;
    MemoryKind memory_kind = MemoryKind::unknown;
    MemoryOperation operation = MemoryOperation::invalid;
    std::string name;
};

// An NVTX push/pop or start/end range (end_ns < 0: an instant mark).
struct NvtxRangeRecord {
    std::int64_t start_ns = 0;
    std::int64_t end_ns = -1;
    std::string domain; // empty: the default domain
    std::string text;
    std::uint32_t thread = 0; // OS thread id
};

// Time CUPTI itself spent (buffer flushes, instrumentation), so a reader can
// tell the profiler's cost from the program's.
struct ProfilerOverhead {
    std::int64_t start_ns = 0;
    std::int64_t end_ns = 0;
    std::uint32_t kind = 0; // CUpti_ActivityOverheadKind
    std::string name;
    std::uint32_t thread = 0;
};

struct GpuActivityBatch {
    std::vector<GpuKernel> kernels;
    std::vector<GpuMemcpy> memcpys;
    std::vector<GpuMemset> memsets;
    std::vector<GpuMemoryEvent> memory;
    std::vector<NvtxRangeRecord> nvtx;
    std::vector<ProfilerOverhead> overhead;
    std::uint64_t dropped_records = 0; // records CUPTI lost in this batch's buffers

    std::size_t size() const {
        return kernels.size() + memcpys.size() + memsets.size() + memory.size() + nvtx.size() +
               overhead.size();
    }
    void append(GpuActivityBatch&& other);
};

// Receives batches on the tracer's thread; must queue and return.
class GpuActivitySink {
public:
    virtual ~GpuActivitySink() = default;
    virtual void on_gpu_activity(GpuActivityBatch batch) = 0;
};

std::string_view memcpy_kind_name(MemcpyKind kind);
std::string_view memory_kind_name(MemoryKind kind);
std::string_view memory_operation_name(MemoryOperation operation);

} // namespace kvscope::profiler
