// The KV-event decoder against payloads written here with msgpack-c's own
// packer (independent of the decoder's reading code), in every layout vLLM
// and SGLang have published: positional events as they grew field by field,
// tagged maps with defaults left out, both batch forms, every hash form.
// Unknown event types and fields are counted and skipped; anything malformed
// is a counted error with a message, and random bytes never crash it.
#include "profiler/attach/kv_event_decoder.h"

#include <cstdint>
#include <functional>
#include <msgpack.hpp>
#include <random>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include <QTest>

using namespace kvscope::attach;

namespace {

using Packer = msgpack::packer<msgpack::sbuffer>;
using Write = std::function<void(Packer&)>;
using Events = std::vector<KvEvent>;

QByteArray pack(const Write& write) {
    msgpack::sbuffer buffer;
    Packer packer(buffer);
    write(packer);
    return QByteArray(buffer.data(), static_cast<qsizetype>(buffer.size()));
}

void str(Packer& p, std::string_view text) {
    p.pack_str(static_cast<std::uint32_t>(text.size()));
    p.pack_str_body(text.data(), static_cast<std::uint32_t>(text.size()));
}

void bin(Packer& p, const std::vector<std::uint8_t>& bytes) {
    p.pack_bin(static_cast<std::uint32_t>(bytes.size()));
    p.pack_bin_body(reinterpret_cast<const char*>(bytes.data()),
                    static_cast<std::uint32_t>(bytes.size()));
}

void uints(Packer& p, const std::vector<std::uint64_t>& values) {
    p.pack_array(static_cast<std::uint32_t>(values.size()));
    for (const std::uint64_t value : values) {
        p.pack_uint64(value);
    }
}

// [ts, events...] or [ts, events, rank]; rank nil when asked.
enum class Rank { absent, nil, zero, three };
Write batch(const std::vector<Write>& events, Rank rank = Rank::zero) {
    return [=](Packer& p) {
        p.pack_array(rank == Rank::absent ? 2 : 3);
        p.pack_double(1789095808.25);
        p.pack_array(static_cast<std::uint32_t>(events.size()));
        for (const Write& event : events) {
            event(p);
        }
        if (rank == Rank::nil) {
            p.pack_nil();
        } else if (rank != Rank::absent) {
            p.pack_int(rank == Rank::zero ? 0 : 3);
        }
    };
}

constexpr std::uint64_t kBig = 15760518052499183552ull; // > 2^63, from a vLLM 0.26 stream
constexpr std::uint64_t kBig2 = 18174474959339759123ull;
const std::vector<std::uint64_t> kTokens = {151644, 872, 198, 9064};

// BlockStored as a positional array with the first `fields` fields
// (5: the first publisher ... 11: with kv_cache_spec_*), as vLLM 0.23 sends.
Write stored_array(int fields, const std::string& medium = "GPU") {
    return [=](Packer& p) {
        p.pack_array(static_cast<std::uint32_t>(1 + fields));
        str(p, "BlockStored");
        uints(p, {kBig, kBig2}); // block_hashes
        p.pack_uint64(42);       // parent_block_hash
        uints(p, kTokens);       // token_ids
        p.pack_int(2);           // block_size
        p.pack_nil();            // lora_id
        if (fields >= 6) {
            str(p, medium);
        }
        if (fields >= 7) {
            p.pack_nil(); // lora_name
        }
        if (fields >= 8) {
            p.pack_array(2); // extra_keys, one per block
            p.pack_nil();
            p.pack_array(1);
            str(p, "salt");
        }
        if (fields >= 9) {
            p.pack_int(1); // group_idx
        }
        if (fields >= 10) {
            str(p, "full_attention");
        }
        if (fields >= 11) {
            p.pack_nil(); // kv_cache_spec_sliding_window
        }
        for (int extra = 11; extra < fields; ++extra) {
            p.pack_int(extra); // from a vLLM newer than this decoder
        }
    };
}

StoredBlocks stored_expected(int fields, const std::string& medium = "GPU") {
    StoredBlocks event{.hashes = {BlockHash::from_uint(kBig), BlockHash::from_uint(kBig2)},
                       .parent = BlockHash::from_uint(42),
                       .token_ids = {151644, 872, 198, 9064},
                       .block_size = 2};
    if (fields >= 6) {
        event.medium = medium;
    }
    if (fields >= 9) {
        event.group_idx = 1;
    }
    return event;
}

Write removed_array(bool with_medium) {
    return [=](Packer& p) {
        p.pack_array(with_medium ? 3 : 2);
        str(p, "BlockRemoved");
        uints(p, {kBig});
        if (with_medium) {
            str(p, "CPU");
        }
    };
}

Write cleared_array() {
    return [](Packer& p) {
        p.pack_array(1);
        str(p, "AllBlocksCleared");
    };
}

// A tagged map with the given (name, value) pairs after "type".
Write tagged_map(const std::string& type,
                 const std::vector<std::pair<std::string, Write>>& fields) {
    return [=](Packer& p) {
        p.pack_map(static_cast<std::uint32_t>(1 + fields.size()));
        str(p, "type");
        str(p, type);
        for (const auto& [name, write] : fields) {
            str(p, name);
            write(p);
        }
    };
}

Write nil() {
    return [](Packer& p) {
        p.pack_nil();
    };
}
Write integer(std::int64_t value) {
    return [=](Packer& p) {
        p.pack_int64(value);
    };
}
Write text(const std::string& value) {
    return [=](Packer& p) {
        str(p, value);
    };
}
Write hashes(const std::vector<std::uint64_t>& values) {
    return [=](Packer& p) {
        uints(p, values);
    };
}

std::vector<std::uint8_t> bytes32(std::uint8_t first) {
    std::vector<std::uint8_t> bytes(32);
    for (std::size_t i = 0; i < bytes.size(); ++i) {
        bytes[i] = static_cast<std::uint8_t>(first + i);
    }
    return bytes;
}

BlockHash hash_of(const std::vector<std::uint8_t>& bytes) {
    BlockHash hash;
    [[maybe_unused]] const bool ok = BlockHash::from_bytes(bytes, hash);
    return hash;
}

QString describe(const Events& events) {
    QStringList out;
    for (const KvEvent& event : events) {
        if (const auto* s = std::get_if<StoredBlocks>(&event)) {
            QStringList h;
            for (const BlockHash& hash : s->hashes) {
                h << QString::fromStdString(hash.hex());
            }
            out << QString("Stored{%1 parent=%2 tokens=%3 bs=%4 lora=%5 %6 group=%7}")
                       .arg(h.join(','))
                       .arg(s->parent ? QString::fromStdString(s->parent->hex()) : "none")
                       .arg(s->token_ids.size())
                       .arg(s->block_size)
                       .arg(s->lora_id ? QString::number(*s->lora_id) : "none")
                       .arg(QString::fromStdString(s->medium))
                       .arg(s->group_idx ? QString::number(*s->group_idx) : "none");
        } else if (const auto* r = std::get_if<RemovedBlocks>(&event)) {
            out << QString("Removed{%1 hashes %2}")
                       .arg(r->hashes.size())
                       .arg(QString::fromStdString(r->medium));
        } else {
            out << "Cleared";
        }
    }
    return out.join("; ");
}

QString describe(const DecodeCounts& c) {
    return QString("events=%1 unknown_types=%2 unknown_fields=%3 malformed=%4 rejected=%5")
        .arg(c.events)
        .arg(c.unknown_event_types)
        .arg(c.unknown_fields)
        .arg(c.malformed_events)
        .arg(c.rejected_messages);
}

DecodeCounts counts(std::int64_t events, std::int64_t unknown_types = 0,
                    std::int64_t unknown_fields = 0, std::int64_t malformed = 0) {
    return {.messages = 1,
            .events = events,
            .unknown_event_types = unknown_types,
            .unknown_fields = unknown_fields,
            .malformed_events = malformed,
            .rejected_messages = 0};
}

DecodeResult decode_frames(const QList<QByteArray>& frames) {
    std::vector<std::string_view> views;
    for (const QByteArray& frame : frames) {
        views.emplace_back(frame.constData(), static_cast<std::size_t>(frame.size()));
    }
    return decode_kv_event_message(views);
}

QByteArray sequence_frame(std::uint64_t sequence) {
    QByteArray frame(8, '\0');
    for (int i = 7; i >= 0; --i) {
        frame[i] = static_cast<char>(sequence & 0xFF);
        sequence >>= 8;
    }
    return frame;
}

std::string_view view(const QByteArray& bytes) {
    return {bytes.constData(), static_cast<std::size_t>(bytes.size())};
}

} // namespace

