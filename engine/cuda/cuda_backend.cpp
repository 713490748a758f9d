#include "engine/cuda/cuda_backend.h"

#include "engine/cuda/cuda_cache_support.h"
#include "engine/cuda/decode_padding.h"
#include "engine/cuda/query_tiles.h"
#include "engine/cuda/staging_layout.h"
#include "engine/util/host_clock.h"
#include "kernels/activation_overflow.h"
#include "kernels/attention_capture.cuh"
#include "kernels/copy_slots.cuh"
#include "kernels/cuda_check.cuh"
#include "kernels/embedding.cuh"
#include "kernels/kv_append.cuh"
#include "kernels/launch_overlap.h"
#include "kernels/math/paged_slots.h"
#include "kernels/nvtx_range.h"
#include "kernels/paged_attention.cuh"
#include "kernels/rms_norm.cuh"
#include "kernels/rope.cuh"
#include "kernels/rope_kv_write.cuh"
#include "kernels/sampling.cuh"
#include "kernels/tile_attention.cuh"
#include "kernels/to_half.cuh"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <tuple>

namespace kvscope::cuda {

static_assert(kSplitLengthStep == kernels::kShortestAttentionSplit,
              "attention_split_length cuts the lengths the kernels take");

namespace {

std::string mib(std::int64_t bytes) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
    return text;
}

std::size_t size_of(std::int64_t count) {
    return static_cast<std::size_t>(std::max<std::int64_t>(count, 0));
}

// Checks what the device cannot (before any allocation on it), selects the
// device and returns its name.
std::string prepare_device(const model::LlamaConfig& c, const CudaBackendOptions& options) {
    if (const std::string problem =
            cache_problem(model::kv_group_layout(c, options.hybrid_kv), options.cache_format);
        !problem.empty()) {
        throw std::invalid_argument(problem);
    }
    if (options.block_size <= 0 || options.num_blocks <= 0) {
        throw std::invalid_argument("KV cache needs a positive block size and block count");
    }
    for (const kv::KvFormat f : {options.cache_format.key, options.cache_format.value}) {
        if (const std::string problem = kv::kv_format_problem(f, c.head_dim); !problem.empty()) {
            throw std::invalid_argument(problem);
        }
    }
    if (static_cast<std::int64_t>(options.num_blocks) * options.block_size > INT32_MAX) {
        throw std::invalid_argument("KV cache of " + std::to_string(options.num_blocks) +
                                    " blocks x " + std::to_string(options.block_size) +
                                    " tokens: slots must fit in 32 bits");
    }
    KVSCOPE_CUDA_CHECK(cudaSetDevice(options.device));
    cudaDeviceProp properties{};
    KVSCOPE_CUDA_CHECK(cudaGetDeviceProperties(&properties, options.device));
    return properties.name;
}

// Ends the open-block bookkeeping's step however the code between leaves,
// so an exception cannot leave it mid-step for every later one.
class StepGuard {
public:
    explicit StepGuard(KiviOpenBlocks* blocks)
        : blocks_(blocks) {}
    ~StepGuard() {
        if (blocks_ != nullptr) {
            blocks_->end_step();
        }
    }
    StepGuard(const StepGuard&) = delete;
    StepGuard& operator=(const StepGuard&) = delete;

private:
    KiviOpenBlocks* blocks_;
};

// Where each array of a step sits in the staging buffer and its device copy.
struct StepArrays {
    std::size_t token_ids = 0;
    std::size_t positions = 0;
    std::size_t cache_positions = 0;
    std::size_t slot_mapping = 0;
    std::size_t sequence_of = 0;
    std::size_t block_table_offsets = 0;
    std::size_t block_tables = 0;
    std::size_t capture_attention_from = 0;
    std::size_t capture_offsets = 0; // int64
    std::size_t logit_tokens = 0;
    std::size_t write_slot = 0; // KIVI only, like the two below
    std::size_t read_slot = 0;
    std::size_t filled_blocks = 0;
    std::size_t filled_count = 0;      // one int32: filled_blocks' count
    std::size_t query_tile_bounds = 0; // tiled steps only, like the one below
    std::size_t untiled_tokens = 0;
};

} // namespace

CudaBackend::CudaBackend(std::shared_ptr<const model::LlamaModel> model,
                         const CudaBackendOptions& options)
    : model_(std::move(model))
    , options_(options)
    , device_name_(prepare_device(model_->config(), options))
    , cublas_(stream_.get())
    , weights_(CudaWeights::of(*model_, options.device))
    , graphs_(options.cuda_graphs) {
    const model::LlamaConfig& c = model_->config();
    cublas_.set_tile_gemm(options_.tile_gemm);
    overflows_.reserve_discard(1);
    download_overflows_.reserve_discard(1);
    groups_ = model::kv_group_layout(c, options_.hybrid_kv);
    rope_halves_ = c.traits.rope == model::RopePairing::halves;
    const kv::KvCacheFormat& format = options_.cache_format;
    // One block more than the KV manager's: the padded decode rows' spare.
    const std::int64_t blocks_heads =
        (static_cast<std::int64_t>(options_.num_blocks) + 1) * c.kv_heads;
    key_plane_bytes_ =
        blocks_heads * kv::kv_head_block_bytes(format.key, options_.block_size, c.head_dim, true);
    value_plane_bytes_ = blocks_heads * kv::kv_head_block_bytes(format.value, options_.block_size,
                                                                c.head_dim, false);
    const std::int64_t pool_bytes =
        (key_plane_bytes_ + value_plane_bytes_) * groups_.layers_per_block;
    int max_pitch = 0;
    KVSCOPE_CUDA_CHECK(cudaDeviceGetAttribute(&max_pitch, cudaDevAttrMaxPitch, options_.device));
    KVSCOPE_CUDA_CHECK(
        cudaDeviceGetAttribute(&multiprocessors_, cudaDevAttrMultiProcessorCount, options_.device));
    max_copy_pitch_ = max_pitch;
    overlap_launches_ =
        options_.overlap_launches && kernels::device_overlaps_launches(options_.device);
    std::size_t free_bytes = 0;
    std::size_t total_bytes = 0;
    KVSCOPE_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    if (pool_bytes > static_cast<std::int64_t>(free_bytes)) {
        throw std::runtime_error(
            "the KV cache of " + std::to_string(options_.num_blocks) + " blocks (" +
            mib(pool_bytes) + ", " + format.describe() + ") does not fit on " + device_name_ +
            ": " + mib(static_cast<std::int64_t>(free_bytes)) + " free of " +
            mib(static_cast<std::int64_t>(total_bytes)) + " with the weights (" +
            mib(weights_->bytes()) + ") loaded; ask for fewer blocks or a smaller share");
    }
    pool_ = DeviceBuffer<std::uint8_t>(size_of(pool_bytes));
    // Zeroed as the CPU's: a block never written decodes to zeros, not noise.
    KVSCOPE_CUDA_CHECK(cudaMemsetAsync(pool_.data(), 0, pool_.bytes(), stream_.get()));
    if (kv::quantises_whole_blocks(format.key) || kv::quantises_whole_blocks(format.value)) {
        // The spare block too: a decode graph's padding rows write there.
        open_blocks_.emplace(options_.num_blocks + 1);
    }
    if (!c.rope_divisors.empty()) { // Llama 3's scaled RoPE, for the kernels that compute angles
        rope_divisors_ = DeviceBuffer<float>(c.rope_divisors.size());
        KVSCOPE_CUDA_CHECK(cudaMemcpy(rope_divisors_.data(), c.rope_divisors.data(),
                                      c.rope_divisors.size() * sizeof(float),
                                      cudaMemcpyHostToDevice));
        KVSCOPE_CUDA_CHECK(cudaDeviceSynchronize()); // see the tables' copies below
    }
    const kernels::PagedKvView first_layer = layer_view(0, nullptr, nullptr);
    if (!has_kivi_plane() && kernels::rope_kv_write_fits(first_layer, rope_halves_)) {
        std::vector<float> bases;
        for (const model::LayerAttention& layer : c.layer_attention) {
            if (std::find(bases.begin(), bases.end(), layer.rope_base) == bases.end()) {
                bases.push_back(layer.rope_base);
            }
        }
        // Positions past the tables (a context beyond the trained one, or
        // past 32k positions of tables in all) get their angles computed in
        // the kernel.
        rope_positions_ = std::clamp(c.context_length, 1, 32768 / static_cast<int>(bases.size()));
        for (const float base : bases) {
            const std::vector<math::RopeCosSin> angles =
                kernels::rope_table(rope_positions_, c.head_dim, base, c.rope_divisors_or_null());
            RopeAngles& table = rope_angles_.emplace_back();
            table.base = base;
            table.angles = DeviceBuffer<math::RopeCosSin>(angles.size());
            KVSCOPE_CUDA_CHECK(cudaMemcpy(table.angles.data(), angles.data(),
                                          angles.size() * sizeof(math::RopeCosSin),
                                          cudaMemcpyHostToDevice));
        }
        // As CudaWeights: a copy from pageable memory may return before it
        // lands, and the non-blocking stream does not wait for it.
        KVSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
    }
    const kernels::WideRowFetchScope rows(options_.wide_row_fetch); // the kernel planned for
    step_splits_ = kernels::attention_split_limits(first_layer, c.heads, /*capture=*/false);
    capture_splits_ = kernels::attention_split_limits(first_layer, c.heads, /*capture=*/true);
    if (options_.tile_prefill) {
        // Every layer's cache must take the tile path: a tiled step has no
        // per-token fallback.
        bool every_layer_fits = true;
        for (int l = 0; l < c.layers; ++l) {
            every_layer_fits = every_layer_fits && kernels::tile_attention_fits(
                                                       layer_view(l, nullptr, nullptr), c.heads);
        }
        tile_splits_ = kernels::tile_attention_split_limits(first_layer, c.heads);
        if (every_layer_fits && tile_splits_.blocks_per_multiprocessor > 0) {
            tile_tokens_ = kernels::tile_attention_tile_tokens(c.heads / c.kv_heads);
        }
    }
    stream_.synchronize();
}

