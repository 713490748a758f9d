#include "profiler/gpu/cupti_tracer.h"

#include "engine/gpu_devices.h"
#include "engine/util/host_clock.h"

#include <cstdlib>
#include <cupti.h>
#include <dlfcn.h>
#include <mutex>
#include <unordered_map>

namespace kvscope::profiler {
namespace {

constexpr std::size_t kBufferBytes = 8u << 20; // CUPTI's recommended order of size
constexpr std::size_t kBufferAlignment = 8;

const CUpti_ActivityKind kCapturedKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,   CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_MEMORY2,           CUPTI_ACTIVITY_KIND_OVERHEAD, CUPTI_ACTIVITY_KIND_MARKER,
};

struct OpenMarker {
    std::int64_t start_ns = 0;
    std::string name;
    std::string domain;
    std::uint32_t thread = 0;
};

// CUPTI calls back through plain functions, so the running tracer's state is
// global; `g_mutex` guards it against the buffer thread.
struct TracerState {
    GpuActivitySink* sink = nullptr;
    std::unordered_map<std::uint32_t, OpenMarker> open_markers; // NVTX ranges by id
    std::uint64_t dropped = 0;
    CUpti_SubscriberHandle subscriber = nullptr;
};
std::mutex g_mutex;
TracerState* g_state = nullptr;

std::string describe(CUptiResult result) {
    const char* text = nullptr;
    cuptiGetResultString(result, &text);
    return text ? text : "CUPTI error " + std::to_string(static_cast<int>(result));
}

uint64_t CUPTIAPI host_timestamp() {
    return static_cast<uint64_t>(host_now_ns());
}

void CUPTIAPI ignore_callback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
    *buffer = static_cast<uint8_t*>(std::aligned_alloc(kBufferAlignment, kBufferBytes));
    *size = *buffer ? kBufferBytes : 0; // no buffer: CUPTI drops and counts records
    *max_records = 0;
}

GpuPlace place_of(uint32_t device, uint32_t context, uint32_t stream, uint32_t correlation) {
    return {device, context, stream, correlation};
}

std::string overhead_name(CUpti_ActivityOverheadKind kind) {
    switch (kind) {
    case CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER:
        return "driver compiler";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH:
        return "CUPTI buffer flush";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION:
        return "CUPTI instrumentation";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_RESOURCE:
        return "CUPTI resource";
    case CUPTI_ACTIVITY_OVERHEAD_RUNTIME_TRIGGERED_MODULE_LOADING:
        return "module loading";
    case CUPTI_ACTIVITY_OVERHEAD_LAZY_FUNCTION_LOADING:
        return "lazy function loading";
    case CUPTI_ACTIVITY_OVERHEAD_COMMAND_BUFFER_FULL:
        return "command buffer full";
    case CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST:
        return "activity buffer request";
    default:
        return "other";
    }
}