Q_DECLARE_METATYPE(Events)
Q_DECLARE_METATYPE(DecodeCounts)

class TestKvEventDecoder : public QObject {
    Q_OBJECT

private slots:
    void decodes_every_layout_data();
    void decodes_every_layout();
    void frames_data();
    void frames();
    void malformed_events_are_dropped_and_counted_data();
    void malformed_events_are_dropped_and_counted();
    void malformed_payloads_are_rejected_data();
    void malformed_payloads_are_rejected();
    void random_bytes_never_crash();
    void block_hash_forms();
};

void TestKvEventDecoder::decodes_every_layout_data() {
    QTest::addColumn<QByteArray>("payload");
    QTest::addColumn<Events>("events");
    QTest::addColumn<qint64>("rank"); // -1: none
    QTest::addColumn<DecodeCounts>("counts");

    // Positional events as the array grew (see kv_event_decoder.h).
    for (const int fields : {5, 6, 7, 8, 9, 10, 11}) {
        QTest::addRow("array BlockStored, %d fields", fields)
            << pack(batch({stored_array(fields)})) << Events{stored_expected(fields)} << qint64(0)
            << counts(1);
    }
    QTest::newRow("array BlockStored, 2 fields past the known (a newer vLLM)")
        << pack(batch({stored_array(13)})) << Events{stored_expected(13)} << qint64(0)
        << counts(1, 0, 2);
    QTest::newRow("array BlockStored on the CPU tier")
        << pack(batch({stored_array(6, "CPU")})) << Events{stored_expected(6, "CPU")} << qint64(0)
        << counts(1);
    // A medium is kept as text: bytes that are not UTF-8 are replaced with
    // U+FFFD as the recording's JSON writes them, so live and replay agree.
    QTest::newRow("a medium that is not UTF-8")
        << pack(batch({stored_array(6, "GPU\xff")}))
        << Events{stored_expected(6, "GPU\xef\xbf\xbd")} << qint64(0) << counts(1);
    QTest::newRow("first publisher: [ts, events], no medium, no rank")
        << pack(batch({stored_array(5), removed_array(false), cleared_array()}, Rank::absent))
        << Events{stored_expected(5), RemovedBlocks{.hashes = {BlockHash::from_uint(kBig)}},
                  AllCleared{}}
        << qint64(-1) << counts(3);
    QTest::newRow("vLLM 0.23 style batch with rank 3")
        << pack(batch({stored_array(11), removed_array(true), cleared_array()}, Rank::three))
        << Events{stored_expected(11),
                  RemovedBlocks{.hashes = {BlockHash::from_uint(kBig)}, .medium = "CPU"},
                  AllCleared{}}
        << qint64(3) << counts(3);
    QTest::newRow("rank nil") << pack(batch({cleared_array()}, Rank::nil)) << Events{AllCleared{}}
                              << qint64(-1) << counts(1);
    QTest::newRow("empty batch") << pack(batch({})) << Events{} << qint64(0) << counts(0);

    // Tagged maps, vLLM 0.24 and later: defaults (group_idx, extra_keys, ...) omitted.
    const Write map_stored = tagged_map("BlockStored", {{"block_hashes", hashes({kBig})},
                                                        {"parent_block_hash", nil()},
                                                        {"token_ids", hashes({1, 2})},
                                                        {"block_size", integer(2)},
                                                        {"lora_id", integer(7)},
                                                        {"medium", text("GPU")},
                                                        {"lora_name", text("adapter")}});
    const StoredBlocks map_stored_expected{
        .hashes = {BlockHash::from_uint(kBig)}, .token_ids = {1, 2}, .block_size = 2, .lora_id = 7};
    QTest::newRow("map BlockStored, defaults omitted")
        << pack(batch({map_stored})) << Events{map_stored_expected} << qint64(0) << counts(1);
    QTest::newRow("map BlockStored, as a vLLM 0.26 stream sends it")
        << pack(
               batch({tagged_map("BlockStored", {{"block_hashes", hashes({kBig})},
                                                 {"parent_block_hash", nil()},
                                                 {"token_ids", hashes(kTokens)},
                                                 {"block_size", integer(4)},
                                                 {"lora_id", nil()},
                                                 {"medium", text("GPU")},
                                                 {"lora_name", nil()},
                                                 {"extra_keys",
                                                  [](Packer& p) {
                                                      p.pack_array(1);
                                                      p.pack_nil();
                                                  }},
                                                 {"group_idx", integer(0)},
                                                 {"kv_cache_spec_kind", text("full_attention")}})}))
        << Events{StoredBlocks{.hashes = {BlockHash::from_uint(kBig)},
                               .token_ids = {151644, 872, 198, 9064},
                               .block_size = 4,
                               .group_idx = 0}}
        << qint64(0) << counts(1);
    // Fields the real publishers send (tst_attach_publishers drives them):
    // known, skipped, not counted as unknown.
    QTest::newRow("map BlockStored and BlockRemoved, as vLLM 0.33 sends them")
        << pack(batch({tagged_map("BlockStored", {{"block_hashes", hashes({kBig})},
                                                  {"parent_block_hash", nil()},
                                                  {"token_ids", hashes({1, 2})},
                                                  {"block_size", integer(2)},
                                                  {"medium", text("CPU")},
                                                  {"lora_id", nil()},
                                                  {"locality", text("LOCAL")},
                                                  {"ownership", text("tier-2")},
                                                  {"session_id", text("session-1")},
                                                  {"lookahead_token_ids",
                                                   [](Packer& p) {
                                                       p.pack_array(1);
                                                       p.pack_array(1);
                                                       p.pack_int(3);
                                                   }}}),
                       tagged_map("BlockRemoved", {{"block_hashes", hashes({kBig2})},
                                                   {"medium", text("CPU")},
                                                   {"locality", text("REMOTE")},
                                                   {"ownership", text("tier-2")}})}))
        << Events{StoredBlocks{.hashes = {BlockHash::from_uint(kBig)},
                               .token_ids = {1, 2},
                               .block_size = 2,
                               .medium = "CPU"},
                  RemovedBlocks{.hashes = {BlockHash::from_uint(kBig2)}, .medium = "CPU"}}
        << qint64(0) << counts(2);
    QTest::newRow("map BlockStored, as SGLang 0.5.23 sends it")
        << pack(batch({tagged_map("BlockStored", {{"block_hashes", hashes({kBig})},
                                                  {"parent_block_hash", nil()},
                                                  {"token_ids", hashes({1, 2})},
                                                  {"block_size", integer(2)},
                                                  {"lora_id", nil()},
                                                  {"medium", text("DISK")},
                                                  {"cache_salt", text("salt")},
                                                  {"session_id", text("session-1")},
                                                  {"lora_name", text("adapter")}})}))
        << Events{StoredBlocks{.hashes = {BlockHash::from_uint(kBig)},
                               .token_ids = {1, 2},
                               .block_size = 2,
                               .medium = "DISK"}}
        << qint64(0) << counts(1);
    QTest::newRow("map BlockRemoved and AllBlocksCleared, minimal")
        << pack(batch({tagged_map("BlockRemoved", {{"block_hashes", hashes({kBig2})}}),
                       tagged_map("AllBlocksCleared", {})}))
        << Events{RemovedBlocks{.hashes = {BlockHash::from_uint(kBig2)}}, AllCleared{}} << qint64(0)
        << counts(2);
    QTest::newRow("map fields nobody knows yet are counted")
        << pack(batch({tagged_map("BlockRemoved", {{"block_hashes", hashes({kBig2})},
                                                   {"medium", nil()},
                                                   {"future_field", integer(1)},
                                                   {"another", text("x")}})}))
        << Events{RemovedBlocks{.hashes = {BlockHash::from_uint(kBig2)}}} << qint64(0)
        << counts(1, 0, 2);
    QTest::newRow("map batch {ts, events, data_parallel_rank}") << pack([&](Packer& p) {
        p.pack_map(4);
        str(p, "ts");
        p.pack_double(1.5);
        str(p, "events");
        p.pack_array(1);
        cleared_array()(p);
        str(p, "data_parallel_rank");
        p.pack_int(2);
        str(p, "later");
        p.pack_true();
    }) << Events{AllCleared{}} << qint64(2) << counts(1, 0, 1);
    QTest::newRow("SGLang map batch with attn_dp_rank") << pack([&](Packer& p) {
        p.pack_map(3);
        str(p, "ts");
        p.pack_int(12); // an integer time is still a time
        str(p, "events");
        p.pack_array(0);
        str(p, "attn_dp_rank");
        p.pack_int(1);
    }) << Events{} << qint64(1) << counts(0);

    // Hash forms: uint64 above 2^63, negative int64, raw bytes.
    const std::vector<std::uint8_t> digest = bytes32(0xA0);
    const std::vector<std::uint8_t> parent_digest = bytes32(0x10);
    QTest::newRow("hashes: uint64, negative int, 32-byte bin; bin parent")
        << pack(batch({[&](Packer& p) {
               p.pack_array(7);
               str(p, "BlockStored");
               p.pack_array(3);
               p.pack_uint64(~std::uint64_t{0});
               p.pack_int64(-5);
               bin(p, digest);
               bin(p, parent_digest);
               uints(p, {1, 2, 3});
               p.pack_int(1);
               p.pack_nil();
               p.pack_nil(); // medium nil: GPU
           }}))
        << Events{StoredBlocks{.hashes = {BlockHash::from_uint(~std::uint64_t{0}),
                                          BlockHash::from_int(-5), hash_of(digest)},
                               .parent = hash_of(parent_digest),
                               .token_ids = {1, 2, 3},
                               .block_size = 1}}
        << qint64(0) << counts(1);

    // SGLang: positional events up to medium, then its metadata map where
    // vLLM has lora_name (known, skipped, not counted as unknown).
    QTest::newRow("SGLang BlockStored with metadata")
        << pack(batch({[](Packer& p) {
                          p.pack_array(8);
                          str(p, "BlockStored");
                          uints(p, {123});
                          p.pack_nil();
                          uints(p, {1, 2});
                          p.pack_int(2);
                          p.pack_nil();
                          str(p, "CPU_PINNED");
                          p.pack_map(1);
                          str(p, "cache_salt");
                          str(p, "tenant-a");
                      }},
                      Rank::nil))
        << Events{StoredBlocks{.hashes = {BlockHash::from_uint(123)},
                               .token_ids = {1, 2},
                               .block_size = 2,
                               .medium = "CPU_PINNED"}}
        << qint64(-1) << counts(1);

    QTest::newRow("unknown event types are counted, the rest kept")
        << pack(batch({[](Packer& p) {
                           p.pack_array(2);
                           str(p, "BlockPinned");
                           uints(p, {1});
                       },
                       cleared_array(), tagged_map("BlockMoved", {{"x", integer(1)}})}))
        << Events{AllCleared{}} << qint64(0) << counts(1, 2);
}

