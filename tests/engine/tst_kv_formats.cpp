// KV-cache storage formats: names, exact sizes, the codecs against reference
// libraries (gguf-py, numpy, ml_dtypes), their rounding against error bounds and the CPU store,
// KIVI's open blocks included.
#include "engine/cpu/kv_codec.h"
#include "engine/cpu/kv_store.h"
#include "engine/gguf/dequantize.h"
#include "engine/kv/kv_format.h"
#include "kernels/math/kv_codec_math.h"
#include "kernels/math/rope_math.h"
#include "kernels/math/row_chunk_decode.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTest>

using namespace kvscope;
using kv::KvFormat;

Q_DECLARE_METATYPE(kvscope::kv::KvFormat)

namespace {

std::vector<float> random_values(std::size_t n, std::uint32_t seed, float spread = 1.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, spread);
    std::vector<float> values(n);
    for (float& v : values) {
        v = normal(rng);
    }
    // Keys have outlier channels; make sure the codecs meet a few.
    values[n / 3] *= 20.0f;
    return values;
}

std::vector<float> round_trip(KvFormat format, const std::vector<float>& row) {
    const int d = static_cast<int>(row.size());
    std::vector<std::byte> bytes(static_cast<std::size_t>(kv::kv_row_bytes(format, d, false)));
    cpu::encode_kv_row(format, row.data(), d, bytes.data());
    std::vector<float> out(row.size());
    cpu::decode_kv_rows(format, bytes.data(), 1, d, out.data());
    return out;
}

// tests/engine/data/golden_kv_formats.json (scripts/reference/
// make_kv_format_golden.py): rows encoded and decoded by gguf-py, numpy and
// ml_dtypes.
QJsonObject reference_codecs() {
    QFile file(QStringLiteral(KVSCOPE_SOURCE_DIR "/tests/engine/data/golden_kv_formats.json"));
    if (!file.open(QIODevice::ReadOnly)) {
        return {};
    }
    return QJsonDocument::fromJson(file.readAll()).object();
}

std::vector<float> hex_floats(const QJsonArray& words) {
    std::vector<float> out;
    for (const QJsonValue word : words) {
        const auto bits = static_cast<std::uint32_t>(word.toString().toULong(nullptr, 16));
        float value = 0.0f;
        std::memcpy(&value, &bits, sizeof value);
        out.push_back(value);
    }
    return out;
}

// Scale bytes at the head of each group (q8_0, q4_0: 2; q4_1: 4).
int group_header_bytes(KvFormat format) {
    return format == KvFormat::q4_1                               ? 4
           : format == KvFormat::q8_0 || format == KvFormat::q4_0 ? 2
                                                                  : 0;
}

} // namespace

class TestKvFormats : public QObject {
    Q_OBJECT

private slots:
    void names_round_trip();
    void sizes_are_exact();
    void head_dim_problems();
    void e4m3_known_values();
    void e4m3_every_code_round_trips();
    void codecs_match_reference_libraries_data();
    void codecs_match_reference_libraries();
    void gguf_layouts_match_the_gguf_dequantiser_data();
    void gguf_layouts_match_the_gguf_dequantiser();
    void rounding_within_bounds_data();
    void rounding_within_bounds();
    void kivi_keys_per_channel();
    void store_round_trips_every_format_data();
    void store_round_trips_every_format();
    void kivi_open_block_is_exact_until_full();
    void device_decoders_match_the_cpu_codec_data();
    void device_decoders_match_the_cpu_codec();
    void device_kivi_key_decoder_matches_the_cpu_codec();
    void chunk_decoders_match_the_element_decoder_data();
    void chunk_decoders_match_the_element_decoder();
    void rope_angles_match_a_double_reference();
};

void TestKvFormats::names_round_trip() {
    for (const KvFormat format : kv::all_kv_formats()) {
        QCOMPARE(kv::parse_kv_format(kv::kv_format_name(format)), std::optional(format));
    }
    QCOMPARE(kv::parse_kv_format("fp8_e4m3"), std::optional(KvFormat::fp8_e4m3));
    QVERIFY(!kv::parse_kv_format("q3_k"));
    QVERIFY(!kv::parse_kv_format(""));
    QVERIFY(!kv::parse_kv_format("F16")); // names are exact, as llama.cpp's are
    QCOMPARE(kv::all_kv_formats().size(), std::size_t{9});
}

