// scripts/gpu-check.sh, the GPU check in one command, where it can be checked
// without a GPU: it must end cleanly with "no GPU" and at most 8 result files
// (forced, so this passes on a GPU machine too), refuse bad command lines with
// status 2, never write into a folder of someone else's files, and the model's
// journey in parts and its random-weight stand-in must work the first time
// they are needed on a GPU machine.
#include "tests/support/run_process.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QRandomGenerator>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

using kvscope::test::ProcessResult;
using kvscope::test::run_process;

namespace {

QString script() {
    return QStringLiteral(KVSCOPE_SOURCE_DIR "/scripts/gpu-check.sh");
}

QProcessEnvironment no_gpu_environment() {
    QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
    environment.insert("KVSCOPE_GPU_CHECK_ASSUME_NO_GPU", "1");
    return environment;
}

ProcessResult gpu_check(const QStringList& arguments,
                        const QProcessEnvironment& environment = no_gpu_environment()) {
    return run_process(script(), arguments, environment);
}

QByteArray read_file(const QString& path) {
    QFile file(path);
    return file.open(QIODevice::ReadOnly) ? file.readAll() : QByteArray();
}

bool write_file(const QString& path, const QByteArray& data) {
    QFile file(path);
    return file.open(QIODevice::WriteOnly) && file.write(data) == data.size();
}

QStringList files_in(const QString& dir) {
    return QDir(dir).entryList(QDir::AllEntries | QDir::Hidden | QDir::NoDotAndDotDot);
}

} // namespace

class TestGpuCheck : public QObject {
    Q_OBJECT

private slots:
    void without_a_gpu_it_ends_cleanly();
    void a_second_run_replaces_the_first();
    void a_folder_of_other_files_is_refused();
    void command_line_data();
    void command_line();
    void pack_without_a_build_tree_says_why();
    void model_parts_join_back_checked();
    void random_model_has_the_real_shape_and_runs();
};

void TestGpuCheck::without_a_gpu_it_ends_cleanly() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString results = dir.filePath("results");
    const ProcessResult result = gpu_check({"--out", results});
    QVERIFY2(result.started, qPrintable(result.err));
    QVERIFY2(result.exit_code == 0, qPrintable(result.out + result.err));
    QVERIFY2(result.out.contains("no GPU: nothing to check (KVSCOPE_GPU_CHECK_ASSUME_NO_GPU=1"),
             qPrintable(result.out));

    const QStringList files = files_in(results);
    QVERIFY2(files.size() <= 8, qPrintable(files.join(' ')));
    QCOMPARE(files, QStringList{"summary.md"});
    const QByteArray summary = read_file(results + "/summary.md");
    QVERIFY2(summary.contains("no GPU: nothing to check"), summary.constData());
    QVERIFY2(!summary.contains("| fail |"), summary.constData());

    // The options a lease's call passes are taken, and the summary names them.
    const ProcessResult lean =
        gpu_check({"--out", results, "--no-compare", "--only", "tests,bench", "--timeout", "150"});
    QVERIFY2(lean.exit_code == 0, qPrintable(lean.out + lean.err));
    QVERIFY2(read_file(results + "/summary.md").contains("--no-compare"),
             read_file(results + "/summary.md").constData());
}

void TestGpuCheck::a_second_run_replaces_the_first() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString results = dir.filePath("results");
    QCOMPARE(gpu_check({"--out", results}).exit_code, 0);
    // An earlier full check's logs are its own files: replaced, not refused.
    QVERIFY(write_file(results + "/tests.log", "an earlier check's log\n"));
    const ProcessResult again = gpu_check({"--out", results});
    QVERIFY2(again.exit_code == 0, qPrintable(again.err));
    QCOMPARE(files_in(results), QStringList{"summary.md"});
}

void TestGpuCheck::a_folder_of_other_files_is_refused() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    QVERIFY(write_file(dir.filePath("notes.txt"), "mine\n"));
    const ProcessResult result = gpu_check({"--out", dir.path()});
    QCOMPARE(result.exit_code, 2);
    QVERIFY2(result.err.contains("notes.txt"), qPrintable(result.err));
    QCOMPARE(files_in(dir.path()), QStringList{"notes.txt"});
    QCOMPARE(read_file(dir.filePath("notes.txt")), QByteArray("mine\n"));
}

void TestGpuCheck::command_line_data() {
    QTest::addColumn<QStringList>("arguments");
    QTest::addColumn<int>("exit_code");
    QTest::addColumn<QString>("expected_text"); // on stdout for 0, on stderr otherwise

    QTest::newRow("help") << QStringList{"--help"} << 0 << "compute-sanitizer";
    QTest::newRow("short help") << QStringList{"-h"} << 0 << "--model-parts DIR";
    QTest::newRow("help names --no-compare") << QStringList{"--help"} << 0 << "--no-compare";
    QTest::newRow("unknown option") << QStringList{"--frobnicate"} << 2 << "--frobnicate";
    QTest::newRow("stray argument") << QStringList{"extra"} << 2 << "'extra'";
    QTest::newRow("--out without a folder") << QStringList{"--out"} << 2 << "--out needs a value";
    QTest::newRow("unknown step") << QStringList{"--only", "tests,lint"} << 2 << "'lint'";
    QTest::newRow("bad timeout") << QStringList{"--timeout", "soon"} << 2 << "--timeout";
    QTest::newRow("missing model")
        << QStringList{"--model", "/no/such/model.gguf"} << 2 << "/no/such/model.gguf";
    QTest::newRow("two models") << QStringList{"--model", "a.gguf", "--model-parts", "parts"} << 2
                                << "twice";
    QTest::newRow("missing build dir")
        << QStringList{"--build-dir", "/no/such/build"} << 2 << "/no/such/build";
    QTest::newRow("split without a folder")
        << QStringList{"--split-model", "model.gguf"} << 2 << "FILE and DIR";
}

