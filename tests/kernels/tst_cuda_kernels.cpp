// Every CUDA kernel against the CPU implementation it stands in for, on random
// inputs of several shapes, with every device output poisoned before the
// launch so a kernel that skips elements cannot pass. KV formats: the bytes a
// kernel writes must equal the CPU codec's exactly; attention outputs agree to
// fp32 summation-order error. Skips where no GPU is present.
#include "engine/cpu/kv_store.h"
#include "engine/cpu/ops.h"
#include "engine/cpu/paged_attention.h"
#include "engine/cpu/thread_pool.h"
#include "engine/cuda/query_tiles.h"
#include "engine/gpu_devices.h"
#include "engine/kv/kv_format.h"
#include "engine/runner/captured_attention.h"
#include "engine/runner/forward_batch.h"
#include "engine/sampling/sampler.h"
#include "kernels/activation_overflow.h"
#include "kernels/attention_capture.cuh"
#include "kernels/copy_slots.cuh"
#include "kernels/embedding.cuh"
#include "kernels/gemv.cuh"
#include "kernels/kv_append.cuh"
#include "kernels/launch_overlap.h"
#include "kernels/math/half.h"
#include "kernels/math/paged_slots.h"
#include "kernels/math/rope_math.h"
#include "kernels/paged_attention.cuh"
#include "kernels/residual_add.cuh"
#include "kernels/rms_norm.cuh"
#include "kernels/rope.cuh"
#include "kernels/rope_kv_write.cuh"
#include "kernels/sampling.cuh"
#include "kernels/swiglu.cuh"
#include "kernels/tensor_cores.h"
#include "kernels/tile_attention.cuh"
#include "kernels/tile_gemm.cuh"
#include "kernels/to_half.cuh"
#include "kernels/wide_row_fetch.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime_api.h>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <stdexcept>
#include <tuple>
#include <utility>
#include <vector>

#include <QTest>

using namespace kvscope;
using kv::KvFormat;

Q_DECLARE_METATYPE(kvscope::kv::KvFormat)

namespace {

void cuda_ok(cudaError_t code, const char* what) {
    if (code != cudaSuccess) {
        throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(code));
    }
}

// A device array filled with 0xFF bytes (NaN as floats) until written.
template <typename T>
class DeviceArray {
public:
    explicit DeviceArray(std::size_t count)
        : count_(std::max<std::size_t>(count, 1)) {
        cuda_ok(cudaMalloc(reinterpret_cast<void**>(&data_), count_ * sizeof(T)), "cudaMalloc");
        cuda_ok(cudaMemset(data_, 0xff, count_ * sizeof(T)), "cudaMemset");
    }
    explicit DeviceArray(const std::vector<T>& host)
        : DeviceArray(host.size()) {
        upload(host);
    }
    DeviceArray(const DeviceArray&) = delete;
    DeviceArray& operator=(const DeviceArray&) = delete;
    ~DeviceArray() { cudaFree(data_); }

    T* get() const { return data_; }
    void upload(const std::vector<T>& host) {
        cuda_ok(cudaMemcpy(data_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
                "upload");
    }
    void zero() { cuda_ok(cudaMemset(data_, 0, count_ * sizeof(T)), "cudaMemset"); }
    std::vector<T> download(std::size_t count) const {
        cuda_ok(cudaDeviceSynchronize(), "kernel");
        std::vector<T> host(count);
        cuda_ok(cudaMemcpy(host.data(), data_, count * sizeof(T), cudaMemcpyDeviceToHost),
                "download");
        return host;
    }

private:
    T* data_ = nullptr;
    std::size_t count_ = 0;
};

std::vector<float> random_floats(std::size_t n, std::uint32_t seed, float spread = 1.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, spread);
    std::vector<float> values(n);
    for (float& v : values) {
        v = normal(rng);
    }
    return values;
}

// Largest |a - b| over the largest |b|: the error relative to the output's scale.
double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
    double worst = 0.0;
    double scale = 1e-30;
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (!std::isfinite(a[i])) {
            return INFINITY;
        }
        worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - b[i]));
        scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
    }
    return worst / scale;
}

// One sequence of a test batch: `cached` entries already in the cache, `fresh`
// new tokens this step.
struct SequenceShape {
    int cached;
    int fresh;
};

struct TestGeometry {
    int heads;
    int kv_heads;
    int head_dim;
    int block_size;
    int num_blocks;
};

// The batches that fill a sequence set's cache: `history` writes the cached
// entries, `step` the fresh tokens (the one attention runs over). Blocks are
// taken from a shuffled pool, so tables are not contiguous. With `groups`
// KV groups (a hybrid cache, kv_groups.h) every sequence has a table per
// group, each of blocks of its own: group 0's are taken first, as with one.
struct TestBatches {
    runner::ForwardBatch history;
    runner::ForwardBatch step;
};

TestBatches make_batches(const std::vector<SequenceShape>& shapes, const TestGeometry& g,
                         std::uint32_t seed, std::int32_t capture_from = INT32_MAX,
                         int groups = 1) {
    std::vector<kv::BlockId> pool(static_cast<std::size_t>(g.num_blocks));
    std::iota(pool.begin(), pool.end(), 0);
    std::mt19937 rng(seed);
    std::shuffle(pool.begin(), pool.end(), rng);
    std::size_t next = 0;
    std::vector<kv::SequenceBlocks> blocks(shapes.size());
    std::vector<std::vector<std::int32_t>> history_tokens(shapes.size());
    std::vector<std::vector<std::int32_t>> step_tokens(shapes.size());
    for (kv::SequenceBlocks& sequence : blocks) {
        sequence.set_groups(groups);
    }
    for (int group = 0; group < groups; ++group) {
        for (std::size_t s = 0; s < shapes.size(); ++s) {
            const int total = shapes[s].cached + shapes[s].fresh;
            for (int b = 0; b < (total + g.block_size - 1) / g.block_size; ++b) {
                blocks[s].table(group).push_back(pool.at(next++));
            }
        }
    }
    for (std::size_t s = 0; s < shapes.size(); ++s) {
        history_tokens[s].assign(static_cast<std::size_t>(shapes[s].cached), 1);
        step_tokens[s].assign(static_cast<std::size_t>(shapes[s].fresh), 1);
    }
    TestBatches batches;
    std::vector<runner::SequenceStep> steps;
    for (std::size_t s = 0; s < shapes.size(); ++s) {
        if (shapes[s].cached > 0) {
            runner::SequenceStep step;
            step.blocks = &blocks[s];
            step.tokens = history_tokens[s];
            steps.push_back(step);
        }
    }
    batches.history = runner::build_forward_batch(steps, g.block_size);
    steps.clear();
    for (std::size_t s = 0; s < shapes.size(); ++s) {
        blocks[s].length = shapes[s].cached;
        runner::SequenceStep step;
        step.blocks = &blocks[s];
        step.tokens = step_tokens[s];
        step.capture_attention_from = capture_from;
        steps.push_back(step);
    }
    batches.step = runner::build_forward_batch(steps, g.block_size);
    return batches;
}

// The device copy of a one-layer KV pool, its KIVI open blocks and a batch.
struct DevicePool {
    DevicePool(const cpu::KvStore& store, const TestGeometry& g)
        : keys(static_cast<std::size_t>(plane_bytes(store, true)))
        , values(static_cast<std::size_t>(plane_bytes(store, false)))
        , open(static_cast<std::size_t>(g.num_blocks) * 2 * g.kv_heads * g.block_size * g.head_dim)
        , write_slot(static_cast<std::size_t>(g.num_blocks))
        , read_slot(static_cast<std::size_t>(g.num_blocks)) {
        view.layer = 0;
        view.kv_heads = g.kv_heads;
        view.head_dim = g.head_dim;
        view.block_size = g.block_size;
        view.num_blocks = g.num_blocks;
        const kv::KvCacheFormat format = store.format();
        view.keys = {keys.get(), format.key,
                     kv::kv_head_block_bytes(format.key, g.block_size, g.head_dim, true),
                     kv::kv_row_bytes(format.key, g.head_dim, true)};
        view.values = {values.get(), format.value,
                       kv::kv_head_block_bytes(format.value, g.block_size, g.head_dim, false),
                       kv::kv_row_bytes(format.value, g.head_dim, false)};
        view.open.data = open.get();
        view.open.write_slot = write_slot.get();
        view.open.read_slot = read_slot.get();
        view.open.layers = 1;
        // Open slot b for block b: simple, and every block may be open.
        std::vector<std::int32_t> identity(static_cast<std::size_t>(g.num_blocks));
        std::iota(identity.begin(), identity.end(), 0);
        write_slot.upload(identity);
        read_slot.upload(identity);
    }

    static std::int64_t plane_bytes(const cpu::KvStore& store, bool is_key) {
        const cpu::KvGeometry& g = store.geometry();
        const kv::KvFormat format = is_key ? store.format().key : store.format().value;
        return std::int64_t{g.num_blocks} * g.kv_heads *
               kv::kv_head_block_bytes(format, g.block_size, g.head_dim, is_key);
    }

    // Copies the CPU store's bytes and open blocks (the read slots of blocks
    // without one become -1, as the backend's would).
    void mirror(cpu::KvStore& store) {
        const cpu::LayerKvView layer = store.layer(0);
        const auto copy_plane = [&](const cpu::KvPlane& plane, DeviceArray<std::uint8_t>& dst,
                                    bool is_key) {
            const auto bytes = static_cast<std::size_t>(plane_bytes(store, is_key));
            cuda_ok(cudaMemcpy(dst.get(), plane.data, bytes, cudaMemcpyHostToDevice), "mirror");
        };
        copy_plane(layer.keys, keys, true);
        copy_plane(layer.values, values, false);
        const cpu::KvGeometry& g = store.geometry();
        const std::size_t per_head = static_cast<std::size_t>(g.block_size) * g.head_dim;
        std::vector<float> tiles(static_cast<std::size_t>(g.num_blocks) * 2 * g.kv_heads *
                                 per_head);
        std::vector<std::int32_t> read(static_cast<std::size_t>(g.num_blocks), -1);
        for (int block = 0; block < g.num_blocks; ++block) {
            for (const bool is_key : {true, false}) {
                const float* open_copy = store.open_block(block, 0, is_key);
                if (open_copy == nullptr) {
                    continue;
                }
                read[static_cast<std::size_t>(block)] = block;
                std::copy(open_copy, open_copy + g.kv_heads * per_head,
                          tiles.begin() +
                              static_cast<std::ptrdiff_t>(
                                  (static_cast<std::size_t>(block) * 2 + (is_key ? 0 : 1)) *
                                  g.kv_heads * per_head));
            }
        }
        open.upload(tiles);
        read_slot.upload(read);
    }

    DeviceArray<std::uint8_t> keys;
    DeviceArray<std::uint8_t> values;
    DeviceArray<float> open;
    DeviceArray<std::int32_t> write_slot;
    DeviceArray<std::int32_t> read_slot;
    kernels::PagedKvView view;
};

// A ForwardBatch's arrays on the device.
struct DeviceBatch {
    explicit DeviceBatch(const runner::ForwardBatch& b)
        : token_ids(b.token_ids)
        , positions(b.positions)
        , cache_positions(b.cache_positions)
        , slot_mapping(b.slot_mapping)
        , sequence_of(b.sequence_of)
        , block_table_offsets(b.block_table_offsets)
        , block_tables(b.block_tables)
        , capture_from(b.capture_attention_from)
        , capture_offsets(runner::capture_offsets(b)) {
        view.tokens = static_cast<int>(b.token_count());
        view.sequences = static_cast<int>(b.sequence_count());
        view.token_ids = token_ids.get();
        view.positions = positions.get();
        view.cache_positions = cache_positions.get();
        view.slot_mapping = slot_mapping.get();
        view.sequence_of = sequence_of.get();
        view.block_table_offsets = block_table_offsets.get();
        view.block_tables = block_tables.get();
        view.capture_attention_from = capture_from.get();
        view.capture_offsets = capture_offsets.get();
    }

    DeviceArray<std::int32_t> token_ids, positions, cache_positions, slot_mapping, sequence_of,
        block_table_offsets, block_tables, capture_from;
    DeviceArray<std::int64_t> capture_offsets;
    kernels::DeviceBatchView view;
};

int max_context(const runner::ForwardBatch& b) {
    int longest = 0;
    for (const std::int32_t c : b.cache_positions) {
        longest = std::max(longest, c + 1);
    }
    return longest;
}

std::vector<std::uint8_t> plane_bytes_of(const cpu::KvPlane& plane, std::int64_t bytes) {
    const auto* begin = reinterpret_cast<const std::uint8_t*>(plane.data);
    return {begin, begin + bytes};
}

const std::vector<SequenceShape> kMixedBatch = {
    {0, 37},   // a prefill from nothing
    {700, 1},  // a decode over three attention splits
    {300, 20}, // a chunk over prefix-cached blocks
    {15, 2},   // a decode that fills a block and opens the next
};

// Sliding-window attention (Gemma 3's local layers, windows of 8 and 37
// below): contexts of up to 301 entries, far past either window, cut into
// splits of 32 or 64 entries.
const std::vector<SequenceShape> kWindowBatch = {
    {0, 45},   // a prefill whose first tokens see less than a window
    {300, 1},  // a decode whose window starts inside a block
    {280, 20}, // a chunk whose tokens' windows start in different blocks
    {36, 1},   // a context of 37 entries: exactly one window of 37
    {7, 1},    // a context of 8: exactly one window of 8
    {15, 2},   // a decode that fills a block and opens the next
};

// What a sliding group's tables hold once its blocks have left the window
// (kv_manager.h): kNoBlock for every block of `group`'s tables wholly before
// the first entry any of the sequence's tokens attends, so a kernel that read
// one would read far outside the pool. Returns how many were let go.
int let_go_outside_window(runner::ForwardBatch& batch, int group, int window) {
    int let_go = 0;
    for (std::int64_t s = 0; s < batch.sequence_count(); ++s) {
        std::int32_t first = INT32_MAX;
        for (std::size_t t = 0; t < batch.sequence_of.size(); ++t) {
            if (batch.sequence_of[t] == s) {
                first = std::min(first, math::attended_first(batch.cache_positions[t] + 1, window));
            }
        }
        kv::BlockId* table =
            batch.block_tables.data() +
            static_cast<std::size_t>(group) *
                static_cast<std::size_t>(batch.block_table_offsets.back()) +
            static_cast<std::size_t>(batch.block_table_offsets[static_cast<std::size_t>(s)]);
        for (std::int32_t b = 0; (b + 1) * batch.block_size <= first; ++b) {
            table[b] = kv::kNoBlock;
            ++let_go;
        }
    }
    return let_go;
}