void TestKvFormats::sizes_are_exact() {
    // SmolLM2-135M: 30 layers, 3 KV heads, head_dim 64; block size 16.
    const auto per_token = [](KvFormat k, KvFormat v) {
        return kv::kv_bytes_per_token({k, v}, 30, 3, 64, 16);
    };
    QCOMPARE(per_token(KvFormat::f16, KvFormat::f16), 23040.0); // DESIGN.md's number
    QCOMPARE(per_token(KvFormat::f32, KvFormat::f32), 46080.0);
    QCOMPARE(per_token(KvFormat::bf16, KvFormat::bf16), 23040.0);
    QCOMPARE(per_token(KvFormat::fp8_e4m3, KvFormat::fp8_e4m3), 2.0 * 90 * (64 + 4));
    QCOMPARE(per_token(KvFormat::q8_0, KvFormat::q8_0), 2.0 * 90 * 68);
    QCOMPARE(per_token(KvFormat::q4_0, KvFormat::q4_0), 2.0 * 90 * 36);
    QCOMPARE(per_token(KvFormat::q4_1, KvFormat::q4_1), 2.0 * 90 * 40);
    // KIVI-4 keys: 64 channels x (fp16 scale + min) per block + 32 B of codes
    // per token; values: 2 groups x 4 B + 32 B per token.
    QCOMPARE(per_token(KvFormat::kivi4, KvFormat::kivi4), 90 * ((64 * 4 + 16 * 32) / 16.0 + 40));
    QCOMPARE(per_token(KvFormat::kivi2, KvFormat::kivi2), 90 * ((64 * 4 + 16 * 16) / 16.0 + 24));
    QCOMPARE(per_token(KvFormat::q8_0, KvFormat::q4_0), 90.0 * (68 + 36));

    // The store allocates exactly that.
    for (const KvFormat format : kv::all_kv_formats()) {
        const cpu::KvStore store({30, 3, 64, 16, 10}, {format, format});
        QCOMPARE(static_cast<double>(store.bytes()), store.bytes_per_token() * 160);
    }
}

void TestKvFormats::head_dim_problems() {
    QVERIFY(kv::kv_format_problem(KvFormat::q8_0, 48).find("multiple of 32") != std::string::npos);
    QVERIFY(kv::kv_format_problem(KvFormat::f16, 48).empty());
    QVERIFY(!kv::kv_format_problem(KvFormat::kivi2, 80).empty());
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                             cpu::KvStore({2, 1, 48, 16, 4}, {KvFormat::q4_0, KvFormat::f16}));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                             cpu::KvStore({2, 1, 64, 0, 4}, {KvFormat::f16, KvFormat::f16}));
}

void TestKvFormats::e4m3_known_values() {
    QCOMPARE(cpu::fp32_to_e4m3(0.0f), std::uint8_t{0x00});
    QCOMPARE(cpu::fp32_to_e4m3(1.0f), std::uint8_t{0x38});
    QCOMPARE(cpu::fp32_to_e4m3(-1.0f), std::uint8_t{0xb8});
    QCOMPARE(cpu::fp32_to_e4m3(448.0f), std::uint8_t{0x7e});
    QCOMPARE(cpu::fp32_to_e4m3(1e6f), std::uint8_t{0x7e}); // saturates
    QCOMPARE(cpu::fp32_to_e4m3(-INFINITY), std::uint8_t{0xfe});
    QCOMPARE(cpu::fp32_to_e4m3(std::ldexp(1.0f, -9)), std::uint8_t{0x01}); // smallest subnormal
    QCOMPARE(cpu::fp32_to_e4m3(std::ldexp(1.0f, -6)), std::uint8_t{0x08}); // smallest normal
    // Ties go to even: 1.0625 lies halfway between 1.0 (0x38) and 1.125 (0x39).
    QCOMPARE(cpu::fp32_to_e4m3(1.0625f), std::uint8_t{0x38});
    QCOMPARE(cpu::fp32_to_e4m3(1.1875f), std::uint8_t{0x3a});
    QCOMPARE(cpu::e4m3_to_fp32(0x7e), 448.0f);
    QCOMPARE(cpu::e4m3_to_fp32(0x01), std::ldexp(1.0f, -9));
    QVERIFY(std::isnan(cpu::e4m3_to_fp32(0x7f)));
    // Every code against the format's definition (OCP FP8, E4M3 "FN"): bias
    // 7, subnormals m * 2^-9, S.1111.111 NaN, no infinities. The device's
    // decoders compute it with bit moves (math::e4m3_to_fp32).
    for (int code = 0; code < 256; ++code) {
        const int exponent = (code >> 3) & 0xf;
        const int mantissa = code & 7;
        const float magnitude = exponent == 0
                                    ? std::ldexp(float(mantissa), -9)
                                    : std::ldexp(1.0f + float(mantissa) / 8.0f, exponent - 7);
        const float expected = (code & 0x80) != 0 ? -magnitude : magnitude;
        const float decoded = math::e4m3_to_fp32(static_cast<std::uint8_t>(code));
        if ((code & 0x7f) == 0x7f) {
            QVERIFY(std::isnan(decoded));
            QCOMPARE(std::signbit(decoded), (code & 0x80) != 0);
        } else {
            // Bits: QCOMPARE on floats allows a relative 1e-5.
            QCOMPARE(math::float_to_bits(decoded), math::float_to_bits(expected));
        }
    }
}