void TestKvEventDecoder::decodes_every_layout() {
    QFETCH(QByteArray, payload);
    QFETCH(Events, events);
    QFETCH(qint64, rank);
    QFETCH(DecodeCounts, counts);

    const DecodeResult result = decode_kv_event_payload(view(payload));
    QVERIFY2(result.error.empty(), result.error.c_str());
    QVERIFY(result.batch.has_value());
    QVERIFY2(result.batch->events == events,
             qPrintable("got " + describe(result.batch->events) + "\nwant " + describe(events)));
    QCOMPARE(result.batch->rank.value_or(-1), rank);
    QVERIFY2(result.counts == counts,
             qPrintable("got " + describe(result.counts) + "\nwant " + describe(counts)));
}

void TestKvEventDecoder::frames_data() {
    QTest::addColumn<QList<QByteArray>>("frames");
    QTest::addColumn<QString>("error"); // a part of the message; empty: none
    QTest::addColumn<QByteArray>("topic");
    QTest::addColumn<quint64>("sequence");
    QTest::addColumn<bool>("replay_end");

    const QByteArray payload = pack(batch({cleared_array()}));
    QTest::newRow("vLLM: topic, sequence, payload")
        << QList<QByteArray>{"kv-events", sequence_frame(0x0102030405060708ull), payload}
        << QString() << QByteArray("kv-events") << quint64(0x0102030405060708ull) << false;
    QTest::newRow("vLLM: empty topic") << QList<QByteArray>{"", sequence_frame(7), payload}
                                       << QString() << QByteArray() << quint64(7) << false;
    QTest::newRow("SGLang / replay reply: no topic")
        << QList<QByteArray>{sequence_frame(~std::uint64_t{0} - 1), payload} << QString()
        << QByteArray() << quint64(~std::uint64_t{0} - 1) << false;
    QTest::newRow("replay end marker")
        << QList<QByteArray>{sequence_frame(~std::uint64_t{0}), QByteArray()} << QString()
        << QByteArray() << quint64(0) << true;
    QTest::newRow("one frame") << QList<QByteArray>{payload} << QString("1 frames") << QByteArray()
                               << quint64(0) << false;
    QTest::newRow("no frames") << QList<QByteArray>{} << QString("0 frames") << QByteArray()
                               << quint64(0) << false;
    QTest::newRow("four frames") << QList<QByteArray>{"t", sequence_frame(1), payload, payload}
                                 << QString("4 frames") << QByteArray() << quint64(0) << false;
    QTest::newRow("7-byte sequence")
        << QList<QByteArray>{"t", sequence_frame(1).left(7), payload}
        << QString("sequence frame has 7 bytes") << QByteArray() << quint64(0) << false;
    QTest::newRow("9-byte sequence")
        << QList<QByteArray>{sequence_frame(1) + "x", payload}
        << QString("sequence frame has 9 bytes") << QByteArray() << quint64(0) << false;
    QTest::newRow("empty payload")
        << QList<QByteArray>{"t", sequence_frame(1), QByteArray()} << QString("payload is empty")
        << QByteArray() << quint64(0) << false;
}

