// Kernel launchers open their NVTX range with the engine's range class, so
// kernels, ops, layers and steps all land in the one "kvscope" domain.
#pragma once

#include "engine/util/nvtx_range.h"

namespace kvscope::kernels {

using NvtxRange = nvtx::Range;

} // namespace kvscope::kernels
