// SentencePiece vocabularies (tokenizer.ggml.model "llama": Gemma, Llama 2)
// against Google's sentencepiece: a vocabulary it trained, written to GGUF
// as llama.cpp's converter writes one (tests/engine/data/tiny_spm.gguf), must
// tokenize every text of the test set (ASCII, Unicode, code, whitespace runs,
// digits, bytes no piece covers, user-defined pieces; and again with the
// leading-space rule and unused pieces, tiny_spm_prefix.gguf) into the ids
// sentencepiece gives for a model rebuilt from the same GGUF data
// (golden_tiny_spm.json, from make_tiny_spm_gguf.py), and decode back to
// the same text. The same test set on Gemma 3's own 262,144-piece
// vocabulary where that model is in the cache (golden_gemma3_tokenizer.json,
// from scripts/reference/make_gemma3_tokenizer_golden.py). Seen failing with
// the merge order reversed (the lowest score first), with unused pieces
// emitted whole and with the leading space never added.
#include "engine/gguf/gguf_file.h"
#include "engine/model_path.h"
#include "engine/tokenizer/tokenizer.h"

#include <filesystem>

#include <QCryptographicHash>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTest>

using namespace kvscope;

namespace {

const char* data(const char* name) {
    static std::string path;
    path = std::string(KVSCOPE_SOURCE_DIR "/tests/engine/data/") + name;
    return path.c_str();
}

QJsonObject golden(const char* name) {
    QFile file(data(name));
    if (!file.open(QIODevice::ReadOnly)) {
        return {};
    }
    return QJsonDocument::fromJson(file.readAll()).object();
}

std::vector<tokenizer::TokenId> ids_of(const QJsonValue& golden_case) {
    std::vector<tokenizer::TokenId> ids;
    for (const QJsonValue id : golden_case.toObject()["ids"].toArray()) {
        ids.push_back(id.toInt());
    }
    return ids;
}

std::vector<tokenizer::TokenId> encode(const tokenizer::Tokenizer& tokenizer, const QString& text) {
    const QByteArray utf8 = text.toUtf8();
    return tokenizer.encode(std::string_view(utf8.data(), static_cast<std::size_t>(utf8.size())),
                            false);
}

QString ids_text(const std::vector<tokenizer::TokenId>& ids) {
    QStringList parts;
    for (const tokenizer::TokenId id : ids) {
        parts << QString::number(id);
    }
    return parts.join(' ');
}

} // namespace

class TestSentencePiece : public QObject {
    Q_OBJECT

private slots:
    void matches_sentencepiece_data() {
        QTest::addColumn<QString>("vocabulary");
        QTest::addColumn<QString>("text");
        QTest::addColumn<QString>("ids");
        QTest::addColumn<bool>("space_prefix");
        for (const char* name : {"tiny_spm", "tiny_spm_prefix"}) {
            const std::string golden_name = std::string("golden_") + name + ".json";
            const QJsonObject reference = golden(golden_name.c_str());
            const QJsonArray cases = reference["cases"].toArray();
            QVERIFY2(cases.size() >= 20,
                     qPrintable(QString::fromStdString(golden_name) + " is missing or broken"));
            for (int i = 0; i < cases.size(); ++i) {
                QTest::addRow("%s %d", name, i)
                    << QString(name) << cases[i].toObject()["text"].toString()
                    << ids_text(ids_of(cases[i])) << reference["add_space_prefix"].toBool();
            }
        }
    }

    void matches_sentencepiece() {
        QFETCH(QString, vocabulary);
        QFETCH(QString, text);
        QFETCH(QString, ids);
        QFETCH(bool, space_prefix);
        const auto file = gguf::GgufFile::open(data(qPrintable(vocabulary + ".gguf")));
        const auto tokenizer = tokenizer::Tokenizer::from_gguf(file);
        const std::vector<tokenizer::TokenId> got = encode(tokenizer, text);
        QCOMPARE(ids_text(got), ids);
        // Back to the same bytes: pieces, spaces and fallback bytes alike
        // (with the leading-space rule, decoding keeps the space it added).
        if (!space_prefix) {
            QCOMPARE(QByteArray::fromStdString(tokenizer.decode(got)), text.toUtf8());
        }
    }

    void matches_sentencepiece_on_gemma3() {
        const QJsonObject reference = golden("golden_gemma3_tokenizer.json");
        QVERIFY2(reference["cases"].toArray().size() >= 20,
                 "tests/engine/data/golden_gemma3_tokenizer.json is missing or broken");
        const std::filesystem::path model = model_cache_dir() / gemma3_model_file_name;
        if (!std::filesystem::is_regular_file(model)) {
            QSKIP(qPrintable("Gemma 3's vocabulary needs " +
                             QString::fromStdString(model.string()) +
                             " (scripts/setup.sh fetches it)"));
        }
        QFile bytes(QString::fromStdString(model.string()));
        QVERIFY(bytes.open(QIODevice::ReadOnly));
        QCryptographicHash hash(QCryptographicHash::Sha256);
        hash.addData(&bytes);
        if (hash.result().toHex() != reference["model_sha256"].toString().toLatin1()) {
            QSKIP(qPrintable(QString::fromStdString(model.string()) +
                             " is not the file the golden ids came from (run scripts/setup.sh)"));
        }
        const auto file = gguf::GgufFile::open(model);
        const auto tokenizer = tokenizer::Tokenizer::from_gguf(file);
        for (const QJsonValue golden_case : reference["cases"].toArray()) {
            const QString text = golden_case.toObject()["text"].toString();
            const std::vector<tokenizer::TokenId> got = encode(tokenizer, text);
            QVERIFY2(ids_text(got) == ids_text(ids_of(golden_case)),
                     qPrintable(QString("'%1': %2, sentencepiece %3")
                                    .arg(text, ids_text(got), ids_text(ids_of(golden_case)))));
            QCOMPARE(QByteArray::fromStdString(tokenizer.decode(got)), text.toUtf8());
        }
    }

    // The special tokens: control ones only when asked to parse them, the
    // end of a turn ends generation, the unknown piece renders as nothing.
    void control_pieces_need_parse_special() {
        const auto file = gguf::GgufFile::open(data("tiny_spm.gguf"));
        const auto tokenizer = tokenizer::Tokenizer::from_gguf(file);
        const tokenizer::TokenId bos = tokenizer.find("<bos>");
        QCOMPARE(bos, tokenizer.bos_id());
        QCOMPARE(tokenizer.encode("<bos>x", true).front(), bos);
        QVERIFY(tokenizer.encode("<bos>x", false).front() != bos);
        QVERIFY(tokenizer.ends_generation(tokenizer.eos_id()));
        QVERIFY(tokenizer.ends_generation(tokenizer.find("<end_of_turn>")));
        QCOMPARE(tokenizer.token_bytes(tokenizer.unknown_id()), std::string());
        QCOMPARE(tokenizer.token_bytes(bos, true), std::string("<bos>"));
    }
};

QTEST_GUILESS_MAIN(TestSentencePiece)
#include "tst_sentencepiece.moc"