// Converts one record into `batch`; NVTX range starts wait in `state` for
// their ends.
void convert(const CUpti_Activity* record, GpuActivityBatch& batch, TracerState& state) {
    switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        GpuKernel out;
        out.start_ns = static_cast<std::int64_t>(k->start);
        out.end_ns = static_cast<std::int64_t>(k->end);
        out.place = place_of(k->deviceId, k->contextId, k->streamId, k->correlationId);
        out.name = k->name ? k->name : "(unnamed kernel)";
        out.grid[0] = k->gridX;
        out.grid[1] = k->gridY;
        out.grid[2] = k->gridZ;
        out.block[0] = k->blockX;
        out.block[1] = k->blockY;
        out.block[2] = k->blockZ;
        out.static_shared_bytes = k->staticSharedMemory;
        out.dynamic_shared_bytes = k->dynamicSharedMemory;
        out.registers_per_thread = k->registersPerThread;
        batch.kernels.push_back(std::move(out));
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
        GpuMemcpy out;
        out.start_ns = static_cast<std::int64_t>(m->start);
        out.end_ns = static_cast<std::int64_t>(m->end);
        out.place = place_of(m->deviceId, m->contextId, m->streamId, m->correlationId);
        out.bytes = m->bytes;
        out.copy_kind = static_cast<MemcpyKind>(m->copyKind <= 10 ? m->copyKind : 0);
        out.src_kind = static_cast<MemoryKind>(m->srcKind <= 7 ? m->srcKind : 0);
        out.dst_kind = static_cast<MemoryKind>(m->dstKind <= 7 ? m->dstKind : 0);
        batch.memcpys.push_back(out);
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
        GpuMemset out;
        out.start_ns = static_cast<std::int64_t>(m->start);
        out.end_ns = static_cast<std::int64_t>(m->end);
        out.place = place_of(m->deviceId, m->contextId, m->streamId, m->correlationId);
        out.bytes = m->bytes;
        out.value = m->value;
        out.memory_kind = static_cast<MemoryKind>(m->memoryKind <= 7 ? m->memoryKind : 0);
        batch.memsets.push_back(out);
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMORY2: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemory4*>(record);
        GpuMemoryEvent out;
        out.time_ns = static_cast<std::int64_t>(m->timestamp);
        out.place = place_of(m->deviceId, m->contextId, m->streamId, m->correlationId);
        out.address = m->address;
        out.bytes = m->bytes;
        out.pc = m->PC;
        out.memory_kind =
            static_cast<MemoryKind>(m->memoryKind <= 7 ? static_cast<int>(m->memoryKind) : 0);
        out.operation = m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION
                            ? MemoryOperation::allocation
                        : m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE
                            ? MemoryOperation::release
                            : MemoryOperation::invalid;
        out.name = m->name ? m->name : "";
        batch.memory.push_back(std::move(out));
        break;
    }
    case CUPTI_ACTIVITY_KIND_MARKER: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMarker2*>(record);
        const auto time = static_cast<std::int64_t>(m->timestamp);
        const std::uint32_t thread =
            m->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD ? m->objectId.pt.threadId : 0;
        if ((m->flags & CUPTI_ACTIVITY_FLAG_MARKER_START) != 0) {
            state.open_markers[m->id] = {time, m->name ? m->name : "", m->domain ? m->domain : "",
                                         thread};
        } else if ((m->flags & CUPTI_ACTIVITY_FLAG_MARKER_END) != 0) {
            const auto it = state.open_markers.find(m->id);
            if (it != state.open_markers.end()) {
                batch.nvtx.push_back({it->second.start_ns, time, std::move(it->second.domain),
                                      std::move(it->second.name), it->second.thread});
                state.open_markers.erase(it);
            }
        } else if ((m->flags & CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS) != 0) {
            batch.nvtx.push_back(
                {time, -1, m->domain ? m->domain : "", m->name ? m->name : "", thread});
        }
        break;
    }
    case CUPTI_ACTIVITY_KIND_OVERHEAD: {
        const auto* o = reinterpret_cast<const CUpti_ActivityOverhead3*>(record);
        ProfilerOverhead out;
        out.start_ns = static_cast<std::int64_t>(o->start);
        out.end_ns = static_cast<std::int64_t>(o->end);
        out.kind = static_cast<std::uint32_t>(o->overheadKind);
        out.name = overhead_name(o->overheadKind);
        out.thread = o->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD ? o->objectId.pt.threadId : 0;
        batch.overhead.push_back(std::move(out));
        break;
    }
    default:
        break;
    }
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer, size_t size,
                               size_t valid_size) {
    (void)size;
    GpuActivityBatch batch;
    {
        std::lock_guard lock(g_mutex);
        if (g_state != nullptr) {
            CUpti_Activity* record = nullptr;
            while (cuptiActivityGetNextRecord(buffer, valid_size, &record) == CUPTI_SUCCESS) {
                convert(record, batch, *g_state);
            }
            std::size_t dropped = 0;
            if (cuptiActivityGetNumDroppedRecords(context, stream, &dropped) == CUPTI_SUCCESS) {
                batch.dropped_records = dropped;
                g_state->dropped += dropped;
            }
            if (g_state->sink != nullptr && (batch.size() > 0 || batch.dropped_records > 0)) {
                g_state->sink->on_gpu_activity(std::move(batch));
            }
        }
    }
    std::free(buffer);
}