CudaBackend::~CudaBackend() {
    // Work still queued may use the buffers freed next; errors cannot be
    // reported from here and are left to the runtime.
    (void)cudaStreamSynchronize(stream_.get());
}

std::string CudaBackend::changed_paths() const {
    const CudaBackendOptions defaults;
    std::string text;
    const auto add = [&text](bool changed, const char* what) {
        if (changed) {
            text += (text.empty() ? "" : ", ") + std::string(what);
        }
    };
    add(options_.cuda_graphs != defaults.cuda_graphs, "no CUDA graphs");
    add(options_.overlap_launches != defaults.overlap_launches, "kernels launched in turn");
    add(options_.wide_row_fetch != defaults.wide_row_fetch, "16-bit K/V rows through the ring");
    add(options_.tile_prefill != defaults.tile_prefill, "prefill attention per token");
    add(options_.tile_gemm != defaults.tile_gemm, "cuBLAS for 9 to 64 tokens");
    return text;
}

// ---- Views and buffers --------------------------------------------------------

kernels::PagedKvView CudaBackend::layer_view(int layer, const std::int32_t* write_slot,
                                             const std::int32_t* read_slot) const {
    const auto l = static_cast<std::size_t>(layer);
    kernels::PagedKvView view = slot_view(groups_.slot_of[l], write_slot, read_slot);
    view.window = model_->config().layer_attention[l].window;
    return view;
}

kernels::PagedKvView CudaBackend::slot_view(int slot, const std::int32_t* write_slot,
                                            const std::int32_t* read_slot) const {
    const model::LlamaConfig& c = model_->config();
    const kv::KvCacheFormat& format = options_.cache_format;
    kernels::PagedKvView view;
    std::uint8_t* base = pool_.data() + (key_plane_bytes_ + value_plane_bytes_) * slot;
    view.keys.data = base;
    view.keys.format = format.key;
    view.keys.head_block_bytes =
        kv::kv_head_block_bytes(format.key, options_.block_size, c.head_dim, true);
    view.keys.row_bytes = kv::kv_row_bytes(format.key, c.head_dim, true);
    view.values.data = base + key_plane_bytes_;
    view.values.format = format.value;
    view.values.head_block_bytes =
        kv::kv_head_block_bytes(format.value, options_.block_size, c.head_dim, false);
    view.values.row_bytes = kv::kv_row_bytes(format.value, c.head_dim, false);
    if (has_kivi_plane()) {
        view.open.data = open_pool_.data();
        view.open.write_slot = write_slot;
        view.open.read_slot = read_slot;
        view.open.layers = groups_.layers_per_block;
    }
    view.layer = slot;
    view.kv_heads = c.kv_heads;
    view.head_dim = c.head_dim;
    view.block_size = options_.block_size;
    view.num_blocks = options_.num_blocks + 1; // the spare block included
    return view;
}

kernels::RopeTableView CudaBackend::rope_table_of(float base) const {
    kernels::RopeTableView table;
    table.head_dim = model_->config().head_dim;
    table.theta_base = base;
    table.divisors = rope_divisors_or_null();
    for (const RopeAngles& angles : rope_angles_) {
        if (angles.base == base) {
            table.angles = angles.angles.data();
            table.positions = rope_positions_;
        }
    }
    return table; // no table: every angle computed in the kernel
}

void CudaBackend::reserve_open_slots(int slots) {
    if (slots <= open_pool_slots_) {
        return;
    }
    const model::LlamaConfig& c = model_->config();
    const kernels::OpenBlocksView shape{nullptr, nullptr, nullptr, groups_.layers_per_block};
    const std::int64_t per_slot =
        shape.floats_per_slot(c.kv_heads, options_.block_size, c.head_dim);
    // Doubling: a run opens one block per running sequence, and growing
    // copies what is open, so grow rarely.
    const int grown = std::max({slots, 2 * open_pool_slots_, 8});
    DeviceBuffer<float> larger(size_of(per_slot * grown));
    if (!open_pool_.empty()) {
        KVSCOPE_CUDA_CHECK(cudaMemcpyAsync(larger.data(), open_pool_.data(), open_pool_.bytes(),
                                           cudaMemcpyDeviceToDevice, stream_.get()));
        stream_.synchronize(); // queued kernels may still use the old pool
    }
    open_pool_ = std::move(larger);
    open_pool_slots_ = grown;
}

void CudaBackend::zero_open_slots(const std::vector<std::int32_t>& slots) {
    const model::LlamaConfig& c = model_->config();
    const kernels::OpenBlocksView shape{nullptr, nullptr, nullptr, groups_.layers_per_block};
    const std::int64_t per_slot =
        shape.floats_per_slot(c.kv_heads, options_.block_size, c.head_dim);
    for (const std::int32_t slot : slots) {
        KVSCOPE_CUDA_CHECK(cudaMemsetAsync(open_pool_.data() + per_slot * slot, 0,
                                           size_of(per_slot) * sizeof(float), stream_.get()));
    }
}

void CudaBackend::wait_for_staging() {
    // An event never recorded counts as complete.
    staging_read_.synchronize();
}

void CudaBackend::upload_staging(std::size_t bytes) {
    KVSCOPE_CUDA_CHECK(cudaMemcpyAsync(batch_arrays_.data(), staging_.data(), bytes,
                                       cudaMemcpyHostToDevice, stream_.get()));
    staging_read_.record(stream_.get());
}

std::int64_t CudaBackend::activation_bytes() const {
    std::size_t rope_bytes = 0;
    for (const RopeAngles& table : rope_angles_) {
        rope_bytes += table.angles.bytes();
    }
    const std::size_t bytes = act_.x.bytes() + act_.h.bytes() + act_.qkv.bytes() + act_.q.bytes() +
                              act_.k.bytes() + act_.v.bytes() + act_.gate_up.bytes() +
                              act_.x_half.bytes() + act_.ffn_half.bytes() + act_.workspace.bytes() +
                              act_.selected.bytes() + act_.logits.bytes() + act_.capture.bytes() +
                              act_.copy_rows.bytes() + act_.copy_keys.bytes() +
                              act_.copy_values.bytes() + act_.sample_scratch.bytes() +
                              act_.tokens.bytes() + batch_arrays_.bytes() + rope_bytes;
    return static_cast<std::int64_t>(bytes);
}

std::vector<const void*> CudaBackend::graph_addresses() const {
    return {act_.x.data(),        act_.h.data(),         act_.qkv.data(),      act_.q.data(),
            act_.k.data(),        act_.v.data(),         act_.gate_up.data(),  act_.x_half.data(),
            act_.ffn_half.data(), act_.workspace.data(), act_.selected.data(), act_.logits.data(),
            batch_arrays_.data(), pool_.data(),          open_pool_.data()};
}