// Writes random K and V for every token of `batches` (the cached entries,
// then the step's) into layer 0 of `store`, in KV group `group`'s slots.
void fill_store(cpu::KvStore& store, const TestBatches& batches, const TestGeometry& g,
                std::uint32_t seed, int group = 0) {
    for (const runner::ForwardBatch* b : {&batches.history, &batches.step}) {
        const auto n = static_cast<std::size_t>(b->token_count()) * g.kv_heads * g.head_dim;
        const std::vector<float> k = random_floats(n, seed + static_cast<unsigned>(n), 2.0f);
        const std::vector<float> v = random_floats(n, seed + 1 + static_cast<unsigned>(n));
        store.write(0, *b, k.data(), v.data(), group);
    }
}

// A workspace for splits of `split` entries over what a query of the batch
// attends: at most `window` entries of a sliding layer (0: the whole context).
struct TestWorkspace {
    TestWorkspace(int tokens, int heads, int head_dim, int context, int window, int split)
        : splits(((window > 0 ? std::min(context, window) : context) + split - 1) / split)
        , scratch(kernels::AttentionWorkspace::floats(tokens, heads, splits, head_dim))
        , workspace(kernels::AttentionWorkspace::carve(scratch.get(), tokens, heads, splits,
                                                       head_dim, split)) {}

    int splits;
    DeviceArray<float> scratch;
    kernels::AttentionWorkspace workspace;
};

} // namespace

class TestCudaKernels : public QObject {
    Q_OBJECT

private slots:
    void initTestCase();
    void elementwise_ops_match_the_cpu();
    void saturated_activations_are_counted();
    void post_norm_and_next_norm_match_the_two_kernels();
    void rms_norm_heads_matches_the_cpu();
    void rms_norm_add_matches_the_cpu();
    void geglu_half_matches_the_cpu();
    void add_bias_matches_the_cpu();
    void rope_matches_the_cpu_data();
    void rope_matches_the_cpu();
    void rope_kv_write_matches_the_cpu_data();
    void rope_kv_write_matches_the_cpu();
    void rope_kv_write_applies_the_qk_norms();
    void gemv_matches_a_double_reference();
    void gated_products_match_the_product_then_the_activation();
    void tile_gemm_matches_a_double_reference_data();
    void tile_gemm_matches_a_double_reference();
    void overlapped_launches_keep_each_kernels_inputs_data();
    void overlapped_launches_keep_each_kernels_inputs();
    void embedding_gather_matches_the_table();
    void kv_append_writes_the_cpu_codec_bytes_data();
    void kv_append_writes_the_cpu_codec_bytes();
    void paged_attention_matches_the_cpu_data();
    void paged_attention_matches_the_cpu();
    void attention_capture_matches_the_cpu_data();
    void attention_capture_matches_the_cpu();
    void windowed_attention_matches_the_cpu_data();
    void windowed_attention_matches_the_cpu();
    void windowed_attention_capture_matches_the_cpu_data();
    void windowed_attention_capture_matches_the_cpu();
    void tiled_attention_matches_the_cpu_data();
    void tiled_attention_matches_the_cpu();
    void attention_reads_the_layers_kv_group_data();
    void attention_reads_the_layers_kv_group();
    void copy_slot_rows_match_the_cpu_store();
    void sampling_matches_the_cpu_sampler();
};

void TestCudaKernels::initTestCase() {
    const GpuInventory gpus = query_gpu_devices();
    if (gpus.devices.empty()) {
        QSKIP(qPrintable("no CUDA GPU here (" + QString::fromStdString(gpus.unavailable_reason) +
                         "): CUDA kernel tests skipped"));
    }
}

void TestCudaKernels::elementwise_ops_match_the_cpu() {
    const std::int64_t n = 100'003; // not a multiple of any block size
    const std::vector<float> a = random_floats(static_cast<std::size_t>(n), 1, 3.0f);
    const std::vector<float> b = random_floats(static_cast<std::size_t>(n), 2);

    std::vector<float> cpu_gate = a;
    cpu::gated_activation(cpu_gate.data(), b.data(), n, model::GateActivation::silu);
    DeviceArray<float> gate(a), up(b);
    kernels::launch_silu_mul(gate.get(), up.get(), n, nullptr);
    QVERIFY(relative_error(gate.download(a.size()), cpu_gate) < 1e-6);

    std::vector<float> cpu_sum = a;
    cpu::add_in_place(cpu_sum.data(), b.data(), n);
    DeviceArray<float> x(a);
    kernels::launch_residual_add(x.get(), up.get(), n, nullptr);
    QCOMPARE(x.download(a.size()), cpu_sum);

    DeviceArray<__half> halves(a.size());
    DeviceArray<float> source(a);
    kernels::launch_to_half(source.get(), halves.get(), n, nullptr);
    const std::vector<__half> got = halves.download(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
        const __half_raw raw = got[i];
        QCOMPARE(raw.x, fp32_to_fp16(a[i])); // both round to nearest even
    }

    // Past fp16's range: the largest finite value, not infinity; NaN stays.
    const std::vector<float> extremes = {1e6f, -1e6f, 65504.0f, 65520.0f, NAN};
    DeviceArray<float> d_extremes(extremes);
    DeviceArray<__half> extreme_halves(extremes.size());
    kernels::launch_to_half(d_extremes.get(), extreme_halves.get(),
                            static_cast<std::int64_t>(extremes.size()), nullptr);
    const std::vector<__half> saturated = extreme_halves.download(extremes.size());
    const std::vector<std::uint16_t> expected_bits = {0x7bff, 0xfbff, 0x7bff, 0x7bff};
    for (std::size_t i = 0; i < expected_bits.size(); ++i) {
        QCOMPARE(static_cast<__half_raw>(saturated[i]).x, expected_bits[i]);
    }
    QVERIFY(std::isnan(fp16_to_fp32(static_cast<__half_raw>(saturated[4]).x)));

    // SwiGLU of the fused gate_up rows into fp16: the CPU's silu_mul, rounded.
    const int gate_tokens = 7, ffn = 1531; // odd widths: rows do not line up with blocks
    std::vector<float> gate_up(static_cast<std::size_t>(gate_tokens) * 2 * ffn);
    std::vector<float> cpu_swiglu;
    for (int t = 0; t < gate_tokens; ++t) {
        for (int j = 0; j < ffn; ++j) {
            const std::size_t at = static_cast<std::size_t>(t) * ffn + j;
            gate_up[static_cast<std::size_t>(t) * 2 * ffn + j] = a[at];
            gate_up[static_cast<std::size_t>(t) * 2 * ffn + ffn + j] = b[at];
            cpu_swiglu.push_back(a[at]);
        }
    }
    cpu::gated_activation(cpu_swiglu.data(), b.data(), static_cast<std::int64_t>(cpu_swiglu.size()),
                          model::GateActivation::silu);
    DeviceArray<float> d_gate_up(gate_up);
    DeviceArray<__half> swiglu(cpu_swiglu.size());
    kernels::launch_gated_half(d_gate_up.get(), gate_tokens, ffn, false, swiglu.get(), nullptr);
    const std::vector<__half> swiglu_got = swiglu.download(cpu_swiglu.size());
    for (std::size_t i = 0; i < cpu_swiglu.size(); ++i) {
        const float got_value = fp16_to_fp32(static_cast<__half_raw>(swiglu_got[i]).x);
        const float want = fp16_to_fp32(fp32_to_fp16(cpu_swiglu[i]));
        // expf may differ in the last place: at most one fp16 step apart.
        QVERIFY2(std::fabs(got_value - want) <= std::fabs(want) * 1e-3f + 1e-6f,
                 qPrintable(QString("value %1: %2 against %3").arg(i).arg(got_value).arg(want)));
    }

    const std::vector<std::int32_t> rows = {5, 0, 99, 5};
    const int width = 1000;
    DeviceArray<std::int32_t> d_rows(rows);
    DeviceArray<float> gathered(rows.size() * width);
    kernels::launch_gather_rows(source.get(), d_rows.get(), static_cast<int>(rows.size()), width,
                                gathered.get(), nullptr);
    const std::vector<float> picked = gathered.download(rows.size() * width);
    for (std::size_t r = 0; r < rows.size(); ++r) {
        for (int i = 0; i < width; ++i) {
            QCOMPARE(picked[r * width + static_cast<std::size_t>(i)],
                     a[static_cast<std::size_t>(rows[r] * width + i)]);
        }
    }
}

void TestCudaKernels::saturated_activations_are_counted() {
    // Values fp16 would round to infinity (|x| >= 65520) are saturated to
    // +-65504 and counted where a counter is set; NaN stays NaN, uncounted.
    const std::vector<float> in{1.0f, 70000.0f, -1e30f,   INFINITY,
                                NAN,  65519.0f, 65520.0f, -65504.0f};
    DeviceArray<float> d_in(in);
    DeviceArray<__half> out(in.size());
    DeviceArray<unsigned int> counter(1);
    counter.zero();
    kernels::launch_to_half(d_in.get(), out.get(), static_cast<std::int64_t>(in.size()), nullptr);
    QCOMPARE(counter.download(1)[0], 0u); // no scope: counted nowhere
    {
        const kernels::ActivationOverflowScope scope(counter.get());
        kernels::launch_to_half(d_in.get(), out.get(), static_cast<std::int64_t>(in.size()),
                                nullptr);
    }
    QCOMPARE(counter.download(1)[0], 4u);
    const std::vector<__half> got = out.download(in.size());
    QCOMPARE(static_cast<float>(got[1]), 65504.0f);
    QCOMPARE(static_cast<float>(got[2]), -65504.0f);
    QCOMPARE(static_cast<float>(got[3]), 65504.0f);
    QVERIFY(std::isnan(static_cast<float>(got[4])));
    QCOMPARE(static_cast<float>(got[5]), 65504.0f);

    // The RMSNorm and the gated activation into fp16 count theirs too: rows
    // of ones under a norm weight of 1e6, and silu(1000) * 1000, are 1e6
    // each, every one past the range.
    const int dim = 64;
    DeviceArray<float> d_x(std::vector<float>(dim, 1.0f));
    DeviceArray<float> d_weight(std::vector<float>(dim, 1e6f));
    DeviceArray<float> d_gate_up(std::vector<float>(2 * dim, 1e3f));
    DeviceArray<__half> normed(dim), gated(dim);
    counter.zero();
    {
        const kernels::ActivationOverflowScope scope(counter.get());
        kernels::launch_rms_norm_half(d_x.get(), d_weight.get(), normed.get(), 1, dim, 1e-6f,
                                      nullptr);
        kernels::launch_gated_half(d_gate_up.get(), 1, dim, false, gated.get(), nullptr);
    }
    QCOMPARE(counter.download(1)[0], static_cast<unsigned int>(2 * dim));
    QCOMPARE(static_cast<float>(normed.download(dim)[0]), 65504.0f);
    QCOMPARE(static_cast<float>(gated.download(dim)[0]), 65504.0f);
}

// Gemma 3's post-attention norm into the residual stream and its pre-FFN
// norm in one kernel (launch_rms_norm_add_then_half) against the two
// kernels: the same residual and fp16 bits, the same saturated count, at
// Gemma 3 270M's width and one no multiple of a block's threads, with a next
// norm weight that saturates some values.
void TestCudaKernels::post_norm_and_next_norm_match_the_two_kernels() {
    for (const int dim : {640, 333, 96}) { // 96: threads with no values
        const int rows = 7;
        const std::size_t n = static_cast<std::size_t>(rows) * dim;
        const std::vector<float> h = random_floats(n, 91, 3.0f);
        const std::vector<float> x = random_floats(n, 92, 2.0f);
        DeviceArray<float> post(random_floats(static_cast<std::size_t>(dim), 93));
        DeviceArray<float> next(random_floats(static_cast<std::size_t>(dim), 94, 3e4f));
        DeviceArray<float> d_h(h), x_apart(x), x_fused(x);
        DeviceArray<__half> out_apart(n), out_fused(n);
        DeviceArray<unsigned int> apart_count(1), fused_count(1);
        apart_count.zero();
        fused_count.zero();
        {
            const kernels::ActivationOverflowScope scope(apart_count.get());
            kernels::launch_rms_norm_add(d_h.get(), post.get(), x_apart.get(), rows, dim, 1e-6f,
                                         nullptr);
            kernels::launch_rms_norm_half(x_apart.get(), next.get(), out_apart.get(), rows, dim,
                                          1e-6f, nullptr);
        }
        {
            const kernels::ActivationOverflowScope scope(fused_count.get());
            kernels::launch_rms_norm_add_then_half(d_h.get(), post.get(), x_fused.get(), next.get(),
                                                   out_fused.get(), rows, dim, 1e-6f, nullptr);
        }
        const std::vector<float> x_got = x_fused.download(n);
        const std::vector<float> x_want = x_apart.download(n);
        QVERIFY(std::memcmp(x_got.data(), x_want.data(), n * sizeof(float)) == 0); // bits
        const std::vector<__half> got = out_fused.download(n);
        const std::vector<__half> want = out_apart.download(n);
        for (std::size_t i = 0; i < n; ++i) {
            QCOMPARE(static_cast<__half_raw>(got[i]).x, static_cast<__half_raw>(want[i]).x);
        }
        const unsigned int saturated = apart_count.download(1)[0];
        QVERIFY(saturated > 0); // the next weight's scale passes fp16's range
        QCOMPARE(fused_count.download(1)[0], saturated);
    }
}

