// The GGUF reader against files written by gguf-py (llama.cpp's own package):
// every metadata value type, every tensor type kvscope converts to fp32, and
// damaged files, which must fail with a clear error and never crash.
#include "engine/gguf/dequantize.h"
#include "engine/gguf/gguf_file.h"
#include "engine/model_path.h"

#include <cmath>
#include <random>

#include <QFile>
#include <QTemporaryDir>
#include <QTest>

using namespace kvscope::gguf;

namespace {

const char* reference_path() {
    return KVSCOPE_SOURCE_DIR "/tests/engine/data/reference_types.gguf";
}

QByteArray read_all(const QString& path) {
    QFile file(path);
    return file.open(QIODevice::ReadOnly) ? file.readAll() : QByteArray();
}

QString write_temp(const QTemporaryDir& dir, const QString& name, const QByteArray& bytes) {
    const QString path = dir.filePath(name);
    QFile file(path);
    if (!file.open(QIODevice::WriteOnly | QIODevice::Truncate)) {
        return {};
    }
    file.write(bytes);
    return path;
}

// Opens `path`; returns the GgufError message, or empty when it opened.
QString open_error(const QString& path) {
    try {
        GgufFile::open(path.toStdString());
        return {};
    } catch (const GgufError& error) {
        return QString::fromStdString(error.what());
    }
}

} // namespace

class TestGgufFile : public QObject {
    Q_OBJECT

private slots:
    void header_and_layout();
    void metadata_of_every_type();
    void typed_lookups_name_the_key();
    void dequantizes_like_gguf_py_data();
    void dequantizes_like_gguf_py();
    void refuses_wrong_magic_and_versions_data();
    void refuses_wrong_magic_and_versions();
    void every_truncation_fails_cleanly();
    void random_corruption_never_crashes();
    void unknown_tensor_type_is_named();
    void hostile_counts_are_refused_before_allocating();
    void opens_the_real_model();
};

void TestGgufFile::header_and_layout() {
    const GgufFile file = GgufFile::open(reference_path());
    QCOMPARE(file.version(), 3u);
    QCOMPARE(file.alignment(), 32u);
    QCOMPARE(file.data_offset() % 32, 0u);
    QCOMPARE(file.tensors().size(), std::size_t{26}); // 13 types, each with its expected values
    const TensorInfo& q4 = file.require_tensor("q.Q4_1");
    QCOMPARE(q4.type, TensorType::Q4_1);
    QCOMPARE(q4.shape, (std::vector<std::uint64_t>{512, 3}));
    QCOMPARE(q4.rows(), 3u);
    QCOMPARE(q4.byte_size, 3u * 16u * 20u);
    QCOMPARE(QString::fromStdString(q4.shape_string()), QString("[512, 3]"));
    QVERIFY(file.find_tensor("nope") == nullptr);
}