void TestKvFormats::e4m3_every_code_round_trips() {
    for (int code = 0; code < 256; ++code) {
        if ((code & 0x7f) == 0x7f) {
            continue; // NaN
        }
        const float value = cpu::e4m3_to_fp32(static_cast<std::uint8_t>(code));
        QCOMPARE(int(cpu::fp32_to_e4m3(value)), code);
    }
}

// Against codecs nobody here wrote: kvscope's decoder reads the reference's
// bytes as the reference reads them, bit for bit. f16, bf16 and fp8 encode to
// the reference's bytes exactly. The GGUF block formats store the same scale
// (and minimum) bytes as ggml; their codes are rounded against the scale as
// stored, where ggml rounds against the unrounded one, so a code may differ
// by one, and then only to a value nearer the input: no value of ours is
// further from its input than ggml's.
void TestKvFormats::codecs_match_reference_libraries_data() {
    QTest::addColumn<KvFormat>("format");
    for (const KvFormat format : {KvFormat::f16, KvFormat::bf16, KvFormat::fp8_e4m3, KvFormat::q8_0,
                                  KvFormat::q4_0, KvFormat::q4_1}) {
        QTest::newRow(kv::kv_format_name(format).data()) << format;
    }
}

void TestKvFormats::codecs_match_reference_libraries() {
    QFETCH(KvFormat, format);
    const QJsonObject golden = reference_codecs();
    QVERIFY2(!golden.isEmpty(), "tests/engine/data/golden_kv_formats.json is missing or broken");
    const int d = golden["head_dim"].toInt();
    const QJsonObject reference =
        golden["formats"]
            .toObject()[QString::fromUtf8(kv::kv_format_name(format).data())]
            .toObject();
    const QJsonArray rows = golden["rows"].toArray();
    QVERIFY(rows.size() >= 10);
    QCOMPARE(reference["bytes"].toArray().size(), rows.size());
    const auto row_bytes = static_cast<std::size_t>(kv::kv_row_bytes(format, d, false));
    const int header = group_header_bytes(format);
    for (int r = 0; r < rows.size(); ++r) {
        const std::vector<float> input = hex_floats(rows[r].toArray());
        const QByteArray theirs =
            QByteArray::fromHex(reference["bytes"].toArray()[r].toString().toLatin1());
        const std::vector<float> their_values =
            hex_floats(reference["decoded"].toArray()[r].toArray());
        QCOMPARE(static_cast<std::size_t>(theirs.size()), row_bytes);
        QCOMPARE(input.size(), static_cast<std::size_t>(d));

        // Their bytes through our decoder.
        std::vector<float> decoded(static_cast<std::size_t>(d));
        cpu::decode_kv_rows(format, reinterpret_cast<const std::byte*>(theirs.data()), 1, d,
                            decoded.data());
        QVERIFY2(std::memcmp(decoded.data(), their_values.data(), decoded.size() * 4) == 0,
                 qPrintable(QString("row %1: decoding the reference's bytes differs").arg(r)));

        // Our bytes against theirs.
        std::vector<std::byte> ours(row_bytes);
        cpu::encode_kv_row(format, input.data(), d, ours.data());
        if (header == 0) {
            QVERIFY2(std::memcmp(ours.data(), theirs.data(), row_bytes) == 0,
                     qPrintable(QString("row %1: other bytes than the reference's").arg(r)));
            continue;
        }
        const int group_bytes = static_cast<int>(row_bytes) / (d / 32);
        for (int g = 0; g < d / 32; ++g) {
            QVERIFY2(
                std::memcmp(ours.data() + g * group_bytes, theirs.data() + g * group_bytes,
                            static_cast<std::size_t>(header)) == 0,
                qPrintable(QString("row %1 group %2: another scale than ggml's").arg(r).arg(g)));
        }
        std::vector<float> our_values(static_cast<std::size_t>(d));
        cpu::decode_kv_rows(format, ours.data(), 1, d, our_values.data());
        for (int i = 0; i < d; ++i) {
            const float our_error = std::fabs(our_values[i] - input[i]);
            const float their_error = std::fabs(their_values[i] - input[i]);
            QVERIFY2(our_error <= their_error,
                     qPrintable(QString("row %1 value %2 (%3): ours %4, ggml's %5")
                                    .arg(r)
                                    .arg(i)
                                    .arg(double(input[i]))
                                    .arg(double(our_values[i]))
                                    .arg(double(their_values[i]))));
        }
    }
}

