// The tokenizer against llama.cpp's on the real SmolLM2 vocabulary: identical
// ids for ASCII, Unicode, code, whitespace runs, digits and special tokens,
// with and without special-token parsing; decoding gives the text back.
#include "engine/gguf/gguf_file.h"
#include "engine/tokenizer/chat_template.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/utf8_stream.h"
#include "tests/support/golden.h"

#include <optional>

#include <QJsonArray>
#include <QTest>

using namespace kvscope;
using tokenizer::TokenId;

namespace {

std::vector<TokenId> to_ids(const QJsonValue& value) {
    std::vector<TokenId> ids;
    for (const QJsonValue& id : value.toArray()) {
        ids.push_back(id.toInt());
    }
    return ids;
}

QString show(const std::vector<TokenId>& ids) {
    QStringList parts;
    for (TokenId id : ids) {
        parts << QString::number(id);
    }
    return "[" + parts.join(", ") + "]";
}

} // namespace

class TestTokenizer : public QObject {
    Q_OBJECT

private slots:
    void initTestCase();
    void matches_llama_cpp_data();
    void matches_llama_cpp();
    void decode_streams_text_back();
    void special_tokens_and_ids();
    void chat_template_matches_the_models();
    void invalid_utf8_input_is_kept();

private:
    QJsonObject golden_;
    std::optional<gguf::GgufFile> file_;
    std::optional<tokenizer::Tokenizer> tokenizer_;
};

void TestTokenizer::initTestCase() {
    golden_ = test::load_golden();
    QVERIFY2(!golden_.isEmpty(), "tests/engine/data/golden_smollm2.json is missing or invalid");
    if (const QString problem = test::golden_model_problem(golden_); !problem.isEmpty()) {
        QSKIP(qPrintable("golden tokenizer tests need the SmolLM2 model: " + problem));
    }
    file_.emplace(gguf::GgufFile::open(test::golden_model_path()));
    tokenizer_.emplace(tokenizer::Tokenizer::from_gguf(*file_));
}

void TestTokenizer::matches_llama_cpp_data() {
    QTest::addColumn<QString>("text");
    QTest::addColumn<QJsonValue>("ids");
    QTest::addColumn<QJsonValue>("ids_no_special");
    int row = 0;
    for (const QJsonValue& entry : golden_.value("tokenizer").toArray()) {
        const QJsonObject c = entry.toObject();
        QTest::addRow("%d: %s", row++, qPrintable(c.value("text").toString().left(30)))
            << c.value("text").toString() << c.value("ids") << c.value("ids_no_special");
    }
}

void TestTokenizer::matches_llama_cpp() {
    QFETCH(QString, text);
    QFETCH(QJsonValue, ids);
    QFETCH(QJsonValue, ids_no_special);
    const std::string utf8 = text.toStdString();

    const std::vector<TokenId> ours = tokenizer_->encode(utf8, true);
    QVERIFY2(ours == to_ids(ids),
             qPrintable("ours " + show(ours) + "\nllama.cpp " + show(to_ids(ids))));
    const std::vector<TokenId> plain = tokenizer_->encode(utf8, false);
    QVERIFY2(plain == to_ids(ids_no_special),
             qPrintable("ours " + show(plain) + "\nllama.cpp " + show(to_ids(ids_no_special))));
    QCOMPARE(tokenizer_->decode(ours, true), utf8);
    QCOMPARE(tokenizer_->decode(plain), utf8);
}

void TestTokenizer::decode_streams_text_back() {
    // Token by token through the stream decoder, as `generate` prints:
    // the pieces joined are the text, and no piece splits a character.
    for (const QJsonValue& entry : golden_.value("tokenizer").toArray()) {
        const std::string text = entry.toObject().value("text").toString().toStdString();
        tokenizer::Utf8StreamDecoder decoder;
        std::string joined;
        for (const TokenId id : tokenizer_->encode(text, false)) {
            const std::string piece = decoder.push(tokenizer_->token_bytes(id));
            QVERIFY(QString::fromUtf8(piece.data(), static_cast<qsizetype>(piece.size()))
                        .toStdString() == piece); // valid UTF-8 on its own
            joined += piece;
        }
        joined += decoder.finish();
        QCOMPARE(joined, text);
    }
}

void TestTokenizer::special_tokens_and_ids() {
    QCOMPARE(tokenizer_->vocab_size(), std::size_t{49152});
    QCOMPARE(tokenizer_->bos_id(), 1);
    QCOMPARE(tokenizer_->eos_id(), 2);
    QCOMPARE(tokenizer_->token_text(2), std::string("<|im_end|>"));
    QVERIFY(tokenizer_->is_special(1));
    QVERIFY(!tokenizer_->is_special(100));
    QCOMPARE(tokenizer_->token_bytes(2), std::string()); // hidden unless asked for
    QCOMPARE(tokenizer_->token_bytes(2, true), std::string("<|im_end|>"));
    QCOMPARE(tokenizer_->find("<|im_start|>"), 1);
    QCOMPARE(tokenizer_->find("no such token"), -1);
}

void TestTokenizer::chat_template_matches_the_models() {
    for (const QJsonValue& entry : golden_.value("greedy").toArray()) {
        const QJsonObject c = entry.toObject();
        const std::string rendered =
            tokenizer::render_chatml({{"user", c.value("prompt").toString().toStdString()}}, true);
        QCOMPARE(QString::fromStdString(rendered), c.value("prompt_text").toString());
        QVERIFY(tokenizer_->encode(rendered, true) == to_ids(c.value("prompt_ids")));
        // The same from the file's own template, default system prompt and all.
        QCOMPARE(tokenizer::render_conversation(
                     *tokenizer_, {{"user", c.value("prompt").toString().toStdString()}}),
                 rendered);
    }
    QCOMPARE(tokenizer::default_system_prompt(*tokenizer_),
             std::string(tokenizer::smollm2_default_system_prompt));
    // A conversation that brings its own system prompt gets no default one.
    const std::string own =
        tokenizer::render_chatml({{"system", "Be brief."}, {"user", "Hi"}}, false);
    QCOMPARE(own, std::string(
                      "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"));
}

void TestTokenizer::invalid_utf8_input_is_kept() {
    // Byte-level BPE keeps any byte its vocabulary has a symbol for: a cut-off
    // character (e2 82) survives. SmolLM2's vocabulary has no symbol for bytes
    // that never occur in UTF-8 (ff, fe): those become the unknown token.
    const std::string bytes = "ok \xff\xfe bad \xe2\x82 cut";
    const std::vector<TokenId> ids = tokenizer_->encode(bytes, true);
    QCOMPARE(std::count(ids.begin(), ids.end(), 0), 2);
    QCOMPARE(tokenizer_->decode(ids), std::string("ok  bad \xe2\x82 cut"));
}

QTEST_GUILESS_MAIN(TestTokenizer)
#include "tst_tokenizer.moc"