void TestGgufFile::metadata_of_every_type() {
    const GgufFile file = GgufFile::open(reference_path());
    QCOMPARE(file.require_string("general.architecture"), std::string("reference"));
    QCOMPARE(file.find("test.u8")->type, ValueType::UINT8);
    QCOMPARE(*file.find("test.u8")->as_uint(), 200u);
    QCOMPARE(*file.find("test.i8")->as_int(), -100);
    QCOMPARE(*file.find("test.u16")->as_uint(), 60000u);
    QCOMPARE(*file.find("test.i16")->as_int(), -30000);
    QCOMPARE(*file.find("test.u32")->as_uint(), 4000000000u);
    QCOMPARE(*file.find("test.i32")->as_int(), -2000000000);
    QCOMPARE(*file.find("test.f32")->as_float(), 0.15625);
    QCOMPARE(file.find("test.u64")->type, ValueType::UINT64);
    QCOMPARE(*file.find("test.u64")->as_uint(), (std::uint64_t{1} << 63) + 5);
    QVERIFY(!file.find("test.u64")->as_int().has_value()); // does not fit
    QCOMPARE(*file.find("test.i64")->as_int(), -(std::int64_t{1} << 62));
    QCOMPARE(*file.find("test.f64")->as_float(), 2.718281828459045);
    QCOMPARE(*file.find("test.bool_true")->as_bool(), true);
    QCOMPARE(*file.find("test.bool_false")->as_bool(), false);
    QCOMPARE(*file.find("test.string")->as_string(), std::string("héllo, κόσμε ✓"));

    const MetadataArray& ints = file.require_array("test.array_i32");
    QCOMPARE(ints.element_type, ValueType::INT32);
    QCOMPARE(ints.items.size(), std::size_t{3});
    QCOMPARE(*ints.items[1].as_int(), -2);
    const MetadataArray& strings = file.require_array("test.array_string");
    QCOMPARE(*strings.items[2].as_string(), std::string("ünï"));
    QCOMPARE(*strings.items[1].as_string(), std::string());
    const MetadataArray& nested = file.require_array("test.array_nested");
    QCOMPARE(nested.element_type, ValueType::ARRAY);
    QCOMPARE(nested.items[0].as_array()->items.size(), std::size_t{2});
    QCOMPARE(*nested.items[1].as_array()->items[0].as_int(), 3);
    const MetadataArray& floats = file.require_array("test.array_f32");
    QCOMPARE(*floats.items[1].as_float(), -1.25);
    QCOMPARE(
        QString::fromStdString(ints.items.empty() ? "" : file.find("test.array_i32")->describe()),
        QString("array<int32>[3] [1, -2, 3]"));
}

void TestGgufFile::typed_lookups_name_the_key() {
    const GgufFile file = GgufFile::open(reference_path());
    try {
        file.require_uint("llama.block_count");
        QFAIL("expected an error for a missing key");
    } catch (const GgufError& error) {
        QVERIFY2(QString(error.what()).contains("missing metadata key 'llama.block_count'"),
                 error.what());
        QVERIFY2(QString(error.what()).contains("reference_types.gguf"), error.what());
    }
    try {
        file.require_uint("test.string");
        QFAIL("expected an error for a wrong type");
    } catch (const GgufError& error) {
        QVERIFY2(QString(error.what()).contains("'test.string' should be a non-negative integer"),
                 error.what());
    }
}

void TestGgufFile::dequantizes_like_gguf_py_data() {
    QTest::addColumn<QString>("type");
    for (const char* type : {"F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K",
                             "Q3_K", "Q4_K", "Q5_K", "Q6_K"}) {
        QTest::newRow(type) << QString(type);
    }
}

void TestGgufFile::dequantizes_like_gguf_py() {
    QFETCH(QString, type);
    const GgufFile file = GgufFile::open(reference_path());
    const TensorInfo& quantized = file.require_tensor("q." + type.toStdString());
    const TensorInfo& expected = file.require_tensor("expected." + type.toStdString());
    QCOMPARE(QString(tensor_type_name(quantized.type).data()), type);
    QVERIFY(can_dequantize(quantized.type));
    QCOMPARE(expected.element_count, quantized.element_count);

    std::vector<float> ours(quantized.element_count);
    // Row by row, as the engine converts weights.
    const std::uint64_t row = quantized.shape[0];
    const std::uint64_t row_bytes = quantized.byte_size / quantized.rows();
    for (std::uint64_t r = 0; r < quantized.rows(); ++r) {
        dequantize_values(quantized.type, file.tensor_bytes(quantized).data() + r * row_bytes,
                          ours.data() + r * row, static_cast<std::int64_t>(row));
    }
    const auto* reference = reinterpret_cast<const float*>(file.tensor_bytes(expected).data());
    for (std::size_t i = 0; i < ours.size(); ++i) {
        // gguf-py may multiply in another order: allow a couple of ulps.
        const float tolerance = 1e-6f * (1.0f + std::abs(reference[i]));
        if (!(std::abs(ours[i] - reference[i]) <= tolerance)) {
            QFAIL(qPrintable(QString("%1 value %2: ours %3, gguf-py %4")
                                 .arg(type)
                                 .arg(i)
                                 .arg(double(ours[i]), 0, 'g', 9)
                                 .arg(double(reference[i]), 0, 'g', 9)));
        }
    }
}