void TestKvEventDecoder::frames() {
    QFETCH(QList<QByteArray>, frames);
    QFETCH(QString, error);
    QFETCH(QByteArray, topic);
    QFETCH(quint64, sequence);
    QFETCH(bool, replay_end);

    const DecodeResult result = decode_frames(frames);
    QCOMPARE(result.counts.messages, 1);
    QCOMPARE(result.replay_end, replay_end);
    if (!error.isEmpty()) {
        QVERIFY2(QString::fromStdString(result.error).contains(error), result.error.c_str());
        QVERIFY(!result.batch);
        QCOMPARE(result.counts.rejected_messages, 1);
        return;
    }
    QVERIFY2(result.error.empty(), result.error.c_str());
    QCOMPARE(result.counts.rejected_messages, 0);
    if (replay_end) {
        QVERIFY(!result.batch);
        return;
    }
    QVERIFY(result.batch);
    QCOMPARE(QByteArray::fromStdString(result.batch->topic), topic);
    QCOMPARE(result.batch->sequence, sequence);
    QCOMPARE(result.batch->events.size(), std::size_t{1});
}

void TestKvEventDecoder::malformed_events_are_dropped_and_counted_data() {
    QTest::addColumn<QByteArray>("payload");
    QTest::addColumn<QString>("error");

    const auto with_stored_field = [](const std::string& name, const Write& value) {
        std::vector<std::pair<std::string, Write>> fields = {{"block_hashes", hashes({1})},
                                                             {"token_ids", hashes({1, 2})},
                                                             {"block_size", integer(2)}};
        bool replaced = false;
        for (auto& field : fields) {
            if (field.first == name) {
                field.second = value;
                replaced = true;
            }
        }
        if (!replaced) {
            fields.emplace_back(name, value);
        }
        return pack(batch({tagged_map("BlockStored", fields), cleared_array()}));
    };
    QTest::newRow("block_size a string")
        << with_stored_field("block_size", text("16"))
        << "event 0 dropped: BlockStored: block_size is a string, expected a positive integer";
    QTest::newRow("block_size zero") << with_stored_field("block_size", integer(0))
                                     << "block_size is an integer, expected a positive integer";
    QTest::newRow("hashes not an array")
        << with_stored_field("block_hashes", integer(5))
        << "block_hashes is an integer, expected an array of hashes";
    QTest::newRow("a hash that is a string") << with_stored_field("block_hashes", [](Packer& p) {
        p.pack_array(2);
        p.pack_uint64(1);
        str(p, "abc");
    }) << "block_hashes [1] is a string, expected a hash";
    QTest::newRow("a 33-byte hash") << with_stored_field("block_hashes", [](Packer& p) {
        p.pack_array(1);
        bin(p, std::vector<std::uint8_t>(33, 1));
    }) << "[0] is bytes longer than 32";
    QTest::newRow("a token id above int64")
        << with_stored_field("token_ids", hashes({kBig})) << "token_ids [0] is an integer";
    QTest::newRow("parent a float")
        << with_stored_field("parent_block_hash", [](Packer& p) { p.pack_double(1.5); })
        << "parent_block_hash is a float, expected a hash or nil";
    QTest::newRow("medium an integer") << with_stored_field("medium", integer(1))
                                       << "medium is an integer, expected a string or nil";
    QTest::newRow("lora_id a string") << with_stored_field("lora_id", text("a"))
                                      << "lora_id is a string, expected an integer or nil";
    QTest::newRow("map without token_ids")
        << pack(batch({tagged_map("BlockStored",
                                  {{"block_hashes", hashes({1})}, {"block_size", integer(2)}}),
                       cleared_array()}))
        << "BlockStored: missing token_ids";
    QTest::newRow("array too short for block_size") << pack(batch({[](Packer& p) {
                                                                       p.pack_array(4);
                                                                       str(p, "BlockStored");
                                                                       uints(p, {1});
                                                                       p.pack_nil();
                                                                       uints(p, {1});
                                                                   },
                                                                   cleared_array()}))
                                                    << "missing block_size";
    QTest::newRow("BlockRemoved without hashes")
        << pack(batch({tagged_map("BlockRemoved", {}), cleared_array()}))
        << "BlockRemoved: missing block_hashes";
    QTest::newRow("an event that is an integer")
        << pack(batch({integer(3), cleared_array()}))
        << "an event is an integer, expected a tagged array or map";
    QTest::newRow("a tag that is an integer") << pack(batch({[](Packer& p) {
                                                                 p.pack_array(1);
                                                                 p.pack_int(0);
                                                             },
                                                             cleared_array()}))
                                              << "type tag is an integer";
    QTest::newRow("an empty array event")
        << pack(batch({[](Packer& p) { p.pack_array(0); }, cleared_array()}))
        << "expected a tagged array or map";
    QTest::newRow("a map event without a type")
        << pack(batch({[](Packer& p) { p.pack_map(0); }, cleared_array()})) << "has no type tag";
    QTest::newRow("a map event with an integer key") << pack(batch({[](Packer& p) {
                                                                        p.pack_map(2);
                                                                        str(p, "type");
                                                                        str(p, "AllBlocksCleared");
                                                                        p.pack_int(1);
                                                                        p.pack_int(2);
                                                                    },
                                                                    cleared_array()}))
                                                     << "a field name is not a string";
}