void TestCudaKernels::rms_norm_heads_matches_the_cpu() {
    // Qwen 3's QK norms (groups of 2 and 4 at 128), Gemma 3's MQA at 256, and
    // heads of no multiple of a warp's 32 values.
    for (const auto& [heads, kv_heads, head_dim] : std::vector<std::tuple<int, int, int>>{
             {16, 8, 128}, {4, 1, 256}, {9, 3, 64}, {6, 2, 80}}) {
        const int tokens = 37; // rows of heads not a multiple of a block's 4
        const float eps = 1e-6f;
        const std::int64_t stride = std::int64_t{heads + 2 * kv_heads} * head_dim;
        const std::vector<float> qkv =
            random_floats(static_cast<std::size_t>(tokens * stride), 70, 2.0f);
        const std::vector<float> q_weight = random_floats(static_cast<std::size_t>(head_dim), 71);
        const std::vector<float> k_weight = random_floats(static_cast<std::size_t>(head_dim), 72);
        // The CPU: each token's Q heads, then its K heads, as rows of head_dim.
        std::vector<float> cpu_qkv = qkv;
        for (int t = 0; t < tokens; ++t) {
            float* q = cpu_qkv.data() + t * stride;
            float* k = q + std::int64_t{heads} * head_dim;
            cpu::rms_norm(q, q_weight.data(), q, heads, head_dim, eps);
            cpu::rms_norm(k, k_weight.data(), k, kv_heads, head_dim, eps);
        }
        // The device: in place on the fused QKV rows, K at offset heads * head_dim.
        DeviceArray<float> d_qkv(qkv), d_q_weight(q_weight), d_k_weight(k_weight);
        kernels::launch_rms_norm_heads(d_qkv.get(), d_q_weight.get(), tokens, heads, head_dim,
                                       stride, eps, nullptr);
        kernels::launch_rms_norm_heads(d_qkv.get() + std::int64_t{heads} * head_dim,
                                       d_k_weight.get(), tokens, kv_heads, head_dim, stride, eps,
                                       nullptr);
        const std::vector<float> got = d_qkv.download(qkv.size());
        // fp32 sums in another order and rsqrtf: a few units in the last place.
        const double error = relative_error(got, cpu_qkv);
        QVERIFY2(error < 1e-5, qPrintable(QString("%1 heads of %2, %3 KV heads: relative error %4")
                                              .arg(heads)
                                              .arg(head_dim)
                                              .arg(kv_heads)
                                              .arg(error)));
        // V is left as it was.
        for (int t = 0; t < tokens; ++t) {
            const std::int64_t v = t * stride + std::int64_t{heads + kv_heads} * head_dim;
            QVERIFY(std::equal(got.begin() + v, got.begin() + v + std::int64_t{kv_heads} * head_dim,
                               qkv.begin() + v));
        }
    }
}

void TestCudaKernels::rms_norm_add_matches_the_cpu() {
    // Gemma 3 1B's width, and one no multiple of the block's 256 threads.
    for (const int dim : {1152, 1000}) {
        const int rows = 7;
        const float eps = 1e-6f;
        const auto n = static_cast<std::size_t>(rows) * dim;
        const std::vector<float> h = random_floats(n, 73, 3.0f);
        const std::vector<float> weight = random_floats(static_cast<std::size_t>(dim), 74);
        const std::vector<float> x = random_floats(n, 75);
        // The CPU: the post-norm into a buffer, then the residual add.
        std::vector<float> normed(n), cpu_x = x;
        cpu::rms_norm(h.data(), weight.data(), normed.data(), rows, dim, eps);
        cpu::add_in_place(cpu_x.data(), normed.data(), static_cast<std::int64_t>(n));
        DeviceArray<float> d_h(h), d_weight(weight), d_x(x);
        kernels::launch_rms_norm_add(d_h.get(), d_weight.get(), d_x.get(), rows, dim, eps, nullptr);
        const double error = relative_error(d_x.download(n), cpu_x);
        QVERIFY2(error < 1e-5,
                 qPrintable(QString("width %1: relative error %2").arg(dim).arg(error)));
        QVERIFY(d_h.download(n) == h); // the layer's output is only read
    }
}

void TestCudaKernels::geglu_half_matches_the_cpu() {
    // GeGLU of the fused gate_up rows into fp16: the CPU's gated_activation
    // with gelu_tanh, rounded (as the SwiGLU check in elementwise_ops).
    const int tokens = 7, ffn = 1531; // odd widths: rows do not line up with blocks
    const auto n = static_cast<std::size_t>(tokens) * ffn;
    const std::vector<float> gate = random_floats(n, 76, 3.0f);
    const std::vector<float> up = random_floats(n, 77);
    std::vector<float> gate_up(2 * n);
    for (int t = 0; t < tokens; ++t) {
        for (int j = 0; j < ffn; ++j) {
            const std::size_t at = static_cast<std::size_t>(t) * ffn + j;
            gate_up[static_cast<std::size_t>(t) * 2 * ffn + j] = gate[at];
            gate_up[static_cast<std::size_t>(t) * 2 * ffn + ffn + j] = up[at];
        }
    }
    std::vector<float> cpu_geglu = gate;
    cpu::gated_activation(cpu_geglu.data(), up.data(), static_cast<std::int64_t>(n),
                          model::GateActivation::gelu_tanh);
    DeviceArray<float> d_gate_up(gate_up);
    DeviceArray<__half> geglu(n);
    kernels::launch_gated_half(d_gate_up.get(), tokens, ffn, /*gelu_tanh=*/true, geglu.get(),
                               nullptr);
    const std::vector<__half> got = geglu.download(n);
    for (std::size_t i = 0; i < n; ++i) {
        const float got_value = fp16_to_fp32(static_cast<__half_raw>(got[i]).x);
        const float want = fp16_to_fp32(fp32_to_fp16(cpu_geglu[i]));
        // At most one fp16 step apart (tanhf and the cubic's contraction may
        // differ in the last place), plus where 1 + tanh cancels (gates near
        // -4) a few fp32 units of 1 times |gate * up| / 2.
        const float slack = std::fabs(want) * 1e-3f + 1e-6f * (1.0f + std::fabs(gate[i] * up[i]));
        QVERIFY2(std::fabs(got_value - want) <= slack,
                 qPrintable(QString("value %1 (gate %2, up %3): %4 against %5")
                                .arg(i)
                                .arg(gate[i])
                                .arg(up[i])
                                .arg(got_value)
                                .arg(want)));
    }
}

void TestCudaKernels::add_bias_matches_the_cpu() {
    // Qwen 2's QKV bias over the fused rows: one add per value, exactly the CPU's.
    const int rows = 7, width = 1531;
    const std::vector<float> x = random_floats(static_cast<std::size_t>(rows) * width, 78, 3.0f);
    const std::vector<float> bias = random_floats(static_cast<std::size_t>(width), 79);
    std::vector<float> cpu_x = x;
    cpu::add_bias(cpu_x.data(), bias.data(), rows, width);
    DeviceArray<float> d_x(x), d_bias(bias);
    kernels::launch_add_bias(d_x.get(), d_bias.get(), rows, width, nullptr);
    QCOMPARE(d_x.download(x.size()), cpu_x);
}

void TestCudaKernels::rope_matches_the_cpu_data() {
    QTest::addColumn<int>("head_dim");
    QTest::addColumn<bool>("halves");
    QTest::addColumn<float>("theta_base");
    QTest::addColumn<bool>("divided");
    QTest::newRow("adjacent, d64") << 64 << false << 100000.0f << false;
    QTest::newRow("adjacent, d128") << 128 << false << 100000.0f << false;
    // NEOX pairing (i, i + head_dim/2): Qwen's base of 1e6, Gemma 3's head of
    // 256 with its local layers' base of 1e4.
    QTest::newRow("halves, d64") << 64 << true << 1000000.0f << false;
    QTest::newRow("halves, d256") << 256 << true << 10000.0f << false;
    // Llama 3's scaled RoPE: each pair's frequency divided (rope_freqs).
    QTest::newRow("adjacent, d64, divisors") << 64 << false << 500000.0f << true;
}

namespace {

// Per-pair RoPE frequency divisors from 1 to 8, as Llama 3's rope_freqs
// spreads them.
std::vector<float> test_rope_divisors(int head_dim) {
    const int pairs = head_dim / 2;
    std::vector<float> divisors(static_cast<std::size_t>(pairs));
    for (int i = 0; i < pairs; ++i) {
        divisors[static_cast<std::size_t>(i)] = 1.0f + 7.0f * static_cast<float>(i) / (pairs - 1);
    }
    return divisors;
}

} // namespace

void TestCudaKernels::rope_matches_the_cpu() {
    QFETCH(int, head_dim);
    QFETCH(bool, halves);
    QFETCH(float, theta_base);
    QFETCH(bool, divided);
    const std::vector<float> divisors =
        divided ? test_rope_divisors(head_dim) : std::vector<float>{};
    const float* host_divisors = divided ? divisors.data() : nullptr;
    const int tokens = 29, heads = 9, kv_heads = 3;
    std::vector<std::int32_t> positions(tokens);
    for (int t = 0; t < tokens; ++t) {
        positions[static_cast<std::size_t>(t)] = t * 283; // up to ~8k
    }
    const std::vector<float> q = random_floats(std::size_t{tokens} * heads * head_dim, 3);
    const std::vector<float> k = random_floats(std::size_t{tokens} * kv_heads * head_dim, 4);
    std::vector<float> cos(std::size_t{tokens} * head_dim / 2), sin(cos.size());
    cpu::rope_tables(positions.data(), tokens, head_dim, theta_base, host_divisors, cos.data(),
                     sin.data());
    const model::RopePairing pairing =
        halves ? model::RopePairing::halves : model::RopePairing::adjacent;
    std::vector<float> cpu_q = q, cpu_k = k;
    cpu::rope(cpu_q.data(), cos.data(), sin.data(), tokens, heads, head_dim, pairing);
    cpu::rope(cpu_k.data(), cos.data(), sin.data(), tokens, kv_heads, head_dim, pairing);
    DeviceArray<float> d_q(q), d_k(k);
    DeviceArray<std::int32_t> d_positions(positions);
    DeviceArray<float> d_divisors(divided ? divisors : std::vector<float>{1.0f});
    kernels::launch_rope(d_q.get(), d_k.get(), d_positions.get(), tokens, heads, kv_heads, head_dim,
                         theta_base, divided ? d_divisors.get() : nullptr, halves, nullptr);
    // Same angles (shared code, double precision); fma contraction may differ.
    QVERIFY(relative_error(d_q.download(q.size()), cpu_q) < 1e-6);
    QVERIFY(relative_error(d_k.download(k.size()), cpu_k) < 1e-6);
}

void TestCudaKernels::rope_kv_write_matches_the_cpu_data() {
    QTest::addColumn<KvFormat>("format");
    QTest::addColumn<int>("head_dim");
    QTest::addColumn<int>("table_positions");
    QTest::addColumn<bool>("halves");
    QTest::addColumn<bool>("divided"); // Llama 3's per-pair divisors
    QTest::newRow("f16, d64") << KvFormat::f16 << 64 << 8192 << false << false;
    QTest::newRow("bf16, d128") << KvFormat::bf16 << 128 << 8192 << false << false;
    // Positions past the table: the kernel computes their angles itself.
    QTest::newRow("f16, d64, short table") << KvFormat::f16 << 64 << 1000 << false << false;
    // NEOX pairing (Qwen, Gemma): a thread's two pairs (2i, 2i+1) and their
    // partners d/2 on, at the smallest head the kernel pairs so, Qwen's 128
    // and Gemma 3's 256.
    QTest::newRow("f16, d32, halves") << KvFormat::f16 << 32 << 8192 << true << false;
    QTest::newRow("bf16, d32, halves") << KvFormat::bf16 << 32 << 8192 << true << false;
    QTest::newRow("f16, d128, halves") << KvFormat::f16 << 128 << 8192 << true << false;
    QTest::newRow("bf16, d128, halves") << KvFormat::bf16 << 128 << 8192 << true << false;
    QTest::newRow("f16, d256, halves") << KvFormat::f16 << 256 << 8192 << true << false;
    QTest::newRow("bf16, d256, halves") << KvFormat::bf16 << 256 << 8192 << true << false;
    QTest::newRow("bf16, d128, halves, short table")
        << KvFormat::bf16 << 128 << 1000 << true << false;
    // Both from the table and past it (computed in the kernel).
    QTest::newRow("f16, d64, short table, divisors")
        << KvFormat::f16 << 64 << 1000 << false << true;
}