void TestGgufFile::refuses_wrong_magic_and_versions_data() {
    QTest::addColumn<QByteArray>("header");
    QTest::addColumn<QString>("message");
    const auto u32 = [](quint32 v) {
        return QByteArray(reinterpret_cast<const char*>(&v), 4);
    };
    QTest::newRow("empty") << QByteArray() << "too short to be a GGUF file";
    QTest::newRow("sqlite") << QByteArray("SQLite format 3\0", 16) << "not a GGUF file";
    QTest::newRow("version 1") << (QByteArray("GGUF") + u32(1) + QByteArray(16, 0))
                               << "GGUF version 1 is not supported";
    QTest::newRow("version 99") << (QByteArray("GGUF") + u32(99) + QByteArray(16, 0))
                                << "unsupported GGUF version 99";
    QTest::newRow("big endian") << (QByteArray("GGUF") + u32(0x03000000) + QByteArray(16, 0))
                                << "big-endian";
    QTest::newRow("huge metadata count")
        << (QByteArray("GGUF") + u32(3) + QByteArray(8, 0) + QByteArray(8, '\xff'))
        << "metadata count";
}

void TestGgufFile::refuses_wrong_magic_and_versions() {
    QFETCH(QByteArray, header);
    QFETCH(QString, message);
    QTemporaryDir dir;
    const QString path = write_temp(dir, "bad.gguf", header);
    const QString error = open_error(path);
    QVERIFY2(error.contains(message), qPrintable(error));
    QVERIFY2(error.contains(path), qPrintable(error));
}

void TestGgufFile::every_truncation_fails_cleanly() {
    const QByteArray whole = read_all(reference_path());
    QVERIFY(!whole.isEmpty());
    const GgufFile intact = GgufFile::open(reference_path());
    QTemporaryDir dir;
    // Every cut inside the header and tensor infos, then a stride through the
    // tensor data: each must be refused with the file and an offset named.
    std::vector<qsizetype> cuts;
    for (qsizetype cut = 0; cut < static_cast<qsizetype>(intact.data_offset()); ++cut) {
        cuts.push_back(cut);
    }
    for (qsizetype cut = static_cast<qsizetype>(intact.data_offset()); cut < whole.size();
         cut += 509) {
        cuts.push_back(cut);
    }
    cuts.push_back(whole.size() - 1);
    const QString path = dir.filePath("cut.gguf");
    for (const qsizetype cut : cuts) {
        write_temp(dir, "cut.gguf", whole.left(cut));
        const QString error = open_error(path);
        if (error.isEmpty() || !error.contains(path) ||
            !(error.contains("offset") || error.contains("too short"))) {
            QFAIL(qPrintable(QString("cut at %1: '%2'").arg(cut).arg(error)));
        }
    }
}

void TestGgufFile::random_corruption_never_crashes() {
    const QByteArray whole = read_all(reference_path());
    const GgufFile intact = GgufFile::open(reference_path());
    QTemporaryDir dir;
    const QString path = dir.filePath("corrupt.gguf");
    std::mt19937 rng(7);
    std::uniform_int_distribution<qsizetype> where(0, static_cast<qsizetype>(intact.data_offset()));
    std::uniform_int_distribution<int> byte(0, 255);
    int refused = 0;
    for (int round = 0; round < 3000; ++round) {
        QByteArray bytes = whole;
        const int flips = 1 + round % 4;
        for (int f = 0; f < flips; ++f) {
            bytes[where(rng)] = static_cast<char>(byte(rng));
        }
        write_temp(dir, "corrupt.gguf", bytes);
        try {
            const GgufFile file = GgufFile::open(path.toStdString());
            // Whatever opened must be internally consistent.
            for (const TensorInfo& tensor : file.tensors()) {
                QVERIFY(tensor.file_offset + tensor.byte_size <= file.file_size());
            }
        } catch (const GgufError& error) {
            ++refused;
            QVERIFY2(QString(error.what()).contains(path), error.what());
        }
    }
    QVERIFY(refused > 0);
}