void TestKvFormats::gguf_layouts_match_the_gguf_dequantiser_data() {
    QTest::addColumn<KvFormat>("format");
    QTest::addColumn<int>("type");
    QTest::newRow("q8_0") << KvFormat::q8_0 << int(gguf::TensorType::Q8_0);
    QTest::newRow("q4_0") << KvFormat::q4_0 << int(gguf::TensorType::Q4_0);
    QTest::newRow("q4_1") << KvFormat::q4_1 << int(gguf::TensorType::Q4_1);
    QTest::newRow("f16") << KvFormat::f16 << int(gguf::TensorType::F16);
    QTest::newRow("bf16") << KvFormat::bf16 << int(gguf::TensorType::BF16);
}

void TestKvFormats::gguf_layouts_match_the_gguf_dequantiser() {
    // These rows are laid out as GGUF blocks, so the GGUF reader (checked
    // against gguf-py) must read back what the KV decoder reads.
    QFETCH(KvFormat, format);
    QFETCH(int, type);
    for (std::uint32_t seed = 1; seed <= 50; ++seed) {
        const std::vector<float> row = random_values(128, seed);
        std::vector<std::byte> bytes(
            static_cast<std::size_t>(kv::kv_row_bytes(format, 128, false)));
        cpu::encode_kv_row(format, row.data(), 128, bytes.data());
        std::vector<float> ours(128);
        std::vector<float> theirs(128);
        cpu::decode_kv_rows(format, bytes.data(), 1, 128, ours.data());
        gguf::dequantize_values(static_cast<gguf::TensorType>(type), bytes.data(), theirs.data(),
                                128);
        QCOMPARE(ours, theirs);
    }
}

void TestKvFormats::rounding_within_bounds_data() {
    QTest::addColumn<KvFormat>("format");
    for (const KvFormat format : kv::all_kv_formats()) {
        QTest::newRow(kv::kv_format_name(format).data()) << format;
    }
}

