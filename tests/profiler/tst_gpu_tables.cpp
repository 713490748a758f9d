// The CUDA and NVTX side of recordings, fed with synthetic GPU activity (so
// it runs without a GPU): the Nsight-named tables hold what was captured and
// answer Nsight-style queries; stats and the Chrome trace read them back;
// a schema-1 recording without those tables still opens.
#include "profiler/export/chrome_trace.h"
#include "profiler/gpu/nsight_tables.h"
#include "profiler/recording/recorder.h"
#include "profiler/recording/recording_stats.h"
#include "profiler/recording/sqlite_util.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <sqlite3.h>
#include <sstream>

#include <QTemporaryDir>
#include <QTest>

using namespace kvscope;
using namespace kvscope::profiler;

namespace {

constexpr const char* kMangledRmsNorm =
    "_ZN7kvscope7kernels12_GLOBAL__N_115rms_norm_kernelILi4EEEvPKfS4_Pfif";

GpuKernel kernel(std::int64_t start, std::int64_t duration, const char* name,
                 std::uint32_t stream) {
    GpuKernel k;
    k.start_ns = start;
    k.end_ns = start + duration;
    k.place = {0, 1, stream, static_cast<std::uint32_t>(start)};
    k.name = name;
    k.grid[0] = 30;
    k.block[0] = 128;
    k.registers_per_thread = 32;
    return k;
}

// Engine events and GPU activity of a small made-up run: 2 steps, kernels of
// two names on two streams, a copy, a memset, an allocation and NVTX ranges.
void write_recording(const std::string& path) {
    Recorder recorder(path, {{"model_name", "synthetic"}});
    GpuDevice device;
    device.index = 0;
    device.name = "Test GPU";
    device.total_memory_bytes = 80ull << 30;
    device.multiprocessors = 132;
    device.compute_major = 9;
    recorder.set_gpu_devices({device});
    for (std::int64_t step = 0; step < 2; ++step) {
        const std::int64_t t0 = 1'000'000 + step * 100'000;
        events::EngineEvent begin;
        begin.time_ns = t0;
        begin.kind = events::EventKind::step_begin;
        begin.a = step;
        recorder.on_event(begin);
        events::EngineEvent end = begin;
        end.time_ns = t0 + 90'000;
        end.kind = events::EventKind::step_end;
        recorder.on_event(end);

        GpuActivityBatch batch;
        batch.kernels.push_back(kernel(t0 + 1'000, 10'000, kMangledRmsNorm, 7));
        batch.kernels.push_back(kernel(t0 + 20'000, 30'000, "_Z10add_kerneliPfS_", 7));
        batch.kernels.push_back(kernel(t0 + 20'000, 20'000, "_Z10add_kerneliPfS_", 8));
        batch.nvtx.push_back({t0, t0 + 90'000, "kvscope", "step", 4242});
        batch.nvtx.push_back({t0 + 500, t0 + 60'000, "kvscope", "decode", 4242});
        recorder.on_gpu_activity(std::move(batch));
    }
    GpuActivityBatch setup;
    GpuMemcpy copy;
    copy.start_ns = 900'000;
    copy.end_ns = 950'000;
    copy.place = {0, 1, 7, 1};
    copy.bytes = 1 << 20;
    copy.copy_kind = MemcpyKind::htod;
    copy.src_kind = MemoryKind::pageable;
    copy.dst_kind = MemoryKind::device;
    setup.memcpys.push_back(copy);
    GpuMemset set;
    set.start_ns = 960'000;
    set.end_ns = 961'000;
    set.place = {0, 1, 7, 2};
    set.bytes = 4096;
    setup.memsets.push_back(set);
    GpuMemoryEvent alloc;
    alloc.time_ns = 800'000;
    alloc.bytes = 64 << 20;
    alloc.address = 0x7f0000000000;
    alloc.memory_kind = MemoryKind::device;
    alloc.operation = MemoryOperation::allocation;
    setup.memory.push_back(alloc);
    setup.overhead.push_back({850'000, 851'000, 1 << 16, "CUPTI buffer flush", 4242});
    setup.dropped_records = 3;
    recorder.on_gpu_activity(std::move(setup));
    recorder.close();
}

struct Db {
    explicit Db(const std::string& path) {
        sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr);
    }
    ~Db() { sqlite3_close(db); }
    std::int64_t integer(const char* sql) const {
        Statement s(db, sql);
        return s.next() ? s.int64(0) : -1;
    }
    std::string text(const char* sql) const {
        Statement s(db, sql);
        return s.next() ? s.text(0) : std::string("<no row>");
    }
    sqlite3* db = nullptr;
};

const NamedDurations* find(const std::vector<NamedDurations>& rows, const std::string& name) {
    for (const NamedDurations& d : rows) {
        if (d.name == name) {
            return &d;
        }
    }
    return nullptr;
}

} // namespace

class TestGpuTables : public QObject {
    Q_OBJECT

private slots:
    void short_names_data();
    void short_names();
    void tables_hold_the_activity();
    void nsight_style_queries_work();
    void stats_summarise_kernels_copies_and_ranges();
    void time_by_name_matches_a_direct_computation();
    void overlapped_kernels_count_from_the_kernel_before();
    void chrome_trace_has_gpu_tracks();
    void schema_1_recordings_still_open();
};

void TestGpuTables::short_names_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<QString>("expected");
    QTest::newRow("anonymous namespace, template") << kMangledRmsNorm << "rms_norm_kernel";
    QTest::newRow("free function") << "_Z10add_kerneliPfS_"
                                   << "add_kernel";
    QTest::newRow("not mangled") << "my_c_kernel"
                                 << "my_c_kernel";
    QTest::newRow("nested templates")
        << QString::fromStdString(demangle("_ZN2ns6kernelISt4pairIiiEEEvPT_")) << "kernel";
}

void TestGpuTables::short_names() {
    QFETCH(QString, name);
    QFETCH(QString, expected);
    QCOMPARE(QString::fromStdString(kernel_short_name(demangle(name.toStdString()))), expected);
}

void TestGpuTables::tables_hold_the_activity() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("gpu.sqlite").toStdString();
    write_recording(path);
    QCOMPARE(recording_problem(path), std::string());
    const Db db(path);
    QCOMPARE(db.integer("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL"), 6);
    QCOMPARE(db.integer("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY"), 1);
    QCOMPARE(db.integer("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMSET"), 1);
    QCOMPARE(db.integer("SELECT count(*) FROM CUDA_GPU_MEMORY_USAGE_EVENTS"), 1);
    QCOMPARE(db.integer("SELECT count(*) FROM PROFILER_OVERHEAD"), 1);
    // Each name is stored once however many kernels carry it.
    QCOMPARE(db.integer("SELECT count(*) FROM StringIds WHERE value = 'add_kernel'"), 1);
    QCOMPARE(db.text("SELECT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON "
                     "s.id = k.demangledName ORDER BY k.start LIMIT 1"),
             std::string("void kvscope::kernels::(anonymous namespace)::rms_norm_kernel<4>(float "
                         "const*, float const*, float*, int, float)"));
    QCOMPARE(db.integer("SELECT registersPerThread FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1"), 32);
    QCOMPARE(db.text("SELECT name FROM TARGET_INFO_GPU WHERE id = 0"), std::string("Test GPU"));
    QCOMPARE(db.integer("SELECT smCount FROM TARGET_INFO_GPU"), 132);
    QCOMPARE(db.text("SELECT value FROM KVSCOPE_META WHERE key = 'cupti_dropped_records'"),
             std::string("3"));
    // NVTX: one domain-create row names the domain; ranges point at it.
    QCOMPARE(db.integer("SELECT count(*) FROM NVTX_EVENTS WHERE eventType = 75"), 1);
    QCOMPARE(db.text("SELECT d.text FROM NVTX_EVENTS r JOIN NVTX_EVENTS d ON d.eventType = 75 "
                     "AND d.domainId = r.domainId WHERE r.eventType = 59 LIMIT 1"),
             std::string("kvscope"));
    // Threads as Nsight serialises them.
    QCOMPARE(db.integer("SELECT globalTid % 16777216 FROM NVTX_EVENTS WHERE eventType = 59 "
                        "LIMIT 1"),
             4242);
    QCOMPARE(db.integer("SELECT globalTid / 16777216 FROM NVTX_EVENTS WHERE eventType = 59 "
                        "LIMIT 1"),
             static_cast<std::int64_t>(::getpid()));
}

void TestGpuTables::nsight_style_queries_work() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("gpu.sqlite").toStdString();
    write_recording(path);
    const Db db(path);
    // The kernel summary recipe people run on nsys exports.
    QCOMPARE(db.integer(R"sql(
        SELECT sum("end" - start) FROM CUPTI_ACTIVITY_KIND_KERNEL AS k
        JOIN StringIds AS s ON s.id = k.shortName WHERE s.value = 'add_kernel')sql"),
             2 * (30'000 + 20'000));
    QCOMPARE(db.text(R"sql(
        SELECT e.label FROM CUPTI_ACTIVITY_KIND_MEMCPY AS m
        JOIN ENUM_CUDA_MEMCPY_OPER AS e ON e.id = m.copyKind)sql"),
             std::string("HtoD"));
    QCOMPARE(db.text(R"sql(
        SELECT e.name FROM CUDA_GPU_MEMORY_USAGE_EVENTS AS m
        JOIN ENUM_CUDA_DEV_MEM_EVENT_OPER AS e ON e.id = m.memoryOperationType)sql"),
             std::string("CUDA_DEV_MEM_EVENT_OPR_ALLOCATION"));
    QCOMPARE(db.text(R"sql(
        SELECT e.name FROM NVTX_EVENTS AS r JOIN ENUM_NSYS_EVENT_TYPE AS e ON e.id = r.eventType
        WHERE r.text = 'decode')sql"),
             std::string("NvtxPushPopRange"));
    // Time-range queries use the start indexes.
    Statement plan(db.db, "EXPLAIN QUERY PLAN SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE "
                          "start BETWEEN 1 AND 2");
    std::string details;
    while (plan.next()) {
        details += plan.text(3);
    }
    QVERIFY2(details.find("CUPTI_ACTIVITY_KIND_KERNEL_START") != std::string::npos,
             details.c_str());
}