void TestCudaKernels::rope_kv_write_matches_the_cpu() {
    QFETCH(KvFormat, format);
    QFETCH(int, head_dim);
    QFETCH(int, table_positions);
    QFETCH(bool, halves);
    QFETCH(bool, divided);
    const std::vector<float> divisors =
        divided ? test_rope_divisors(head_dim) : std::vector<float>{};
    const float* host_divisors = divided ? divisors.data() : nullptr;
    const model::RopePairing pairing =
        halves ? model::RopePairing::halves : model::RopePairing::adjacent;
    const int heads = 9;
    const TestGeometry g{heads, 3, head_dim, 16, 64};
    const TestBatches batches = make_batches({{0, 37}, {0, 16}, {0, 5}, {0, 70}}, g, 21);
    runner::ForwardBatch batch = batches.step;
    const auto tokens = static_cast<int>(batch.token_count());
    for (int t = 0; t < tokens; ++t) { // positions up to ~8k, a few past the short table
        batch.positions[static_cast<std::size_t>(t)] = t * 61;
    }
    const std::size_t kv_values = static_cast<std::size_t>(tokens) * g.kv_heads * head_dim;
    const std::vector<float> q =
        random_floats(static_cast<std::size_t>(tokens) * heads * head_dim, 22, 2.0f);
    const std::vector<float> k = random_floats(kv_values, 23, 2.0f);
    const std::vector<float> v = random_floats(kv_values, 24);

    // The CPU: RoPE on Q and K, then the store's write.
    std::vector<float> cos(static_cast<std::size_t>(tokens) * head_dim / 2), sin(cos.size());
    cpu::rope_tables(batch.positions.data(), tokens, head_dim, 100000.0f, host_divisors, cos.data(),
                     sin.data());
    std::vector<float> cpu_q = q, cpu_k = k;
    cpu::rope(cpu_q.data(), cos.data(), sin.data(), tokens, heads, head_dim, pairing);
    cpu::rope(cpu_k.data(), cos.data(), sin.data(), tokens, g.kv_heads, head_dim, pairing);
    cpu::KvStore store({1, g.kv_heads, head_dim, g.block_size, g.num_blocks}, {format, format});
    store.write(0, batch, cpu_k.data(), v.data());

    DevicePool pool(store, g);
    pool.keys.zero();
    pool.values.zero();
    QVERIFY(kernels::rope_kv_write_fits(pool.view, halves));
    // Halves pairing stores two whole pairs a thread: head_dim a multiple of 4.
    kernels::PagedKvView odd_head = pool.view;
    odd_head.head_dim = 34;
    QVERIFY(kernels::rope_kv_write_fits(odd_head, false));
    QVERIFY(!kernels::rope_kv_write_fits(odd_head, true));
    DeviceBatch d_batch(batch);
    // The fused QKV layer's rows: each token's Q heads, then K, then V.
    const std::size_t q_row = static_cast<std::size_t>(heads) * head_dim;
    const std::size_t kv_row = static_cast<std::size_t>(g.kv_heads) * head_dim;
    std::vector<float> qkv;
    for (int t = 0; t < tokens; ++t) {
        const auto at = static_cast<std::ptrdiff_t>(t);
        qkv.insert(qkv.end(), q.begin() + at * static_cast<std::ptrdiff_t>(q_row),
                   q.begin() + (at + 1) * static_cast<std::ptrdiff_t>(q_row));
        qkv.insert(qkv.end(), k.begin() + at * static_cast<std::ptrdiff_t>(kv_row),
                   k.begin() + (at + 1) * static_cast<std::ptrdiff_t>(kv_row));
        qkv.insert(qkv.end(), v.begin() + at * static_cast<std::ptrdiff_t>(kv_row),
                   v.begin() + (at + 1) * static_cast<std::ptrdiff_t>(kv_row));
    }
    DeviceArray<float> d_qkv(qkv), d_q(q.size());
    const std::vector<math::RopeCosSin> angles =
        kernels::rope_table(table_positions, head_dim, 100000.0f, host_divisors);
    DeviceArray<math::RopeCosSin> d_angles(angles);
    DeviceArray<float> d_divisors(divided ? divisors : std::vector<float>{1.0f});
    kernels::RopeTableView table{d_angles.get(), table_positions, head_dim, 100000.0f,
                                 divided ? d_divisors.get() : nullptr};
    kernels::launch_rope_kv_write(pool.view, d_qkv.get(), d_q.get(), d_batch.view.positions,
                                  d_batch.view.slot_mapping, table, tokens, heads, halves, nullptr);
    QVERIFY(relative_error(d_q.download(q.size()), cpu_q) < 1e-6);
    // V is stored as it came: the CPU's bytes exactly. K went through the
    // rotation (products rounded alike, but the CPU compiler may contract):
    // equal bytes, or a last-place difference of the 16-bit value.
    const cpu::LayerKvView layer = store.layer(0);
    const std::int64_t key_bytes = DevicePool::plane_bytes(store, true);
    const std::int64_t value_bytes = DevicePool::plane_bytes(store, false);
    QVERIFY(pool.values.download(static_cast<std::size_t>(value_bytes)) ==
            plane_bytes_of(layer.values, value_bytes));
    const std::vector<std::uint8_t> got = pool.keys.download(static_cast<std::size_t>(key_bytes));
    const std::vector<std::uint8_t> want = plane_bytes_of(layer.keys, key_bytes);
    int different = 0;
    for (std::size_t i = 0; i + 1 < got.size(); i += 2) {
        const int a = got[i] | (got[i + 1] << 8);
        const int b = want[i] | (want[i + 1] << 8);
        QVERIFY2(
            std::abs(a - b) <= 1,
            qPrintable(QString("key half %1: %2 against the CPU's %3").arg(i / 2).arg(a).arg(b)));
        different += a != b ? 1 : 0;
    }
    QVERIFY2(different * 1000 <= static_cast<int>(got.size() / 2),
             qPrintable(QString("%1 key values differ in the last place").arg(different)));
    QVERIFY(d_qkv.download(qkv.size()) == qkv); // the layer's output is left as it was
}

// Qwen 3's and Gemma 3's QK norms inside the RoPE kernel against the norm
// kernel in place then the plain RoPE kernel: the same Q bits and the same
// pool bytes, with the layer's output left as it was, at head_dim 128
// (Qwen 3) and 256 (Gemma 3, a single KV head), both pairings.
void TestCudaKernels::rope_kv_write_applies_the_qk_norms() {
    struct Case {
        int heads;
        int kv_heads;
        int head_dim;
        bool halves;
    };
    struct Cache {
        KvFormat format;
        float eps; // a large one too: an eps dropped or misplaced must show
    };
    for (const auto& [c, cache] : {std::pair{Case{16, 8, 128, true}, Cache{KvFormat::bf16, 1e-6f}},
                                   {Case{4, 1, 256, true}, Cache{KvFormat::f16, 1.0f}},
                                   {Case{9, 3, 64, false}, Cache{KvFormat::f16, 1e-6f}}}) {
        const TestGeometry g{c.heads, c.kv_heads, c.head_dim, 16, 64};
        const TestBatches batches = make_batches({{0, 37}, {0, 5}}, g, 31);
        const runner::ForwardBatch& batch = batches.step;
        const auto tokens = static_cast<int>(batch.token_count());
        const std::int64_t stride = std::int64_t{c.heads + 2 * c.kv_heads} * c.head_dim;
        const std::vector<float> qkv =
            random_floats(static_cast<std::size_t>(tokens * stride), 32, 3.0f);
        const std::vector<float> q_weight = random_floats(static_cast<std::size_t>(c.head_dim), 33);
        const std::vector<float> k_weight = random_floats(static_cast<std::size_t>(c.head_dim), 34);
        const float eps = cache.eps;
        cpu::KvStore store({1, c.kv_heads, c.head_dim, g.block_size, g.num_blocks},
                           {cache.format, cache.format});
        DeviceBatch d_batch(batch);
        const std::vector<math::RopeCosSin> angles =
            kernels::rope_table(256, c.head_dim, 1000000.0f, nullptr);
        DeviceArray<math::RopeCosSin> d_angles(angles);
        const kernels::RopeTableView table{d_angles.get(), 256, c.head_dim, 1000000.0f, nullptr};
        DeviceArray<float> d_q_weight(q_weight), d_k_weight(k_weight);
        const std::size_t q_values = static_cast<std::size_t>(tokens) * c.heads * c.head_dim;
        const auto key_bytes = static_cast<std::size_t>(DevicePool::plane_bytes(store, true));
        const auto value_bytes = static_cast<std::size_t>(DevicePool::plane_bytes(store, false));

        // Apart: the norms in place on a copy of the layer's output, then RoPE.
        DevicePool apart(store, g);
        apart.keys.zero();
        apart.values.zero();
        DeviceArray<float> normed_qkv(qkv), q_apart(q_values);
        kernels::launch_rms_norm_heads(normed_qkv.get(), d_q_weight.get(), tokens, c.heads,
                                       c.head_dim, stride, eps, nullptr);
        kernels::launch_rms_norm_heads(normed_qkv.get() + std::int64_t{c.heads} * c.head_dim,
                                       d_k_weight.get(), tokens, c.kv_heads, c.head_dim, stride,
                                       eps, nullptr);
        kernels::launch_rope_kv_write(apart.view, normed_qkv.get(), q_apart.get(),
                                      d_batch.view.positions, d_batch.view.slot_mapping, table,
                                      tokens, c.heads, c.halves, nullptr);
        // Fused: one kernel over the layer's output as it is.
        DevicePool fused(store, g);
        fused.keys.zero();
        fused.values.zero();
        DeviceArray<float> d_qkv(qkv), q_fused(q_values);
        kernels::launch_rope_kv_write(fused.view, d_qkv.get(), q_fused.get(),
                                      d_batch.view.positions, d_batch.view.slot_mapping, table,
                                      tokens, c.heads, c.halves, nullptr,
                                      {d_q_weight.get(), d_k_weight.get(), eps});
        const QString shape =
            QString("heads %1/%2, head_dim %3").arg(c.heads).arg(c.kv_heads).arg(c.head_dim);
        QVERIFY2(q_fused.download(q_values) == q_apart.download(q_values), qPrintable(shape));
        QVERIFY2(fused.keys.download(key_bytes) == apart.keys.download(key_bytes),
                 qPrintable(shape));
        QVERIFY2(fused.values.download(value_bytes) == apart.values.download(value_bytes),
                 qPrintable(shape));
        QVERIFY(d_qkv.download(qkv.size()) == qkv);
        // The norms changed the values (a kernel that skipped them would
        // not match the normed path, but check the test's premise too).
        QVERIFY(normed_qkv.download(qkv.size()) != qkv);
    }
    // One weight without the other is refused.
    const TestGeometry g{4, 1, 64, 16, 64};
    cpu::KvStore store({1, 1, 64, 16, 64}, {KvFormat::f16, KvFormat::f16});
    DevicePool pool(store, g);
    DeviceArray<float> weight(std::vector<float>(64, 1.0f));
    const kernels::RopeTableView table{nullptr, 0, 64, 10000.0f, nullptr};
    QVERIFY_THROWS_EXCEPTION(
        std::invalid_argument,
        kernels::launch_rope_kv_write(pool.view, weight.get(), weight.get(), nullptr, nullptr,
                                      table, 1, 4, false, nullptr, {weight.get(), nullptr, 1e-6f}));
    // More Q and K heads than the kernel keeps norms for.
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                             kernels::launch_rope_kv_write(pool.view, weight.get(), weight.get(),
                                                           nullptr, nullptr, table, 1,
                                                           kernels::kMaxNormedHeads, false, nullptr,
                                                           {weight.get(), weight.get(), 1e-6f}));
}

namespace {

// `floats` rounded to fp16, and the values the halves hold, in double.
std::vector<__half> fp16_values(const std::vector<float>& floats, std::vector<double>& values) {
    std::vector<__half> halves(floats.size());
    values.resize(floats.size());
    for (std::size_t i = 0; i < floats.size(); ++i) {
        __half_raw raw;
        raw.x = fp32_to_fp16(floats[i]);
        halves[i] = __half(raw);
        values[i] = fp16_to_fp32(raw.x);
    }
    return halves;
}

// A linear layer's products in double: y = x w^T (`product`), and y added to
// `start` (`sum`), each (tokens, rows), rounded to fp32.
struct LinearReference {
    std::vector<float> product;
    std::vector<float> sum;
};
LinearReference linear_reference(const std::vector<double>& w, const std::vector<double>& x,
                                 const std::vector<float>& start, int tokens, int rows, int cols) {
    LinearReference r{std::vector<float>(start.size()), std::vector<float>(start.size())};
    for (int t = 0; t < tokens; ++t) {
        for (int row = 0; row < rows; ++row) {
            double dot = 0.0;
            for (int c = 0; c < cols; ++c) {
                dot += w[static_cast<std::size_t>(row) * cols + c] *
                       x[static_cast<std::size_t>(t) * cols + c];
            }
            const std::size_t at = static_cast<std::size_t>(t) * rows + row;
            r.product[at] = static_cast<float>(dot);
            r.sum[at] = static_cast<float>(start[at] + dot);
        }
    }
    return r;
}

} // namespace

void TestCudaKernels::gemv_matches_a_double_reference() {
    const int rows = 963, cols = 576; // rows not a multiple of a block's four
    std::vector<double> w_values;
    const std::vector<__half> w =
        fp16_values(random_floats(static_cast<std::size_t>(rows) * cols, 31), w_values);
    DeviceArray<__half> d_w(w);
    QVERIFY(!kernels::gemv_fits(d_w.get(), d_w.get(), 9, cols)); // too many tokens
    QVERIFY(!kernels::gemv_fits(d_w.get(), d_w.get(), 1, 100));  // width not a multiple of 8
    for (int tokens = 1; tokens <= kernels::kGemvMaxTokens; ++tokens) {
        std::vector<double> x_values;
        const std::vector<__half> x = fp16_values(
            random_floats(static_cast<std::size_t>(tokens) * cols, 40 + tokens), x_values);
        const std::vector<float> start = random_floats(static_cast<std::size_t>(tokens) * rows, 50);
        const LinearReference want =
            linear_reference(w_values, x_values, start, tokens, rows, cols);
        DeviceArray<__half> d_x(x);
        QVERIFY(kernels::gemv_fits(d_w.get(), d_x.get(), tokens, cols));
        DeviceArray<float> y(start.size()); // poisoned: every output must be written
        kernels::launch_gemv(d_w.get(), rows, cols, d_x.get(), tokens, y.get(), false, nullptr);
        const double set_error = relative_error(y.download(start.size()), want.product);
        DeviceArray<float> accumulated(start);
        kernels::launch_gemv(d_w.get(), rows, cols, d_x.get(), tokens, accumulated.get(), true,
                             nullptr);
        const double add_error = relative_error(accumulated.download(start.size()), want.sum);
        // fp32 sums of 576 products: a few units in the last place.
        QVERIFY2(set_error < 1e-5 && add_error < 1e-5,
                 qPrintable(QString("%1 tokens: relative error %2, accumulating %3")
                                .arg(tokens)
                                .arg(set_error)
                                .arg(add_error)));
        // A bias in the epilogue: the bits of the product then launch_add_bias.
        DeviceArray<float> bias(random_floats(static_cast<std::size_t>(rows), 57));
        DeviceArray<float> biased(start.size()), then_added(start.size());
        kernels::launch_gemv(d_w.get(), rows, cols, d_x.get(), tokens, biased.get(), false, nullptr,
                             bias.get());
        kernels::launch_gemv(d_w.get(), rows, cols, d_x.get(), tokens, then_added.get(), false,
                             nullptr);
        kernels::launch_add_bias(then_added.get(), bias.get(), tokens, rows, nullptr);
        QVERIFY(biased.download(start.size()) == then_added.download(start.size()));
    }
}

void TestCudaKernels::tile_gemm_matches_a_double_reference_data() {
    QTest::addColumn<int>("tokens");
    QTest::addColumn<int>("rows");
    QTest::addColumn<int>("cols");
    // Every tile count (1 to 4 of 16 tokens), partial tiles, SmolLM2's
    // shapes (QKV 960 x 576, down 576 x 1536), rows no multiple of 8 and
    // inputs of fewer slices than a block has warps.
    QTest::newRow("9 tokens, QKV") << 9 << 960 << 576;
    QTest::newRow("16 tokens, 963 rows") << 16 << 963 << 576;
    QTest::newRow("17 tokens, down") << 17 << 576 << 1536;
    QTest::newRow("32 tokens, gate/up") << 32 << 3072 << 576;
    QTest::newRow("45 tokens, 5 rows") << 45 << 5 << 576;
    QTest::newRow("64 tokens, 3 slices") << 64 << 100 << 96;
    QTest::newRow("1 token") << 1 << 64 << 64;
}