void TestKvFormats::rounding_within_bounds() {
    // Each format's worst case for one value, from its definition: half a
    // quantisation step (plus the fp16 rounding of scales), or half an ulp.
    QFETCH(KvFormat, format);
    for (std::uint32_t seed = 1; seed <= 200; ++seed) {
        const std::vector<float> row = random_values(64, seed, seed % 2 ? 1.0f : 0.01f);
        const std::vector<float> back = round_trip(format, row);
        for (int g = 0; g < 2; ++g) {
            const auto first = row.begin() + g * 32;
            const auto [lo, hi] = std::minmax_element(first, first + 32);
            const float amax = std::max(std::fabs(*lo), std::fabs(*hi));
            for (int i = g * 32; i < g * 32 + 32; ++i) {
                const float x = row[static_cast<std::size_t>(i)];
                const float error = std::fabs(back[static_cast<std::size_t>(i)] - x);
                float bound = 0;
                switch (format) {
                case KvFormat::f32:
                    bound = 0;
                    break;
                case KvFormat::f16:
                    bound = std::fabs(x) * 0x1p-11f + 0x1p-25f;
                    break;
                case KvFormat::bf16:
                    bound = std::fabs(x) * 0x1p-8f;
                    break;
                case KvFormat::fp8_e4m3: {
                    const float row_amax =
                        std::fabs(*std::max_element(row.begin(), row.end(), [](float a, float b) {
                            return std::fabs(a) < std::fabs(b);
                        }));
                    bound = std::fabs(x) * 0x1p-4f + row_amax / 448.0f * 0x1p-10f;
                    break;
                }
                case KvFormat::q8_0:
                    bound = amax / 127.0f * 0.5f * 1.002f;
                    break;
                case KvFormat::q4_0:
                    // Codes run -8..7 with -8 at the extreme: values of the
                    // other sign clip at 7/8 of it, an error up to amax / 8.
                    bound = amax / 8.0f * 1.002f + 1e-7f;
                    break;
                case KvFormat::q4_1:
                case KvFormat::kivi4:
                    bound = (*hi - *lo) / 15.0f * 0.5f * 1.01f + std::fabs(*lo) * 0x1p-11f;
                    break;
                case KvFormat::kivi2:
                    bound = (*hi - *lo) / 3.0f * 0.5f * 1.01f + std::fabs(*lo) * 0x1p-11f;
                    break;
                }
                QVERIFY2(error <= bound, qPrintable(QString("seed %1 value %2: %3 -> %4, bound %5")
                                                        .arg(seed)
                                                        .arg(i)
                                                        .arg(x)
                                                        .arg(back[static_cast<std::size_t>(i)])
                                                        .arg(bound)));
            }
        }
    }
}

void TestKvFormats::kivi_keys_per_channel() {
    // One channel with a huge range must not spoil the others: each channel
    // is quantised over the block's tokens on its own.
    const int block = 16;
    const int d = 64;
    for (const int bits : {4, 2}) {
        std::vector<float> tile = random_values(static_cast<std::size_t>(block * d), 7);
        for (int t = 0; t < block; ++t) {
            tile[static_cast<std::size_t>(t * d + 5)] = 100.0f * (t % 3 - 1); // outlier channel
        }
        std::vector<std::byte> bytes(static_cast<std::size_t>(kv::kv_head_block_bytes(
            bits == 4 ? KvFormat::kivi4 : KvFormat::kivi2, block, d, true)));
        cpu::encode_kivi_keys(bits, tile.data(), block, d, bytes.data());
        std::vector<float> back(tile.size());
        cpu::decode_kivi_keys(bits, bytes.data(), block, d, 0, block, back.data());
        for (int c = 0; c < d; ++c) {
            float lo = tile[static_cast<std::size_t>(c)];
            float hi = lo;
            for (int t = 0; t < block; ++t) {
                lo = std::min(lo, tile[static_cast<std::size_t>(t * d + c)]);
                hi = std::max(hi, tile[static_cast<std::size_t>(t * d + c)]);
            }
            const float bound =
                (hi - lo) / float((1 << bits) - 1) * 0.5f * 1.01f + std::fabs(lo) * 0x1p-11f;
            for (int t = 0; t < block; ++t) {
                const auto at = static_cast<std::size_t>(t * d + c);
                QVERIFY2(
                    std::fabs(back[at] - tile[at]) <= bound,
                    qPrintable(QString("bits %1 channel %2 token %3").arg(bits).arg(c).arg(t)));
            }
        }
        // Rows decode the same one at a time as all together.
        std::vector<float> one(static_cast<std::size_t>(d));
        cpu::decode_kivi_keys(bits, bytes.data(), block, d, 9, 1, one.data());
        QVERIFY(std::equal(one.begin(), one.end(), back.begin() + 9 * d));
    }
}

void TestKvFormats::store_round_trips_every_format_data() {
    rounding_within_bounds_data();
}

