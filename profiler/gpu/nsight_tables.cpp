#include "profiler/gpu/nsight_tables.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cxxabi.h>
#include <string_view>
#include <unistd.h>

namespace kvscope::profiler {
namespace {

constexpr const char* kNsightSchema = R"sql(
CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE TARGET_INFO_GPU (
    id INTEGER PRIMARY KEY, name TEXT NOT NULL, busLocation TEXT, totalMemory INTEGER,
    smCount INTEGER, computeMajor INTEGER, computeMinor INTEGER, cuDevice INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (
    start INTEGER NOT NULL, "end" INTEGER NOT NULL, deviceId INTEGER NOT NULL,
    contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER,
    globalPid INTEGER, demangledName INTEGER NOT NULL REFERENCES StringIds(id),
    shortName INTEGER NOT NULL REFERENCES StringIds(id),
    mangledName INTEGER REFERENCES StringIds(id), registersPerThread INTEGER NOT NULL,
    gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL,
    blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL,
    staticSharedMemory INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (
    start INTEGER NOT NULL, "end" INTEGER NOT NULL, deviceId INTEGER NOT NULL,
    contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER,
    globalPid INTEGER, bytes INTEGER NOT NULL,
    copyKind INTEGER NOT NULL REFERENCES ENUM_CUDA_MEMCPY_OPER(id),
    srcKind INTEGER REFERENCES ENUM_CUDA_MEM_KIND(id),
    dstKind INTEGER REFERENCES ENUM_CUDA_MEM_KIND(id));
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (
    start INTEGER NOT NULL, "end" INTEGER NOT NULL, deviceId INTEGER NOT NULL,
    contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER,
    globalPid INTEGER, value INTEGER NOT NULL, bytes INTEGER NOT NULL,
    memKind INTEGER REFERENCES ENUM_CUDA_MEM_KIND(id));
CREATE TABLE CUDA_GPU_MEMORY_USAGE_EVENTS (
    start INTEGER NOT NULL, globalPid INTEGER, deviceId INTEGER NOT NULL,
    contextId INTEGER NOT NULL, streamId INTEGER, address INTEGER NOT NULL, pc INTEGER,
    bytes INTEGER NOT NULL, memKind INTEGER REFERENCES ENUM_CUDA_MEM_KIND(id),
    memoryOperationType INTEGER NOT NULL REFERENCES ENUM_CUDA_DEV_MEM_EVENT_OPER(id),
    name INTEGER REFERENCES StringIds(id), correlationId INTEGER);
CREATE TABLE NVTX_EVENTS (
    start INTEGER NOT NULL, "end" INTEGER, eventType INTEGER NOT NULL
    REFERENCES ENUM_NSYS_EVENT_TYPE(id), rangeId INTEGER, category INTEGER, color INTEGER,
    text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER REFERENCES StringIds(id),
    domainId INTEGER, uint64Value INTEGER, int64Value INTEGER, doubleValue REAL,
    uint32Value INTEGER, int32Value INTEGER, floatValue REAL, jsonTextId INTEGER,
    jsonText TEXT);
CREATE TABLE PROFILER_OVERHEAD (
    start INTEGER NOT NULL, "end" INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER,
    nameId INTEGER REFERENCES StringIds(id), overheadType INTEGER);
CREATE TABLE ENUM_CUDA_MEMCPY_OPER (id INTEGER PRIMARY KEY, name TEXT NOT NULL, label TEXT);
CREATE TABLE ENUM_CUDA_MEM_KIND (id INTEGER PRIMARY KEY, name TEXT NOT NULL, label TEXT);
CREATE TABLE ENUM_CUDA_DEV_MEM_EVENT_OPER (id INTEGER PRIMARY KEY, name TEXT NOT NULL, label TEXT);
CREATE TABLE ENUM_NSYS_EVENT_TYPE (id INTEGER PRIMARY KEY, name TEXT NOT NULL, label TEXT);
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES
    (34, 'NvtxMark', 'NVTX Mark'), (59, 'NvtxPushPopRange', 'NVTX PushPop Range'),
    (60, 'NvtxStartEndRange', 'NVTX StartEnd Range'),
    (75, 'NvtxDomainCreate', 'NVTX Domain Create');
)sql";

constexpr const char* kNsightIndexes = R"sql(
CREATE INDEX IF NOT EXISTS CUPTI_ACTIVITY_KIND_KERNEL_START ON CUPTI_ACTIVITY_KIND_KERNEL (start);
CREATE INDEX IF NOT EXISTS CUPTI_ACTIVITY_KIND_MEMCPY_START ON CUPTI_ACTIVITY_KIND_MEMCPY (start);
CREATE INDEX IF NOT EXISTS CUPTI_ACTIVITY_KIND_MEMSET_START ON CUPTI_ACTIVITY_KIND_MEMSET (start);
CREATE INDEX IF NOT EXISTS CUDA_GPU_MEMORY_USAGE_EVENTS_START
    ON CUDA_GPU_MEMORY_USAGE_EVENTS (start);
CREATE INDEX IF NOT EXISTS NVTX_EVENTS_START ON NVTX_EVENTS (start);
)sql";

// A readable label from an enum name: "CUDA_MEMCPY_KIND_HTOD" -> "HtoD".
std::string label_of(std::string_view name) {
    const auto last = name.rfind('_');
    std::string label(name.substr(last + 1));
    for (std::size_t i = 1; i < label.size(); ++i) {
        label[i] = static_cast<char>(std::tolower(static_cast<unsigned char>(label[i])));
    }
    if (label.size() == 4 && label[2] == 'o') { // HtoD, DtoH, PtoP
        label[3] = static_cast<char>(std::toupper(static_cast<unsigned char>(label[3])));
    }
    return label;
}

template <typename Enum, typename NameOf>
void fill_enum(sqlite3* db, const char* table, int count, NameOf name_of) {
    const std::string sql = std::string("INSERT INTO ") + table + " VALUES (?, ?, ?)";
    Statement insert(db, sql.c_str());
    for (int i = 0; i < count; ++i) {
        const std::string_view name = name_of(static_cast<Enum>(i));
        insert.bind(1, std::int64_t{i}).bind(2, name).bind(3, label_of(name), true);
        insert.run(table);
    }
}

std::int64_t as_int(std::uint64_t value) {
    return static_cast<std::int64_t>(value);
}

} // namespace

void create_nsight_tables(sqlite3* db) {
    exec_sqlite(db, kNsightSchema, "creating the CUDA tables");
    fill_enum<MemcpyKind>(db, "ENUM_CUDA_MEMCPY_OPER", 11, memcpy_kind_name);
    fill_enum<MemoryKind>(db, "ENUM_CUDA_MEM_KIND", 8, memory_kind_name);
    fill_enum<MemoryOperation>(db, "ENUM_CUDA_DEV_MEM_EVENT_OPER", 3, memory_operation_name);
}

void create_nsight_indexes(sqlite3* db) {
    exec_sqlite(db, kNsightIndexes, "indexing the CUDA tables");
}

std::int64_t global_pid(std::uint32_t pid) {
    return static_cast<std::int64_t>(pid) << 24;
}

std::int64_t global_tid(std::uint32_t pid, std::uint32_t tid) {
    return global_pid(pid) + (tid & 0xFFFFFF);
}

std::string demangle(const std::string& name) {
    if (name.rfind("_Z", 0) != 0) {
        return name;
    }
    int status = 0;
    char* out = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
    std::string result = status == 0 && out ? std::string(out) : name;
    std::free(out);
    return result;
}

std::string kernel_short_name(const std::string& demangled) {
    // Drop the parameter list (the parenthesised group that ends the name;
    // "(anonymous namespace)" elsewhere stays), then template arguments at
    // any depth, then namespaces and the return type.
    std::string_view name = demangled;
    if (!name.empty() && name.back() == ')') {
        int depth = 0;
        for (std::size_t i = name.size(); i-- > 0;) {
            depth += name[i] == ')' ? 1 : name[i] == '(' ? -1 : 0;
            if (depth == 0) {
                name = name.substr(0, i);
                break;
            }
        }
    }
    std::string base;
    int depth = 0;
    for (const char ch : name) {
        if (ch == '<') {
            ++depth;
        } else if (ch == '>') {
            depth = std::max(0, depth - 1);
        } else if (depth == 0) {
            base.push_back(ch);
        }
    }
    if (const auto scope = base.rfind("::"); scope != std::string::npos) {
        base = base.substr(scope + 2);
    }
    if (const auto space = base.rfind(' '); space != std::string::npos) {
        base = base.substr(space + 1);
    }
    return base.empty() ? demangled : base;
}

struct NsightTableWriter::Statements {
    explicit Statements(sqlite3* db)
        : string(db, "INSERT INTO StringIds (id, value) VALUES (?, ?)")
        , kernel(db, "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES "
                     "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
        , memcpy(db, "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES "
                     "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
        , memset(db, "INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
        , memory(db, "INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS VALUES "
                     "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
        , nvtx(db, "INSERT INTO NVTX_EVENTS (start, \"end\", eventType, text, globalTid, "
                   "endGlobalTid, domainId) VALUES (?, ?, ?, ?, ?, ?, ?)")
        , overhead(db, "INSERT INTO PROFILER_OVERHEAD VALUES (?, ?, ?, NULL, ?, ?)") {}
    Statement string;
    Statement kernel;
    Statement memcpy;
    Statement memset;
    Statement memory;
    Statement nvtx;
    Statement overhead;
};

NsightTableWriter::NsightTableWriter(sqlite3* db)
    : db_(db)
    , pid_(static_cast<std::int64_t>(::getpid())) {
    // Continue numbering after what the file already holds.
    Statement max_id(db, "SELECT coalesce(max(id), 0) FROM StringIds");
    max_id.next();
    next_string_id_ = max_id.int64(0) + 1;
    statements_ = std::make_unique<Statements>(db);
}

NsightTableWriter::~NsightTableWriter() = default;

std::int64_t NsightTableWriter::string_id(const std::string& value) {
    if (const auto it = strings_.find(value); it != strings_.end()) {
        return it->second;
    }
    const std::int64_t id = next_string_id_++;
    statements_->string.bind(1, id).bind(2, value);
    statements_->string.run("recording a string");
    strings_.emplace(value, id);
    return id;
}

std::int64_t NsightTableWriter::nvtx_domain_id(const std::string& domain) {
    if (domain.empty()) {
        return 0; // NVTX's default domain
    }
    if (const auto it = domains_.find(domain); it != domains_.end()) {
        return it->second;
    }
    const auto id = static_cast<std::int64_t>(domains_.size()) + 1;
    // Nsight announces a domain with a DomainCreate row carrying its name.
    Statement& s = statements_->nvtx;
    s.bind(1, std::int64_t{0}).bind_null(2).bind(3, std::int64_t{kNvtxDomainCreateEventType});
    s.bind(4, domain).bind(5, global_pid(static_cast<std::uint32_t>(pid_))).bind_null(6);
    s.bind(7, id);
    s.run("recording an NVTX domain");
    domains_.emplace(domain, id);
    return id;
}

void NsightTableWriter::write(const GpuActivityBatch& batch) {
    const auto pid = static_cast<std::uint32_t>(pid_);
    const std::int64_t gpid = global_pid(pid);
    const auto bind_place = [gpid](Statement& s, int first, const GpuPlace& p) {
        s.bind(first, std::int64_t{p.device})
            .bind(first + 1, std::int64_t{p.context})
            .bind(first + 2, std::int64_t{p.stream})
            .bind(first + 3, std::int64_t{p.correlation})
            .bind(first + 4, gpid);
    };
    for (const GpuKernel& k : batch.kernels) {
        auto names = kernel_names_.find(k.name);
        if (names == kernel_names_.end()) { // demangling is slow: once per name
            const std::string demangled = demangle(k.name);
            names = kernel_names_
                        .emplace(k.name, KernelNameIds{string_id(demangled),
                                                       string_id(kernel_short_name(demangled)),
                                                       string_id(k.name)})
                        .first;
        }
        const auto [demangled_id, short_id, mangled_id] = names->second;
        Statement& s = statements_->kernel;
        s.bind(1, k.start_ns).bind(2, k.end_ns);
        bind_place(s, 3, k.place);
        s.bind(8, demangled_id).bind(9, short_id).bind(10, mangled_id);
        s.bind(11, std::int64_t{k.registers_per_thread});
        for (int i = 0; i < 3; ++i) {
            s.bind(12 + i, std::int64_t{k.grid[i]}).bind(15 + i, std::int64_t{k.block[i]});
        }
        s.bind(18, std::int64_t{k.static_shared_bytes})
            .bind(19, std::int64_t{k.dynamic_shared_bytes});
        s.run("recording a kernel");
    }
    for (const GpuMemcpy& m : batch.memcpys) {
        Statement& s = statements_->memcpy;
        s.bind(1, m.start_ns).bind(2, m.end_ns);
        bind_place(s, 3, m.place);
        s.bind(8, as_int(m.bytes))
            .bind(9, std::int64_t{static_cast<int>(m.copy_kind)})
            .bind(10, std::int64_t{static_cast<int>(m.src_kind)})
            .bind(11, std::int64_t{static_cast<int>(m.dst_kind)});
        s.run("recording a copy");
    }
    for (const GpuMemset& m : batch.memsets) {
        Statement& s = statements_->memset;
        s.bind(1, m.start_ns).bind(2, m.end_ns);
        bind_place(s, 3, m.place);
        s.bind(8, std::int64_t{m.value})
            .bind(9, as_int(m.bytes))
            .bind(10, std::int64_t{static_cast<int>(m.memory_kind)});
        s.run("recording a memset");
    }
    for (const GpuMemoryEvent& m : batch.memory) {
        Statement& s = statements_->memory;
        s.bind(1, m.time_ns).bind(2, gpid).bind(3, std::int64_t{m.place.device});
        s.bind(4, std::int64_t{m.place.context}).bind(5, std::int64_t{m.place.stream});
        s.bind(6, as_int(m.address)).bind(7, as_int(m.pc)).bind(8, as_int(m.bytes));
        s.bind(9, std::int64_t{static_cast<int>(m.memory_kind)});
        s.bind(10, std::int64_t{static_cast<int>(m.operation)});
        if (m.name.empty()) {
            s.bind_null(11);
        } else {
            s.bind(11, string_id(m.name));
        }
        s.bind(12, std::int64_t{m.place.correlation});
        s.run("recording a memory event");
    }
    for (const NvtxRangeRecord& r : batch.nvtx) {
        const std::int64_t domain = nvtx_domain_id(r.domain);
        const std::int64_t tid = global_tid(pid, r.thread);
        Statement& s = statements_->nvtx;
        s.bind(1, r.start_ns);
        if (r.end_ns >= 0) {
            s.bind(2, r.end_ns).bind(3, std::int64_t{kNvtxPushPopRangeEventType});
        } else {
            s.bind_null(2).bind(3, std::int64_t{kNvtxMarkEventType});
        }
        s.bind(4, r.text).bind(5, tid).bind(6, tid).bind(7, domain);
        s.run("recording an NVTX range");
    }
    for (const ProfilerOverhead& o : batch.overhead) {
        Statement& s = statements_->overhead;
        s.bind(1, o.start_ns).bind(2, o.end_ns).bind(3, global_tid(pid, o.thread));
        s.bind(4, string_id(o.name)).bind(5, std::int64_t{o.kind});
        s.run("recording profiler overhead");
    }
}

void NsightTableWriter::write_devices(const std::vector<GpuDevice>& devices) {
    Statement s(db_, "INSERT OR REPLACE INTO TARGET_INFO_GPU VALUES (?, ?, NULL, ?, ?, ?, ?, ?)");
    for (const GpuDevice& d : devices) {
        s.bind(1, std::int64_t{d.index}).bind(2, d.name);
        s.bind(3, static_cast<std::int64_t>(d.total_memory_bytes));
        s.bind(4, std::int64_t{d.multiprocessors});
        s.bind(5, std::int64_t{d.compute_major}).bind(6, std::int64_t{d.compute_minor});
        s.bind(7, std::int64_t{d.index});
        s.run("recording the GPUs");
    }
}

} // namespace kvscope::profiler