void TestGgufFile::unknown_tensor_type_is_named() {
    QByteArray bytes = read_all(reference_path());
    const GgufFile intact = GgufFile::open(reference_path());
    // Find the first tensor info ("q.F32") and change its type id to 99.
    const qsizetype name_at = bytes.indexOf("q.F32");
    QVERIFY(name_at > 0);
    const qsizetype type_at = name_at + 5 + 4 + 2 * 8; // name, n_dims, two dims
    const quint32 bad = 99;
    bytes.replace(type_at, 4, QByteArray(reinterpret_cast<const char*>(&bad), 4));
    QTemporaryDir dir;
    const QString error = open_error(write_temp(dir, "type.gguf", bytes));
    QVERIFY2(error.contains("tensor 'q.F32' has unknown type id 99"), qPrintable(error));
}

// Counts a file claims are checked against what it can hold, and metadata
// values against a budget, before anything is allocated for them: a header
// claiming 2^60 tensors or strings, or millions of one-byte values (each some
// fifty bytes in memory), is refused with the claim named.
void TestGgufFile::hostile_counts_are_refused_before_allocating() {
    const auto u32 = [](quint32 v) {
        return QByteArray(reinterpret_cast<const char*>(&v), 4);
    };
    const auto u64 = [](quint64 v) {
        return QByteArray(reinterpret_cast<const char*>(&v), 8);
    };
    const auto key = [&](const QByteArray& name) {
        return u64(name.size()) + name;
    };
    const QByteArray header = QByteArray("GGUF") + u32(3);
    QTemporaryDir dir;

    const QString tensors = write_temp(dir, "tensors.gguf",
                                       header + u64(quint64{1} << 60) + u64(0) + QByteArray(64, 0));
    QVERIFY2(open_error(tensors).contains("tensor count 1152921504606846976 cannot fit"),
             qPrintable(open_error(tensors)));

    const QString string_length =
        write_temp(dir, "string.gguf",
                   header + u64(0) + u64(1) + key("general.name") + u32(8) + u64(quint64{1} << 60) +
                       QByteArray(64, 'x'));
    QVERIFY2(open_error(string_length).contains("claims 1152921504606846976 bytes"),
             qPrintable(open_error(string_length)));

    // Two arrays of 2^22 + 1 uint8 values each: each fits its file, together
    // they pass the budget.
    const quint64 count = (quint64{1} << 22) + 1;
    QByteArray values = header + u64(0) + u64(2);
    for (const QByteArray& name : {QByteArray("a.bytes"), QByteArray("b.bytes")}) {
        values += key(name) + u32(9) + u32(0) + u64(count) + QByteArray(qsizetype(count), 1);
    }
    const QString budget = write_temp(dir, "values.gguf", values);
    const QString error = open_error(budget);
    QVERIFY2(error.contains("metadata 'b.bytes': more than 8388608 array values"),
             qPrintable(error));
    QVERIFY2(error.contains(budget), qPrintable(error));
}

void TestGgufFile::opens_the_real_model() {
    const kvscope::ModelPath model = kvscope::resolve_model_path();
    if (!kvscope::model_path_problem(model).empty()) {
        QSKIP("the model is not in place (run scripts/setup.sh): real-model check skipped");
    }
    const GgufFile file = GgufFile::open(model.path);
    QCOMPARE(file.require_string("general.architecture"), std::string("llama"));
    const std::uint64_t layers = file.require_uint("llama.block_count");
    QVERIFY(layers > 0);
    const TensorInfo& embedding = file.require_tensor("token_embd.weight");
    QVERIFY(can_dequantize(embedding.type));
    std::vector<float> row(embedding.shape[0]);
    const std::uint64_t row_bytes = embedding.byte_size / embedding.rows();
    dequantize_values(embedding.type, file.tensor_bytes(embedding).data() + 100 * row_bytes,
                      row.data(), static_cast<std::int64_t>(row.size()));
    double sum_sq = 0;
    for (float v : row) {
        QVERIFY(std::isfinite(v));
        sum_sq += double(v) * v;
    }
    QVERIFY(sum_sq > 0);
    for (const TensorInfo& tensor : file.tensors()) {
        QVERIFY2(can_dequantize(tensor.type), tensor.name.c_str());
    }
}

QTEST_GUILESS_MAIN(TestGgufFile)
#include "tst_gguf_file.moc"