// The tensor-core kernel for 9 to 64 tokens (tile_gemm.cuh) against sums in
// double of the same fp16 values, set and accumulated; every output written
// (the buffer starts poisoned).
void TestCudaKernels::tile_gemm_matches_a_double_reference() {
    QFETCH(int, tokens);
    QFETCH(int, rows);
    QFETCH(int, cols);
    if (!kernels::device_has_mma()) {
        QSKIP("the tensor-core kernels need a GPU of compute capability 8.0 or later");
    }
    std::vector<double> w_values, x_values;
    const std::vector<__half> w =
        fp16_values(random_floats(static_cast<std::size_t>(rows) * cols, 61), w_values);
    const std::vector<__half> x =
        fp16_values(random_floats(static_cast<std::size_t>(tokens) * cols, 62), x_values);
    const std::vector<float> start = random_floats(static_cast<std::size_t>(tokens) * rows, 63);
    const LinearReference want = linear_reference(w_values, x_values, start, tokens, rows, cols);
    DeviceArray<__half> d_w(w), d_x(x);
    QVERIFY(kernels::tile_gemm_fits(d_w.get(), d_x.get(), tokens, rows, cols));
    QVERIFY(!kernels::tile_gemm_fits(d_w.get(), d_x.get(), kernels::kTileGemmMaxTokens + 1, rows,
                                     cols));
    QVERIFY(!kernels::tile_gemm_fits(d_w.get(), d_x.get(), tokens, rows, 40)); // no multiple of 32
    QVERIFY(!kernels::tile_gemm_fits(d_w.get(), d_x.get(), tokens, 49152, 576)); // an output head
    DeviceArray<float> y(start.size());
    kernels::launch_tile_gemm(d_w.get(), rows, cols, d_x.get(), tokens, y.get(), false, nullptr);
    const double set_error = relative_error(y.download(start.size()), want.product);
    DeviceArray<float> accumulated(start);
    kernels::launch_tile_gemm(d_w.get(), rows, cols, d_x.get(), tokens, accumulated.get(), true,
                              nullptr);
    const double add_error = relative_error(accumulated.download(start.size()), want.sum);
    qDebug("relative error %.3g, accumulating %.3g", set_error, add_error);
    // fp32 sums of up to 1536 products of fp16 values (exact in the tensor
    // cores' products): a few units in the last place.
    QVERIFY2(
        set_error < 1e-5 && add_error < 1e-5,
        qPrintable(QString("relative error %1, accumulating %2").arg(set_error).arg(add_error)));
    // A bias in the epilogue: the bits of the product then launch_add_bias.
    DeviceArray<float> bias(random_floats(static_cast<std::size_t>(rows), 64));
    DeviceArray<float> biased(start.size()), then_added(start.size());
    kernels::launch_tile_gemm(d_w.get(), rows, cols, d_x.get(), tokens, biased.get(), false,
                              nullptr, bias.get());
    kernels::launch_tile_gemm(d_w.get(), rows, cols, d_x.get(), tokens, then_added.get(), false,
                              nullptr);
    kernels::launch_add_bias(then_added.get(), bias.get(), tokens, rows, nullptr);
    QVERIFY(biased.download(start.size()) == then_added.download(start.size()));
    QVERIFY_THROWS_EXCEPTION(
        std::invalid_argument,
        kernels::launch_tile_gemm(d_w.get(), rows, 40, d_x.get(), tokens, y.get(), false, nullptr));
}

namespace {

// fp16 copies of normal values of `spread`, as the backend keeps its weights.
std::vector<__half> half_weights(std::size_t n, std::uint32_t seed, float spread) {
    const std::vector<float> floats = random_floats(n, seed, spread);
    std::vector<__half> halves(n);
    for (std::size_t i = 0; i < n; ++i) {
        __half_raw raw;
        raw.x = fp32_to_fp16(floats[i]);
        halves[i] = __half(raw);
    }
    return halves;
}

} // namespace

// The gate/up products with the activation in their epilogue
// (launch_gemv_gated up to 8 tokens, launch_tile_gemm_gated to 64) against
// the same kernel's product into fp32 then launch_gated_half: the same bits
// (the tile GEMM's gates sit in other columns of the tensor-core
// instruction, each column's sums its own), for SwiGLU and GeGLU, rows no
// multiple of a block's, and the same count of saturated values (weights
// scaled so some products pass fp16's range).
void TestCudaKernels::gated_products_match_the_product_then_the_activation() {
    const int cols = 576;
    DeviceArray<unsigned int> fused_count(1), apart_count(1);
    // Every GEMV token count and tile count on a small FFN, ordinary and
    // saturating; the ends of each on SmolLM2's (kept few: compute-sanitizer
    // runs this suite too).
    std::vector<int> every{1, 2, 3, 4, 5, 6, 7, 8};
    std::vector<int> ends{1, 8};
    if (kernels::device_has_mma()) {
        every.insert(every.end(), {9, 16, 17, 33, 64});
        ends.insert(ends.end(), {9, 64});
    } else {
        qDebug("no tensor cores (compute capability 8.0): the tile GEMM's rows are left out");
    }
    struct Shape {
        int ffn;
        float spread;
        const std::vector<int>* token_counts;
    };
    for (const Shape& shape :
         {Shape{101, 0.05f, &every}, Shape{101, 40.0f, &every}, Shape{1536, 0.05f, &ends}}) {
        const int ffn = shape.ffn;
        const float spread = shape.spread;
        {
            DeviceArray<__half> w(
                half_weights(static_cast<std::size_t>(2) * ffn * cols, 81 + ffn, spread));
            for (const int tokens : *shape.token_counts) {
                const bool gemv = tokens <= kernels::kGemvMaxTokens;
                DeviceArray<__half> x(
                    half_weights(static_cast<std::size_t>(tokens) * cols, 90 + tokens, 1.0f));
                QVERIFY(gemv ? kernels::gemv_fits(w.get(), x.get(), tokens, cols)
                             : kernels::tile_gemm_fits(w.get(), x.get(), tokens, 2 * ffn, cols));
                for (const bool gelu : {false, true}) {
                    const std::size_t n = static_cast<std::size_t>(tokens) * ffn;
                    DeviceArray<__half> fused(n), apart(n); // poisoned: all written
                    DeviceArray<float> products(n * 2);
                    fused_count.zero();
                    apart_count.zero();
                    {
                        const kernels::ActivationOverflowScope scope(fused_count.get());
                        if (gemv) {
                            kernels::launch_gemv_gated(w.get(), ffn, cols, x.get(), tokens, gelu,
                                                       fused.get(), nullptr);
                        } else {
                            kernels::launch_tile_gemm_gated(w.get(), ffn, cols, x.get(), tokens,
                                                            gelu, fused.get(), nullptr);
                        }
                    }
                    {
                        const kernels::ActivationOverflowScope scope(apart_count.get());
                        if (gemv) {
                            kernels::launch_gemv(w.get(), 2 * ffn, cols, x.get(), tokens,
                                                 products.get(), false, nullptr);
                        } else {
                            kernels::launch_tile_gemm(w.get(), 2 * ffn, cols, x.get(), tokens,
                                                      products.get(), false, nullptr);
                        }
                        kernels::launch_gated_half(products.get(), tokens, ffn, gelu, apart.get(),
                                                   nullptr);
                    }
                    const std::vector<__half> got = fused.download(n);
                    const std::vector<__half> want = apart.download(n);
                    for (std::size_t i = 0; i < n; ++i) {
                        if (static_cast<__half_raw>(got[i]).x !=
                            static_cast<__half_raw>(want[i]).x) {
                            QFAIL(qPrintable(QString("ffn %1, spread %2, %3 tokens, %4: value %5 "
                                                     "is %6, apart %7")
                                                 .arg(ffn)
                                                 .arg(double(spread))
                                                 .arg(tokens)
                                                 .arg(gelu ? "GeGLU" : "SwiGLU")
                                                 .arg(i)
                                                 .arg(double(static_cast<float>(got[i])))
                                                 .arg(double(static_cast<float>(want[i])))));
                        }
                    }
                    const unsigned int saturated = apart_count.download(1)[0];
                    QCOMPARE(fused_count.download(1)[0], saturated);
                    // Large weights do pass the range (the count is checked).
                    QVERIFY(spread < 1.0f ? saturated == 0 : saturated > 0);
                    QVERIFY(spread < 1.0f ? fused_count.download(1)[0] == 0
                                          : fused_count.download(1)[0] > 0);
                }
            }
        }
    }
    DeviceArray<__half> w(half_weights(static_cast<std::size_t>(2) * 64 * 100, 5, 1.0f));
    DeviceArray<__half> out(64);
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                             kernels::launch_gemv_gated(w.get(), 64, 100, w.get(), 1, false,
                                                        out.get(),
                                                        nullptr)); // 100: no multiple of 8
    QVERIFY_THROWS_EXCEPTION(
        std::invalid_argument,
        kernels::launch_tile_gemm_gated(w.get(), 64, 100, w.get(), 16, false, out.get(), nullptr));
    // The output over its own input (the race the backend's ffn_half avoids).
    DeviceArray<__half> shared_rows(static_cast<std::size_t>(16) * 64);
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                             kernels::launch_gemv_gated(w.get(), 32, 64, shared_rows.get(), 2,
                                                        false, shared_rows.get() + 64, nullptr));
    if (kernels::device_has_mma()) {
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                                 kernels::launch_tile_gemm_gated(w.get(), 32, 64, shared_rows.get(),
                                                                 9, false, shared_rows.get() + 64,
                                                                 nullptr));
    }
}

void TestCudaKernels::overlapped_launches_keep_each_kernels_inputs_data() {
    QTest::addColumn<int>("tokens");
    // Up to 8 tokens the GEMVs, past that the tile GEMMs.
    for (const int tokens : {1, 3, 8, 16, 33}) {
        QTest::addRow("%d tokens", tokens) << tokens;
    }
}

// A chain of FFN blocks over a residual stream (norm, gate/up product, gated
// activation, down product adding into the stream; every other block the
// product and activation in one kernel, as the backend runs them up to 64
// tokens: the GEMV to 8, the tile GEMM past that), each kernel reading what the one before wrote:
// with launches overlapped it gives the same bytes as kernels launched strictly in turn. A kernel
// that read before its wait for the one before (dependent_launch.cuh) would read stale inputs.
void TestCudaKernels::overlapped_launches_keep_each_kernels_inputs() {
    QFETCH(int, tokens);
    if (!kernels::device_overlaps_launches(0)) {
        QSKIP("this GPU (or this build's targets) cannot overlap launches: nothing to compare");
    }
    const bool gemv = tokens <= kernels::kGemvMaxTokens;
    if (!gemv && !kernels::device_has_mma()) {
        QSKIP("the tile GEMMs need a GPU of compute capability 8.0 or later");
    }
    const int hidden = 576, ffn = 1536;
    const float eps = 1e-5f;
    cudaStream_t stream = nullptr; // a stream of its own: the default one never overlaps
    cuda_ok(cudaStreamCreate(&stream), "cudaStreamCreate");
    const std::unique_ptr<CUstream_st, decltype(&cudaStreamDestroy)> owned(stream,
                                                                           &cudaStreamDestroy);
    DeviceArray<__half> w_gate_up(
        half_weights(static_cast<std::size_t>(2) * ffn * hidden, 66, 0.05f));
    DeviceArray<__half> w_down(half_weights(static_cast<std::size_t>(hidden) * ffn, 67, 0.05f));
    DeviceArray<float> norm(random_floats(hidden, 62));
    const std::vector<float> x_start = random_floats(static_cast<std::size_t>(tokens) * hidden, 68);
    // The products as the backend's linear() and gated_linear() pick them.
    const auto product = [&](const __half* w, int rows, int cols, const __half* x, float* y,
                             bool accumulate) {
        if (gemv) {
            kernels::launch_gemv(w, rows, cols, x, tokens, y, accumulate, stream);
        } else {
            kernels::launch_tile_gemm(w, rows, cols, x, tokens, y, accumulate, stream);
        }
    };
    const auto gated_product = [&](const __half* x, __half* out) {
        if (gemv) {
            kernels::launch_gemv_gated(w_gate_up.get(), ffn, hidden, x, tokens, false, out, stream);
        } else {
            kernels::launch_tile_gemm_gated(w_gate_up.get(), ffn, hidden, x, tokens, false, out,
                                            stream);
        }
    };
    const auto run_chain = [&](bool overlap) {
        const kernels::OverlappedLaunches scope(overlap);
        DeviceArray<float> residual(x_start);
        DeviceArray<float> products(static_cast<std::size_t>(tokens) * 2 * ffn);
        DeviceArray<__half> inputs(static_cast<std::size_t>(tokens) * ffn);
        DeviceArray<__half> gated(static_cast<std::size_t>(tokens) * ffn);
        for (int block = 0; block < 6; ++block) {
            kernels::launch_rms_norm_half(residual.get(), norm.get(), inputs.get(), tokens, hidden,
                                          eps, stream);
            if (block % 2 == 0) {
                // The activation overwrites the input the product before it
                // read: a write before its wait would race that read.
                product(w_gate_up.get(), 2 * ffn, hidden, inputs.get(), products.get(), false);
                kernels::launch_gated_half(products.get(), tokens, ffn, false, inputs.get(),
                                           stream);
                product(w_down.get(), hidden, ffn, inputs.get(), residual.get(), true);
            } else {
                // The fused product twice: the second overwrites what the
                // down product right before it read.
                for (int twice = 0; twice < 2; ++twice) {
                    gated_product(inputs.get(), gated.get());
                    product(w_down.get(), hidden, ffn, gated.get(), residual.get(), true);
                }
            }
        }
        return residual.download(x_start.size());
    };
    const std::vector<float> in_turn = run_chain(false);
    const std::vector<float> overlapped = run_chain(true);
    QCOMPARE(overlapped, in_turn);
    // Each block changed the stream: a chain that read stale inputs would not
    // have been caught by comparing unchanged values.
    QVERIFY(relative_error(in_turn, x_start) > 0.1);
}