void TestKvFormats::store_round_trips_every_format() {
    // Tokens written through slots come back, through the attention view, as
    // the codec decodes them; KIVI blocks once full.
    QFETCH(KvFormat, format);
    const cpu::KvGeometry geometry{2, 3, 64, 8, 6};
    cpu::KvStore store(geometry, {format, format});
    runner::ForwardBatch batch;
    batch.block_size = 8;
    // 16 tokens filling blocks 4 and 1, in that order.
    for (int t = 0; t < 16; ++t) {
        batch.token_ids.push_back(1);
        batch.positions.push_back(t);
        batch.slot_mapping.push_back((t < 8 ? 4 : 1) * 8 + t % 8);
        batch.sequence_of.push_back(0);
    }
    const std::vector<float> k = random_values(16 * 3 * 64, 11);
    const std::vector<float> v = random_values(16 * 3 * 64, 12);
    for (int layer = 0; layer < 2; ++layer) {
        store.write(layer, batch, k.data(), v.data());
    }
    QCOMPARE(store.open_block_count(), std::size_t{0}); // both blocks full
    std::vector<float> tile(8 * 64);
    std::vector<float> expected(64);
    const cpu::LayerKvView view = store.layer(1);
    for (int t = 0; t < 16; ++t) {
        for (int h = 0; h < 3; ++h) {
            const float* src = v.data() + (t * 3 + h) * 64;
            const float* got = view.rows(view.values, t < 8 ? 4 : 1, h, t % 8, 1, tile.data());
            const std::vector<float> row(src, src + 64);
            expected = round_trip(format, row);
            QVERIFY2(std::equal(expected.begin(), expected.end(), got),
                     qPrintable(QString("token %1 head %2").arg(t).arg(h)));
            // Keys: KIVI quantises each full block per channel.
            const float* key = view.rows(view.keys, t < 8 ? 4 : 1, h, t % 8, 1, tile.data());
            if (kv::quantises_whole_blocks(format)) {
                std::vector<float> block_tile(8 * 64);
                for (int r = 0; r < 8; ++r) {
                    const float* src_row = k.data() + (((t / 8) * 8 + r) * 3 + h) * 64;
                    std::copy(src_row, src_row + 64, block_tile.begin() + r * 64);
                }
                std::vector<std::byte> bytes(
                    static_cast<std::size_t>(kv::kv_head_block_bytes(format, 8, 64, true)));
                cpu::encode_kivi_keys(kv::kivi_bits(format), block_tile.data(), 8, 64,
                                      bytes.data());
                cpu::decode_kivi_keys(kv::kivi_bits(format), bytes.data(), 8, 64, t % 8, 1,
                                      expected.data());
            } else {
                const float* key_src = k.data() + (t * 3 + h) * 64;
                expected = round_trip(format, std::vector<float>(key_src, key_src + 64));
            }
            QVERIFY2(std::equal(expected.begin(), expected.end(), key),
                     qPrintable(QString("key: token %1 head %2").arg(t).arg(h)));
        }
    }
}

void TestKvFormats::kivi_open_block_is_exact_until_full() {
    const cpu::KvGeometry geometry{1, 1, 32, 4, 3};
    cpu::KvStore store(geometry, {KvFormat::kivi2, KvFormat::kivi2});
    const std::vector<float> k = random_values(4 * 32, 3);
    const std::vector<float> v = random_values(4 * 32, 4);
    runner::ForwardBatch batch;
    batch.block_size = 4;
    batch.token_ids = {1};
    std::vector<float> tile(4 * 32);
    for (int t = 0; t < 4; ++t) {
        batch.slot_mapping = {2 * 4 + t};
        store.write(0, batch, k.data() + t * 32, v.data() + t * 32);
        const cpu::LayerKvView view = store.layer(0);
        const float* keys = view.rows(view.keys, 2, 0, 0, t + 1, tile.data());
        const bool exact = std::equal(keys, keys + (t + 1) * 32, k.begin());
        if (t < 3) {
            QVERIFY2(exact, "the open block reads back in full precision");
            QCOMPARE(store.open_block_count(), std::size_t{2}); // K and V
        } else {
            QVERIFY2(!exact, "a full block is quantised");
            QCOMPARE(store.open_block_count(), std::size_t{0});
        }
    }
    // A sequence freed with its last block open leaves nothing behind.
    batch.slot_mapping = {0};
    store.write(0, batch, k.data(), v.data());
    QCOMPARE(store.open_block_count(), std::size_t{2});
    const kv::BlockId freed[] = {0};
    store.release(freed);
    QCOMPARE(store.open_block_count(), std::size_t{0});
}

