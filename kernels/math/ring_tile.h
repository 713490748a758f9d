// How the vector attention's ring (kernels/vector_attention.cu, RingRows)
// cuts a tile of cache rows into copies: a tile is `TileRows` consecutive
// cache entries of one KV head, each row `RowBytes` long; a warp's 32 lanes
// copy it `CopyBytes` at a time, lane after lane along the tile (coalesced),
// into a plane of shared memory where the rows lie end to end. K and V each
// have such a plane, side by side in a slot; a ring holds two slots.
//
// Host and device share it, so the CPU tests (tst_ring_tiles) check that the
// copies cover every byte of a tile once and land each row where the
// decoders read it.
#pragma once

#include "kernels/math/host_device.h"

namespace kvscope::math {

// One lane's c-th copy of a tile.
struct RingPiece {
    bool exists; // false past the tile's last copy (the lane has none there)
    int row;     // the tile's row it copies from
    int byte;    // where in the row
    int word;    // where it lands in the plane, in 4-byte words
};

template <int RowBytes, int CopyBytes, int TileRows>
struct RingTileLayout {
    static_assert(CopyBytes == 4 || CopyBytes == 16, "copies of 4 or 16 bytes");
    static_assert(RowBytes % CopyBytes == 0, "rows must be whole copies");
    static_assert(TileRows >= 1 && TileRows <= 32, "one lane finds each row of a tile");
    static constexpr int kRowCopies = RowBytes / CopyBytes;
    static constexpr int kTileCopies = TileRows * kRowCopies;
    static constexpr int kCopiesPerLane = (kTileCopies + 31) / 32;
    static constexpr int kPlaneWords = TileRows * RowBytes / 4;
    static constexpr int kSlotWords = 2 * kPlaneWords; // K rows, then V rows
    static constexpr int kRingWords = 2 * kSlotWords;
    static_assert(kPlaneWords % 4 == 0, "planes and slots must start 16-byte aligned");

    KVSCOPE_HD static RingPiece piece(int lane, int c) {
        const int index = lane + 32 * c;
        const int row = index / kRowCopies;
        const int byte = (index % kRowCopies) * CopyBytes;
        return {index < kTileCopies, row, byte, (row * RowBytes + byte) / 4};
    }
    // Where row `row` of a plane starts, in bytes from the plane's start.
    KVSCOPE_HD static int row_start(int row) { return row * RowBytes; }
};

} // namespace kvscope::math