void TestKvEventDecoder::malformed_events_are_dropped_and_counted() {
    QFETCH(QByteArray, payload);
    QFETCH(QString, error);

    const DecodeResult result = decode_kv_event_payload(view(payload));
    QVERIFY2(QString::fromStdString(result.error).contains(error), result.error.c_str());
    // The bad event is dropped; its batch and the good event after it stay.
    QVERIFY(result.batch);
    QVERIFY(result.batch->events == Events{AllCleared{}});
    QCOMPARE(result.counts.malformed_events, 1);
    QCOMPARE(result.counts.events, 1);
    QCOMPARE(result.counts.rejected_messages, 0);
}

void TestKvEventDecoder::malformed_payloads_are_rejected_data() {
    QTest::addColumn<QByteArray>("payload");
    QTest::addColumn<QString>("error");

    const QByteArray valid = pack(batch({stored_array(11), removed_array(true)}));
    QTest::newRow("truncated") << valid.left(valid.size() - 3) << "not valid msgpack";
    QTest::newRow("cut after the first byte") << valid.left(1) << "not valid msgpack";
    QTest::newRow("garbage") << QByteArray("\xc1\xc1\xc1 not msgpack", 16) << "not valid msgpack";
    QTest::newRow("trailing bytes") << valid + "\x01\x02"
                                    << "2 bytes after its batch";
    QTest::newRow("claims four billion elements")
        << QByteArray("\xdd\xff\xff\xff\xff\x01", 6) << "not valid msgpack";
    QTest::newRow("a map claiming four billion pairs")
        << QByteArray("\xdf\xff\xff\xff\xff\x01", 6) << "not valid msgpack";
    QTest::newRow("an integer") << pack([](Packer& p) { p.pack_int(1); })
                                << "the payload is an integer, expected a batch";
    QTest::newRow("a one-element batch") << pack([](Packer& p) {
        p.pack_array(1);
        p.pack_double(1.0);
    }) << "the batch has 1 elements";
    QTest::newRow("ts a string") << pack([](Packer& p) {
        p.pack_array(2);
        str(p, "now");
        p.pack_array(0);
    }) << "ts is a string, expected a number";
    QTest::newRow("events a map") << pack([](Packer& p) {
        p.pack_array(2);
        p.pack_double(1.0);
        p.pack_map(0);
    }) << "events are a map, expected an array";
    QTest::newRow("rank a string") << pack([](Packer& p) {
        p.pack_array(3);
        p.pack_double(1.0);
        p.pack_array(0);
        str(p, "0");
    }) << "data_parallel_rank is a string";
    QTest::newRow("map batch without events") << pack([](Packer& p) {
        p.pack_map(1);
        str(p, "ts");
        p.pack_double(1.0);
    }) << "the batch has no events";
}

