#include "engine/cpu/kv_store.h"

#include "engine/cpu/kv_codec.h"
#include "kernels/math/paged_slots.h"

#include <cstring>
#include <stdexcept>

namespace kvscope::cpu {

using kv::KvFormat;

const float* LayerKvView::rows(const KvPlane& plane, kv::BlockId block, int head, int first,
                               int count, float* tile) const {
    const std::int64_t head_offset = static_cast<std::int64_t>(head) * block_size * head_dim;
    const std::byte* head_block = plane.head_block(block, head);
    if (plane.format == KvFormat::f32) {
        return reinterpret_cast<const float*>(head_block) +
               static_cast<std::int64_t>(first) * head_dim;
    }
    if (kv::quantises_whole_blocks(plane.format)) {
        if (const float* open = store->open_block(block, layer, plane.is_key)) {
            return open + head_offset + static_cast<std::int64_t>(first) * head_dim;
        }
        if (plane.is_key) {
            decode_kivi_keys(kv::kivi_bits(plane.format), head_block, block_size, head_dim, first,
                             count, tile);
            return tile;
        }
    }
    decode_kv_rows(plane.format, head_block + first * plane.row_bytes, count, head_dim, tile);
    return tile;
}

KvStore::KvStore(const KvGeometry& geometry, const kv::KvCacheFormat& format)
    : geometry_(geometry)
    , format_(format) {
    if (geometry.block_size <= 0 || geometry.num_blocks <= 0) {
        throw std::invalid_argument("KV cache needs a positive block size and block count");
    }
    for (const KvFormat f : {format.key, format.value}) {
        if (const std::string problem = kv::kv_format_problem(f, geometry.head_dim);
            !problem.empty()) {
            throw std::invalid_argument(problem);
        }
    }
    const std::int64_t blocks_heads =
        static_cast<std::int64_t>(geometry.num_blocks) * geometry.kv_heads;
    key_plane_bytes_ = blocks_heads * kv::kv_head_block_bytes(format.key, geometry.block_size,
                                                              geometry.head_dim, true);
    value_plane_bytes_ = blocks_heads * kv::kv_head_block_bytes(format.value, geometry.block_size,
                                                                geometry.head_dim, false);
    storage_.assign(
        static_cast<std::size_t>((key_plane_bytes_ + value_plane_bytes_) * geometry.layers),
        std::byte{0});
}

double KvStore::bytes_per_token() const {
    return kv::kv_bytes_per_token(format_, geometry_.layers, geometry_.kv_heads, geometry_.head_dim,
                                  geometry_.block_size);
}

LayerKvView KvStore::layer(int layer, int group) {
    LayerKvView view;
    view.store = this;
    view.layer = layer;
    view.group = group;
    view.kv_heads = geometry_.kv_heads;
    view.head_dim = geometry_.head_dim;
    view.block_size = geometry_.block_size;
    std::byte* base = storage_.data() + (key_plane_bytes_ + value_plane_bytes_) * layer;
    const auto plane = [&](std::byte* data, KvFormat format, bool is_key) {
        KvPlane p;
        p.data = data;
        p.format = format;
        p.is_key = is_key;
        p.head_block_bytes =
            kv::kv_head_block_bytes(format, geometry_.block_size, geometry_.head_dim, is_key);
        p.row_bytes = kv::kv_row_bytes(format, geometry_.head_dim, is_key);
        p.kv_heads = geometry_.kv_heads;
        return p;
    };
    view.keys = plane(base, format_.key, true);
    view.values = plane(base + key_plane_bytes_, format_.value, false);
    return view;
}

const float* KvStore::open_block(kv::BlockId block, int layer, bool is_key) const {
    const auto found = open_.find(open_key(block, layer, is_key));
    return found == open_.end() ? nullptr : found->second.data();
}

void KvStore::write_plane(const KvPlane& plane, int layer, std::int32_t slot, const float* src) {
    const int block_size = geometry_.block_size;
    const int d = geometry_.head_dim;
    const math::SlotAddress address = math::slot_address(slot, block_size);
    const kv::BlockId block = address.block;
    const int offset = address.offset;
    if (!kv::quantises_whole_blocks(plane.format)) {
        for (int h = 0; h < geometry_.kv_heads; ++h) {
            encode_kv_row(plane.format, src + static_cast<std::int64_t>(h) * d, d,
                          plane.head_block(block, h) + offset * plane.row_bytes);
        }
        return;
    }
    std::vector<float>& open = open_[open_key(block, layer, plane.is_key)];
    open.resize(static_cast<std::size_t>(geometry_.kv_heads) * block_size * d);
    for (int h = 0; h < geometry_.kv_heads; ++h) {
        std::memcpy(open.data() + (static_cast<std::int64_t>(h) * block_size + offset) * d,
                    src + static_cast<std::int64_t>(h) * d,
                    static_cast<std::size_t>(d) * sizeof(float));
    }
    if (offset != block_size - 1) {
        return;
    }
    // The block is full: quantise it and drop the full-precision copy.
    for (int h = 0; h < geometry_.kv_heads; ++h) {
        const float* tile = open.data() + static_cast<std::int64_t>(h) * block_size * d;
        std::byte* head_block = plane.head_block(block, h);
        if (plane.is_key) {
            encode_kivi_keys(kv::kivi_bits(plane.format), tile, block_size, d, head_block);
        } else {
            for (int t = 0; t < block_size; ++t) {
                encode_kv_row(plane.format, tile + static_cast<std::int64_t>(t) * d, d,
                              head_block + t * plane.row_bytes);
            }
        }
    }
    open_.erase(open_key(block, layer, plane.is_key));
}

void KvStore::write(int layer, const runner::ForwardBatch& batch, const float* k, const float* v,
                    int group) {
    const LayerKvView view = this->layer(layer);
    const std::int64_t width = static_cast<std::int64_t>(geometry_.kv_heads) * geometry_.head_dim;
    const std::span<const std::int32_t> slots = batch.group_slots(group);
    for (std::int64_t t = 0; t < batch.token_count(); ++t) {
        const std::int32_t slot = slots[static_cast<std::size_t>(t)];
        write_plane(view.keys, layer, slot, k + t * width);
        write_plane(view.values, layer, slot, v + t * width);
    }
}

void KvStore::copy_slots(std::span<const std::int32_t> from, std::span<const std::int32_t> to) {
    if (from.size() != to.size()) {
        throw std::invalid_argument("copy_slots: as many sources as destinations are needed");
    }
    const int bs = geometry_.block_size;
    const int heads = geometry_.kv_heads;
    const int d = geometry_.head_dim;
    const std::size_t n = from.size();
    std::vector<float> tile(static_cast<std::size_t>(d));
    for (int layer = 0; layer < geometry_.layers; ++layer) {
        const LayerKvView view = this->layer(layer);
        for (const KvPlane* plane : {&view.keys, &view.values}) {
            if (!kv::quantises_whole_blocks(plane->format)) {
                const auto row = static_cast<std::size_t>(plane->row_bytes);
                std::vector<std::byte> rows(n * static_cast<std::size_t>(heads) * row);
                for (std::size_t i = 0; i < n; ++i) {
                    for (int h = 0; h < heads; ++h) {
                        std::memcpy(rows.data() + (i * heads + h) * row,
                                    plane->head_block(from[i] / bs, h) + (from[i] % bs) * row, row);
                    }
                }
                for (std::size_t i = 0; i < n; ++i) {
                    for (int h = 0; h < heads; ++h) {
                        std::memcpy(plane->head_block(to[i] / bs, h) + (to[i] % bs) * row,
                                    rows.data() + (i * heads + h) * row, row);
                    }
                }
                continue;
            }
            std::vector<float> values(n * static_cast<std::size_t>(heads) * d);
            for (std::size_t i = 0; i < n; ++i) {
                for (int h = 0; h < heads; ++h) {
                    const float* src =
                        view.rows(*plane, from[i] / bs, h, from[i] % bs, 1, tile.data());
                    std::memcpy(values.data() + (i * heads + h) * d, src,
                                static_cast<std::size_t>(d) * sizeof(float));
                }
            }
            for (std::size_t i = 0; i < n; ++i) {
                write_plane(*plane, layer, to[i], values.data() + i * heads * d);
            }
        }
    }
}

std::int64_t KvStore::block_bytes() const {
    return (key_plane_bytes_ + value_plane_bytes_) * geometry_.layers / geometry_.num_blocks;
}

namespace {

// Calls f(offset in the store, offset in the block's bytes, length) for each
// of the block's runs: per layer, its K heads, then its V heads.
template <typename F>
void for_each_block_run(const KvGeometry& g, std::int64_t key_plane, std::int64_t value_plane,
                        kv::BlockId block, F&& f) {
    const std::int64_t key_run = key_plane / g.num_blocks;
    const std::int64_t value_run = value_plane / g.num_blocks;
    std::int64_t at = 0;
    for (int layer = 0; layer < g.layers; ++layer) {
        const std::int64_t base = (key_plane + value_plane) * layer;
        f(base + key_run * block, at, key_run);
        at += key_run;
        f(base + key_plane + value_run * block, at, value_run);
        at += value_run;
    }
}

} // namespace

void KvStore::read_block(kv::BlockId block, std::span<std::byte> bytes) const {
    if (block < 0 || block >= geometry_.num_blocks ||
        static_cast<std::int64_t>(bytes.size()) != block_bytes()) {
        throw std::invalid_argument("read_block: no such block, or the wrong size");
    }
    for (int layer = 0; layer < geometry_.layers; ++layer) {
        if (open_.count(open_key(block, layer, true)) +
            open_.count(open_key(block, layer, false))) {
            throw std::logic_error("read_block: a KIVI block not yet full has no stored form");
        }
    }
    for_each_block_run(geometry_, key_plane_bytes_, value_plane_bytes_, block,
                       [&](std::int64_t from, std::int64_t to, std::int64_t length) {
                           std::memcpy(bytes.data() + to, storage_.data() + from,
                                       static_cast<std::size_t>(length));
                       });
}

void KvStore::write_block(kv::BlockId block, std::span<const std::byte> bytes) {
    if (block < 0 || block >= geometry_.num_blocks ||
        static_cast<std::int64_t>(bytes.size()) != block_bytes()) {
        throw std::invalid_argument("write_block: no such block, or the wrong size");
    }
    const std::vector<kv::BlockId> stale{block};
    release(stale); // whatever was open there is overwritten
    for_each_block_run(geometry_, key_plane_bytes_, value_plane_bytes_, block,
                       [&](std::int64_t to, std::int64_t from, std::int64_t length) {
                           std::memcpy(storage_.data() + to, bytes.data() + from,
                                       static_cast<std::size_t>(length));
                       });
}

void KvStore::release(std::span<const kv::BlockId> blocks) {
    if (open_.empty()) {
        return;
    }
    for (const kv::BlockId block : blocks) {
        for (int layer = 0; layer < geometry_.layers; ++layer) {
            open_.erase(open_key(block, layer, true));
            open_.erase(open_key(block, layer, false));
        }
    }
}

} // namespace kvscope::cpu
