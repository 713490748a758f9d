#include "engine/cuda/decode_graphs.h"

#include "kernels/cuda_check.cuh"

#include <iostream>

namespace kvscope::cuda {

void DecodeGraphs::clear() {
    for (auto& [key, exec] : graphs_) {
        (void)cudaGraphExecDestroy(exec); // nothing to report from here
    }
    graphs_.clear();
}

void DecodeGraphs::check_addresses(const std::vector<const void*>& addresses) {
    if (addresses != addresses_) {
        clear();
        addresses_ = addresses;
    }
}

bool DecodeGraphs::run(const DecodeGraphKey& key, cudaStream_t stream,
                       const std::function<void()>& enqueue) {
    if (!enabled(key.timed)) {
        return false;
    }
    auto found = graphs_.find(key);
    if (found == graphs_.end()) {
        // Thread-local mode: other threads' CUDA calls (the profiler's CUPTI
        // reads) are not captured or refused.
        KVSCOPE_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
        cudaGraph_t graph = nullptr;
        std::string failure;
        try {
            enqueue();
        } catch (const std::exception& error) {
            failure = error.what();
        }
        // Ends the capture in every case, so the stream can run eagerly.
        const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
        cudaGraphExec_t exec = nullptr;
        if (failure.empty() && ended == cudaSuccess && graph != nullptr) {
            const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
            if (made != cudaSuccess) {
                failure = std::string("cudaGraphInstantiate: ") + cudaGetErrorString(made);
                exec = nullptr;
            }
        } else if (failure.empty()) {
            failure = std::string("cudaStreamEndCapture: ") + cudaGetErrorString(ended);
        }
        if (graph != nullptr) {
            (void)cudaGraphDestroy(graph);
        }
        if (exec == nullptr) {
            (void)cudaGetLastError(); // clear the capture's error; the eager run reports its own
            disabled_reason_ = failure;
            if (key.timed) {
                // A profiler's threads may disturb a capture now and then:
                // a few tries before recorded steps give graphs up.
                if (++timed_failures_ >= kTimedCaptureTries) {
                    timed_enabled_ = false;
                    std::cerr << "kvscope: CUDA graphs off for recorded steps (capture with op "
                                 "timing failed "
                              << kTimedCaptureTries << " times, last: " << failure
                              << "); recorded decode steps run without them\n";
                }
            } else {
                enabled_ = false;
                std::cerr << "kvscope: CUDA graphs off for this run (capture failed: " << failure
                          << "); decode steps run without them\n";
            }
            return false;
        }
        found = graphs_.emplace(key, exec).first;
    }
    KVSCOPE_CUDA_CHECK(cudaGraphLaunch(found->second, stream));
    ++replays_;
    return true;
}

} // namespace kvscope::cuda