void TestCudaKernels::embedding_gather_matches_the_table() {
    const int vocab = 300;
    // Each row as stored, and times Gemma's sqrt(hidden) as the backends
    // compute it in fp32: 24 at 576, whose products are exact, and 33.94...
    // at Gemma 3 1B's 1152, whose products round (once, as on the CPU).
    for (const int hidden : {576, 1152}) {
        const std::vector<float> table = random_floats(std::size_t{vocab} * hidden, 5);
        std::vector<__half> halves(table.size());
        for (std::size_t i = 0; i < table.size(); ++i) {
            __half_raw raw;
            raw.x = fp32_to_fp16(table[i]);
            halves[i] = __half(raw);
        }
        const std::vector<std::int32_t> ids = {0, 299, 17, 17, 150};
        DeviceArray<__half> d_table(halves);
        DeviceArray<std::int32_t> d_ids(ids);
        DeviceArray<float> out(ids.size() * hidden), scaled(ids.size() * hidden);
        kernels::launch_embedding_gather(d_table.get(), d_ids.get(), static_cast<int>(ids.size()),
                                         hidden, vocab, out.get(), nullptr);
        const float scale = std::sqrt(static_cast<float>(hidden));
        kernels::launch_embedding_gather(d_table.get(), d_ids.get(), static_cast<int>(ids.size()),
                                         hidden, vocab, scaled.get(), nullptr, scale);
        // Whole rows compared (vectors compare exactly, single floats fuzzily).
        std::vector<float> stored, times_scale;
        for (const std::int32_t id : ids) {
            for (int i = 0; i < hidden; ++i) {
                stored.push_back(fp16_to_fp32(fp32_to_fp16(
                    table[static_cast<std::size_t>(id) * hidden + static_cast<std::size_t>(i)])));
                times_scale.push_back(stored.back() * scale);
            }
        }
        QCOMPARE(out.download(ids.size() * hidden), stored);
        QCOMPARE(scaled.download(ids.size() * hidden), times_scale);
    }
}

void TestCudaKernels::kv_append_writes_the_cpu_codec_bytes_data() {
    QTest::addColumn<KvFormat>("key_format");
    QTest::addColumn<KvFormat>("value_format");
    for (const KvFormat format : kv::all_kv_formats()) {
        QTest::newRow(kv::kv_format_name(format).data()) << format << format;
    }
    QTest::newRow("K q8_0, V q4_0") << KvFormat::q8_0 << KvFormat::q4_0;
    QTest::newRow("K kivi2, V f16") << KvFormat::kivi2 << KvFormat::f16;
}

void TestCudaKernels::kv_append_writes_the_cpu_codec_bytes() {
    QFETCH(KvFormat, key_format);
    QFETCH(KvFormat, value_format);
    const TestGeometry g{9, 3, 64, 16, 64};
    // Fresh sequences only: every block the device writes is written whole
    // by this batch, so whole planes compare.
    const TestBatches batches = make_batches({{0, 37}, {0, 16}, {0, 5}, {0, 70}}, g, 6);
    const runner::ForwardBatch& batch = batches.step;
    const auto tokens = static_cast<std::size_t>(batch.token_count());
    const std::vector<float> k = random_floats(tokens * g.kv_heads * g.head_dim, 7, 2.0f);
    const std::vector<float> v = random_floats(tokens * g.kv_heads * g.head_dim, 8);

    cpu::KvStore store({1, g.kv_heads, g.head_dim, g.block_size, g.num_blocks},
                       {key_format, value_format});
    store.write(0, batch, k.data(), v.data());

    DevicePool pool(store, g);
    pool.keys.zero(); // the CPU store starts zeroed
    pool.values.zero();
    DeviceBatch d_batch(batch);
    DeviceArray<float> d_k(k), d_v(v);
    kernels::launch_kv_append(pool.view, d_k.get(), d_v.get(), d_batch.view.slot_mapping,
                              d_batch.view.tokens, nullptr);
    std::vector<std::int32_t> filled;
    for (const std::int32_t slot : batch.slot_mapping) {
        if (slot % g.block_size == g.block_size - 1) {
            filled.push_back(slot / g.block_size);
        }
    }
    DeviceArray<std::int32_t> d_filled(filled);
    kernels::launch_kivi_finalize(pool.view, d_filled.get(), static_cast<int>(filled.size()),
                                  nullptr);

    const cpu::LayerKvView layer = store.layer(0);
    const std::int64_t key_bytes = DevicePool::plane_bytes(store, true);
    const std::int64_t value_bytes = DevicePool::plane_bytes(store, false);
    QVERIFY(pool.keys.download(static_cast<std::size_t>(key_bytes)) ==
            plane_bytes_of(layer.keys, key_bytes));
    QVERIFY(pool.values.download(static_cast<std::size_t>(value_bytes)) ==
            plane_bytes_of(layer.values, value_bytes));
    // KIVI blocks not yet full: the open copies hold the exact rows.
    const std::vector<float> open = pool.open.download(static_cast<std::size_t>(g.num_blocks) * 2 *
                                                       g.kv_heads * g.block_size * g.head_dim);
    const std::size_t per_plane = std::size_t{3} * g.block_size * g.head_dim;
    for (int block = 0; block < g.num_blocks; ++block) {
        for (const bool is_key : {true, false}) {
            const float* expected = store.open_block(block, 0, is_key);
            if (expected == nullptr) {
                continue;
            }
            const float* got =
                open.data() + (static_cast<std::size_t>(block) * 2 + (is_key ? 0 : 1)) * per_plane;
            // Rows the batch wrote; the rest of an open block is unwritten.
            for (std::size_t t = 0; t < tokens; ++t) {
                const std::int32_t slot = batch.slot_mapping[t];
                if (slot / g.block_size != block) {
                    continue;
                }
                for (int h = 0; h < g.kv_heads; ++h) {
                    const std::size_t at =
                        (static_cast<std::size_t>(h) * g.block_size + slot % g.block_size) *
                        g.head_dim;
                    QVERIFY(std::equal(expected + at, expected + at + g.head_dim, got + at));
                }
            }
        }
    }
}

void TestCudaKernels::paged_attention_matches_the_cpu_data() {
    QTest::addColumn<KvFormat>("format");
    QTest::addColumn<int>("heads");
    QTest::addColumn<int>("kv_heads");
    QTest::addColumn<int>("head_dim");
    for (const KvFormat format : kv::all_kv_formats()) {
        QTest::newRow(
            qPrintable(QString("%1, SmolLM2 heads").arg(kv::kv_format_name(format).data())))
            << format << 9 << 3 << 64;
    }
    QTest::newRow("f16, group of 8, d128") << KvFormat::f16 << 16 << 2 << 128;
    QTest::newRow("q4_1, multi-head (group 1)") << KvFormat::q4_1 << 4 << 4 << 64;
    QTest::newRow("kivi4, MQA (group 12)") << KvFormat::kivi4 << 12 << 1 << 64;
    // The value sums' thread shares: 4 parts (d 32), idle threads (d 96), two
    // dimensions per thread (d 256), the largest register group (8).
    QTest::newRow("q8_0, d32, group 4") << KvFormat::q8_0 << 8 << 2 << 32;
    QTest::newRow("f16, d96, group 3") << KvFormat::f16 << 6 << 2 << 96;
    QTest::newRow("bf16, d256, group 2") << KvFormat::bf16 << 4 << 2 << 256;
    QTest::newRow("q4_0, group 8") << KvFormat::q4_0 << 16 << 2 << 64;
    // The vector path's kernels (f16 and bf16, head_dim 64/128/256, groups
    // rounded up to 1, 2, 4, 8): Gemma 3's MQA of 256, Llama's group 4 of 128,
    // multi-head, and groups that leave heads of a bucket unused (3, 5, 7).
    QTest::newRow("f16, d256, MQA group 4") << KvFormat::f16 << 4 << 1 << 256;
    QTest::newRow("bf16, d128, group 4") << KvFormat::bf16 << 16 << 4 << 128;
    QTest::newRow("f16, d64, group 1") << KvFormat::f16 << 4 << 4 << 64;
    QTest::newRow("bf16, d64, group 5") << KvFormat::bf16 << 10 << 2 << 64;
    QTest::newRow("f16, d128, group 7") << KvFormat::f16 << 7 << 1 << 128;
    QTest::newRow("f16, d32, group 2") << KvFormat::f16 << 4 << 2 << 32;
    // A head_dim that is no multiple of 4: the merge's one-value-a-thread form.
    QTest::newRow("f32, d34, group 3") << KvFormat::f32 << 6 << 2 << 34;
    // The quantised formats' staged rows at head_dim 128 (the d64 rows above).
    QTest::newRow("q8_0, d128, group 4") << KvFormat::q8_0 << 16 << 4 << 128;
    QTest::newRow("fp8_e4m3, d128, group 8") << KvFormat::fp8_e4m3 << 16 << 2 << 128;
    QTest::newRow("q4_0, d128, group 1") << KvFormat::q4_0 << 2 << 2 << 128;
    QTest::newRow("bf16, d256, group 8") << KvFormat::bf16 << 8 << 1 << 256;
}

void TestCudaKernels::paged_attention_matches_the_cpu() {
    QFETCH(KvFormat, format);
    QFETCH(int, heads);
    QFETCH(int, kv_heads);
    QFETCH(int, head_dim);
    const TestGeometry g{heads, kv_heads, head_dim, 16, 128};
    const TestBatches batches = make_batches(kMixedBatch, g, 9);
    cpu::KvStore store({1, kv_heads, head_dim, g.block_size, g.num_blocks}, {format, format});
    for (const runner::ForwardBatch* b : {&batches.history, &batches.step}) {
        const auto n = static_cast<std::size_t>(b->token_count()) * kv_heads * head_dim;
        const std::vector<float> k = random_floats(n, 10 + static_cast<unsigned>(n), 2.0f);
        const std::vector<float> v = random_floats(n, 11 + static_cast<unsigned>(n));
        store.write(0, *b, k.data(), v.data());
    }
    const runner::ForwardBatch& batch = batches.step;
    const auto tokens = static_cast<std::size_t>(batch.token_count());
    const std::vector<float> q = random_floats(tokens * heads * head_dim, 12);
    std::vector<float> cpu_out(q.size());
    cpu::ThreadPool threads(2);
    cpu::paged_attention(store.layer(0), batch, q.data(), heads, cpu_out.data(), threads);

    DevicePool pool(store, g);
    pool.mirror(store);
    DeviceBatch d_batch(batch);
    DeviceArray<float> d_q(q), out(q.size());
    const int context = max_context(batch);
    // The longest splits (the CPU's segments) and the shortest, which a step
    // of few tokens asks for (cuda::attention_split_length), and one that is
    // no power of two (it plans any multiple of 32); on the vector path also
    // the longer splits it plans (at 2048 one split covers the longest
    // context, 701 entries), and the general path must refuse those.
    const bool vector = kernels::attention_takes_vector_path(pool.view, heads);
    const bool sixteen_bit = format == KvFormat::f16 || format == KvFormat::bf16;
    const bool staged =
        format == KvFormat::q8_0 || format == KvFormat::q4_0 || format == KvFormat::fp8_e4m3;
    QCOMPARE(vector, (sixteen_bit &&
                      (head_dim == 32 || head_dim == 64 || head_dim == 128 || head_dim == 256)) ||
                         (staged && (head_dim == 64 || head_dim == 128)));
    std::vector<int> splits_tried{kernels::kAttentionSplit, kernels::kShortestAttentionSplit, 224};
    if (vector) {
        splits_tried.push_back(512);
        splits_tried.push_back(832);
        splits_tried.push_back(kernels::kLongestVectorSplit);
    } else {
        DeviceArray<float> scratch(
            kernels::AttentionWorkspace::floats(static_cast<int>(tokens), heads, 1, head_dim));
        const kernels::AttentionWorkspace too_long = kernels::AttentionWorkspace::carve(
            scratch.get(), static_cast<int>(tokens), heads, 1, head_dim, 1024);
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                                 kernels::launch_paged_attention(pool.view, d_batch.view, d_q.get(),
                                                                 heads, 0.125f, context, too_long,
                                                                 out.get(), nullptr));
    }
    for (const int split : splits_tried) {
        const int splits = (context + split - 1) / split;
        out.zero(); // nothing left from the other split length
        DeviceArray<float> scratch(
            kernels::AttentionWorkspace::floats(static_cast<int>(tokens), heads, splits, head_dim));
        const kernels::AttentionWorkspace workspace = kernels::AttentionWorkspace::carve(
            scratch.get(), static_cast<int>(tokens), heads, splits, head_dim, split);
        kernels::launch_paged_attention(pool.view, d_batch.view, d_q.get(), heads,
                                        1.0f / std::sqrt(static_cast<float>(head_dim)), context,
                                        workspace, out.get(), nullptr);
        const double error = relative_error(out.download(q.size()), cpu_out);
        qDebug("splits of %d: relative error %.3g", split, error);
        QVERIFY2(error < 1e-4,
                 qPrintable(QString("splits of %1: relative error %2").arg(split).arg(error)));
        // The fp16 output the backend feeds the output projection: the same
        // merge, rounded (every element written: the buffer starts poisoned).
        DeviceArray<__half> halves(q.size());
        kernels::launch_paged_attention_half(pool.view, d_batch.view, d_q.get(), heads,
                                             1.0f / std::sqrt(static_cast<float>(head_dim)),
                                             context, workspace, halves.get(), nullptr);
        const std::vector<float> floats = out.download(q.size());
        const std::vector<__half> got = halves.download(q.size());
        for (std::size_t i = 0; i < q.size(); ++i) {
            QCOMPARE(static_cast<__half_raw>(got[i]).x, fp32_to_fp16(floats[i]));
        }
        if (vector && sixteen_bit) {
            // 16-bit rows through the shared-memory ring (wide_row_fetch.h):
            // the same values in the same order, so the same bits.
            const kernels::WideRowFetchScope ring(kernels::WideRowFetch::ring);
            out.zero();
            kernels::launch_paged_attention(pool.view, d_batch.view, d_q.get(), heads,
                                            1.0f / std::sqrt(static_cast<float>(head_dim)), context,
                                            workspace, out.get(), nullptr);
            QVERIFY2(out.download(q.size()) == floats,
                     qPrintable(QString("splits of %1: the ring's output differs from the "
                                        "registers'")
                                    .arg(split)));
        }
    }
}