std::optional<runner::DeviceMemory> CudaBackend::device_memory() const {
    KVSCOPE_CUDA_CHECK(cudaSetDevice(options_.device));
    std::size_t free_bytes = 0;
    std::size_t total_bytes = 0;
    KVSCOPE_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    runner::DeviceMemory memory;
    memory.weights = weights_->bytes();
    memory.kv_pool = static_cast<std::int64_t>(pool_.bytes() + open_pool_.bytes());
    memory.activations = activation_bytes();
    memory.free = static_cast<std::int64_t>(free_bytes);
    memory.total = static_cast<std::int64_t>(total_bytes);
    return memory;
}

// ---- Op timing ----------------------------------------------------------------

int CudaBackend::next_timing_event() {
    if (timing_events_used_ == static_cast<int>(timing_events_.size())) {
        timing_events_.emplace_back(true);
    }
    return timing_events_used_++;
}

template <class Run>
void CudaBackend::op(const char* name, int layer, Run&& run) {
    const nvtx::Range range(name);
    if (op_observer_ == nullptr) {
        run();
        return;
    }
    const int begin = next_timing_event();
    record_timing_event(begin);
    run();
    const int end = next_timing_event();
    record_timing_event(end);
    timed_ops_.push_back({name, layer, begin, end});
}

void CudaBackend::record_timing_event(int index) {
    const cudaStream_t stream = stream_.get();
    const cudaEvent_t event = timing_events_[static_cast<std::size_t>(index)].get();
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    KVSCOPE_CUDA_CHECK(cudaStreamIsCapturing(stream, &capturing));
    // Into a graph being captured as an event record node (a plain record
    // there only orders the capture), so every replay records the time.
    KVSCOPE_CUDA_CHECK(cudaEventRecordWithFlags(event, stream,
                                                capturing == cudaStreamCaptureStatusActive
                                                    ? cudaEventRecordExternal
                                                    : cudaEventRecordDefault));
}

void CudaBackend::report_ops() {
    // Event times are relative to the anchor (event 0), recorded on an idle
    // stream right after anchor_host_ns_ was read: GPU time on the host clock.
    const cudaEvent_t anchor = timing_events_.front().get();
    const auto host_ns = [&](int event) {
        float ms = 0.0f;
        KVSCOPE_CUDA_CHECK(cudaEventElapsedTime(
            &ms, anchor, timing_events_[static_cast<std::size_t>(event)].get()));
        return anchor_host_ns_ + std::llround(static_cast<double>(ms) * 1e6);
    };
    for (const TimedOp& timed : timed_ops_) {
        op_observer_->on_op(timed.name, timed.layer, host_ns(timed.begin), host_ns(timed.end), 0);
    }
    timed_ops_.clear();
}

// ---- Forward ------------------------------------------------------------------

void CudaBackend::validate(const runner::ForwardBatch& batch) const {
    const auto fail = [](const std::string& what) {
        throw std::invalid_argument("CUDA backend: " + what);
    };
    const model::LlamaConfig& c = model_->config();
    const std::size_t tokens = batch.token_ids.size();
    const std::size_t sequences = batch.context_lengths.size();
    if (batch.layers > 0 && has_kivi_plane()) {
        // Blocks a partial pass fills would stay unquantised in the layers
        // it skips.
        fail("a pass of some layers (a self-draft) cannot write KIVI blocks");
    }
    for (const std::int32_t length : batch.context_lengths) {
        if (length < 0) { // the capture's per-sequence offsets sum them
            fail("a sequence's context length is negative");
        }
    }
    if (tokens > static_cast<std::size_t>(INT32_MAX / std::max(1, c.hidden))) {
        fail("a batch of " + std::to_string(tokens) + " tokens is too large");
    }
    if (batch.block_size != options_.block_size) {
        fail("the batch's block size " + std::to_string(batch.block_size) + " is not the cache's " +
             std::to_string(options_.block_size));
    }
    const int groups = groups_.group_count();
    if (batch.kv_groups != groups) {
        fail("the batch has block tables for " + std::to_string(batch.kv_groups) +
             " KV groups, the cache " + std::to_string(groups));
    }
    const auto group_count = static_cast<std::size_t>(groups);
    if (batch.positions.size() != tokens || batch.cache_positions.size() != tokens ||
        batch.slot_mapping.size() != tokens * group_count || batch.sequence_of.size() != tokens) {
        fail("the batch's per-token arrays differ in length");
    }
    if (batch.block_table_offsets.size() != sequences + 1 ||
        batch.block_table_offsets.front() != 0 ||
        static_cast<std::size_t>(batch.block_table_offsets.back()) * group_count !=
            batch.block_tables.size() ||
        !std::is_sorted(batch.block_table_offsets.begin(), batch.block_table_offsets.end())) {
        fail("the batch's block table offsets do not match its sequences and tables");
    }
    if (!batch.capture_attention_from.empty() && batch.capture_attention_from.size() != sequences) {
        fail("capture_attention_from needs one entry per sequence");
    }
    const auto per_group = static_cast<std::size_t>(batch.block_table_offsets.back());
    for (std::size_t i = 0; i < batch.block_tables.size(); ++i) {
        const kv::BlockId block = batch.block_tables[i];
        // A sliding group's table lets go of the blocks that left its window.
        const bool let_go =
            block == kv::kNoBlock && groups_.window(static_cast<int>(i / per_group)) > 0;
        if (!let_go && (block < 0 || block >= options_.num_blocks)) {
            fail("block " + std::to_string(block) + " is outside the KV cache");
        }
    }
    for (const std::int32_t slot : batch.slot_mapping) {
        if (slot < 0 || slot >= options_.num_blocks * options_.block_size) {
            // The CPU backend's words, so callers see one message.
            throw std::invalid_argument("slot " + std::to_string(slot) +
                                        " is outside the KV cache");
        }
    }
    for (std::size_t t = 0; t < tokens; ++t) {
        const std::int32_t id = batch.token_ids[t];
        if (id < 0 || id >= c.vocab) {
            throw std::invalid_argument("token id " + std::to_string(id) +
                                        " is outside the vocabulary");
        }
        const std::int32_t s = batch.sequence_of[t];
        if (s < 0 || static_cast<std::size_t>(s) >= sequences) {
            fail("token " + std::to_string(t) + " belongs to no sequence of the batch");
        }
        const std::int64_t held =
            static_cast<std::int64_t>(batch.block_table_offsets[static_cast<std::size_t>(s) + 1] -
                                      batch.block_table_offsets[static_cast<std::size_t>(s)]) *
            options_.block_size;
        if (batch.cache_positions[t] < 0 || batch.cache_positions[t] >= held) {
            fail("token " + std::to_string(t) + " attends beyond its sequence's blocks");
        }
        // On the device a let-go block inside the window would be a negative
        // address.
        for (int g = 0; g < groups; ++g) {
            if (groups_.window(g) == 0) {
                continue; // its tables hold no let-go blocks (checked above)
            }
            const std::int32_t context = batch.cache_positions[t] + 1;
            const kv::BlockId* table = batch.group_table(g, s);
            for (std::int32_t b =
                     math::attended_first(context, groups_.window(g)) / options_.block_size;
                 b <= batch.cache_positions[t] / options_.block_size; ++b) {
                if (table[b] == kv::kNoBlock) {
                    fail("token " + std::to_string(t) + " attends a block its KV group let go");
                }
            }
        }
    }
    for (const std::int32_t t : batch.logit_tokens) {
        if (t < 0 || static_cast<std::size_t>(t) >= tokens) {
            fail("logit token " + std::to_string(t) + " is not in the batch");
        }
    }
    // The output head's buffers hold one row per token.
    if (batch.logit_tokens.size() > tokens) {
        fail("more logit rows than tokens");
    }
    // The attention capture adds into each sequence's context_lengths sums:
    // an entry past them would land in another sequence's, or past the end.
    if (batch.captures_attention()) {
        for (std::size_t t = 0; t < tokens; ++t) {
            const auto s = static_cast<std::size_t>(batch.sequence_of[t]);
            if (batch.cache_positions[t] >= batch.context_lengths[s]) {
                fail("token " + std::to_string(t) + " attends past its sequence's context length");
            }
        }
    }
}

template <class Work>
void CudaBackend::run_guarded(Work&& work) {
    if (!failure_.empty()) {
        throw std::runtime_error("the CUDA backend stopped after an earlier step failed (" +
                                 failure_ + ")");
    }
    device_work_started_ = false;
    try {
        work();
    } catch (const std::exception& error) {
        // Refused, or out of memory, before anything ran: the backend is as
        // it was. Past that point a failure may have run part of the kernels
        // while the host's bookkeeping (KIVI's open blocks) moved on, so
        // later steps could read a cache that is not what the host thinks.
        if (device_work_started_) {
            failure_ = error.what();
        }
        throw;
    }
}

