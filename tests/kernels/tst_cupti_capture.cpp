// GPU capture end to end on a real GPU: CUPTI records a copy, a memset, an
// allocation, a kernel and the launcher's NVTX range into a recording, on
// the host clock (inside the window the test measured around the work).
// Skips where no GPU is present.
#include "engine/gpu_devices.h"
#include "engine/util/host_clock.h"
#include "kernels/rms_norm.cuh"
#include "profiler/gpu/cupti_tracer.h"
#include "profiler/recording/recorder.h"
#include "profiler/recording/sqlite_util.h"

#include <cuda_runtime_api.h>
#include <sqlite3.h>
#include <vector>

#include <QTemporaryDir>
#include <QTest>

using namespace kvscope;

class TestCuptiCapture : public QObject {
    Q_OBJECT

private slots:
    void initTestCase();
    void records_gpu_activity_on_the_host_clock();
};

void TestCuptiCapture::initTestCase() {
    const GpuInventory gpus = query_gpu_devices();
    if (gpus.devices.empty()) {
        QSKIP(qPrintable("no CUDA GPU here (" + QString::fromStdString(gpus.unavailable_reason) +
                         "): CUPTI capture tests skipped"));
    }
}

void TestCuptiCapture::records_gpu_activity_on_the_host_clock() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("capture.sqlite").toStdString();
    profiler::Recorder recorder(path, {});
    profiler::CuptiTracer::Started started = profiler::CuptiTracer::start(recorder);
    if (started.held_by_another_profiler) { // under compute-sanitizer, say
        QSKIP(started.unavailable_reason.c_str());
    }
    QVERIFY2(started.tracer != nullptr, started.unavailable_reason.c_str());

    const int rows = 64;
    const int dim = 576;
    const std::size_t bytes = static_cast<std::size_t>(rows) * dim * sizeof(float);
    std::vector<float> x(static_cast<std::size_t>(rows) * dim, 1.5f);
    std::vector<float> weight(dim, 0.5f);
    const std::int64_t before = host_now_ns();
    float *d_x = nullptr, *d_w = nullptr, *d_out = nullptr;
    QCOMPARE(cudaMalloc(reinterpret_cast<void**>(&d_x), bytes), cudaSuccess);
    QCOMPARE(cudaMalloc(reinterpret_cast<void**>(&d_w), dim * sizeof(float)), cudaSuccess);
    QCOMPARE(cudaMalloc(reinterpret_cast<void**>(&d_out), bytes), cudaSuccess);
    QCOMPARE(cudaMemset(d_out, 0, bytes), cudaSuccess);
    QCOMPARE(cudaMemcpy(d_x, x.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
    QCOMPARE(cudaMemcpy(d_w, weight.data(), dim * sizeof(float), cudaMemcpyHostToDevice),
             cudaSuccess);
    kernels::launch_rms_norm(d_x, d_w, d_out, rows, dim, 1e-5f, nullptr);
    QCOMPARE(cudaDeviceSynchronize(), cudaSuccess);
    cudaFree(d_x);
    cudaFree(d_w);
    cudaFree(d_out);
    const std::int64_t after = host_now_ns();
    started.tracer->stop();
    recorder.close();

    sqlite3* db = nullptr;
    sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
    const auto integer = [db](const std::string& sql) {
        profiler::Statement s(db, sql.c_str());
        return s.next() ? s.int64(0) : -1;
    };
    const std::string window =
        " BETWEEN " + std::to_string(before) + " AND " + std::to_string(after);
    QCOMPARE(integer("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL AS k JOIN StringIds AS s "
                     "ON s.id = k.shortName WHERE s.value LIKE '%rms_norm%' AND k.start" +
                     window + " AND k.\"end\"" + window),
             1);
    QCOMPARE(integer("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind = 1 AND "
                     "bytes = " +
                     std::to_string(bytes) + " AND start" + window),
             1);
    QCOMPARE(integer("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMSET WHERE bytes = " +
                     std::to_string(bytes)),
             1);
    QVERIFY(integer("SELECT count(*) FROM CUDA_GPU_MEMORY_USAGE_EVENTS WHERE "
                    "memoryOperationType = 1 AND bytes = " +
                    std::to_string(bytes)) >= 1);
    QCOMPARE(integer("SELECT count(*) FROM NVTX_EVENTS AS r JOIN NVTX_EVENTS AS d ON "
                     "d.eventType = 75 AND d.domainId = r.domainId WHERE d.text = 'kvscope' AND "
                     "r.text = 'rms_norm' AND r.start" +
                     window),
             1);
    // The kernel ran inside its launcher's NVTX range... or after it: the
    // launch is asynchronous. It cannot have started before the range.
    QVERIFY(integer("SELECT k.start >= r.start FROM CUPTI_ACTIVITY_KIND_KERNEL AS k, "
                    "NVTX_EVENTS AS r WHERE r.text = 'rms_norm'") == 1);
    sqlite3_close(db);
}

QTEST_GUILESS_MAIN(TestCuptiCapture)
#include "tst_cupti_capture.moc"
