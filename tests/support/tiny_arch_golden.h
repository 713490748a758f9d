// The tiny random-weight models of each architecture (tests/engine/data,
// made by make_tiny_llama_gguf.py) and transformers' fp32 logits for them
// (golden_tiny_archs.json, from scripts/reference/make_tiny_arch_golden.py):
// the CPU (tst_architectures) and CUDA (tst_cuda_backend) suites check both
// backends against the same reference, in the same chunkings.
#pragma once

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QList>
#include <QString>
#include <QTest>

namespace kvscope::test {

inline QString engine_data_path(const QString& name) {
    return QStringLiteral(KVSCOPE_SOURCE_DIR "/tests/engine/data/") + name;
}

// The golden entry for one model file; empty when there is none.
inline QJsonObject tiny_arch_golden(const QString& file) {
    QFile golden(engine_data_path("golden_tiny_archs.json"));
    if (!golden.open(QIODevice::ReadOnly)) {
        return {};
    }
    for (const QJsonValue& model : QJsonDocument::fromJson(golden.readAll())["models"].toArray()) {
        if (model["model_file"].toString() == file) {
            return model.toObject();
        }
    }
    return {};
}

// Data rows (file, chunks): every tiny model as one pass, token by token
// (the decode path; Gemma 3's window of 8 slides) and in chunks of 5.
inline void add_tiny_arch_rows() {
    QTest::addColumn<QString>("file");
    QTest::addColumn<QList<int>>("chunks");
    for (const char* file : {"tiny_llama.gguf", "tiny_qwen2.gguf", "tiny_qwen3.gguf",
                             "tiny_gemma3.gguf", "tiny_llama3.gguf"}) {
        QTest::addRow("%s one pass", file) << QString(file) << QList<int>{32};
        QTest::addRow("%s token by token", file) << QString(file) << QList<int>{1};
        QTest::addRow("%s chunks of 5", file) << QString(file) << QList<int>{5};
    }
}

} // namespace kvscope::test
