// The CUDA and NVTX side of a recording, under the table and column names of
// the Nsight Systems SQLite export (a subset of its columns), so queries
// written for `nsys export` files work on kvscope recordings too. Integer
// nanoseconds on the host clock; names through StringIds; processes and
// threads as Nsight serialises them (globalPid = pid << 24,
// globalTid = globalPid + tid).
#pragma once

#include "engine/gpu_devices.h"
#include "profiler/gpu/gpu_activity.h"
#include "profiler/recording/sqlite_util.h"

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace kvscope::profiler {

// Nsight's ENUM_NSYS_EVENT_TYPE ids of the NVTX rows kvscope writes.
inline constexpr int kNvtxMarkEventType = 34;
inline constexpr int kNvtxPushPopRangeEventType = 59;
inline constexpr int kNvtxDomainCreateEventType = 75;

// The tables and their enums; run once when a recording is created.
void create_nsight_tables(sqlite3* db);
// Their time indexes; run once when the recording closes (indexes kept up to
// date row by row would slow the writer down threefold).
void create_nsight_indexes(sqlite3* db);

std::int64_t global_pid(std::uint32_t pid);
std::int64_t global_tid(std::uint32_t pid, std::uint32_t tid);

// "void ns::rms_norm_kernel<float>(float const*, int)" -> "rms_norm_kernel":
// the name Nsight lists as a kernel's shortName.
std::string kernel_short_name(const std::string& demangled);
// C++ names demangled (when they are mangled), others as they are.
std::string demangle(const std::string& name);

// Writes GPU activity inside the caller's transaction. Keeps the StringIds it
// has handed out, so each name is stored once per recording.
class NsightTableWriter {
public:
    explicit NsightTableWriter(sqlite3* db);
    ~NsightTableWriter();

    void write(const GpuActivityBatch& batch);
    void write_devices(const std::vector<GpuDevice>& devices);

private:
    std::int64_t string_id(const std::string& value);
    std::int64_t nvtx_domain_id(const std::string& domain);

    sqlite3* db_;
    std::int64_t pid_;
    std::int64_t next_string_id_ = 1;
    std::unordered_map<std::string, std::int64_t> strings_;
    std::unordered_map<std::string, std::int64_t> domains_;
    struct KernelNameIds {
        std::int64_t demangled;
        std::int64_t short_name;
        std::int64_t mangled;
    };
    std::unordered_map<std::string, KernelNameIds> kernel_names_; // by CUPTI's name
    struct Statements;
    std::unique_ptr<Statements> statements_;
};

} // namespace kvscope::profiler
