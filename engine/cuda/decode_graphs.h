// Captured CUDA graphs of decode steps, one per (batch bucket, launch context,
// timed or not): a decode step of a small model is hundreds of short kernels,
// and replaying a graph launches them all at the cost of one. A timed graph
// holds the op timing events of a step recorded for a profile (event record
// nodes between its ops), so a recorded decode is launched at the cost of
// one too, instead of op by op at the host's pace. Its kernels launch in
// turn (no overlap with the kernel before), and each op adds two event
// nodes, so a recorded step takes somewhat longer than an unrecorded one. A graph bakes in the
// device addresses it was captured with, so the set is dropped whenever a buffer it uses moves
// (grows); and if capture fails (a driver or library that cannot capture), graphs switch off for
// the backend with one message, and steps run eagerly. Timed graphs that fail to capture three
// times switch off timed graphs alone: recorded steps then run eagerly, as they did before.
#pragma once

#include <compare>
#include <cstdint>
#include <cuda_runtime_api.h>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace kvscope::cuda {

struct DecodeGraphKey {
    int bucket = 0;         // the padded batch (decode_padding.h)
    int launch_context = 0; // the attention's grid covers this many entries
    bool timed = false;     // op timing events inside (CudaBackend::op)
    auto operator<=>(const DecodeGraphKey&) const = default;
};

class DecodeGraphs {
public:
    explicit DecodeGraphs(bool enabled)
        : enabled_(enabled) {}
    ~DecodeGraphs() { clear(); }
    DecodeGraphs(const DecodeGraphs&) = delete;
    DecodeGraphs& operator=(const DecodeGraphs&) = delete;

    // Whether steps (timed ones: recorded for a profile) may run as graphs.
    bool enabled(bool timed = false) const { return enabled_ && (!timed || timed_enabled_); }
    std::size_t size() const { return graphs_.size(); }
    std::int64_t replays() const { return replays_; }
    const std::string& disabled_reason() const { return disabled_reason_; }

    // Drops every graph when `addresses` (the buffers the graphs use) differ
    // from those the graphs were captured with.
    void check_addresses(const std::vector<const void*>& addresses);

    // Runs the step of `key` on `stream`: replays its graph, capturing it
    // from `enqueue` first if there is none. Returns false (nothing ran)
    // when graphs are off or capture failed; the caller then runs `enqueue`
    // eagerly.
    bool run(const DecodeGraphKey& key, cudaStream_t stream, const std::function<void()>& enqueue);

private:
    void clear();

    bool enabled_;
    bool timed_enabled_ = true;
    static constexpr int kTimedCaptureTries = 3;
    int timed_failures_ = 0;
    std::string disabled_reason_;
    std::map<DecodeGraphKey, cudaGraphExec_t> graphs_;
    std::vector<const void*> addresses_;
    std::int64_t replays_ = 0;
};

} // namespace kvscope::cuda
