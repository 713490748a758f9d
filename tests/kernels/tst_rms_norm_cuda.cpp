// The CUDA RMSNorm against a CPU reference in double precision, on random rows
// of several shapes. Skips where no GPU is present.
#include "engine/gpu_devices.h"
#include "kernels/math/half.h"
#include "kernels/rms_norm.cuh"

#include <cmath>
#include <cstdint>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <random>
#include <vector>

#include <QTest>

class TestRmsNormCuda : public QObject {
    Q_OBJECT

private slots:
    void initTestCase();
    void matches_cpu_reference_data();
    void matches_cpu_reference();
};

void TestRmsNormCuda::initTestCase() {
    const kvscope::GpuInventory gpus = kvscope::query_gpu_devices();
    if (gpus.devices.empty()) {
        QSKIP(qPrintable("no CUDA GPU here (" + QString::fromStdString(gpus.unavailable_reason) +
                         "): CUDA kernel tests skipped"));
    }
}

void TestRmsNormCuda::matches_cpu_reference_data() {
    QTest::addColumn<int>("rows");
    QTest::addColumn<int>("dim");
    QTest::newRow("one row, SmolLM2 hidden") << 1 << 576;
    QTest::newRow("batch, SmolLM2 hidden") << 37 << 576;
    QTest::newRow("odd dim") << 5 << 333;
    QTest::newRow("wide") << 3 << 4096;
}

void TestRmsNormCuda::matches_cpu_reference() {
    QFETCH(int, rows);
    QFETCH(int, dim);
    const float eps = 1e-5f;
    std::mt19937 rng(1234u + static_cast<unsigned>(rows * dim));
    std::normal_distribution<float> normal(0.0f, 2.0f);
    std::vector<float> x(static_cast<size_t>(rows) * dim), weight(dim);
    for (float& v : x) {
        v = normal(rng);
    }
    for (float& v : weight) {
        v = normal(rng);
    }

    float *d_x = nullptr, *d_w = nullptr, *d_out = nullptr;
    QCOMPARE(cudaMalloc(reinterpret_cast<void**>(&d_x), x.size() * sizeof(float)), cudaSuccess);
    QCOMPARE(cudaMalloc(reinterpret_cast<void**>(&d_w), weight.size() * sizeof(float)),
             cudaSuccess);
    QCOMPARE(cudaMalloc(reinterpret_cast<void**>(&d_out), x.size() * sizeof(float)), cudaSuccess);
    // Poison the output so a kernel that skips elements cannot pass.
    QCOMPARE(cudaMemset(d_out, 0xff, x.size() * sizeof(float)), cudaSuccess);
    QCOMPARE(cudaMemcpy(d_x, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice),
             cudaSuccess);
    QCOMPARE(cudaMemcpy(d_w, weight.data(), weight.size() * sizeof(float), cudaMemcpyHostToDevice),
             cudaSuccess);
    kvscope::kernels::launch_rms_norm(d_x, d_w, d_out, rows, dim, eps, nullptr);
    std::vector<float> out(x.size());
    QCOMPARE(cudaMemcpy(out.data(), d_out, out.size() * sizeof(float), cudaMemcpyDeviceToHost),
             cudaSuccess);
    // The fp16 form the CUDA backend feeds its linear layers: the same norm,
    // rounded to fp16 (the output poisoned first, as above).
    QCOMPARE(cudaMemset(d_out, 0xff, x.size() * sizeof(float)), cudaSuccess);
    kvscope::kernels::launch_rms_norm_half(d_x, d_w, reinterpret_cast<__half*>(d_out), rows, dim,
                                           eps, nullptr);
    std::vector<std::uint16_t> halves(x.size());
    QCOMPARE(cudaMemcpy(halves.data(), d_out, halves.size() * sizeof(std::uint16_t),
                        cudaMemcpyDeviceToHost),
             cudaSuccess);
    for (std::size_t i = 0; i < halves.size(); ++i) {
        QCOMPARE(halves[i], kvscope::fp32_to_fp16(out[i])); // the float result, rounded once
    }
    cudaFree(d_x);
    cudaFree(d_w);
    cudaFree(d_out);

    for (int r = 0; r < rows; ++r) {
        double sum_sq = 0;
        for (int i = 0; i < dim; ++i) {
            sum_sq += double(x[r * dim + i]) * x[r * dim + i];
        }
        const double inv_rms = 1.0 / std::sqrt(sum_sq / dim + eps);
        for (int i = 0; i < dim; ++i) {
            const double expected = x[r * dim + i] * inv_rms * weight[i];
            const double got = out[r * dim + i];
            // fp32 accumulation over up to 4096 terms: a few ulps of relative error.
            QVERIFY2(std::abs(got - expected) <= 1e-5 * (1.0 + std::abs(expected)),
                     qPrintable(QString("row %1 col %2: got %3, expected %4")
                                    .arg(r)
                                    .arg(i)
                                    .arg(got)
                                    .arg(expected)));
        }
    }
}

QTEST_GUILESS_MAIN(TestRmsNormCuda)
#include "tst_rms_norm_cuda.moc"