void CudaBackend::forward(const runner::ForwardBatch& batch, float* logits) {
    guarded_step(batch, logits, {}, nullptr);
}

void CudaBackend::guarded_step(const runner::ForwardBatch& batch, float* logits,
                               std::span<const runner::RowSampling> sampling,
                               std::int32_t* tokens) {
    if (!failure_.empty()) {
        throw std::runtime_error("the CUDA backend stopped after an earlier step failed (" +
                                 failure_ + ")");
    }
    run_guarded([&] { run_step(batch, logits, sampling, tokens); });
}

void CudaBackend::forward_sampled(const runner::ForwardBatch& batch,
                                  std::span<const runner::RowSampling> rows, std::int32_t* tokens) {
    if (rows.size() != batch.logit_tokens.size()) {
        throw std::invalid_argument("forward_sampled: one sampling row per logit row is needed");
    }
    guarded_step(batch, nullptr, rows, tokens);
}

// What a step is, worked out before anything changes: whether it replays a
// graph (and the padded batch it then runs), its sizes, the attention's
// splits, and where each array sits in the staging buffer.
struct CudaBackend::StepPlan {
    const runner::ForwardBatch* requested = nullptr;
    std::optional<int> bucket;                  // the decode graph's bucket, when one runs
    std::optional<runner::ForwardBatch> padded; // requested, padded to the bucket
    const runner::ForwardBatch& batch() const { return padded ? *padded : *requested; }
    int wanted_rows = 0; // the requested batch's logit rows (not the bucket's)
    int tokens = 0;
    int sequences = 0;
    int rows = 0;
    bool capture = false;
    int launch_context = 0;
    int split = 0;
    int max_splits = 0;
    std::vector<std::int64_t> offsets; // each sequence's captured entries start here
    std::int64_t capture_total = 0;
    QueryTiles tiles; // (query_tiles.h) none: every token on the per-token paths
    StagingLayout layout;
    StepArrays at;
    bool sampled = false; // forward_sampled: tokens back, the logits stay on the device
    std::size_t at_sampling = 0;
    bool all_greedy = true;
};

// The step's arrays on the device, as the kernels take them.
struct CudaBackend::DeviceStep {
    kernels::DeviceBatchView batch;
    const std::int32_t* logit_tokens = nullptr;
    const std::int32_t* write_slot = nullptr; // KIVI's open blocks, like the two below
    const std::int32_t* read_slot = nullptr;
    const std::int32_t* filled_blocks = nullptr;
    int filled_host_count = 0;                  // the blocks this step fills ...
    const std::int32_t* filled_count = nullptr; // ... and that count on the device, for graphs
    const kernels::DeviceSamplingParams* sampling = nullptr; // forward_sampled only
};

void CudaBackend::run_step(const runner::ForwardBatch& requested, float* logits,
                           std::span<const runner::RowSampling> sampling,
                           std::int32_t* sampled_tokens) {
    if (requested.token_count() == 0) {
        return;
    }
    validate(requested);
    KVSCOPE_CUDA_CHECK(cudaSetDevice(options_.device));
    const kernels::OverlappedLaunches overlap(overlap_launches_);
    const kernels::WideRowFetchScope rows(options_.wide_row_fetch);
    const kernels::ActivationOverflowScope overflow(overflows_.data());
    const StepPlan plan = plan_step(requested, sampling, sampled_tokens != nullptr);
    reserve_step(plan, sampling);
    const DeviceStep step = stage_step(plan, sampling);
    enqueue_step(plan, step);
    read_back(plan, step, logits, sampled_tokens);
    tiled_steps_ += plan.tiles.count() > 0 ? 1 : 0;
}

CudaBackend::StepPlan CudaBackend::plan_step(const runner::ForwardBatch& requested,
                                             std::span<const runner::RowSampling> sampling,
                                             bool sampled) const {
    const model::LlamaConfig& c = model_->config();
    StepPlan plan;
    plan.requested = &requested;
    // A plain decode step runs as its bucket's captured graph: padded to the
    // bucket with rows nobody reads (decode_padding.h), recorded for a
    // profile too (its op timing events are nodes of the graph), with KIVI
    // planes too (the blocks a step fills are counted on the device). A
    // self-draft's partial pass (requested.layers) runs op by op: the graphs
    // are captured over every layer.
    if (graphs_.enabled(/*timed=*/op_observer_ != nullptr) && requested.layers == 0 &&
        is_plain_decode(requested)) {
        plan.bucket = decode_bucket(static_cast<int>(requested.token_count()));
    }
    if (plan.bucket) {
        plan.padded = pad_decode_batch(requested, *plan.bucket, options_.num_blocks);
    }
    const runner::ForwardBatch& batch = plan.batch();
    plan.wanted_rows = static_cast<int>(requested.logit_tokens.size());
    plan.tokens = static_cast<int>(batch.token_count());
    plan.sequences = static_cast<int>(batch.sequence_count());
    plan.rows = static_cast<int>(batch.logit_tokens.size());
    plan.capture = batch.captures_attention();
    const int tokens = plan.tokens;
    const int sequences = plan.sequences;
    int max_context = 0;
    for (const std::int32_t entry : batch.cache_positions) {
        max_context = std::max(max_context, entry + 1);
    }
    // A graph's grid covers a bucket of shortest splits (split_bucket: four
    // an octave), so a context growing by a token does not need a new
    // graph; splits past a token's context return at once. The split length follows from the
    // (padded) tokens and that context, so a graph's key, bucket and launch
    // context, fixes it too.
    plan.launch_context = plan.bucket
                              ? split_bucket(max_context, kernels::kShortestAttentionSplit) *
                                    kernels::kShortestAttentionSplit
                              : max_context;
    // Prefill chunks (and speculative verifications) take the tensor-core
    // attention over query tiles, a block per tile rather than per token;
    // decodes beside them stay per token. Never in a graph (decodes only)
    // nor with a capture, which rescores the per-token splits.
    if (tile_tokens_ > 0 && !plan.bucket && !plan.capture) {
        plan.tiles = plan_query_tiles(batch.sequence_of, tile_tokens_);
    }
    const bool tiled = plan.tiles.count() > 0;
    if (tiled) {
        plan.split = tiled_split_length(
            plan.tiles, batch.cache_positions, c.kv_heads, multiprocessors_, tile_splits_.longest,
            tile_splits_.shortest, tile_splits_.blocks_per_multiprocessor);
    } else {
        // The capture rescores a split in shared memory, so it keeps the
        // general path's split lengths.
        const kernels::AttentionSplitLimits& limits = plan.capture ? capture_splits_ : step_splits_;
        plan.split = attention_split_length(tokens, c.kv_heads, plan.launch_context,
                                            multiprocessors_, limits.longest, limits.shortest,
                                            limits.blocks_per_multiprocessor);
    }
    plan.max_splits = (plan.launch_context + plan.split - 1) / plan.split;

    // Each sequence's captured entries start at its offset (as on the CPU).
    plan.offsets = runner::capture_offsets(batch);
    plan.capture_total = plan.capture ? plan.offsets.back() : 0;

    StagingLayout& layout = plan.layout;
    StepArrays& at = plan.at;
    at.token_ids = layout.add<std::int32_t>(size_of(tokens));
    at.positions = layout.add<std::int32_t>(size_of(tokens));
    at.cache_positions = layout.add<std::int32_t>(size_of(tokens));
    at.slot_mapping = layout.add<std::int32_t>(batch.slot_mapping.size()); // (groups, tokens)
    at.sequence_of = layout.add<std::int32_t>(size_of(tokens));
    at.block_table_offsets = layout.add<std::int32_t>(size_of(sequences) + 1);
    at.capture_attention_from = layout.add<std::int32_t>(size_of(sequences));
    at.capture_offsets = layout.add<std::int64_t>(size_of(sequences) + 1);
    at.logit_tokens = layout.add<std::int32_t>(size_of(plan.rows));
    if (has_kivi_plane()) {
        at.write_slot = layout.add<std::int32_t>(size_of(options_.num_blocks + 1)); // and the spare
        at.read_slot = layout.add<std::int32_t>(size_of(options_.num_blocks + 1));
        at.filled_blocks = layout.add<std::int32_t>(size_of(tokens)); // at most one per token
        at.filled_count = layout.add<std::int32_t>(1);
    }
    // After every array a captured graph reads: the only one that grows
    // between decode steps of one batch, so the others keep the addresses the
    // graph was captured with.
    at.block_tables = layout.add<std::int32_t>(batch.block_tables.size());
    if (tiled) { // never in a graph's step, so past its arrays
        at.query_tile_bounds = layout.add<std::int32_t>(plan.tiles.bounds.size());
        at.untiled_tokens = layout.add<std::int32_t>(plan.tiles.untiled_tokens.size());
    }
    // The sampling rows last of all: the sampling kernel runs outside any
    // graph, and their count (real rows, not the bucket) and presence
    // (forward or forward_sampled) vary between replays of one graph.
    plan.sampled = sampled;
    if (sampled) {
        plan.at_sampling = layout.add<kernels::DeviceSamplingParams>(sampling.size());
    }
    for (const runner::RowSampling& row : sampling) {
        plan.all_greedy = plan.all_greedy && row.temperature <= 0.0f;
    }
    return plan;
}

