// The house's one-way layers (docs/layout.md), checked on every source file's
// includes so that a shortcut fails here rather than in review: the engine,
// profiler and kernels stay free of Qt; nothing below the app includes it;
// only the CPU backend and the backend factory see engine/cpu (the model is
// backend-neutral: each backend prepares its own form of the weights); in the
// app, panels sit above views, models and the run controller.
#include <QDirIterator>
#include <QFile>
#include <QRegularExpression>
#include <QTest>

namespace {

struct Rule {
    QString folder;     // files under this folder (from the repository root)
    QString forbidden;  // may not include paths starting with this
    QStringList except; // files (from the root) allowed to
    QString why;
};

// Every `#include` of the file, as written between the quotes or brackets.
QStringList includes_of(const QString& path) {
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly | QIODevice::Text)) {
        return {};
    }
    // Built from pieces: moc, which reads this file, mistakes a raw string
    // holding a hash and "include" for a directive.
    static const QRegularExpression include(QStringLiteral("^\\s*#\\s*") + "include" +
                                            QStringLiteral("\\s*[<\"]([^>\"]+)[>\"]"));
    QStringList found;
    while (!file.atEnd()) {
        const QRegularExpressionMatch match = include.match(QString::fromUtf8(file.readLine()));
        if (match.hasMatch()) {
            found << match.captured(1);
        }
    }
    return found;
}

} // namespace

class TestIncludeLayers : public QObject {
    Q_OBJECT

private slots:
    void includes_point_one_way_data();
    void includes_point_one_way();
};

void TestIncludeLayers::includes_point_one_way_data() {
    QTest::addColumn<QString>("folder");
    QTest::addColumn<QString>("forbidden");
    QTest::addColumn<QStringList>("except");

    const QList<Rule> rules = {
        {"engine/", "Q", {}, "the engine is Qt-free"},
        {"profiler/", "Q", {}, "the profiler is Qt-free"},
        {"profiler/attach/", "Q", {}, "attached engines are decoded without Qt"},
        {"kernels/", "Q", {}, "kernels are Qt-free"},
        {"engine/", "profiler/", {}, "the profiler sits above the engine"},
        {"engine/", "app/", {}, "the app sits above the engine"},
        {"kernels/", "app/", {}, "the app sits above the kernels"},
        {"kernels/",
         "engine/",
         {},
         "the kernels are the bottom layer: shared math lives in kernels/math"},
        {"kernels/", "profiler/", {}, "the profiler sits above the kernels"},
        {"profiler/", "app/", {}, "the app sits above the profiler"},
        {"engine/model/", "engine/cpu/", {}, "the model is backend-neutral"},
        {"engine/kv/", "engine/cpu/", {}, "the KV manager is backend-neutral"},
        {"engine/sched/", "engine/cpu/", {}, "the scheduler is backend-neutral"},
        {"engine/session/",
         "engine/cpu/",
         {"engine/session/backend_factory.cpp"},
         "backends are made in one place"},
        {"engine/quality/", "engine/cpu/", {}, "backends are made by the factory"},
        {"engine/workload/", "engine/cpu/", {}, "workloads are backend-neutral"},
        {"engine/runner/", "engine/cpu/", {}, "the backend interface is backend-neutral"},
        {"engine/events/", "engine/cpu/", {}, "events are backend-neutral"},
        {"engine/gguf/", "engine/cpu/", {}, "the file reader is backend-neutral"},
        {"engine/tokenizer/", "engine/cpu/", {}, "the tokenizer is backend-neutral"},
        {"engine/sampling/", "engine/cpu/", {}, "sampling is backend-neutral"},
        {"engine/util/", "engine/cpu/", {}, "utilities are backend-neutral"},
        {"profiler/", "engine/cpu/", {}, "the profiler sees backends through their interface"},
        {"app/", "engine/cpu/", {}, "backends are made by the factory"},
        // Decoding other engines' events needs the typed events, the
        // tokenizer and utilities of the engine, never a model or a run.
        {"profiler/attach/", "engine/model/", {}, "attach decodes events, runs no model"},
        {"profiler/attach/", "engine/session/", {}, "attach decodes events, serves nothing"},
        {"profiler/attach/", "engine/sched/", {}, "attach decodes events, schedules nothing"},
        {"profiler/attach/", "engine/kv/", {}, "attached blocks are the engines', not ours"},
        {"app/ui/views/", "app/ui/panels/", {}, "panels sit above views"},
        {"app/ui/models/", "app/ui/panels/", {}, "panels sit above models"},
        {"app/ui/run/", "app/ui/panels/", {}, "panels sit above the run controller"},
    };
    for (const Rule& rule : rules) {
        QTest::newRow(qPrintable(rule.folder + " without " + rule.forbidden + ": " + rule.why))
            << rule.folder << rule.forbidden << rule.except;
    }
}

void TestIncludeLayers::includes_point_one_way() {
    QFETCH(QString, folder);
    QFETCH(QString, forbidden);
    QFETCH(QStringList, except);
    const QString root = QStringLiteral(KVSCOPE_SOURCE_DIR) + "/";
    QVERIFY2(QFile::exists(root + folder), qPrintable(root + folder + " is missing"));
    QStringList violations;
    int files = 0;
    QDirIterator it(root + folder, {"*.h", "*.cpp", "*.cu", "*.cuh"}, QDir::Files,
                    QDirIterator::Subdirectories);
    while (it.hasNext()) {
        const QString path = it.next();
        const QString relative = path.mid(root.size());
        ++files;
        if (except.contains(relative)) {
            continue;
        }
        for (const QString& include : includes_of(path)) {
            if (include.startsWith(forbidden)) {
                violations << relative + " includes " + include;
            }
        }
    }
    QVERIFY2(files > 0, "no sources found: the rule checks nothing");
    QVERIFY2(violations.isEmpty(), qPrintable(violations.join("\n")));
}

QTEST_GUILESS_MAIN(TestIncludeLayers)
#include "tst_include_layers.moc"