// The CUDA kernels decode one value at a time (math::decode_row_element; the
// vector attention 8 at a time for q8_0, q4_0 and fp8, math::decode_row_chunk,
// checked against it below) and
// encode a row per thread (math::encode_row); the CPU codec decodes whole
// groups and may use F16C. Both must give the same bytes and the same floats,
// bit for bit, or the GPU would not run what these tests check. (The CPU
// encodes with math::encode_row too, f16 apart, so the bytes can differ only
// there; codecs_match_reference_libraries checks the encoders themselves.)
void TestKvFormats::device_decoders_match_the_cpu_codec_data() {
    QTest::addColumn<KvFormat>("format");
    QTest::addColumn<int>("head_dim");
    for (const KvFormat format : kv::all_kv_formats()) {
        for (const int d : {32, 64, 128}) {
            QTest::newRow(
                qPrintable(QString("%1 d%2").arg(kv::kv_format_name(format).data()).arg(d)))
                << format << d;
        }
    }
}

void TestKvFormats::device_decoders_match_the_cpu_codec() {
    QFETCH(KvFormat, format);
    QFETCH(int, head_dim);
    const int rows = 7;
    const std::int64_t row_bytes = kv::kv_row_bytes(format, head_dim, false);
    QVERIFY(row_bytes > 0);
    const std::vector<float> values = random_values(static_cast<std::size_t>(rows) * head_dim,
                                                    77u + static_cast<unsigned>(head_dim));
    std::vector<std::byte> cpu_bytes(static_cast<std::size_t>(rows * row_bytes));
    std::vector<std::uint8_t> device_bytes(cpu_bytes.size(), 0xAB); // poisoned
    for (int r = 0; r < rows; ++r) {
        cpu::encode_kv_row(format, values.data() + r * head_dim, head_dim,
                           cpu_bytes.data() + r * row_bytes);
        math::encode_row(format, values.data() + r * head_dim, head_dim,
                         device_bytes.data() + r * row_bytes);
    }
    QVERIFY2(std::memcmp(cpu_bytes.data(), device_bytes.data(), cpu_bytes.size()) == 0,
             "the row encoder the kernels run wrote other bytes than the CPU codec");

    std::vector<float> cpu_values(values.size());
    cpu::decode_kv_rows(format, cpu_bytes.data(), rows, head_dim, cpu_values.data());
    for (int r = 0; r < rows; ++r) {
        for (int i = 0; i < head_dim; ++i) {
            const float device_value =
                math::decode_row_element(format, device_bytes.data() + r * row_bytes, head_dim, i);
            const float cpu_value = cpu_values[static_cast<std::size_t>(r * head_dim + i)];
            if (std::memcmp(&device_value, &cpu_value, sizeof(float)) != 0) {
                QFAIL(qPrintable(QString("row %1 value %2: element decoder %3, CPU %4")
                                     .arg(r)
                                     .arg(i)
                                     .arg(double(device_value))
                                     .arg(double(cpu_value))));
            }
        }
    }
}

void TestKvFormats::device_kivi_key_decoder_matches_the_cpu_codec() {
    for (const int bits : {4, 2}) {
        const int block = 16;
        const int d = 64;
        const std::vector<float> tile =
            random_values(static_cast<std::size_t>(block) * d, 5u + bits);
        const KvFormat format = bits == 4 ? KvFormat::kivi4 : KvFormat::kivi2;
        std::vector<std::byte> bytes(
            static_cast<std::size_t>(kv::kv_head_block_bytes(format, block, d, true)));
        cpu::encode_kivi_keys(bits, tile.data(), block, d, bytes.data());
        // The kernels' order: every channel's header first, then the code
        // bytes one by one, each by its own thread.
        std::vector<std::uint8_t> device(bytes.size(), 0xCD);
        for (int c = 0; c < d; ++c) {
            math::encode_kivi_key_channel(bits, tile.data(), block, d, c, device.data());
        }
        for (int b = block * d * bits / 8 - 1; b >= 0; --b) { // any order must do
            math::encode_kivi_key_byte(bits, tile.data(), d, b / (d * bits / 8), b % (d * bits / 8),
                                       device.data());
        }
        QVERIFY(std::memcmp(bytes.data(), device.data(), bytes.size()) == 0);
        std::vector<float> cpu_values(tile.size());
        cpu::decode_kivi_keys(bits, bytes.data(), block, d, 0, block, cpu_values.data());
        for (int t = 0; t < block; ++t) {
            for (int c = 0; c < d; ++c) {
                QCOMPARE(math::decode_kivi_key_element(bits, device.data(), d, t, c),
                         cpu_values[static_cast<std::size_t>(t * d + c)]);
            }
        }
    }
}