void CudaBackend::reserve_step(const StepPlan& plan,
                               std::span<const runner::RowSampling> sampling) {
    const model::LlamaConfig& c = model_->config();
    const runner::ForwardBatch& batch = plan.batch();
    const int tokens = plan.tokens;
    const int rows = plan.rows;
    const std::int64_t hidden = c.hidden;
    const std::int64_t q_width = static_cast<std::int64_t>(c.heads) * c.head_dim;
    const std::int64_t kv_width = static_cast<std::int64_t>(c.kv_heads) * c.head_dim;
    const std::int64_t ffn = c.ffn_hidden;
    // Every allocation first: a failure then leaves the open-block
    // bookkeeping and the previous buffers as they were.
    const std::size_t n = size_of(tokens);
    act_.x.reserve_discard(n * size_of(hidden));
    if (c.traits.post_norms) {
        act_.h.reserve_discard(n * size_of(hidden));
    }
    act_.q.reserve_discard(n * size_of(q_width));
    if (!rope_angles_.empty()) { // the fused QKV rows (16-bit caches)
        act_.qkv.reserve_discard(n * size_of(q_width + 2 * kv_width));
    } else { // Q, K and V apart
        act_.k.reserve_discard(n * size_of(kv_width));
        act_.v.reserve_discard(n * size_of(kv_width));
    }
    act_.gate_up.reserve_discard(n * size_of(2 * ffn));
    act_.x_half.reserve_discard(n * size_of(std::max(hidden, q_width)));
    act_.ffn_half.reserve_discard(n * size_of(ffn));
    act_.workspace.reserve_discard(kernels::AttentionWorkspace::floats(
        tokens, c.heads, std::max(plan.max_splits, 1), c.head_dim));
    act_.selected.reserve_discard(size_of(rows) * size_of(hidden));
    act_.logits.reserve_discard(size_of(rows) * size_of(c.vocab));
    act_.capture.reserve_discard(size_of(plan.capture_total));
    if (plan.sampled) {
        act_.tokens.reserve_discard(sampling.size());
        if (!plan.all_greedy) {
            act_.sample_scratch.reserve_discard(
                kernels::sampling_scratch_bytes(plan.wanted_rows, c.vocab));
        }
        download_tokens_.reserve_discard(sampling.size());
    }
    // Room for the block tables to grow (by a block per sequence now and
    // then) without moving the buffer, which would drop the graphs: the
    // slack is added only when the buffer must grow anyway.
    if (plan.layout.bytes() > batch_arrays_.bytes()) {
        batch_arrays_.reserve_discard(plan.layout.bytes() + size_of(options_.num_blocks + tokens) *
                                                                size_of(groups_.group_count()) *
                                                                sizeof(std::int32_t));
    }
    if (open_blocks_) {
        reserve_open_slots(open_blocks_->capacity_needed(batch.slot_mapping, options_.block_size));
    }
    // The pinned buffers are rewritten below: the last upload (and download)
    // must be done with them. forward() and copy_slots() end synchronised,
    // so this returns at once unless a step failed midway.
    wait_for_staging();
    staging_.reserve_discard(plan.layout.bytes());
    download_.reserve_discard(size_of(rows) * size_of(c.vocab) + size_of(plan.capture_total));
}

CudaBackend::DeviceStep CudaBackend::stage_step(const StepPlan& plan,
                                                std::span<const runner::RowSampling> sampling) {
    const runner::ForwardBatch& batch = plan.batch();
    const StepArrays& at = plan.at;
    const int tokens = plan.tokens;
    const int sequences = plan.sequences;
    std::byte* staged = staging_.data();
    StagingLayout::write<std::int32_t>(staged, at.token_ids, batch.token_ids);
    StagingLayout::write<std::int32_t>(staged, at.positions, batch.positions);
    StagingLayout::write<std::int32_t>(staged, at.cache_positions, batch.cache_positions);
    StagingLayout::write<std::int32_t>(staged, at.slot_mapping, batch.slot_mapping);
    StagingLayout::write<std::int32_t>(staged, at.sequence_of, batch.sequence_of);
    StagingLayout::write<std::int32_t>(staged, at.block_table_offsets, batch.block_table_offsets);
    StagingLayout::write<std::int32_t>(staged, at.block_tables, batch.block_tables);
    if (batch.capture_attention_from.empty()) { // no capture asked for: none from anywhere
        std::fill_n(StagingLayout::at<std::int32_t>(staged, at.capture_attention_from), sequences,
                    INT32_MAX);
    } else {
        StagingLayout::write<std::int32_t>(staged, at.capture_attention_from,
                                           batch.capture_attention_from);
    }
    StagingLayout::write<std::int64_t>(staged, at.capture_offsets, plan.offsets);
    StagingLayout::write<std::int32_t>(staged, at.logit_tokens, batch.logit_tokens);
    if (plan.tiles.count() > 0) {
        StagingLayout::write<std::int32_t>(staged, at.query_tile_bounds, plan.tiles.bounds);
        StagingLayout::write<std::int32_t>(staged, at.untiled_tokens, plan.tiles.untiled_tokens);
    }
    if (plan.sampled) {
        auto* params = StagingLayout::at<kernels::DeviceSamplingParams>(staged, plan.at_sampling);
        for (std::size_t r = 0; r < sampling.size(); ++r) {
            params[r] = {sampling[r].temperature, sampling[r].top_k, sampling[r].top_p,
                         sampling[r].min_p, static_cast<float>(sampling[r].uniform)};
        }
    }
    DeviceStep step;
    std::vector<std::int32_t> opened;
    device_work_started_ = true; // the bookkeeping and the device change from here
    {
        const StepGuard guard(open_blocks_ ? &*open_blocks_ : nullptr);
        if (open_blocks_) {
            const KiviOpenBlocks::Step& open =
                open_blocks_->begin_step(batch.slot_mapping, options_.block_size);
            StagingLayout::write<std::int32_t>(staged, at.write_slot, open.write_slot);
            StagingLayout::write<std::int32_t>(staged, at.read_slot, open.read_slot);
            StagingLayout::write<std::int32_t>(staged, at.filled_blocks, open.filled_blocks);
            step.filled_host_count = static_cast<int>(open.filled_blocks.size());
            *StagingLayout::at<std::int32_t>(staged, at.filled_count) = step.filled_host_count;
            opened = open.opened_slots;
        }
    } // the kernels below quantise the filled blocks: their slots are free after them
    upload_staging(plan.layout.bytes());
    zero_open_slots(opened);

    std::byte* arrays = batch_arrays_.data();
    kernels::DeviceBatchView& device_batch = step.batch;
    device_batch.tokens = tokens;
    device_batch.sequences = sequences;
    device_batch.token_ids = StagingLayout::at<std::int32_t>(arrays, at.token_ids);
    device_batch.positions = StagingLayout::at<std::int32_t>(arrays, at.positions);
    device_batch.cache_positions = StagingLayout::at<std::int32_t>(arrays, at.cache_positions);
    device_batch.slot_mapping = StagingLayout::at<std::int32_t>(arrays, at.slot_mapping);
    device_batch.sequence_of = StagingLayout::at<std::int32_t>(arrays, at.sequence_of);
    device_batch.block_table_offsets =
        StagingLayout::at<std::int32_t>(arrays, at.block_table_offsets);
    device_batch.block_tables = StagingLayout::at<std::int32_t>(arrays, at.block_tables);
    device_batch.capture_attention_from =
        StagingLayout::at<std::int32_t>(arrays, at.capture_attention_from);
    device_batch.capture_offsets = StagingLayout::at<std::int64_t>(arrays, at.capture_offsets);
    step.logit_tokens = StagingLayout::at<std::int32_t>(arrays, at.logit_tokens);
    if (plan.tiles.count() > 0) {
        device_batch.query_tiles = static_cast<int>(plan.tiles.count());
        device_batch.query_tile_tokens = tile_tokens_;
        device_batch.query_tile_bounds =
            StagingLayout::at<std::int32_t>(arrays, at.query_tile_bounds);
        device_batch.untiled_count = static_cast<int>(plan.tiles.untiled_tokens.size());
        device_batch.untiled_tokens = StagingLayout::at<std::int32_t>(arrays, at.untiled_tokens);
    }
    if (has_kivi_plane()) {
        step.write_slot = StagingLayout::at<std::int32_t>(arrays, at.write_slot);
        step.read_slot = StagingLayout::at<std::int32_t>(arrays, at.read_slot);
        step.filled_blocks = StagingLayout::at<std::int32_t>(arrays, at.filled_blocks);
        step.filled_count = StagingLayout::at<std::int32_t>(arrays, at.filled_count);
    }
    if (plan.sampled) {
        step.sampling = StagingLayout::at<kernels::DeviceSamplingParams>(arrays, plan.at_sampling);
    }
    return step;
}