void TestCudaKernels::attention_capture_matches_the_cpu_data() {
    QTest::addColumn<KvFormat>("format");
    QTest::newRow("q4_1 (general path)") << KvFormat::q4_1;
    // The capture reads the merged maximum and sum the vector path's splits
    // leave (log2 units inside the kernel, natural ones out).
    QTest::newRow("f16 (vector path)") << KvFormat::f16;
    QTest::newRow("q8_0 (vector path, staged rows)") << KvFormat::q8_0;
}

void TestCudaKernels::attention_capture_matches_the_cpu() {
    QFETCH(KvFormat, format);
    const TestGeometry g{9, 3, 64, 16, 128};
    const TestBatches batches = make_batches(kMixedBatch, g, 13, /*capture_from=*/10);
    cpu::KvStore store({1, 3, 64, 16, 128}, {format, format});
    for (const runner::ForwardBatch* b : {&batches.history, &batches.step}) {
        const auto n = static_cast<std::size_t>(b->token_count()) * 3 * 64;
        const std::vector<float> k = random_floats(n, 14 + static_cast<unsigned>(n), 2.0f);
        const std::vector<float> v = random_floats(n, 15 + static_cast<unsigned>(n));
        store.write(0, *b, k.data(), v.data());
    }
    const runner::ForwardBatch& batch = batches.step;
    const auto tokens = static_cast<std::size_t>(batch.token_count());
    const std::vector<float> q = random_floats(tokens * 9 * 64, 16);
    const std::vector<std::int64_t> offsets = runner::capture_offsets(batch);
    std::vector<float> cpu_sums(static_cast<std::size_t>(offsets.back()), 0.0f);
    std::vector<float> cpu_out(q.size());
    cpu::ThreadPool threads(2);
    cpu::paged_attention(store.layer(0), batch, q.data(), 9, cpu_out.data(), threads,
                         {cpu_sums.data(), offsets.data()});

    DevicePool pool(store, g);
    pool.mirror(store);
    DeviceBatch d_batch(batch);
    DeviceArray<float> d_q(q), out(q.size()), sums(cpu_sums.size());
    sums.zero();
    const int context = max_context(batch);
    // Short splits: the capture's scores follow the split length too, and
    // lengths no power of two, as cuda::attention_split_length plans them.
    for (const int split : {kernels::kShortestAttentionSplit, 96, 224}) {
        const int splits = (context + split - 1) / split;
        DeviceArray<float> scratch(
            kernels::AttentionWorkspace::floats(static_cast<int>(tokens), 9, splits, 64));
        const kernels::AttentionWorkspace workspace = kernels::AttentionWorkspace::carve(
            scratch.get(), static_cast<int>(tokens), 9, splits, 64, split);
        const float scale = 1.0f / 8.0f;
        sums.zero(); // the capture adds into it
        kernels::launch_paged_attention(pool.view, d_batch.view, d_q.get(), 9, scale, context,
                                        workspace, out.get(), nullptr);
        kernels::launch_attention_capture(pool.view, d_batch.view, d_q.get(), 9, scale, context,
                                          workspace, sums.get(), nullptr);
        const double error = relative_error(sums.download(cpu_sums.size()), cpu_sums);
        qDebug("splits of %d: capture relative error %.3g", split, error);
        QVERIFY2(
            error < 1e-4,
            qPrintable(QString("splits of %1: capture relative error %2").arg(split).arg(error)));
    }
    QVERIFY(std::any_of(cpu_sums.begin(), cpu_sums.end(), [](float s) { return s > 0.0f; }));
    // Split lengths the kernels cannot take.
    DeviceArray<float> scratch(kernels::AttentionWorkspace::floats(1, 9, 1, 64));
    for (const int bad : {0, 16, 48, 100, kernels::kLongestVectorSplit + 32}) {
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, kernels::AttentionWorkspace::carve(
                                                            scratch.get(), 1, 9, 1, 64, bad));
    }
}

void TestCudaKernels::windowed_attention_matches_the_cpu_data() {
    QTest::addColumn<KvFormat>("format");
    QTest::addColumn<int>("heads");
    QTest::addColumn<int>("kv_heads");
    QTest::addColumn<int>("head_dim");
    QTest::addColumn<int>("window");
    QTest::addColumn<bool>("vector"); // whether the cache takes the vector path
    for (const int window : {8, 37}) {
        const QString of = QString(", window %1").arg(window);
        QTest::newRow(qPrintable("q4_1" + of + " (general path)"))
            << KvFormat::q4_1 << 9 << 3 << 64 << window << false;
        QTest::newRow(qPrintable("kivi2" + of + " (general path, open blocks)"))
            << KvFormat::kivi2 << 9 << 3 << 64 << window << false;
        QTest::newRow(qPrintable("f16" + of + " (vector path)"))
            << KvFormat::f16 << 9 << 3 << 64 << window << true;
        QTest::newRow(qPrintable("q8_0" + of + " (vector path, staged rows)"))
            << KvFormat::q8_0 << 9 << 3 << 64 << window << true;
        // Gemma 3: one KV head of 256 for 4 query heads.
        QTest::newRow(qPrintable("f16, d256, MQA group 4" + of + " (vector path)"))
            << KvFormat::f16 << 4 << 1 << 256 << window << true;
        QTest::newRow(qPrintable("q4_1, d256, MQA group 4" + of + " (general path)"))
            << KvFormat::q4_1 << 4 << 1 << 256 << window << false;
    }
    // A window of several splits of every length tried.
    QTest::newRow("bf16, d256, MQA group 4, window 200 (vector path)")
        << KvFormat::bf16 << 4 << 1 << 256 << 200 << true;
}

void TestCudaKernels::windowed_attention_matches_the_cpu() {
    QFETCH(KvFormat, format);
    QFETCH(int, heads);
    QFETCH(int, kv_heads);
    QFETCH(int, head_dim);
    QFETCH(int, window);
    QFETCH(bool, vector);
    const TestGeometry g{heads, kv_heads, head_dim, 16, 128};
    const TestBatches batches = make_batches(kWindowBatch, g, 25);
    cpu::KvStore store({1, kv_heads, head_dim, g.block_size, g.num_blocks}, {format, format});
    fill_store(store, batches, g, 26);
    const auto tokens = static_cast<int>(batches.step.token_count());
    const std::vector<float> q =
        random_floats(static_cast<std::size_t>(tokens) * heads * head_dim, 27);
    const float scale = 0.0625f; // not 1/sqrt(head_dim): Gemma 3's query_pre_attn_scalar of 256
    cpu::ThreadPool threads(2);
    std::vector<float> cpu_whole(q.size());
    cpu::paged_attention(store.layer(0), batches.step, q.data(), heads, cpu_whole.data(), threads,
                         {}, {scale, 0});
    // The tables of a sliding layer's group: the blocks before every window let go.
    runner::ForwardBatch batch = batches.step;
    QVERIFY(let_go_outside_window(batch, 0, window) > 0);
    std::vector<float> cpu_out(q.size());
    cpu::paged_attention(store.layer(0), batch, q.data(), heads, cpu_out.data(), threads, {},
                         {scale, window});
    QVERIFY(relative_error(cpu_whole, cpu_out) > 1e-2); // the window matters here

    DevicePool pool(store, g);
    pool.mirror(store);
    pool.view.window = window;
    QCOMPARE(kernels::attention_takes_vector_path(pool.view, heads), vector);
    DeviceBatch d_batch(batch);
    DeviceArray<float> d_q(q);
    const int context = max_context(batch);
    QVERIFY(context > window);
    // Splits shorter than the contexts (and than the window of 37); the
    // workspace holds only the window's splits.
    for (const int split : {kernels::kShortestAttentionSplit, 64, kernels::kAttentionSplit}) {
        const TestWorkspace work(tokens, heads, head_dim, context, window, split);
        DeviceArray<float> out(q.size());
        kernels::launch_paged_attention(pool.view, d_batch.view, d_q.get(), heads, scale, context,
                                        work.workspace, out.get(), nullptr);
        const std::vector<float> floats = out.download(q.size());
        const double error = relative_error(floats, cpu_out);
        qDebug("window %d, splits of %d: relative error %.3g", window, split, error);
        QVERIFY2(error < 1e-4, qPrintable(QString("window %1, splits of %2: relative error %3")
                                              .arg(window)
                                              .arg(split)
                                              .arg(error)));
        DeviceArray<__half> halves(q.size());
        kernels::launch_paged_attention_half(pool.view, d_batch.view, d_q.get(), heads, scale,
                                             context, work.workspace, halves.get(), nullptr);
        const std::vector<__half> got = halves.download(q.size());
        for (std::size_t i = 0; i < q.size(); ++i) {
            QCOMPARE(static_cast<__half_raw>(got[i]).x, fp32_to_fp16(floats[i]));
        }
    }
}

void TestCudaKernels::windowed_attention_capture_matches_the_cpu_data() {
    QTest::addColumn<KvFormat>("format");
    QTest::addColumn<int>("window");
    for (const int window : {8, 37}) {
        const QString of = QString(", window %1").arg(window);
        QTest::newRow(qPrintable("q4_1" + of + " (general path)")) << KvFormat::q4_1 << window;
        QTest::newRow(qPrintable("f16" + of + " (vector path)")) << KvFormat::f16 << window;
    }
}

void TestCudaKernels::windowed_attention_capture_matches_the_cpu() {
    QFETCH(KvFormat, format);
    QFETCH(int, window);
    const TestGeometry g{9, 3, 64, 16, 128};
    const TestBatches batches = make_batches(kWindowBatch, g, 28, /*capture_from=*/10);
    cpu::KvStore store({1, 3, 64, 16, 128}, {format, format});
    fill_store(store, batches, g, 29);
    runner::ForwardBatch batch = batches.step;
    QVERIFY(let_go_outside_window(batch, 0, window) > 0);
    const auto tokens = static_cast<int>(batch.token_count());
    const std::vector<float> q = random_floats(static_cast<std::size_t>(tokens) * 9 * 64, 30);
    const std::vector<std::int64_t> offsets = runner::capture_offsets(batch);
    std::vector<float> cpu_sums(static_cast<std::size_t>(offsets.back()), 0.0f);
    std::vector<float> cpu_out(q.size());
    const float scale = 1.0f / 8.0f;
    cpu::ThreadPool threads(2);
    cpu::paged_attention(store.layer(0), batch, q.data(), 9, cpu_out.data(), threads,
                         {cpu_sums.data(), offsets.data()}, {scale, window});
    // The decode of the 301st entry: its 9 heads' probabilities, each summing
    // to 1, all inside its window.
    const float* decode = cpu_sums.data() + offsets[1];
    QVERIFY(std::all_of(decode, decode + 301 - window, [](float p) { return p == 0.0f; }));
    QVERIFY(std::fabs(std::accumulate(decode, decode + 301, 0.0f) - 9.0f) < 1e-3f);

    DevicePool pool(store, g);
    pool.mirror(store);
    pool.view.window = window;
    DeviceBatch d_batch(batch);
    DeviceArray<float> d_q(q);
    const int context = max_context(batch);
    // Short splits: the capture's scores follow the split length too.
    for (const int split : {kernels::kShortestAttentionSplit, 64}) {
        const TestWorkspace work(tokens, 9, 64, context, window, split);
        DeviceArray<float> out(q.size()), sums(cpu_sums.size());
        sums.zero();
        kernels::launch_paged_attention(pool.view, d_batch.view, d_q.get(), 9, scale, context,
                                        work.workspace, out.get(), nullptr);
        kernels::launch_attention_capture(pool.view, d_batch.view, d_q.get(), 9, scale, context,
                                          work.workspace, sums.get(), nullptr);
        const double out_error = relative_error(out.download(q.size()), cpu_out);
        const double error = relative_error(sums.download(cpu_sums.size()), cpu_sums);
        qDebug("window %d, splits of %d: capture relative error %.3g", window, split, error);
        QVERIFY2(out_error < 1e-4 && error < 1e-4,
                 qPrintable(QString("window %1, splits of %2: relative error %3, capture %4")
                                .arg(window)
                                .arg(split)
                                .arg(out_error)
                                .arg(error)));
    }
}

void TestCudaKernels::tiled_attention_matches_the_cpu_data() {
    QTest::addColumn<KvFormat>("format");
    QTest::addColumn<int>("heads");
    QTest::addColumn<int>("kv_heads");
    QTest::addColumn<int>("head_dim");
    QTest::addColumn<int>("window");
    // Every tile shape: groups of 1 (tiles of 64 tokens, 4 warps), 2 (32),
    // 3 (SmolLM2: 16 tokens, 3 warps), 4, 7 and 8; head_dim 32, 64 and 128.
    QTest::newRow("f16, SmolLM2 heads") << KvFormat::f16 << 9 << 3 << 64 << 0;
    QTest::newRow("bf16, SmolLM2 heads") << KvFormat::bf16 << 9 << 3 << 64 << 0;
    QTest::newRow("f16, d64, group 1") << KvFormat::f16 << 4 << 4 << 64 << 0;
    QTest::newRow("f16, d128, group 2") << KvFormat::f16 << 4 << 2 << 128 << 0;
    QTest::newRow("bf16, d128, group 4") << KvFormat::bf16 << 16 << 4 << 128 << 0;
    QTest::newRow("f16, d128, group 7") << KvFormat::f16 << 7 << 1 << 128 << 0;
    QTest::newRow("bf16, d64, group 8") << KvFormat::bf16 << 16 << 2 << 64 << 0;
    QTest::newRow("f16, d32, group 2 (the tiny test models)") << KvFormat::f16 << 2 << 1 << 32 << 0;
    // Sliding windows (a tile's tokens each start their own window).
    QTest::newRow("f16, SmolLM2 heads, window 8") << KvFormat::f16 << 9 << 3 << 64 << 8;
    QTest::newRow("f16, d128, group 4, window 37") << KvFormat::f16 << 8 << 2 << 128 << 37;
    QTest::newRow("f16, d64, group 1, window 200") << KvFormat::f16 << 2 << 2 << 64 << 200;
}