// The vector attention decodes 8 values of a row at a time
// (math::decode_row_chunk); each must be the element decoder's value, bit
// for bit, for every code: rows of random bytes (nearly every code at every
// byte of a chunk, scales of every kind, NaN and infinity included), then
// encoded rows. It fails if a chunk's group, nibble half or code offset is
// off by one (checked by hand).
void TestKvFormats::chunk_decoders_match_the_element_decoder_data() {
    QTest::addColumn<KvFormat>("format");
    QTest::addColumn<int>("head_dim");
    for (const KvFormat format : kv::all_kv_formats()) {
        if (!math::has_chunk_decoder(format)) {
            continue;
        }
        for (const int d : {32, 64, 128, 256}) {
            QTest::newRow(
                qPrintable(QString("%1 d%2").arg(kv::kv_format_name(format).data()).arg(d)))
                << format << d;
        }
    }
}

void TestKvFormats::chunk_decoders_match_the_element_decoder() {
    QFETCH(KvFormat, format);
    QFETCH(int, head_dim);
    const auto row_bytes = static_cast<std::size_t>(kv::kv_row_bytes(format, head_dim, false));
    const int random_rows = 600; // every byte value many times at every position
    const int encoded_rows = 20;
    std::vector<std::uint8_t> bytes(row_bytes * (random_rows + encoded_rows));
    std::mt19937 generator(91u + static_cast<unsigned>(head_dim));
    std::uniform_int_distribution<int> byte(0, 255);
    for (std::size_t i = 0; i < row_bytes * random_rows; ++i) {
        bytes[i] = static_cast<std::uint8_t>(byte(generator));
    }
    const std::vector<float> values =
        random_values(static_cast<std::size_t>(encoded_rows) * head_dim, 13u, 40.0f);
    for (int r = 0; r < encoded_rows; ++r) {
        math::encode_row(format, values.data() + r * head_dim, head_dim,
                         bytes.data() + (random_rows + r) * row_bytes);
    }
    const auto decode_chunk = [format](const std::uint8_t* row, int chunk,
                                       float(&out)[math::kChunkValues]) {
        switch (format) {
        case KvFormat::q8_0:
            return math::decode_row_chunk<KvFormat::q8_0>(row, chunk, out);
        case KvFormat::q4_0:
            return math::decode_row_chunk<KvFormat::q4_0>(row, chunk, out);
        default:
            return math::decode_row_chunk<KvFormat::fp8_e4m3>(row, chunk, out);
        }
    };
    for (int r = 0; r < random_rows + encoded_rows; ++r) {
        const std::uint8_t* row = bytes.data() + r * row_bytes;
        for (int chunk = 0; chunk < head_dim / math::kChunkValues; ++chunk) {
            float out[math::kChunkValues];
            decode_chunk(row, chunk, out);
            for (int v = 0; v < math::kChunkValues; ++v) {
                const int i = chunk * math::kChunkValues + v;
                const float expected = math::decode_row_element(format, row, head_dim, i);
                // NaN times NaN keeps either operand's payload, and the
                // compiler may swap a product's operands: any NaN will do.
                const bool both_nan = std::isnan(out[v]) && std::isnan(expected);
                if (!both_nan && std::memcmp(&out[v], &expected, sizeof(float)) != 0) {
                    QFAIL(qPrintable(QString("row %1 value %2: chunk decoder %3, element %4")
                                         .arg(r)
                                         .arg(i)
                                         .arg(double(out[v]))
                                         .arg(double(expected))));
                }
            }
        }
    }
}

// RoPE's angles, shared by the CPU ops and the CUDA kernel, against long
// double: within fp32 rounding of the true cos and sin at long positions.
void TestKvFormats::rope_angles_match_a_double_reference() {
    for (const int position : {0, 1, 17, 4095, 8191, 131071}) {
        for (const int pair : {0, 1, 15, 31}) {
            const math::RopeCosSin angle = math::rope_cos_sin(position, pair, 64, 100000.0f, 1.0f);
            const long double freq = std::pow(100000.0L, -2.0L * pair / 64.0L);
            const long double theta = position * freq;
            QVERIFY(std::fabs(angle.cos - static_cast<float>(std::cos(theta))) <= 1e-6f);
            QVERIFY(std::fabs(angle.sin - static_cast<float>(std::sin(theta))) <= 1e-6f);
        }
    }
}

QTEST_GUILESS_MAIN(TestKvFormats)
#include "tst_kv_formats.moc"