void CudaBackend::enqueue_step(const StepPlan& plan, const DeviceStep& step) {
    const cudaStream_t stream = stream_.get();
    timed_ops_.clear();
    timing_events_used_ = 0;
    if (op_observer_ != nullptr) {
        stream_.synchronize(); // idle, so the anchor runs as the host clock is read
        const int anchor = next_timing_event();
        anchor_host_ns_ = host_now_ns();
        timing_events_[static_cast<std::size_t>(anchor)].record(stream);
    }

    const model::LlamaConfig& c = model_->config();
    // Carved here, outside any graph capture: a bad split throws from the
    // step rather than from inside a capture (which would turn graphs off).
    const kernels::AttentionWorkspace workspace =
        kernels::AttentionWorkspace::carve(act_.workspace.data(), plan.tokens, c.heads,
                                           std::max(plan.max_splits, 1), c.head_dim, plan.split);
    if (plan.capture) { // the launcher accumulates over layers and heads
        KVSCOPE_CUDA_CHECK(cudaMemsetAsync(act_.capture.data(), 0,
                                           size_of(plan.capture_total) * sizeof(float), stream));
    }
    // Outside any graph, which only bakes in the counter's address.
    KVSCOPE_CUDA_CHECK(cudaMemsetAsync(overflows_.data(), 0, sizeof(unsigned int), stream));
    const auto enqueue = [&] {
        enqueue_model(plan, step, workspace);
    };
    bool replayed = false;
    if (plan.bucket) {
        graphs_.check_addresses(graph_addresses());
        const bool timed = op_observer_ != nullptr;
        const DecodeGraphKey key{*plan.bucket, plan.launch_context, timed};
        const int events_before = timing_events_used_;
        {
            // A timed graph's kernels launch in turn: a kernel allowed to
            // overlap the one before it would follow an event record node,
            // and its op's boundaries are events anyway.
            const kernels::OverlappedLaunches in_turn(!timed && kernels::launches_overlap());
            replayed = graphs_.run(key, stream, enqueue);
        }
        if (timed && replayed) {
            // The ops were listed while the graph was captured (this step, or
            // the first of its key); a replay records the same events again.
            if (!timed_ops_.empty()) {
                timed_graph_ops_[key] = {timed_ops_, timing_events_used_};
            } else {
                const auto found = timed_graph_ops_.find(key);
                if (found == timed_graph_ops_.end()) {
                    throw std::logic_error("CUDA backend: a timed decode graph without its ops");
                }
                timed_ops_ = found->second.ops;
                timing_events_used_ = found->second.events_used;
            }
        } else if (!replayed) {
            // A capture that failed listed ops (and took events) of its own.
            timed_ops_.clear();
            timing_events_used_ = events_before;
        }
    }
    if (!replayed) {
        enqueue();
    }
}

void CudaBackend::enqueue_model(const StepPlan& plan, const DeviceStep& step,
                                const kernels::AttentionWorkspace& workspace) {
    const model::LlamaConfig& c = model_->config();
    const CudaWeights& w = *weights_;
    const cudaStream_t stream = stream_.get();
    const int tokens = plan.tokens;
    const float embedding_scale =
        c.traits.scaled_embedding ? std::sqrt(static_cast<float>(c.hidden)) : 1.0f;
    op("embedding", -1, [&] {
        kernels::launch_embedding_gather(w.token_embedding.data, step.batch.token_ids, tokens,
                                         c.hidden, c.vocab, act_.x.data(), stream, embedding_scale);
    });
    const int run_layers =
        plan.batch().layers > 0 ? std::min(plan.batch().layers, c.layers) : c.layers;
    for (int l = 0; l < run_layers; ++l) {
        enqueue_layer(l, plan, step, workspace);
    }
    // Only the rows whose logits are wanted go through the (large) output head.
    if (plan.rows > 0) { // a step of prefill chunks only wants no logits at all
        float* selected = act_.selected.data();
        op("lm_head", -1, [&] {
            kernels::launch_gather_rows(act_.x.data(), step.logit_tokens, plan.rows, c.hidden,
                                        selected, stream);
            kernels::launch_rms_norm_half(selected, w.output_norm, act_.x_half.data(), plan.rows,
                                          c.hidden, c.rms_eps, stream);
            linear(cublas_, act_.x_half.data(), plan.rows, w.output, act_.logits.data());
        });
    }
}