void TestGpuCheck::command_line() {
    QFETCH(QStringList, arguments);
    QFETCH(int, exit_code);
    QFETCH(QString, expected_text);

    const ProcessResult result = gpu_check(arguments);
    QVERIFY2(result.started, qPrintable(result.err));
    QCOMPARE(result.exit_code, exit_code);
    const QString& where = exit_code == 0 ? result.out : result.err;
    QVERIFY2(where.contains(expected_text),
             qPrintable("expected '" + expected_text + "' in:\n" + where));
}

void TestGpuCheck::pack_without_a_build_tree_says_why() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const ProcessResult result =
        gpu_check({"--pack", dir.filePath("pack"), "--build-dir", dir.path()});
    QCOMPARE(result.exit_code, 1);
    QVERIFY2(result.err.contains("not a build tree"), qPrintable(result.err));
    QVERIFY(!QFileInfo::exists(dir.filePath("pack/kvscope-gpu-pack.tar.xz")));
}

void TestGpuCheck::model_parts_join_back_checked() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    QByteArray model(5 * 1024 * 1024 / 2, Qt::Uninitialized); // 2.5 MiB: three 1 MiB parts
    QRandomGenerator generator(14);
    for (char& byte : model) {
        byte = static_cast<char>(generator.bounded(256));
    }
    const QString original = dir.filePath("model.gguf");
    QVERIFY(write_file(original, model));
    const QString parts = dir.filePath("parts");

    const ProcessResult split = gpu_check({"--split-model", original, parts, "--part-size", "1"});
    QVERIFY2(split.exit_code == 0, qPrintable(split.err));
    QCOMPARE(files_in(parts), (QStringList{"model.gguf.part00", "model.gguf.part01",
                                           "model.gguf.part02", "model.gguf.sha256"}));

    const QString joined = dir.filePath("joined.gguf");
    const ProcessResult join = gpu_check({"--join-model", parts, joined});
    QVERIFY2(join.exit_code == 0, qPrintable(join.err));
    QVERIFY(read_file(joined) == model);

    // A damaged part is caught and leaves nothing behind.
    QByteArray part = read_file(parts + "/model.gguf.part01");
    part[1000] = static_cast<char>(part[1000] ^ 0x55);
    QVERIFY(write_file(parts + "/model.gguf.part01", part));
    const QString damaged = dir.filePath("damaged.gguf");
    const ProcessResult bad = gpu_check({"--join-model", parts, damaged});
    QCOMPARE(bad.exit_code, 1);
    QVERIFY2(bad.err.contains("missing or damaged"), qPrintable(bad.err));
    QVERIFY(!QFileInfo::exists(damaged));
    QVERIFY(!QFileInfo::exists(damaged + ".partial"));

    // So is a missing one.
    QVERIFY(QFile::remove(parts + "/model.gguf.part01"));
    QCOMPARE(gpu_check({"--join-model", parts, damaged}).exit_code, 1);
}

// The stand-in for the real model on machines it cannot reach: the same
// shape and bytes of weights, and kvscope runs it.
void TestGpuCheck::random_model_has_the_real_shape_and_runs() {
    const QString python = QStandardPaths::findExecutable("python3");
    if (python.isEmpty()) {
        QFAIL("python3 is not on PATH: scripts/setup.sh installs it");
    }
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString model = dir.filePath("random.gguf");
    const ProcessResult made =
        run_process(python, {KVSCOPE_SOURCE_DIR "/scripts/make_random_model.py", model});
    QVERIFY2(made.exit_code == 0, qPrintable(made.out + made.err));

    const ProcessResult ran =
        run_process(KVSCOPE_CLI_PATH, {"generate", "-m", model, "--backend", "cpu", "-p", "Hello",
                                       "-n", "3", "--temperature", "0"});
    QVERIFY2(ran.exit_code == 0, qPrintable(ran.err));
    // SmolLM2-135M-Instruct.Q4_1.gguf prints the same shape and weight bytes.
    QVERIFY2(ran.err.contains("30 layers, 576 wide, 9/3 heads, 92.1 MiB of weights"),
             qPrintable(ran.err));
    QVERIFY2(ran.err.contains("output: 3 tokens"), qPrintable(ran.err));
}

QTEST_GUILESS_MAIN(TestGpuCheck)
#include "tst_gpu_check.moc"