void TestKvEventDecoder::malformed_payloads_are_rejected() {
    QFETCH(QByteArray, payload);
    QFETCH(QString, error);

    const DecodeResult result = decode_kv_event_payload(view(payload));
    QVERIFY2(QString::fromStdString(result.error).contains(error), result.error.c_str());
    QVERIFY(!result.batch);
    QCOMPARE(result.counts.rejected_messages, 1);
    QCOMPARE(result.counts.events, 0);
}

void TestKvEventDecoder::random_bytes_never_crash() {
    // Whatever arrives, the result is a batch, an error or the replay end,
    // and nothing escapes as an exception.
    std::mt19937 random(20260915);
    const auto check = [](const DecodeResult& result) {
        return result.counts.messages == 1 &&
               (result.batch.has_value() || !result.error.empty() || result.replay_end) &&
               (result.batch.has_value() || result.counts.rejected_messages == 1 ||
                result.replay_end);
    };
    for (int i = 0; i < 3000; ++i) {
        std::string bytes(random() % 80, '\0');
        for (char& byte : bytes) {
            byte = static_cast<char>(random());
        }
        QVERIFY2(check(decode_kv_event_payload(bytes)), qPrintable(QString("random %1").arg(i)));
        const std::string_view frames[] = {
            "kv", std::string_view(bytes).substr(0, 8),
            std::string_view(bytes).substr(std::min<std::size_t>(8, bytes.size()))};
        QVERIFY(check(decode_kv_event_message(frames)));
    }
    const std::vector<QByteArray> valid = {
        pack(batch({stored_array(11), removed_array(true), cleared_array()})),
        pack(batch({tagged_map("BlockStored", {{"block_hashes", hashes({kBig, kBig2})},
                                               {"parent_block_hash", nil()},
                                               {"token_ids", hashes(kTokens)},
                                               {"block_size", integer(2)}}),
                    tagged_map("BlockRemoved", {{"block_hashes", hashes({kBig})}})})),
    };
    for (int i = 0; i < 3000; ++i) {
        std::string bytes = valid[static_cast<std::size_t>(i) % valid.size()].toStdString();
        for (int m = 1 + static_cast<int>(random() % 4); m > 0; --m) {
            const std::size_t at = random() % bytes.size();
            switch (random() % 4) {
            case 0: // flip bits
                bytes[at] = static_cast<char>(bytes[at] ^ (1 << (random() % 8)));
                break;
            case 1: // a random byte
                bytes[at] = static_cast<char>(random());
                break;
            case 2: // cut
                bytes.resize(std::max<std::size_t>(at, 1));
                break;
            default: // insert
                bytes.insert(bytes.begin() + static_cast<std::ptrdiff_t>(at),
                             static_cast<char>(random()));
                break;
            }
        }
        QVERIFY2(check(decode_kv_event_payload(bytes)), qPrintable(QString("mutation %1").arg(i)));
    }
}

