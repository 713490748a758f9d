// `--throttle-ms N` and `--slow-down P`: a backend that runs another and
// then, in every forward pass, sleeps N ms or runs P percent of the pass's CPU
// time more on the CPU: stand-ins for a slower build when trying regression
// gates. Both land inside the step, where a slower kernel's time would; only
// the second costs CPU time (and cycles, and instructions), as slower code
// does.
#pragma once

#include "engine/runner/backend.h"
#include "engine/util/cpu_clock.h"

#include <chrono>
#include <memory>
#include <thread>

namespace kvscope::runner {

class ThrottledBackend final : public Backend {
public:
    ThrottledBackend(std::unique_ptr<Backend> inner, int delay_ms, double slowdown_percent = 0)
        : inner_(std::move(inner))
        , delay_(delay_ms)
        , slowdown_(slowdown_percent / 100) {}

    const Backend& inner() const { return *inner_; }
    std::string name() const override { return inner_->name(); }
    int vocab_size() const override { return inner_->vocab_size(); }
    int block_size() const override { return inner_->block_size(); }
    int layers() const override { return inner_->layers(); }
    int num_blocks() const override { return inner_->num_blocks(); }
    kv::KvGroupLayout kv_groups() const override { return inner_->kv_groups(); }
    BatchDetail batch_detail() const override { return inner_->batch_detail(); }
    kv::KvCacheFormat cache_format() const override { return inner_->cache_format(); }
    std::int64_t kv_cache_bytes() const override { return inner_->kv_cache_bytes(); }
    void forward(const ForwardBatch& batch, float* logits) override {
        inner_->set_op_observer(op_observer_); // the engine set it on this wrapper
        const std::int64_t cpu_start = thread_cpu_ns();
        inner_->forward(batch, logits);
        slow_down(cpu_start);
    }
    void release_blocks(std::span<const kv::BlockId> blocks) override {
        inner_->release_blocks(blocks);
    }
    std::span<const float> captured_attention(std::size_t s) const override {
        return inner_->captured_attention(s);
    }
    void copy_slots(std::span<const std::int32_t> from, std::span<const std::int32_t> to) override {
        inner_->copy_slots(from, to);
    }
    std::int64_t block_bytes() const override { return inner_->block_bytes(); }
    void read_block(kv::BlockId block, std::span<std::byte> bytes) const override {
        inner_->read_block(block, bytes);
    }
    void write_block(kv::BlockId block, std::span<const std::byte> bytes) override {
        inner_->write_block(block, bytes);
    }
    std::optional<DeviceMemory> device_memory() const override { return inner_->device_memory(); }
    std::int64_t activation_overflows() const override { return inner_->activation_overflows(); }
    bool samples_on_device() const override { return inner_->samples_on_device(); }
    void forward_sampled(const ForwardBatch& batch, std::span<const RowSampling> rows,
                         std::int32_t* tokens) override {
        inner_->set_op_observer(op_observer_);
        const std::int64_t cpu_start = thread_cpu_ns();
        inner_->forward_sampled(batch, rows, tokens);
        slow_down(cpu_start);
    }

private:
    // The pass's CPU time on this thread (the engine's; a pool's other
    // threads are not counted) times the slowdown, then the sleep.
    void slow_down(std::int64_t cpu_start) const {
        if (slowdown_ > 0) {
            const auto ran = static_cast<double>(thread_cpu_ns() - cpu_start);
            spin_thread_cpu_ns(static_cast<std::int64_t>(ran * slowdown_));
        }
        if (delay_.count() > 0) {
            std::this_thread::sleep_for(delay_);
        }
    }

    std::unique_ptr<Backend> inner_;
    std::chrono::milliseconds delay_;
    double slowdown_; // a fraction
};

} // namespace kvscope::runner
