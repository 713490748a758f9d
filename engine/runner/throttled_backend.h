// `--throttle-ms N`: a backend that runs another and then sleeps N ms in
// every forward pass, a stand-in for a slower build when trying regression
// gates. The sleep lands inside the step, where a slower kernel's time would.
#pragma once

#include "engine/runner/backend.h"

#include <chrono>
#include <memory>
#include <thread>

namespace kvscope::runner {

class ThrottledBackend final : public Backend {
public:
    ThrottledBackend(std::unique_ptr<Backend> inner, int delay_ms)
        : inner_(std::move(inner))
        , delay_(delay_ms) {}

    const Backend& inner() const { return *inner_; }
    std::string name() const override { return inner_->name(); }
    int vocab_size() const override { return inner_->vocab_size(); }
    int block_size() const override { return inner_->block_size(); }
    int num_blocks() const override { return inner_->num_blocks(); }
    kv::KvCacheFormat cache_format() const override { return inner_->cache_format(); }
    std::int64_t kv_cache_bytes() const override { return inner_->kv_cache_bytes(); }
    void forward(const ForwardBatch& batch, float* logits) override {
        inner_->set_op_observer(op_observer_); // the engine set it on this wrapper
        inner_->forward(batch, logits);
        std::this_thread::sleep_for(delay_);
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
    bool samples_on_device() const override { return inner_->samples_on_device(); }
    void forward_sampled(const ForwardBatch& batch, std::span<const RowSampling> rows,
                         std::int32_t* tokens) override {
        inner_->set_op_observer(op_observer_);
        inner_->forward_sampled(batch, rows, tokens);
        std::this_thread::sleep_for(delay_);
    }

private:
    std::unique_ptr<Backend> inner_;
    std::chrono::milliseconds delay_;
};

} // namespace kvscope::runner
