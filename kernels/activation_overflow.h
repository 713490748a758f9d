// Where the kernels that write fp16 activations (the linear layers' inputs:
// the RMSNorms, the gated activation, the attention's output) count the
// values past fp16's range they saturate (to_half_saturated,
// half_store.cuh): a model whose activations outgrow fp16 (Gemma's do) then
// computes on clamped values, which the backend reports instead of hiding.
// A device counter per thread, held while a scope lives (as
// launch_overlap.h's choice is): the CUDA backend sets its own for its
// steps; launches outside any scope count nowhere. Other fp16 roundings are
// not counted: the queries the tile attention packs for its tensor cores,
// and K/V written to an f16 cache (which math::fp32_to_fp16 rounds).
#pragma once

namespace kvscope::kernels {

// This thread's counter now (device memory), or nullptr.
unsigned int* activation_overflow_counter();

// Sets this thread's counter while it lives.
class ActivationOverflowScope {
public:
    explicit ActivationOverflowScope(unsigned int* counter);
    ~ActivationOverflowScope();
    ActivationOverflowScope(const ActivationOverflowScope&) = delete;
    ActivationOverflowScope& operator=(const ActivationOverflowScope&) = delete;

private:
    unsigned int* previous_;
};

} // namespace kvscope::kernels