// The tensor-core path (tile_attention.cuh) over query tiles: prefill chunks
// from nothing and over prefix-cached blocks, with the decodes and runs of 2
// beside them on the vector path (as the backend plans a step) or in tiles
// of one token;
// splits from 64 entries to one split covering every context (then a step of
// tiles alone writes the output without the merge). Q and P are rounded
// to the cache's 16-bit type for the products, so the output agrees with the
// CPU to that rounding, not to fp32 summation order.
void TestCudaKernels::tiled_attention_matches_the_cpu() {
    QFETCH(KvFormat, format);
    QFETCH(int, heads);
    QFETCH(int, kv_heads);
    QFETCH(int, head_dim);
    QFETCH(int, window);
    const TestGeometry g{heads, kv_heads, head_dim, 16, 128};
    const TestBatches batches = make_batches(window > 0 ? kWindowBatch : kMixedBatch, g, 31);
    cpu::KvStore store({1, kv_heads, head_dim, g.block_size, g.num_blocks}, {format, format});
    fill_store(store, batches, g, 32);
    runner::ForwardBatch batch = batches.step;
    if (window > 0) {
        QVERIFY(let_go_outside_window(batch, 0, window) > 0);
    }
    const auto tokens = static_cast<int>(batch.token_count());
    const std::vector<float> q =
        random_floats(static_cast<std::size_t>(tokens) * heads * head_dim, 33);
    const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    cpu::ThreadPool threads(2);
    std::vector<float> cpu_out(q.size());
    cpu::paged_attention(store.layer(0), batch, q.data(), heads, cpu_out.data(), threads, {},
                         {scale, window});

    if (!kernels::device_has_mma()) {
        QSKIP("the tensor-core kernels need a GPU of compute capability 8.0 or later");
    }
    DevicePool pool(store, g);
    pool.mirror(store);
    pool.view.window = window;
    QVERIFY(kernels::tile_attention_fits(pool.view, heads));
    const int tile_tokens = kernels::tile_attention_tile_tokens(heads / kv_heads);
    // As the backend plans them: tiles, and the short runs beside them per token.
    const cuda::QueryTiles planned = cuda::plan_query_tiles(batch.sequence_of, tile_tokens);
    QVERIFY(planned.count() > 0 && !planned.untiled_tokens.empty());
    // Every token in a tile, the short runs in tiles of one: then a step of
    // one split needs no merge, and the tiles write the output themselves.
    cuda::QueryTiles all_tiles = planned;
    for (const std::int32_t t : planned.untiled_tokens) {
        all_tiles.bounds.push_back(t);
        all_tiles.bounds.push_back(t + 1);
    }
    all_tiles.untiled_tokens.clear();
    DeviceArray<float> d_q(q);
    const int context = max_context(batch);
    const double tolerance = format == KvFormat::bf16 ? 3e-2 : 5e-3;
    for (const cuda::QueryTiles* tiles : {&planned, &std::as_const(all_tiles)}) {
        DeviceBatch d_batch(batch);
        DeviceArray<std::int32_t> d_bounds(tiles->bounds);
        DeviceArray<std::int32_t> d_singles(tiles->untiled_tokens);
        d_batch.view.query_tiles = static_cast<int>(tiles->count());
        d_batch.view.query_tile_tokens = tile_tokens;
        d_batch.view.query_tile_bounds = d_bounds.get();
        d_batch.view.untiled_count = static_cast<int>(tiles->untiled_tokens.size());
        d_batch.view.untiled_tokens = d_singles.get();
        const char* which = tiles == &planned ? "short runs per token" : "every token in a tile";
        for (const int split : {64, kernels::kAttentionSplit, kernels::kLongestVectorSplit}) {
            const TestWorkspace work(tokens, heads, head_dim, context, window, split);
            DeviceArray<float> out(q.size());
            kernels::launch_paged_attention(pool.view, d_batch.view, d_q.get(), heads, scale,
                                            context, work.workspace, out.get(), nullptr);
            const std::vector<float> floats = out.download(q.size());
            const double error = relative_error(floats, cpu_out);
            qDebug("%s, splits of %d (%d a token at most): relative error %.3g", which, split,
                   work.splits, error);
            QVERIFY2(error < tolerance, qPrintable(QString("%1, splits of %2: relative error %3")
                                                       .arg(which)
                                                       .arg(split)
                                                       .arg(error)));
            DeviceArray<__half> halves(q.size());
            kernels::launch_paged_attention_half(pool.view, d_batch.view, d_q.get(), heads, scale,
                                                 context, work.workspace, halves.get(), nullptr);
            const std::vector<__half> got = halves.download(q.size());
            for (std::size_t i = 0; i < q.size(); ++i) {
                QCOMPARE(static_cast<__half_raw>(got[i]).x, fp32_to_fp16(floats[i]));
            }
        }
        // Tiles cut for another group are refused, not misread.
        d_batch.view.query_tile_tokens = tile_tokens * 2;
        const TestWorkspace work(tokens, heads, head_dim, context, window, 64);
        DeviceArray<float> out(q.size());
        QVERIFY_THROWS_EXCEPTION(
            std::invalid_argument,
            kernels::launch_paged_attention(pool.view, d_batch.view, d_q.get(), heads, scale,
                                            context, work.workspace, out.get(), nullptr));
    }
}

void TestCudaKernels::attention_reads_the_layers_kv_group_data() {
    QTest::addColumn<KvFormat>("format");
    QTest::newRow("f16 (vector path)") << KvFormat::f16;
    QTest::newRow("q4_1 (general path)") << KvFormat::q4_1;
    QTest::newRow("kivi4 (general path, open blocks)") << KvFormat::kivi4;
}

void TestCudaKernels::attention_reads_the_layers_kv_group() {
    QFETCH(KvFormat, format);
    // A hybrid cache as Gemma 3's: group 0 attends the whole context, group 1
    // a window of 37, each sequence's tables of its own blocks, holding
    // different entries; group 1's let the blocks before the window go.
    const int windows[2] = {0, 37};
    const TestGeometry g{9, 3, 64, 16, 128};
    const TestBatches batches =
        make_batches(kWindowBatch, g, 31, /*capture_from=*/INT32_MAX, /*groups=*/2);
    QCOMPARE(batches.step.kv_groups, 2);
    QCOMPARE(batches.step.block_tables.size(),
             2 * static_cast<std::size_t>(batches.step.block_table_offsets.back()));
    cpu::KvStore store({1, 3, 64, 16, 128}, {format, format});
    fill_store(store, batches, g, 32, /*group=*/0);
    fill_store(store, batches, g, 33, /*group=*/1);
    runner::ForwardBatch batch = batches.step;
    QVERIFY(let_go_outside_window(batch, 1, windows[1]) > 0);
    const auto tokens = static_cast<int>(batch.token_count());
    const std::vector<float> q = random_floats(static_cast<std::size_t>(tokens) * 9 * 64, 34);
    const float scale = 1.0f / 8.0f;
    cpu::ThreadPool threads(2);
    std::vector<std::vector<float>> cpu_out(2, std::vector<float>(q.size()));
    for (int group = 0; group < 2; ++group) {
        cpu::paged_attention(store.layer(0, group), batch, q.data(), 9,
                             cpu_out[static_cast<std::size_t>(group)].data(), threads, {},
                             {scale, windows[group]});
    }
    // Group 0's entries over group 1's window: not group 1's result.
    std::vector<float> other_group(q.size());
    cpu::paged_attention(store.layer(0, 0), batch, q.data(), 9, other_group.data(), threads, {},
                         {scale, windows[1]});
    QVERIFY(relative_error(other_group, cpu_out[1]) > 1e-2);

    DevicePool pool(store, g);
    pool.mirror(store);
    DeviceBatch d_batch(batch);
    DeviceArray<float> d_q(q);
    const int context = max_context(batch);
    for (int group = 0; group < 2; ++group) {
        kernels::PagedKvView cache = pool.view;
        cache.window = windows[group];
        kernels::DeviceBatchView layer_batch = d_batch.view;
        layer_batch.kv_group = group;
        const TestWorkspace work(tokens, 9, 64, context, windows[group],
                                 kernels::kShortestAttentionSplit);
        DeviceArray<float> out(q.size());
        kernels::launch_paged_attention(cache, layer_batch, d_q.get(), 9, scale, context,
                                        work.workspace, out.get(), nullptr);
        const double error =
            relative_error(out.download(q.size()), cpu_out[static_cast<std::size_t>(group)]);
        qDebug("group %d: relative error %.3g", group, error);
        QVERIFY2(error < 1e-4,
                 qPrintable(QString("group %1: relative error %2").arg(group).arg(error)));
    }
}

void TestCudaKernels::copy_slot_rows_match_the_cpu_store() {
    for (const KvFormat format : {KvFormat::f16, KvFormat::q4_1, KvFormat::fp8_e4m3}) {
        const TestGeometry g{9, 3, 64, 16, 64};
        const TestBatches batches = make_batches({{0, 100}, {0, 40}}, g, 17);
        cpu::KvStore store({1, 3, 64, 16, 64}, {format, format});
        const auto n = static_cast<std::size_t>(batches.step.token_count()) * 3 * 64;
        const std::vector<float> k = random_floats(n, 18), v = random_floats(n, 19);
        store.write(0, batches.step, k.data(), v.data());
        DevicePool pool(store, g);
        pool.mirror(store);
        // Overlapping moves, as compaction makes: 10..29 -> 5..24, and a swap.
        std::vector<std::int32_t> from, to;
        for (int i = 0; i < 20; ++i) {
            from.push_back(batches.step.slot_mapping[static_cast<std::size_t>(10 + i)]);
            to.push_back(batches.step.slot_mapping[static_cast<std::size_t>(5 + i)]);
        }
        from.push_back(batches.step.slot_mapping[100]);
        to.push_back(batches.step.slot_mapping[101]);
        from.push_back(batches.step.slot_mapping[101]);
        to.push_back(batches.step.slot_mapping[100]);
        store.copy_slots(from, to);
        DeviceArray<std::int32_t> d_from(from), d_to(to);
        DeviceArray<std::uint8_t> staging(
            from.size() * 3 *
            static_cast<std::size_t>(pool.view.keys.row_bytes + pool.view.values.row_bytes));
        kernels::launch_copy_slot_rows(pool.view, d_from.get(), d_to.get(),
                                       static_cast<int>(from.size()), staging.get(), nullptr);
        const cpu::LayerKvView layer = store.layer(0);
        const std::int64_t bytes = DevicePool::plane_bytes(store, true);
        QVERIFY(pool.keys.download(static_cast<std::size_t>(bytes)) ==
                plane_bytes_of(layer.keys, bytes));
        QVERIFY(pool.values.download(static_cast<std::size_t>(bytes)) ==
                plane_bytes_of(layer.values, bytes));
    }
}

// The device sampler against sampling::pick_token, the rule the CPU sampler
// uses, given the same draws; rows where a draw falls within fp32 rounding
// of a boundary are not compared (the kernel sums in fp32, the CPU in double).
bool near_a_boundary(const std::vector<float>& row, const sampling::SamplingParams& p, double u) {
    for (const double shift : {-2e-4, 2e-4}) {
        if (sampling::pick_token(row, p, std::clamp(u + shift, 0.0, 0.999999)) !=
            sampling::pick_token(row, p, u)) {
            return true;
        }
    }
    return false;
}

void TestCudaKernels::sampling_matches_the_cpu_sampler() {
    const int rows = 6, vocab = 5000;
    std::vector<float> logits = random_floats(std::size_t{rows} * vocab, 20, 3.0f);
    logits[7] = logits[8] = 40.0f; // a tie at the top: the lower id wins greedily
    const std::vector<float> uniforms = {0.05f, 0.3f, 0.5f, 0.71f, 0.9f, 0.999f};
    DeviceArray<float> d_logits(logits);
    DeviceArray<std::int32_t> tokens(rows);
    DeviceArray<std::uint8_t> scratch(kernels::sampling_scratch_bytes(rows, vocab));

    const std::vector<sampling::SamplingParams> settings = [] {
        std::vector<sampling::SamplingParams> list;
        for (const auto& [t, k, p, m] :
             std::vector<std::tuple<float, int, float, float>>{{0.0f, 0, 1.0f, 0.0f},
                                                               {0.8f, 40, 0.95f, 0.05f},
                                                               {1.0f, 0, 1.0f, 0.0f},
                                                               {0.5f, 0, 0.9f, 0.0f},
                                                               {1.3f, 5, 1.0f, 0.0f},
                                                               {0.7f, 0, 1.0f, 0.1f}}) {
            sampling::SamplingParams params;
            params.temperature = t;
            params.top_k = k;
            params.top_p = p;
            params.min_p = m;
            list.push_back(params);
        }
        return list;
    }();
    int compared = 0;
    // Each setting for all rows, then every setting at once (a row each).
    for (std::size_t mode = 0; mode <= settings.size(); ++mode) {
        std::vector<kernels::DeviceSamplingParams> params(rows);
        std::vector<sampling::SamplingParams> cpu(rows);
        for (int r = 0; r < rows; ++r) {
            const sampling::SamplingParams& p =
                settings[mode < settings.size() ? mode : static_cast<std::size_t>(r)];
            cpu[static_cast<std::size_t>(r)] = p;
            params[static_cast<std::size_t>(r)] = {p.temperature, p.top_k, p.top_p, p.min_p,
                                                   uniforms[static_cast<std::size_t>(r)]};
        }
        const bool all_greedy = mode == 0;
        DeviceArray<kernels::DeviceSamplingParams> d_params(params);
        kernels::launch_sample(d_logits.get(), rows, vocab, d_params.get(), all_greedy,
                               tokens.get(), scratch.get(), nullptr);
        const std::vector<std::int32_t> picked = tokens.download(rows);
        for (int r = 0; r < rows; ++r) {
            const std::vector<float> row(logits.begin() + r * vocab,
                                         logits.begin() + (r + 1) * vocab);
            const double u = uniforms[static_cast<std::size_t>(r)];
            if (near_a_boundary(row, cpu[static_cast<std::size_t>(r)], u)) {
                continue;
            }
            QCOMPARE(picked[static_cast<std::size_t>(r)],
                     sampling::pick_token(row, cpu[static_cast<std::size_t>(r)], u));
            ++compared;
        }
        if (all_greedy) {
            QCOMPARE(picked[0], 7);
        }
    }
    QVERIFY(compared >= 30);
}

QTEST_GUILESS_MAIN(TestCudaKernels)
#include "tst_cuda_kernels.moc"
