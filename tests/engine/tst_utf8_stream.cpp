// The streaming UTF-8 decoder: characters split across tokens come out whole,
// bytes that can never form a character become U+FFFD, nothing is lost. And
// the one-line printable form of generated text the terminal tables use.
#include "engine/tokenizer/printable_text.h"
#include "engine/tokenizer/utf8_stream.h"

#include <QTest>

using kvscope::tokenizer::Utf8StreamDecoder;

class TestUtf8Stream : public QObject {
    Q_OBJECT

private slots:
    void split_characters_wait_for_their_end_data();
    void split_characters_wait_for_their_end();
    void invalid_bytes_become_replacement_data();
    void invalid_bytes_become_replacement();
    void cut_off_character_at_end();
    void printable_text_is_one_safe_line_data();
    void printable_text_is_one_safe_line();
};

void TestUtf8Stream::split_characters_wait_for_their_end_data() {
    QTest::addColumn<QByteArray>("text");
    QTest::newRow("ascii") << QByteArray("plain text");
    QTest::newRow("two-byte") << QByteArray("café κόσμε");
    QTest::newRow("three-byte") << QByteArray("你好世界 ✓");
    QTest::newRow("four-byte") << QByteArray("🤖🚀 👩‍👩‍👧");
}

void TestUtf8Stream::split_characters_wait_for_their_end() {
    QFETCH(QByteArray, text);
    // Every way of cutting the text in two, and byte by byte.
    for (qsizetype cut = 0; cut <= text.size(); ++cut) {
        Utf8StreamDecoder decoder;
        const std::string first = decoder.push(text.left(cut).toStdString());
        QVERIFY(QString::fromUtf8(first.c_str()).toUtf8() == QByteArray::fromStdString(first));
        const std::string second = decoder.push(text.mid(cut).toStdString());
        QCOMPARE(QByteArray::fromStdString(first + second), text);
        QVERIFY(!decoder.has_pending());
    }
    Utf8StreamDecoder decoder;
    std::string joined;
    for (const char c : text) {
        joined += decoder.push(std::string(1, c));
    }
    QCOMPARE(QByteArray::fromStdString(joined + decoder.finish()), text);
}

void TestUtf8Stream::invalid_bytes_become_replacement_data() {
    QTest::addColumn<QByteArray>("input");
    QTest::addColumn<QByteArray>("expected");
    const QByteArray fffd("\xEF\xBF\xBD");
    QTest::newRow("lone continuation") << QByteArray("a\x80z") << ("a" + fffd + "z");
    QTest::newRow("invalid lead") << QByteArray("\xff") << fffd;
    QTest::newRow("overlong") << QByteArray("\xc0\xaf") << (fffd + fffd);
    QTest::newRow("surrogate") << QByteArray("\xed\xa0\x80") << (fffd + fffd + fffd);
    QTest::newRow("interrupted") << QByteArray("\xe4\xbd"
                                               "A")
                                 << (fffd + "A");
}

void TestUtf8Stream::invalid_bytes_become_replacement() {
    QFETCH(QByteArray, input);
    QFETCH(QByteArray, expected);
    Utf8StreamDecoder decoder;
    const std::string out = decoder.push(input.toStdString()) + decoder.finish();
    QCOMPARE(QByteArray::fromStdString(out), expected);
}

void TestUtf8Stream::cut_off_character_at_end() {
    Utf8StreamDecoder decoder;
    QCOMPARE(decoder.push("ok \xf0\x9f"), std::string("ok "));
    QVERIFY(decoder.has_pending());
    QCOMPARE(decoder.finish(), std::string("\xEF\xBF\xBD"));
    QVERIFY(!decoder.has_pending());
}

void TestUtf8Stream::printable_text_is_one_safe_line_data() {
    QTest::addColumn<QByteArray>("bytes");
    QTest::addColumn<int>("max_chars");
    QTest::addColumn<QString>("shown");
    QTest::newRow("plain") << QByteArray("Hello") << 10 << "Hello";
    QTest::newRow("cut") << QByteArray("Hello") << 4 << "Hell...";
    QTest::newRow("exactly") << QByteArray("Hello") << 5 << "Hello";
    QTest::newRow("lines and tabs") << QByteArray("a\nb\tc") << 10 << "a\\nb\\tc";
    QTest::newRow("control") << QByteArray("a\x1b[2Jb") << 10 << "a\\x1b[2Jb";
    // Whole characters count as one, and a cut never splits one.
    QTest::newRow("characters") << QByteArray("café 你好") << 6 << "café 你...";
    // A token limit can leave half a character; lone bytes are escaped.
    QTest::newRow("half a character") << QByteArray("ok\xe4\xbd") << 10 << "ok\\xe4\\xbd";
    QTest::newRow("stray bytes") << QByteArray("\x86\xf8") << 10 << "\\x86\\xf8";
    QTest::newRow("backslash") << QByteArray("a\\nb") << 10 << "a\\\\nb";
    // Not well-formed UTF-8 (Unicode's table 3-7), each byte escaped.
    QTest::newRow("overlong") << QByteArray("\xe0\x80\xaf") << 10 << "\\xe0\\x80\\xaf";
    QTest::newRow("surrogate") << QByteArray("\xed\xa0\x80") << 10 << "\\xed\\xa0\\x80";
    QTest::newRow("past U+10FFFF")
        << QByteArray("\xf4\x90\x80\x80") << 10 << "\\xf4\\x90\\x80\\x80";
    QTest::newRow("C1 control") << QByteArray("a\xc2\x85") << 10 << "a\\xc2\\x85";
    QTest::newRow("empty") << QByteArray() << 10 << "";
}

void TestUtf8Stream::printable_text_is_one_safe_line() {
    QFETCH(QByteArray, bytes);
    QFETCH(int, max_chars);
    QFETCH(QString, shown);
    const std::string printed = kvscope::tokenizer::printable_text(
        std::string_view(bytes.constData(), static_cast<std::size_t>(bytes.size())),
        static_cast<std::size_t>(max_chars));
    QCOMPARE(QString::fromStdString(printed), shown);
}

QTEST_GUILESS_MAIN(TestUtf8Stream)
#include "tst_utf8_stream.moc"