void CudaBackend::enqueue_layer(int l, const StepPlan& plan, const DeviceStep& step,
                                const kernels::AttentionWorkspace& workspace) {
    const model::LlamaConfig& c = model_->config();
    const cudaStream_t stream = stream_.get();
    const int tokens = plan.tokens;
    const std::int64_t q_width = static_cast<std::int64_t>(c.heads) * c.head_dim;
    const std::int64_t kv_width = static_cast<std::int64_t>(c.kv_heads) * c.head_dim;
    const float scale = c.attention_scale > 0.0f ? c.attention_scale
                                                 : 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    const bool fused_rope_write = !rope_angles_.empty();
    const bool gelu_tanh = c.traits.activation == model::GateActivation::gelu_tanh;
    const bool capture = plan.capture;
    const int launch_context = plan.launch_context;
    const kernels::DeviceBatchView& device_batch = step.batch;
    float* x = act_.x.data();
    float* qkv = act_.qkv.data();
    float* q = act_.q.data();
    float* k = act_.k.data();
    float* v = act_.v.data();
    float* gate_up = act_.gate_up.data();
    float* h = act_.h.data();
    __half* x_half = act_.x_half.data();
    __half* ffn_half = act_.ffn_half.data();
    float* sums = act_.capture.data();

    const CudaLayerWeights& layer = weights_->layers[static_cast<std::size_t>(l)];
    const kernels::PagedKvView cache = layer_view(l, step.write_slot, step.read_slot);
    const nvtx::Range layer_range(nvtx::layer_name(l));
    const float rope_base = c.layer_attention[static_cast<std::size_t>(l)].rope_base;
    // The layer's group: its tables (read on the device) and slots.
    const int group = groups_.group_of[static_cast<std::size_t>(l)];
    kernels::DeviceBatchView layer_batch = device_batch;
    layer_batch.kv_group = group;
    const std::int32_t* slots =
        device_batch.slot_mapping + static_cast<std::ptrdiff_t>(group) * tokens;
    // The output of attention or the FFN goes through the layer's
    // post-norm, where it has one, into the residual stream; else
    // the matrix product adds it there itself.
    const auto project_into_residual = [&](const __half* input, const HalfMatrix& matrix,
                                           const float* post_norm) {
        if (post_norm == nullptr) {
            linear(cublas_, input, tokens, matrix, x, /*accumulate=*/true);
            return;
        }
        linear(cublas_, input, tokens, matrix, h);
        kernels::launch_rms_norm_add(h, post_norm, x, tokens, c.hidden, c.rms_eps, stream);
    };

    // Nine kernels a layer on 16-bit caches for Llama where the gate/up
    // product applies the activation itself (the GEMV up to 8 tokens, the
    // tile GEMM up to 64 where it takes the matrix: tile_gemm_fits), ten
    // otherwise. Qwen 2's biases go into the GEMV's and tile GEMM's
    // epilogues (launch_add_bias after cuBLAS), Qwen 3's and Gemma 3's QK
    // norms into the RoPE kernel; Gemma 3's post-attention norm shares
    // the pre-FFN norm's kernel and its post-FFN norm adds one. Each
    // linear layer's input is written as fp16 by the kernel before it, and
    // the output projections add into the residual stream themselves where
    // no post-norm comes between.
    op("attn_norm", l, [&] {
        kernels::launch_rms_norm_half(x, layer.attn_norm, x_half, tokens, c.hidden, c.rms_eps,
                                      stream);
    });
    if (fused_rope_write) { // 16-bit caches: no KIVI finalisation either
        op("qkv", l, [&] {
            linear(cublas_, x_half, tokens, layer.wqkv, qkv, /*accumulate=*/false, layer.qkv_bias);
        });
        // Qwen 3's and Gemma 3's QK norms (before RoPE, as on the CPU) in
        // the same kernel: one op, not qk_norm and rope_kv_write.
        kernels::QkNorms norms;
        if (layer.q_norm != nullptr) {
            norms = {layer.q_norm, layer.k_norm, c.rms_eps};
        }
        op("rope_kv_write", l, [&] {
            kernels::launch_rope_kv_write(cache, qkv, q, device_batch.positions, slots,
                                          rope_table_of(rope_base), tokens, c.heads, rope_halves_,
                                          stream, norms);
        });
    } else {
        op("qkv", l, [&] {
            // Qwen 2's biases (null elsewhere) in the products' epilogues.
            linear(cublas_, x_half, tokens, layer.wq, q, false, layer.q_bias);
            linear(cublas_, x_half, tokens, layer.wk, k, false, layer.k_bias);
            linear(cublas_, x_half, tokens, layer.wv, v, false, layer.v_bias);
        });
        if (layer.q_norm != nullptr) {
            op("qk_norm", l, [&] {
                kernels::launch_rms_norm_heads(q, layer.q_norm, tokens, c.heads, c.head_dim,
                                               q_width, c.rms_eps, stream);
                kernels::launch_rms_norm_heads(k, layer.k_norm, tokens, c.kv_heads, c.head_dim,
                                               kv_width, c.rms_eps, stream);
            });
        }
        op("rope", l, [&] {
            kernels::launch_rope(q, k, device_batch.positions, tokens, c.heads, c.kv_heads,
                                 c.head_dim, rope_base, rope_divisors_or_null(), rope_halves_,
                                 stream);
        });
        op("kv_write", l, [&] {
            kernels::launch_kv_append(cache, k, v, slots, tokens, stream);
            if (plan.bucket && step.filled_count != nullptr) {
                // A graph's KIVI step: up to a block a token, counted on the
                // device (a replay fills others, or none).
                kernels::launch_kivi_finalize(cache, step.filled_blocks, tokens, stream,
                                              step.filled_count);
            } else if (step.filled_host_count > 0) {
                kernels::launch_kivi_finalize(cache, step.filled_blocks, step.filled_host_count,
                                              stream);
            }
        });
    }
    op("attention", l, [&] {
        kernels::launch_paged_attention_half(cache, layer_batch, q, c.heads, scale, launch_context,
                                             workspace, x_half, stream);
        if (capture) {
            kernels::launch_attention_capture(cache, layer_batch, q, c.heads, scale, launch_context,
                                              workspace, sums, stream);
        }
    });
    // Gemma 3's post-attention norm goes into the residual stream with its
    // pre-FFN norm, in the ffn_norm op's one kernel; attn_out leaves the
    // projection in h for it.
    op("attn_out", l, [&] {
        if (layer.post_attn_norm != nullptr) {
            linear(cublas_, x_half, tokens, layer.wo, h);
        } else {
            project_into_residual(x_half, layer.wo, nullptr);
        }
    });
    op("ffn_norm", l, [&] {
        if (layer.post_attn_norm != nullptr) {
            kernels::launch_rms_norm_add_then_half(h, layer.post_attn_norm, x, layer.ffn_norm,
                                                   x_half, tokens, c.hidden, c.rms_eps, stream);
        } else {
            kernels::launch_rms_norm_half(x, layer.ffn_norm, x_half, tokens, c.hidden, c.rms_eps,
                                          stream);
        }
    });
    op("gate_up", l, [&] {
        gated_linear(cublas_, x_half, tokens, layer.w_gate_up, gelu_tanh, gate_up, ffn_half);
    });
    op("down", l, [&] { project_into_residual(ffn_half, layer.w_down, layer.post_ffn_norm); });
}

void CudaBackend::read_back(const StepPlan& plan, const DeviceStep& step, float* logits,
                            std::int32_t* sampled_tokens) {
    const model::LlamaConfig& c = model_->config();
    const cudaStream_t stream = stream_.get();
    const int wanted_rows = plan.wanted_rows;
    const bool sampled = plan.sampled;
    const bool capture = plan.capture;
    const std::int64_t capture_total = plan.capture_total;
    float* download = download_.data();
    const std::size_t logit_floats = sampled ? 0 : size_of(wanted_rows) * size_of(c.vocab);
    if (sampled && wanted_rows > 0) {
        // Outside any graph: the draws and filters change every step.
        kernels::launch_sample(act_.logits.data(), wanted_rows, c.vocab, step.sampling,
                               plan.all_greedy, act_.tokens.data(), act_.sample_scratch.data(),
                               stream);
        KVSCOPE_CUDA_CHECK(cudaMemcpyAsync(download_tokens_.data(), act_.tokens.data(),
                                           size_of(wanted_rows) * sizeof(std::int32_t),
                                           cudaMemcpyDeviceToHost, stream));
    } else if (wanted_rows > 0) {
        KVSCOPE_CUDA_CHECK(cudaMemcpyAsync(download, act_.logits.data(),
                                           logit_floats * sizeof(float), cudaMemcpyDeviceToHost,
                                           stream));
    }
    if (capture) {
        KVSCOPE_CUDA_CHECK(cudaMemcpyAsync(download + logit_floats, act_.capture.data(),
                                           size_of(capture_total) * sizeof(float),
                                           cudaMemcpyDeviceToHost, stream));
    }
    KVSCOPE_CUDA_CHECK(cudaMemcpyAsync(download_overflows_.data(), overflows_.data(),
                                       sizeof(unsigned int), cudaMemcpyDeviceToHost, stream));
    stream_.synchronize();
    activation_overflows_ += *download_overflows_.data();

    if (sampled) {
        std::memcpy(sampled_tokens, download_tokens_.data(),
                    size_of(wanted_rows) * sizeof(std::int32_t));
    } else if (wanted_rows > 0) {
        std::memcpy(logits, download, logit_floats * sizeof(float));
    }
    captured_.reset(plan.batch());
    if (capture) {
        std::copy_n(download + logit_floats, capture_total, captured_.sums());
    }
    if (op_observer_ != nullptr) {
        report_ops();
    }
}

// ---- Cache maintenance --------------------------------------------------------

void CudaBackend::release_blocks(std::span<const kv::BlockId> blocks) {
    // The KV manager's blocks only: the open-block bookkeeping also holds the
    // padding rows' spare block, which nobody releases.
    for (const kv::BlockId block : blocks) {
        if (block < 0 || block >= options_.num_blocks) {
            throw std::invalid_argument("CUDA backend: release of block " + std::to_string(block) +
                                        ", outside the pool of " +
                                        std::to_string(options_.num_blocks));
        }
    }
    if (open_blocks_) {
        open_blocks_->release(blocks);
    }
}

void CudaBackend::check_block_copy(const char* what, kv::BlockId block, std::size_t bytes) const {
    if (block < 0 || block >= options_.num_blocks ||
        static_cast<std::int64_t>(bytes) != block_bytes()) {
        throw std::invalid_argument(std::string(what) + ": no such block, or the wrong size");
    }
}

