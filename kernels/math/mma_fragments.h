// Which matrix element each lane of a warp holds in each register of the
// tensor-core instruction mma.sync.aligned.m16n8k16 (16-bit inputs, fp32
// accumulators), as the PTX ISA lays the fragments out ("Matrix Fragments
// for mma.m16n8k16 with floating point type"). A lane's group is lane / 4,
// its place in the group lane % 4. The tile attention
// (kernels/tile_attention.cu) finds every element it loads, masks or stores
// through these, and the CPU tests check that each layout covers its matrix
// exactly once and that the scores' accumulators are already the
// probabilities' input fragments.
#pragma once

#include "kernels/math/host_device.h"

namespace kvscope::math::mma {

struct Element {
    int row;
    int col;
};

// A, 16 x 16 (rows M, columns K): four 32-bit registers of two 16-bit
// values each, `half` 0 in the low 16 bits.
KVSCOPE_HD inline Element a_element(int lane, int reg, int half) {
    return {lane / 4 + 8 * (reg % 2), 2 * (lane % 4) + half + 8 * (reg / 2)};
}

// B, 16 x 8 (rows K, columns N): two registers of two values.
KVSCOPE_HD inline Element b_element(int lane, int reg, int half) {
    return {2 * (lane % 4) + half + 8 * reg, lane / 4};
}

// C and D, 16 x 8 (rows M, columns N): four fp32 values.
KVSCOPE_HD inline Element c_element(int lane, int value) {
    return {lane / 4 + 8 * (value / 2), 2 * (lane % 4) + value % 2};
}

// Where A's value (reg, half) of a 16-wide K step comes from when A is the
// product of two earlier instructions whose C tiles cover that step's
// columns side by side (attention's probabilities, computed as scores
// over 8 keys per tile): tile `tile` (0: the step's first 8 columns, 1: the
// next 8) and its value `value`. Same lane, no data moves between lanes.
struct AccumulatorSource {
    int tile;
    int value;
};
KVSCOPE_HD inline AccumulatorSource a_from_accumulators(int reg, int half) {
    return {reg / 2, 2 * (reg % 2) + half};
}

// A 32-wide slice of dot products done as two K steps of the instruction,
// each lane loading 16 contiguous bytes (8 values) of every row it holds:
// K position k of step `step` (0, 1) reads column slice_column(step, k) of
// the slice. The columns a_element and b_element give a lane (k = 2 *
// (lane % 4) + half + 8 * upper) all lie in its own 8 values, in the 32-bit
// word slice_word(step, upper); A and B read the same order, so each step's
// products pair the same columns and the slice sums every column once.
KVSCOPE_HD inline int slice_column(int step, int k) {
    return 8 * ((k % 8) / 2) + 4 * step + 2 * (k / 8) + k % 2;
}
KVSCOPE_HD inline int slice_word(int step, int upper) {
    return 2 * step + upper;
}

} // namespace kvscope::math::mma
