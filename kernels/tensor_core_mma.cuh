// The warp-level tensor-core instruction the tensor-core kernels share
// (tile_attention.cu, tile_gemm.cu): mma.sync.aligned.m16n8k16 with 16-bit
// inputs and fp32 accumulators, d += a b, one type's side of it each: how
// two values pack into a register (the first in the low half, as
// math/mma_fragments.h's fragments hold them) and the instruction. Callers
// check kernels::device_has_mma (tensor_cores.h) before they launch; built
// for a target without the instruction, it traps.
#pragma once

#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace kvscope::kernels {

template <typename Elem>
struct TensorCore;

template <>
struct TensorCore<__half> {
    __device__ static std::uint32_t pack(float low, float high) {
        const __half2 pair = __floats2half2_rn(low, high);
        return *reinterpret_cast<const std::uint32_t*>(&pair);
    }
    __device__ static void mma(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                               std::uint32_t b1) {
#if __CUDA_ARCH__ >= 800
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
        __trap();
#endif
    }
};

template <>
struct TensorCore<__nv_bfloat16> {
    __device__ static std::uint32_t pack(float low, float high) {
        const __nv_bfloat162 pair = __floats2bfloat162_rn(low, high);
        return *reinterpret_cast<const std::uint32_t*>(&pair);
    }
    __device__ static void mma(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                               std::uint32_t b1) {
#if __CUDA_ARCH__ >= 800
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
        __trap();
#endif
    }
};

} // namespace kvscope::kernels