void TestKvEventDecoder::block_hash_forms() {
    const BlockHash big = BlockHash::from_uint(kBig);
    QCOMPARE(big.hex(), std::string("0xdab89baa7b5857c0"));
    QCOMPARE(BlockHash::from_uint(0x0123456789abcdefull).hex(), std::string("0x0123456789abcdef"));
    QCOMPARE(BlockHash::from_int(-1).hex(), std::string("0xffffffffffffffff"));
    QCOMPARE(BlockHash::from_int(-1), BlockHash::from_uint(~std::uint64_t{0}));
    QCOMPARE(big.low64(), kBig);

    // vLLM's integer form of a byte hash is its low 64 bits: low64() agrees.
    const std::vector<std::uint8_t> digest = bytes32(0xA0);
    const BlockHash raw = hash_of(digest);
    QCOMPARE(raw.hex().size(), std::size_t{64});
    QCOMPARE(raw.hex().substr(0, 4), std::string("a0a1"));
    QCOMPARE(raw.low64(), 0xb8b9babbbcbdbebfull);
    // The same bits in another form are another hash.
    const std::vector<std::uint8_t> eight = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    QVERIFY(hash_of(eight) != BlockHash::from_int(-1));
    QCOMPARE(hash_of(eight).hex(), std::string("ffffffffffffffff"));
    BlockHash too_long;
    QVERIFY(!BlockHash::from_bytes(std::vector<std::uint8_t>(33), too_long));

    const std::unordered_set<BlockHash> set = {big, raw, hash_of(eight), BlockHash::from_int(-1),
                                               BlockHash::from_uint(kBig)};
    QCOMPARE(set.size(), std::size_t{4});
    QVERIFY(set.contains(hash_of(digest)));
}

QTEST_GUILESS_MAIN(TestKvEventDecoder)
#include "tst_kv_event_decoder.moc"