void CudaBackend::copy_block_runs(kv::BlockId block, std::byte* to_host,
                                  const std::byte* from_host) const {
    // Pool: (layer slots, [K, V], num_blocks + 1, ...): a layer's K run of the
    // block, then its V run, a layer's planes apart. Host: K run, V run, per
    // layer. A strided copy moves every layer's K runs, another the V runs;
    // where a layer's planes exceed the largest pitch a strided copy takes
    // (a big pool), a copy per layer and run.
    const std::int64_t key_run = key_plane_bytes_ / (options_.num_blocks + 1);
    const std::int64_t value_run = value_plane_bytes_ / (options_.num_blocks + 1);
    const std::int64_t host_pitch = key_run + value_run;
    const std::int64_t device_pitch = key_plane_bytes_ + value_plane_bytes_;
    const int layers = groups_.layers_per_block;
    const cudaStream_t stream = stream_.get();
    KVSCOPE_CUDA_CHECK(cudaSetDevice(options_.device));
    for (const auto& [device_at, host_at, width] :
         {std::tuple{key_run * block, std::int64_t{0}, key_run},
          std::tuple{key_plane_bytes_ + value_run * block, key_run, value_run}}) {
        std::uint8_t* const device = pool_.data() + device_at;
        const auto w = static_cast<std::size_t>(width);
        if (device_pitch <= max_copy_pitch_) {
            const auto hp = static_cast<std::size_t>(host_pitch);
            const auto dp = static_cast<std::size_t>(device_pitch);
            const auto h = static_cast<std::size_t>(layers);
            KVSCOPE_CUDA_CHECK(to_host != nullptr
                                   ? cudaMemcpy2DAsync(to_host + host_at, hp, device, dp, w, h,
                                                       cudaMemcpyDeviceToHost, stream)
                                   : cudaMemcpy2DAsync(device, dp, from_host + host_at, hp, w, h,
                                                       cudaMemcpyHostToDevice, stream));
            continue;
        }
        for (int layer = 0; layer < layers; ++layer) {
            std::uint8_t* const d = device + device_pitch * layer;
            const std::int64_t at = host_at + host_pitch * layer;
            KVSCOPE_CUDA_CHECK(
                to_host != nullptr
                    ? cudaMemcpyAsync(to_host + at, d, w, cudaMemcpyDeviceToHost, stream)
                    : cudaMemcpyAsync(d, from_host + at, w, cudaMemcpyHostToDevice, stream));
        }
    }
    KVSCOPE_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void CudaBackend::read_block(kv::BlockId block, std::span<std::byte> bytes) const {
    if (!failure_.empty()) {
        throw std::runtime_error("the CUDA backend stopped after an earlier step failed (" +
                                 failure_ + ")");
    }
    check_block_copy("read_block", block, bytes.size());
    if (open_blocks_ && open_blocks_->current_slots()[static_cast<std::size_t>(block)] >= 0) {
        throw std::logic_error("read_block: a KIVI block not yet full has no stored form");
    }
    copy_block_runs(block, bytes.data(), nullptr);
}

void CudaBackend::write_block(kv::BlockId block, std::span<const std::byte> bytes) {
    run_guarded([&] {
        check_block_copy("write_block", block, bytes.size());
        const kv::BlockId stale[1] = {block};
        release_blocks(stale); // whatever was open there is overwritten
        device_work_started_ = true;
        copy_block_runs(block, nullptr, bytes.data());
    });
}

void CudaBackend::copy_slots(std::span<const std::int32_t> from, std::span<const std::int32_t> to) {
    run_guarded([&] { copy_slots_unguarded(from, to); });
}

void CudaBackend::copy_slots_unguarded(std::span<const std::int32_t> from,
                                       std::span<const std::int32_t> to) {
    if (from.size() != to.size()) {
        throw std::invalid_argument("copy_slots: as many sources as destinations are needed");
    }
    if (from.empty()) {
        return;
    }
    const std::int64_t slots = static_cast<std::int64_t>(options_.num_blocks) * options_.block_size;
    for (const std::span<const std::int32_t> side : {from, to}) {
        for (const std::int32_t slot : side) {
            if (slot < 0 || slot >= slots) {
                throw std::invalid_argument("slot " + std::to_string(slot) +
                                            " is outside the KV cache");
            }
        }
    }
    KVSCOPE_CUDA_CHECK(cudaSetDevice(options_.device));
    const model::LlamaConfig& c = model_->config();
    const cudaStream_t stream = stream_.get();
    const int count = static_cast<int>(from.size());
    const kv::KvCacheFormat& format = options_.cache_format;
    const bool moves_rows =
        !kv::quantises_whole_blocks(format.key) || !kv::quantises_whole_blocks(format.value);

    StagingLayout layout;
    const std::size_t at_from = layout.add<std::int32_t>(from.size());
    const std::size_t at_to = layout.add<std::int32_t>(to.size());
    std::size_t at_before = 0;
    std::size_t at_write = 0;
    std::size_t at_read = 0;
    std::size_t at_filled = 0;
    if (has_kivi_plane()) {
        // Every block's slot, the spare's too (KiviOpenBlocks holds it).
        at_before = layout.add<std::int32_t>(size_of(options_.num_blocks + 1));
        at_write = layout.add<std::int32_t>(size_of(options_.num_blocks + 1));
        at_read = layout.add<std::int32_t>(size_of(options_.num_blocks + 1));
        at_filled = layout.add<std::int32_t>(to.size());
    }

    const std::size_t per_slot_heads = from.size() * size_of(c.kv_heads);
    if (moves_rows) { // launch_copy_slot_rows' staging: K and V rows of each slot
        act_.copy_rows.reserve_discard(per_slot_heads *
                                       size_of(kv::kv_row_bytes(format.key, c.head_dim, true) +
                                               kv::kv_row_bytes(format.value, c.head_dim, false)));
    }
    if (has_kivi_plane()) {
        act_.copy_keys.reserve_discard(per_slot_heads * size_of(c.head_dim));
        act_.copy_values.reserve_discard(per_slot_heads * size_of(c.head_dim));
        reserve_open_slots(open_blocks_->capacity_needed(to, options_.block_size));
    }
    batch_arrays_.reserve_discard(layout.bytes());
    wait_for_staging();
    staging_.reserve_discard(layout.bytes());

    std::byte* staged = staging_.data();
    StagingLayout::write(staged, at_from, from);
    StagingLayout::write(staged, at_to, to);
    int filled_count = 0;
    std::vector<std::int32_t> opened;
    device_work_started_ = true; // the bookkeeping and the device change from here
    if (open_blocks_) {
        // Sources are read as the cache is before the copy; destinations are
        // written as a step writing `to` would.
        StagingLayout::write(staged, at_before, open_blocks_->current_slots());
        const StepGuard guard(&*open_blocks_);
        const KiviOpenBlocks::Step& plan = open_blocks_->begin_step(to, options_.block_size);
        StagingLayout::write<std::int32_t>(staged, at_write, plan.write_slot);
        StagingLayout::write<std::int32_t>(staged, at_read, plan.read_slot);
        StagingLayout::write<std::int32_t>(staged, at_filled, plan.filled_blocks);
        filled_count = static_cast<int>(plan.filled_blocks.size());
        opened = plan.opened_slots;
    }
    upload_staging(layout.bytes());
    zero_open_slots(opened);

    std::byte* arrays = batch_arrays_.data();
    const std::int32_t* from_d = StagingLayout::at<std::int32_t>(arrays, at_from);
    const std::int32_t* to_d = StagingLayout::at<std::int32_t>(arrays, at_to);
    const nvtx::Range range("copy_slots");
    // Every layer slot of the blocks, as the CPU KvStore copies them.
    for (int l = 0; l < groups_.layers_per_block; ++l) {
        if (!has_kivi_plane()) {
            kernels::launch_copy_slot_rows(slot_view(l, nullptr, nullptr), from_d, to_d, count,
                                           act_.copy_rows.data(), stream);
            continue;
        }
        const std::int32_t* before = StagingLayout::at<std::int32_t>(arrays, at_before);
        const kernels::PagedKvView sources = slot_view(l, before, before);
        const kernels::PagedKvView destinations =
            slot_view(l, StagingLayout::at<std::int32_t>(arrays, at_write),
                      StagingLayout::at<std::int32_t>(arrays, at_read));
        // Within a layer every source is read before any destination is
        // written (stream order), and layers do not share bytes.
        kernels::launch_gather_slots_fp32(sources, from_d, count, act_.copy_keys.data(),
                                          act_.copy_values.data(), stream);
        if (moves_rows) { // the per-token plane beside a KIVI one, byte for byte
            kernels::launch_copy_slot_rows(sources, from_d, to_d, count, act_.copy_rows.data(),
                                           stream);
        }
        kernels::launch_kv_append(destinations, act_.copy_keys.data(), act_.copy_values.data(),
                                  to_d, count, stream, /*kivi_only=*/true);
        if (filled_count > 0) {
            kernels::launch_kivi_finalize(destinations,
                                          StagingLayout::at<std::int32_t>(arrays, at_filled),
                                          filled_count, stream);
        }
    }
    stream_.synchronize();
}

} // namespace kvscope::cuda
