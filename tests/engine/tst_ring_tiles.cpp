// The copies of the CUDA vector attention's ring (kernels/math/ring_tile.h,
// used by RingRows in kernels/vector_attention.cu), run here lane by lane as
// a warp runs them: for every row layout the kernels are built with (f16 and
// bf16 rows at head_dim 32 to 256; q8_0, q4_0 and fp8 rows at 64 and 128),
// the copies cover every byte of a tile's plane exactly once, each aligned
// to its size, and a tile copied from a paged pool (shuffled block table,
// a split that starts mid-block and ends mid-tile) holds each entry's row
// where the decoders read it, and zeros past the split; tiles whose rows lie
// end to end in the pool (one block, or two adjacent ones) go as whole runs
// of 16-byte copies, and land the same.
#include "kernels/math/kv_codec_math.h"
#include "kernels/math/kv_format_kind.h"
#include "kernels/math/paged_slots.h"
#include "kernels/math/ring_tile.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include <QTest>

namespace {

using namespace kvscope;

// Rows a warp's tile holds for a head_dim: as the kernel's (8 values a
// lane, kRowLoads = 4 rows a lane).
constexpr int tile_rows(int head_dim) {
    return (32 / (head_dim / 8)) * 4;
}

template <int RowBytes, int CopyBytes, int TileRows>
void copies_cover_the_plane_once() {
    using Layout = math::RingTileLayout<RowBytes, CopyBytes, TileRows>;
    std::vector<int> written(static_cast<std::size_t>(Layout::kPlaneWords) * 4, 0);
    for (int lane = 0; lane < 32; ++lane) {
        for (int c = 0; c < Layout::kCopiesPerLane; ++c) {
            const math::RingPiece piece = Layout::piece(lane, c);
            if (!piece.exists) {
                continue;
            }
            QVERIFY(piece.row >= 0 && piece.row < TileRows);
            QVERIFY(piece.byte >= 0 && piece.byte + CopyBytes <= RowBytes);
            QCOMPARE(piece.byte % CopyBytes, 0);
            QCOMPARE((piece.word * 4) % CopyBytes, 0);
            QCOMPARE(piece.word * 4, Layout::row_start(piece.row) + piece.byte);
            for (int b = 0; b < CopyBytes; ++b) {
                ++written[static_cast<std::size_t>(piece.word * 4 + b)];
            }
        }
    }
    QVERIFY2(std::all_of(written.begin(), written.end(), [](int n) { return n == 1; }),
             "a byte of the plane is copied other than once");
}

// A tile at `tile` of a split of `n` entries from `begin`, copied as the
// warp copies it (RingRows::copy_tile: a whole tile in 16-byte copies from
// its first row; else lane r finds row r's place and each copy takes it from
// there), compared with the rows read straight from the pool. The pool is
// shuffled blocks of 3 KV heads (no two blocks of a head adjacent), or one
// head's blocks in order (adjacent: tiles across two blocks are whole too).
template <int RowBytes, int CopyBytes, int TileRows>
void tiles_land_where_rows_are_read() {
    using Layout = math::RingTileLayout<RowBytes, CopyBytes, TileRows>;
    const int block_size = 16;
    const int num_blocks = 24;
    const std::int64_t head_block_bytes = std::int64_t{block_size} * RowBytes;
    int whole_tiles = 0;
    int row_tiles = 0;
    for (const bool shuffled : {true, false}) {
        const int kv_heads = shuffled ? 3 : 1;
        std::vector<std::uint8_t> pool(static_cast<std::size_t>(num_blocks * kv_heads) *
                                       static_cast<std::size_t>(head_block_bytes));
        std::mt19937 random(RowBytes * 131 + TileRows);
        for (std::uint8_t& byte : pool) {
            byte = static_cast<std::uint8_t>(random() % 255 + 1); // never 0: zero-fill shows
        }
        std::vector<std::int32_t> table(static_cast<std::size_t>(num_blocks));
        std::iota(table.begin(), table.end(), 0);
        if (shuffled) {
            std::shuffle(table.begin(), table.end(), random);
        }
        for (const int head : {0, kv_heads - 1}) {
            for (const auto& [begin, n] :
                 {std::pair{0, 200}, {37, 101}, {5, 3}, {36, 150}, {64, 40}}) {
                for (int tile = 0; tile < n; tile += TileRows) {
                    std::int64_t lane_row_at[32] = {};
                    for (int lane = 0; lane < TileRows && tile + lane < n; ++lane) {
                        lane_row_at[lane] =
                            math::entry_row_offset(table.data(), begin + tile + lane, block_size,
                                                   head, kv_heads, head_block_bytes, RowBytes);
                    }
                    std::vector<std::uint8_t> plane(
                        static_cast<std::size_t>(Layout::kPlaneWords) * 4, 0xAB);
                    const std::int64_t first = lane_row_at[0];
                    if (Layout::whole(n - tile, /*pool_aligned=*/true, first,
                                      lane_row_at[TileRows - 1], block_size)) {
                        ++whole_tiles;
                        for (int lane = 0; lane < 32; ++lane) {
                            for (int c = 0; c < Layout::kWholeCopiesPerLane; ++c) {
                                const int byte = Layout::whole_copy_byte(lane, c);
                                QCOMPARE((first + byte) % 16, 0); // cp.async's 16 bytes
                                if (byte < Layout::kTileBytes) {
                                    std::memcpy(plane.data() + byte, pool.data() + first + byte,
                                                16);
                                }
                            }
                        }
                    } else {
                        ++row_tiles;
                        for (int lane = 0; lane < 32; ++lane) {
                            for (int c = 0; c < Layout::kCopiesPerLane; ++c) {
                                const math::RingPiece piece = Layout::piece(lane, c);
                                if (!piece.exists) {
                                    continue;
                                }
                                std::uint8_t* to = plane.data() + piece.word * 4;
                                if (tile + piece.row < n) {
                                    std::memcpy(
                                        to, pool.data() + lane_row_at[piece.row % 32] + piece.byte,
                                        CopyBytes);
                                } else {
                                    std::memset(to, 0, CopyBytes);
                                }
                            }
                        }
                    }
                    for (int row = 0; row < TileRows; ++row) {
                        const std::uint8_t* got = plane.data() + Layout::row_start(row);
                        std::vector<std::uint8_t> want(RowBytes, 0);
                        const int j = tile + row;
                        if (j < n) {
                            const int entry = begin + j;
                            const std::int64_t at =
                                (std::int64_t{table[static_cast<std::size_t>(entry / block_size)]} *
                                     kv_heads +
                                 head) *
                                    head_block_bytes +
                                std::int64_t{entry % block_size} * RowBytes;
                            std::memcpy(want.data(), pool.data() + at, RowBytes);
                        }
                        QVERIFY2(std::memcmp(got, want.data(), RowBytes) == 0,
                                 qPrintable(QString("%1 pool, head %2, split from %3, tile %4, "
                                                    "row %5")
                                                .arg(shuffled ? "shuffled" : "ordered")
                                                .arg(head)
                                                .arg(begin)
                                                .arg(tile)
                                                .arg(row)));
                    }
                }
            }
        }
    }
    // Both paths ran: whole tiles at block starts (and across adjacent
    // blocks), row by row mid-block and at a split's end. Tiles longer than
    // a block (head_dim 32's 32 rows) always go row by row.
    QVERIFY(whole_tiles > 0 || TileRows > block_size);
    QVERIFY(row_tiles > 0);
}

template <int RowBytes, int CopyBytes, int TileRows>
void check_layout() {
    copies_cover_the_plane_once<RowBytes, CopyBytes, TileRows>();
    if (!QTest::currentTestFailed()) {
        tiles_land_where_rows_are_read<RowBytes, CopyBytes, TileRows>();
    }
}

constexpr int quantised_row(kv::KvFormat format, int head_dim) {
    return static_cast<int>(math::row_bytes(format, head_dim, false));
}

} // namespace

class TestRingTiles : public QObject {
    Q_OBJECT

private slots:
    void sixteen_bit_rows() {
        check_layout<2 * 32, 16, tile_rows(32)>();
        check_layout<2 * 64, 16, tile_rows(64)>();
        check_layout<2 * 128, 16, tile_rows(128)>();
        check_layout<2 * 256, 16, tile_rows(256)>();
    }
    void quantised_rows() {
        using kv::KvFormat;
        check_layout<quantised_row(KvFormat::q8_0, 64), 4, tile_rows(64)>();
        check_layout<quantised_row(KvFormat::q8_0, 128), 4, tile_rows(128)>();
        check_layout<quantised_row(KvFormat::q4_0, 64), 4, tile_rows(64)>();
        check_layout<quantised_row(KvFormat::q4_0, 128), 4, tile_rows(128)>();
        check_layout<quantised_row(KvFormat::fp8_e4m3, 64), 4, tile_rows(64)>();
        check_layout<quantised_row(KvFormat::fp8_e4m3, 128), 4, tile_rows(128)>();
    }
};

QTEST_GUILESS_MAIN(TestRingTiles)
#include "tst_ring_tiles.moc"
