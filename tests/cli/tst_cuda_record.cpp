// `kvscope record --backend cuda` on a GPU: the recording holds CUPTI's
// kernels (ours, by name), copies and memory rows, NVTX ranges, the device
// memory samples, and the timeline's store reads a GPU track per stream.
// Skips where no GPU is present.
#include "engine/gpu_devices.h"
#include "profiler/recording/recording_reader.h"
#include "profiler/store/run_store.h"
#include "tests/support/run_process.h"
#include "tests/support/tiny_model.h"

#include <sqlite3.h>

#include <QTemporaryDir>
#include <QTest>

using kvscope::test::run_process;

namespace {

// The single value `sql` selects, or -1 (and a warning) when it fails.
double scalar(const QString& path, const QString& sql) {
    sqlite3* db = nullptr;
    double value = -1;
    if (sqlite3_open_v2(path.toUtf8().constData(), &db, SQLITE_OPEN_READONLY, nullptr) ==
        SQLITE_OK) {
        sqlite3_stmt* statement = nullptr;
        if (sqlite3_prepare_v2(db, sql.toUtf8().constData(), -1, &statement, nullptr) ==
                SQLITE_OK &&
            sqlite3_step(statement) == SQLITE_ROW) {
            value = sqlite3_column_double(statement, 0);
        } else {
            qWarning("%s: %s", qPrintable(sql), sqlite3_errmsg(db));
        }
        sqlite3_finalize(statement);
    }
    sqlite3_close(db);
    return value;
}

} // namespace

class TestCudaRecord : public QObject {
    Q_OBJECT

private slots:
    void initTestCase();
    void recording_holds_the_gpu_activity();

private:
    QTemporaryDir dir_;
};

void TestCudaRecord::initTestCase() {
    const kvscope::GpuInventory gpus = kvscope::query_gpu_devices();
    if (gpus.devices.empty()) {
        QSKIP(qPrintable("no CUDA GPU here (" + QString::fromStdString(gpus.unavailable_reason) +
                         "): the CUDA recording test skipped"));
    }
    QVERIFY(dir_.isValid());
}

void TestCudaRecord::recording_holds_the_gpu_activity() {
    const QString recording = dir_.filePath("cuda.sqlite");
    // KVSCOPE_CLI: the kvscope beside this suite where it was copied to a GPU
    // machine (scripts/gpu-check.sh --pack), not where it was built.
    const auto recorded = run_process(
        qEnvironmentVariable("KVSCOPE_CLI").isEmpty() ? QString(KVSCOPE_CLI_PATH)
                                                      : qEnvironmentVariable("KVSCOPE_CLI"),
        {"record", "--backend", "cuda", "--gpu-capture", "on", "--model", tiny_model_path(),
         "--workload", "shared-prefix", "--requests", "6", "--max-tokens", "16", "--all-at-once",
         "--seed", "3", "--out", recording});
    QVERIFY2(recorded.exit_code == 0, qPrintable(recorded.err));
    if (recorded.err.contains("another profiler")) { // under compute-sanitizer, say
        QSKIP(qPrintable("CUPTI is held by another profiler: " + recorded.err.trimmed()));
    }

    const auto count = [&](const QString& sql) {
        return scalar(recording, sql);
    };
    QVERIFY(count("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL") > 0);
    // Our kernels, by name (StringIds holds the names CUPTI reported).
    QVERIFY(count("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL AS k JOIN StringIds AS s "
                  "ON s.id = k.shortName WHERE s.value LIKE '%attention_split_kernel%'") > 0);
    // The KV write: its own kernel, or fused with RoPE for 16-bit caches.
    QVERIFY(count("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL AS k JOIN StringIds AS s "
                  "ON s.id = k.shortName WHERE s.value LIKE '%kv_append_kernel%' "
                  "OR s.value LIKE '%rope_kv_write_kernel%'") > 0);
    QVERIFY(count("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY") > 0);
    QVERIFY(count("SELECT count(*) FROM CUDA_GPU_MEMORY_USAGE_EVENTS") > 0);
    QVERIFY(count("SELECT count(*) FROM NVTX_EVENTS") > 0);
    QVERIFY(count("SELECT count(*) FROM KVSCOPE_MEMORY WHERE kind = 'device_memory'") > 0);

    kvscope::profiler::RunStore store;
    kvscope::profiler::load_recording(recording.toStdString(), store);
    QVERIFY(!store.gpu_tracks().empty());
    QVERIFY(store.device_memory().device_total_bytes > 0);
    QVERIFY(store.device_memory().kv_pool_bytes > 0);
}

QTEST_GUILESS_MAIN(TestCudaRecord)
#include "tst_cuda_record.moc"
