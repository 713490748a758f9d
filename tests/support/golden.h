// Access to the golden data made by scripts/reference/make_golden.py from
// llama.cpp and transformers, and to the model it was made with.
#pragma once

#include "engine/model_path.h"

#include <QCryptographicHash>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QString>

namespace kvscope::test {

inline QJsonObject load_golden() {
    QFile file(KVSCOPE_SOURCE_DIR "/tests/engine/data/golden_smollm2.json");
    if (!file.open(QIODevice::ReadOnly)) {
        return {};
    }
    return QJsonDocument::fromJson(file.readAll()).object();
}

// Empty when the model the engine would load is the one the golden data was
// made with; otherwise why the golden comparison cannot run.
inline QString golden_model_problem(const QJsonObject& golden) {
    const ModelPath model = resolve_model_path();
    if (const std::string problem = model_path_problem(model); !problem.empty()) {
        return QString::fromStdString(problem);
    }
    QFile file(QString::fromStdString(model.path.string()));
    if (!file.open(QIODevice::ReadOnly)) {
        return "cannot read " + file.fileName();
    }
    QCryptographicHash hash(QCryptographicHash::Sha256);
    hash.addData(&file);
    if (hash.result().toHex() != golden.value("model_sha256").toString().toLatin1()) {
        return file.fileName() + " is not the model the golden data was made with (" +
               golden.value("model_file").toString() + ")";
    }
    return {};
}

inline std::string golden_model_path() {
    return resolve_model_path().path.string();
}

} // namespace kvscope::test
