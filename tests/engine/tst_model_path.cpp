// Which model file the engine picks: KVSCOPE_MODEL first, then the cache that
// scripts/setup.sh fills, and clear messages when the file is not usable.
#include "engine/model_path.h"

#include <QFile>
#include <QTemporaryDir>
#include <QTest>

class TestModelPath : public QObject {
    Q_OBJECT

private slots:
    void init();
    void cleanup();
    void kvscope_model_overrides();
    void empty_kvscope_model_is_ignored();
    void cache_follows_xdg_cache_home();
    void cache_defaults_to_home_dot_cache();
    void problem_for_missing_file_says_how_to_fetch();
    void problem_for_missing_override_names_the_variable();
    void problem_for_directory();
    void models_by_name();
    void no_problem_for_readable_file();

private:
    QByteArray saved_model_, saved_xdg_, saved_home_;
};

void TestModelPath::init() {
    saved_model_ = qgetenv("KVSCOPE_MODEL");
    saved_xdg_ = qgetenv("XDG_CACHE_HOME");
    saved_home_ = qgetenv("HOME");
    qunsetenv("KVSCOPE_MODEL");
    qunsetenv("XDG_CACHE_HOME");
}

void TestModelPath::cleanup() {
    const auto restore = [](const char* name, const QByteArray& value) {
        value.isNull() ? qunsetenv(name) : qputenv(name, value);
    };
    restore("KVSCOPE_MODEL", saved_model_);
    restore("XDG_CACHE_HOME", saved_xdg_);
    restore("HOME", saved_home_);
}

void TestModelPath::kvscope_model_overrides() {
    qputenv("KVSCOPE_MODEL", "/models/other.gguf");
    const kvscope::ModelPath model = kvscope::resolve_model_path();
    QCOMPARE(QString::fromStdString(model.path.string()), QString("/models/other.gguf"));
    QVERIFY(model.from_environment);
}

void TestModelPath::empty_kvscope_model_is_ignored() {
    qputenv("KVSCOPE_MODEL", "");
    qputenv("HOME", "/home/someone");
    const kvscope::ModelPath model = kvscope::resolve_model_path();
    QVERIFY(!model.from_environment);
    QCOMPARE(QString::fromStdString(model.path.string()),
             QString("/home/someone/.cache/kvscope/models/SmolLM2-135M-Instruct.Q4_1.gguf"));
}

void TestModelPath::cache_follows_xdg_cache_home() {
    qputenv("XDG_CACHE_HOME", "/var/cache/me");
    QCOMPARE(QString::fromStdString(kvscope::model_cache_dir().string()),
             QString("/var/cache/me/kvscope/models"));
}

void TestModelPath::cache_defaults_to_home_dot_cache() {
    qputenv("HOME", "/home/someone");
    QCOMPARE(QString::fromStdString(kvscope::model_cache_dir().string()),
             QString("/home/someone/.cache/kvscope/models"));
}

void TestModelPath::problem_for_missing_file_says_how_to_fetch() {
    QTemporaryDir dir;
    qputenv("XDG_CACHE_HOME", dir.path().toUtf8());
    const std::string problem = kvscope::model_path_problem(kvscope::resolve_model_path());
    QVERIFY2(problem.find("not found") != std::string::npos, problem.c_str());
    QVERIFY2(problem.find("scripts/setup.sh") != std::string::npos, problem.c_str());
    QVERIFY2(problem.find("KVSCOPE_MODEL") != std::string::npos, problem.c_str());
}

void TestModelPath::problem_for_missing_override_names_the_variable() {
    QTemporaryDir dir;
    qputenv("KVSCOPE_MODEL", dir.filePath("missing.gguf").toUtf8());
    const std::string problem = kvscope::model_path_problem(kvscope::resolve_model_path());
    QVERIFY2(problem.find("missing.gguf") != std::string::npos, problem.c_str());
    QVERIFY2(problem.find("chosen by KVSCOPE_MODEL") != std::string::npos, problem.c_str());
}

void TestModelPath::problem_for_directory() {
    QTemporaryDir dir;
    qputenv("KVSCOPE_MODEL", dir.path().toUtf8());
    const std::string problem = kvscope::model_path_problem(kvscope::resolve_model_path());
    QVERIFY2(problem.find("not a regular file") != std::string::npos, problem.c_str());
}

void TestModelPath::no_problem_for_readable_file() {
    QTemporaryDir dir;
    const QString path = dir.filePath("model.gguf");
    QFile file(path);
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write("GGUF");
    file.close();
    qputenv("KVSCOPE_MODEL", path.toUtf8());
    QCOMPARE(QString::fromStdString(kvscope::model_path_problem(kvscope::resolve_model_path())),
             QString());
}

void TestModelPath::models_by_name() {
    qputenv("XDG_CACHE_HOME", "/tmp/xdg");
    const std::filesystem::path cache = "/tmp/xdg/kvscope/models";
    QCOMPARE(*kvscope::named_model_path("gemma-3-270m"), cache / kvscope::gemma3_model_file_name);
    QCOMPARE(*kvscope::named_model_path("Gemma3"), cache / kvscope::gemma3_model_file_name);
    QCOMPARE(*kvscope::named_model_path("smollm2"), cache / kvscope::default_model_file_name);
    QCOMPARE(*kvscope::named_model_path("SmolLM2-135M-Instruct"),
             cache / kvscope::default_model_file_name);
    QVERIFY(!kvscope::named_model_path("llama-3"));
    QVERIFY(!kvscope::named_model_path("models/gemma.gguf"));
    QCOMPARE(kvscope::model_names(), std::string("smollm2, gemma-3-270m"));
}

QTEST_GUILESS_MAIN(TestModelPath)
#include "tst_model_path.moc"