// Makes CUPTI the NVTX tool of this process unless one is set already
// (Nsight Systems sets its own). NVTX reads this at its first call.
std::string route_nvtx_to_cupti() {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&cuptiActivityEnable), &info) == 0 ||
        info.dli_fname == nullptr) {
        return "NVTX ranges not captured: the CUPTI library's path is unknown";
    }
    const char* current = std::getenv("NVTX_INJECTION64_PATH");
    if (current != nullptr && std::string(current) != info.dli_fname) {
        return std::string("NVTX ranges go to another tool (NVTX_INJECTION64_PATH=") + current +
               "), not into the recording";
    }
    setenv("NVTX_INJECTION64_PATH", info.dli_fname, 0);
    return "NVTX ranges captured through CUPTI";
}

} // namespace

CuptiTracer::Started CuptiTracer::start(GpuActivitySink& sink) {
    const GpuInventory gpus = query_gpu_devices();
    if (gpus.devices.empty()) {
        return {nullptr, "no CUDA GPU (" + gpus.unavailable_reason + ")"};
    }
    std::lock_guard lock(g_mutex);
    if (g_state != nullptr) {
        return {nullptr, "a GPU capture is already running in this process"};
    }
    auto state = std::make_unique<TracerState>();
    // Another CUPTI client (Nsight Systems, Nsight Compute) shows itself here.
    if (const CUptiResult r = cuptiSubscribe(&state->subscriber, ignore_callback, nullptr);
        r != CUPTI_SUCCESS) {
        std::string why = "CUPTI refused: " + describe(r);
        const bool held = r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
        if (held) {
            why += " (another profiler, such as Nsight Systems or compute-sanitizer, is attached)";
        }
        return {nullptr, why, held};
    }
    const auto fail = [&state](const std::string& what, CUptiResult r) -> Started {
        for (const CUpti_ActivityKind kind : kCapturedKinds) {
            cuptiActivityDisable(kind);
        }
        cuptiUnsubscribe(state->subscriber);
        std::string why = "CUPTI refused " + what + ": " + describe(r);
        if (r == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES) {
            why += " (GPU profiling needs permission: see NVIDIA's ERR_NVGPUCTRPERM page)";
        }
        return {nullptr, why};
    };
    if (const CUptiResult r = cuptiActivityRegisterTimestampCallback(host_timestamp);
        r != CUPTI_SUCCESS) {
        return fail("the host clock", r);
    }
    if (const CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
        r != CUPTI_SUCCESS) {
        return fail("its buffers", r);
    }
    std::unique_ptr<CuptiTracer> tracer(new CuptiTracer());
    tracer->nvtx_note_ = route_nvtx_to_cupti();
    for (const CUpti_ActivityKind kind : kCapturedKinds) {
        if (const CUptiResult r = cuptiActivityEnable(kind); r != CUPTI_SUCCESS) {
            return fail("activity kind " + std::to_string(static_cast<int>(kind)), r);
        }
    }
    state->sink = &sink;
    g_state = state.release();
    tracer->running_ = true;
    return {std::move(tracer), {}};
}

CuptiTracer::~CuptiTracer() {
    stop();
}

void CuptiTracer::flush() {
    if (running_) {
        cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    }
}

void CuptiTracer::stop() {
    if (!running_) {
        return;
    }
    running_ = false;
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    for (const CUpti_ActivityKind kind : kCapturedKinds) {
        cuptiActivityDisable(kind);
    }
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    std::lock_guard lock(g_mutex);
    cuptiUnsubscribe(g_state->subscriber);
    delete g_state;
    g_state = nullptr;
}

std::uint64_t CuptiTracer::dropped_records() const {
    std::lock_guard lock(g_mutex);
    return g_state ? g_state->dropped : 0;
}

} // namespace kvscope::profiler