void TestGpuTables::stats_summarise_kernels_copies_and_ranges() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("gpu.sqlite").toStdString();
    write_recording(path);
    const RecordingStats s = compute_stats(path);
    QCOMPARE(s.times.gpu_kernels.size(), std::size_t{2});
    // Largest total first: add_kernel 100 us, rms_norm_kernel 20 us.
    QCOMPARE(s.times.gpu_kernels[0].name, std::string("add_kernel"));
    QCOMPARE(s.times.gpu_kernels[0].instances, 4);
    QCOMPARE(s.times.gpu_kernels[0].total_ns, 100'000);
    QCOMPARE(s.times.gpu_kernels[0].min_ns, 20'000);
    QCOMPARE(s.times.gpu_kernels[0].max_ns, 30'000);
    QCOMPARE(s.times.gpu_kernels[0].median_ns, 25'000.0);
    QVERIFY(std::abs(s.times.gpu_kernels[0].percent - 100.0 * 100 / 120) < 1e-9);
    const NamedDurations* copy = find(s.times.gpu_memory_ops, "[CUDA memcpy HtoD]");
    QVERIFY(copy != nullptr);
    QCOMPARE(copy->total_ns, 50'000);
    QVERIFY(find(s.times.gpu_memory_ops, "[CUDA memset]") != nullptr);
    const NamedDurations* step = find(s.times.nvtx_ranges, "kvscope:step");
    QVERIFY(step != nullptr);
    QCOMPARE(step->instances, 2);
    QCOMPARE(step->total_ns, 180'000);
    QCOMPARE(s.times.dropped_gpu_records, 3);
    QVERIFY(s.times.cpu_ops.empty());
    QCOMPARE(s.steps, 2);
}

void TestGpuTables::time_by_name_matches_a_direct_computation() {
    sqlite3* db = nullptr;
    sqlite3_open(":memory:", &db);
    exec_sqlite(db, "CREATE TABLE t (name TEXT, d INTEGER)", "test");
    const std::vector<std::int64_t> a{5, 1, 9, 3};
    for (const std::int64_t x : a) {
        exec_sqlite(db, ("INSERT INTO t VALUES ('a', " + std::to_string(x) + ")").c_str(), "test");
    }
    exec_sqlite(db, "INSERT INTO t VALUES ('b', 100)", "test");
    const std::vector<NamedDurations> rows = time_by_name(db, "SELECT name, d FROM t");
    sqlite3_close(db);
    QCOMPARE(rows.size(), std::size_t{2});
    QCOMPARE(rows[0].name, std::string("b"));
    const NamedDurations& d = rows[1];
    QCOMPARE(d.instances, 4);
    QCOMPARE(d.total_ns, 18);
    QCOMPARE(d.mean_ns, 4.5);
    QCOMPARE(d.median_ns, 4.0); // (3 + 5) / 2
    // Sample standard deviation of {1, 3, 5, 9}: sqrt(35 / 3).
    QVERIFY(std::abs(d.stddev_ns - std::sqrt(35.0 / 3.0)) < 1e-12);
    QVERIFY(std::abs(d.percent - 100.0 * 18 / 118) < 1e-12);
}

// Kernels launched to overlap the one before on their stream (programmatic
// dependent launch) start early and wait: each counts from where the kernel
// before it on its stream ended. A kernel of another stream running at the
// same time is its own, and kernels in turn keep end - start.
void TestGpuTables::overlapped_kernels_count_from_the_kernel_before() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("overlap.sqlite").toStdString();
    {
        Recorder recorder(path, {{"model_name", "synthetic"}});
        GpuActivityBatch batch;
        // Stream 7: norm [0, 10), gemv [4, 16) waits until 10, attention
        // [15, 30) until 16, then a gemv in turn [40, 45).
        batch.kernels.push_back(kernel(1'000'000, 10'000, kMangledRmsNorm, 7));
        batch.kernels.push_back(kernel(1'004'000, 12'000, "gemv_kernel", 7));
        batch.kernels.push_back(kernel(1'015'000, 15'000, "attention_kernel", 7));
        batch.kernels.push_back(kernel(1'040'000, 5'000, "gemv_kernel", 7));
        // Stream 8, inside stream 7's norm: all its own. Stream 9: a kernel
        // inside the one before it, then one that starts past the inner
        // one's end but inside the outer one's: it waited for the outer one
        // (every earlier end counts, not only the previous kernel's).
        batch.kernels.push_back(kernel(1'002'000, 6'000, "attention_kernel", 8));
        batch.kernels.push_back(kernel(2'000'000, 30'000, "outer_kernel", 9));
        batch.kernels.push_back(kernel(2'005'000, 5'000, "inner_kernel", 9));
        batch.kernels.push_back(kernel(2'012'000, 8'000, "late_kernel", 9));
        recorder.on_gpu_activity(std::move(batch));
        recorder.close();
    }
    const RecordingStats s = compute_stats(path);
    const NamedDurations* norm = find(s.times.gpu_kernels, "rms_norm_kernel");
    const NamedDurations* gemv = find(s.times.gpu_kernels, "gemv_kernel");
    const NamedDurations* attention = find(s.times.gpu_kernels, "attention_kernel");
    QVERIFY(norm != nullptr && gemv != nullptr && attention != nullptr);
    QCOMPARE(norm->total_ns, 10'000);
    QCOMPARE(gemv->total_ns, 6'000 + 5'000);
    QCOMPARE(attention->total_ns, 14'000 + 6'000);
    // Stream 7 was busy from 0 to 30 and from 40 to 45: 35 us, counted once.
    QCOMPARE(norm->total_ns + gemv->total_ns + attention->total_ns - 6'000, 35'000);
    QCOMPARE(find(s.times.gpu_kernels, "outer_kernel")->total_ns, 30'000);
    QCOMPARE(find(s.times.gpu_kernels, "inner_kernel")->total_ns, 0);
    QCOMPARE(find(s.times.gpu_kernels, "late_kernel")->total_ns, 0);
}

void TestGpuTables::chrome_trace_has_gpu_tracks() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("gpu.sqlite").toStdString();
    write_recording(path);
    std::ostringstream out;
    const ChromeTraceSummary summary = export_chrome_trace(path, out);
    QCOMPARE(summary.kernels, 8); // 6 kernels, a copy, a memset
    QCOMPARE(summary.nvtx_ranges, 4);
    const nlohmann::json trace = nlohmann::json::parse(out.str());
    int kernels_on_stream_8 = 0;
    bool gpu_named = false;
    bool memory_counter = false;
    double earliest = 1e300;
    for (const nlohmann::json& e : trace["traceEvents"]) {
        if (e.contains("ts")) {
            earliest = std::min(earliest, e["ts"].get<double>());
        }
        if (e["ph"] == "X" && e["pid"] == 100 && e["tid"] == 8) {
            QCOMPARE(e["name"].get<std::string>(), std::string("add_kernel"));
            QCOMPARE(e["dur"].get<double>(), 20.0);
            ++kernels_on_stream_8;
        }
        if (e["ph"] == "M" && e["name"] == "process_name" && e["pid"] == 100) {
            gpu_named = e["args"]["name"] == "GPU 0";
        }
        if (e["ph"] == "C" && e["pid"] == 100) {
            memory_counter = e["args"]["allocated"].get<double>() == 64.0;
        }
    }
    QCOMPARE(kernels_on_stream_8, 2);
    QVERIFY(gpu_named);
    QVERIFY(memory_counter);
    QCOMPARE(earliest, 0.0); // the allocation, before the first engine event
}

void TestGpuTables::schema_1_recordings_still_open() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("old.sqlite").toStdString();
    write_recording(path);
    {
        const Db db(path);
        for (const char* table :
             {"StringIds", "TARGET_INFO_GPU", "CUPTI_ACTIVITY_KIND_KERNEL",
              "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
              "CUDA_GPU_MEMORY_USAGE_EVENTS", "NVTX_EVENTS", "PROFILER_OVERHEAD"}) {
            exec_sqlite(db.db, (std::string("DROP TABLE ") + table).c_str(), "making a v1 file");
        }
        exec_sqlite(db.db, "UPDATE KVSCOPE_META SET value = '1' WHERE key = 'schema_version'",
                    "making a v1 file");
    }
    QCOMPARE(recording_problem(path), std::string());
    const RecordingStats s = compute_stats(path);
    QCOMPARE(s.steps, 2);
    QVERIFY(s.times.gpu_kernels.empty());
    std::ostringstream out;
    QCOMPARE(export_chrome_trace(path, out).kernels, 0);
}

QTEST_GUILESS_MAIN(TestGpuTables)
#include "tst_gpu_tables.moc"
