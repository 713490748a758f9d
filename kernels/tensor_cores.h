// Whether the current CUDA device has the warp-level matrix instruction the
// tensor-core kernels use (mma.sync m16n8k16 with fp16/bf16 inputs: compute
// capability 8.0 on). Asked of the run-time once per device and kept; a
// failed question is not kept. Host code, plain C++.
#pragma once

namespace kvscope::kernels {

bool device_has_mma();

} // namespace kvscope::kernels
