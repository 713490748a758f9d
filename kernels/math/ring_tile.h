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

#include <cstdint>

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

    // Whole tiles. A tile whose rows lie end to end in the pool (one head
    // block, or two adjacent ones: a split's tiles start at multiples of
    // TileRows, so in long contexts most do), from a 16-byte aligned start,
    // is one run of bytes with the plane's layout: the warp copies it 16
    // bytes at a time, with no row's place to look up, and 4-byte rows
    // (q8_0's 68 bytes) take a quarter of the copies.
    static constexpr int kTileBytes = TileRows * RowBytes;
    static constexpr bool kWholeTiles = kTileBytes % 16 == 0;
    static constexpr int kWholeCopiesPerLane = (kTileBytes / 16 + 31) / 32;
    // Whether a tile is such a run: all its rows in the split (`live_rows`
    // of them from its first on), a pool whose K and V planes start 16-byte
    // aligned, and its first row `first` bytes into the plane, its last at
    // `last`. With block_size >= TileRows a tile spans at most two head
    // blocks, and then the rows are end to end exactly when the distance
    // from the first to the last is TileRows - 1 rows.
    KVSCOPE_HD static bool whole(int live_rows, bool pool_aligned, std::int64_t first,
                                 std::int64_t last, int block_size) {
        return kWholeTiles && live_rows >= TileRows && pool_aligned && block_size >= TileRows &&
               first % 16 == 0 && last - first == std::int64_t{TileRows - 1} * RowBytes;
    }
    // Where a lane's c-th 16-byte copy of a whole tile starts, in the tile
    // and in the plane alike; kTileBytes or more: the lane has no such copy.
    KVSCOPE_HD static int whole_copy_byte(int lane, int c) { return (lane + 32 * c) * 16; }
};

} // namespace kvscope::math
