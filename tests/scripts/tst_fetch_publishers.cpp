// scripts/fetch_publishers.py, run the way scripts/setup.sh runs it, against
// wheels built here (a stand-in engine, pyzmq and msgspec): the publisher
// file must match its pinned checksum, land whole with its manifest and
// without the wheel, a second run must download nothing, and a failure must
// leave nothing behind and say what to do.
#include "tests/support/run_process.h"

#include <QCryptographicHash>
#include <QDir>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

using kvscope::test::ProcessResult;
using kvscope::test::run_process;

namespace {

const QString member = "fakeengine/distributed/kv_events.py";
const QByteArray publisher_source = "# a stand-in publisher\nclass ZmqEventPublisher: pass\n";

QByteArray sha256_hex(const QByteArray& data) {
    return QCryptographicHash::hash(data, QCryptographicHash::Sha256).toHex();
}

QString python() {
    return QStandardPaths::findExecutable("python3");
}

QString script() {
    return QStringLiteral(KVSCOPE_SOURCE_DIR "/scripts/fetch_publishers.py");
}

QProcessEnvironment clean_environment() {
    QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
    environment.insert("PIP_NO_CACHE_DIR", "1");
    environment.insert("PIP_CONFIG_FILE", "/dev/null");
    return environment;
}

QStringList entries_besides(const QString& dir, const QStringList& keep = {}) {
    QStringList found = QDir(dir).entryList(QDir::AllEntries | QDir::Hidden | QDir::NoDotAndDotDot);
    for (const QString& name : keep) {
        found.removeAll(name);
    }
    return found;
}

QByteArray read_all(const QString& path) {
    QFile file(path);
    return file.open(QIODevice::ReadOnly) ? file.readAll() : QByteArray();
}

// Writes a wheel pip accepts: name, version, files (path -> content).
const char* const kWheelMaker = R"(
import json, sys, zipfile
wheel, name, version, files = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
info = f"{name}-{version}.dist-info/"
with zipfile.ZipFile(wheel, "w") as z:
    for path, content in files.items():
        z.writestr(path, content)
    z.writestr(info + "METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    z.writestr(info + "WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    z.writestr(info + "RECORD", "")
)";

} // namespace

class TestFetchPublishers : public QObject {
    Q_OBJECT

private slots:
    void initTestCase();
    void wrong_checksum_is_refused_and_leaves_nothing();
    void a_wheel_without_the_file_is_refused_and_leaves_nothing();
    void good_wheel_puts_the_file_and_its_manifest_in_place();
    void second_run_fetches_nothing();
    void damaged_file_is_fetched_again();
    void unreachable_package_says_what_to_do();
    void the_venv_is_made_once();

private:
    void make_wheel(const QString& name, const QString& version, const QJsonObject& files);
    ProcessResult fetch(const QString& cache, const QString& links, const QString& pin,
                        bool venv = false);
    QString pin(const QByteArray& sha) const {
        return "fakeengine==1.0:" + member + ":" + QString::fromLatin1(sha);
    }

    QTemporaryDir work_;
    QString wheels_dir_;
    QString empty_wheels_dir_;
    QString cache_dir_;
};

void TestFetchPublishers::initTestCase() {
    if (python().isEmpty()) {
        QFAIL("python3 is not on PATH: scripts/setup.sh needs it (apt-get install python3)");
    }
    QVERIFY(work_.isValid());
    wheels_dir_ = work_.filePath("wheels");
    empty_wheels_dir_ = work_.filePath("no-wheels");
    cache_dir_ = work_.filePath("cache");
    QVERIFY(QDir().mkpath(wheels_dir_));
    QVERIFY(QDir().mkpath(empty_wheels_dir_));
    make_wheel("fakeengine", "1.0",
               {{member, QString::fromLatin1(publisher_source)}, {"fakeengine/__init__.py", ""}});
    // What the venv installs, as stand-ins (the real ones are pinned there).
    make_wheel("pyzmq", "27.3.0", {{"zmq/__init__.py", "FAKE = True\n"}});
    make_wheel("msgspec", "0.22.0", {{"msgspec/__init__.py", "FAKE = True\n"}});
    make_wheel("prometheus_client", "0.23.1", {{"prometheus_client/__init__.py", "FAKE = True\n"}});
}

void TestFetchPublishers::make_wheel(const QString& name, const QString& version,
                                     const QJsonObject& files) {
    const QString wheel = QString("%1/%2-%3-py3-none-any.whl").arg(wheels_dir_, name, version);
    const ProcessResult made = run_process(
        python(), {"-c", kWheelMaker, wheel, name, version,
                   QString::fromUtf8(QJsonDocument(files).toJson(QJsonDocument::Compact))});
    QVERIFY2(made.exit_code == 0, qPrintable(made.err));
}

ProcessResult TestFetchPublishers::fetch(const QString& cache, const QString& links,
                                         const QString& pin, bool venv) {
    QStringList arguments{script(), "--cache-dir", cache, "--find-links",
                          links,    "--publisher", pin};
    if (!venv) {
        arguments << "--no-venv";
    }
    return run_process(python(), arguments, clean_environment());
}

void TestFetchPublishers::wrong_checksum_is_refused_and_leaves_nothing() {
    const ProcessResult result = fetch(cache_dir_, wheels_dir_, pin(QByteArray(64, '0')));
    QCOMPARE(result.exit_code, 1);
    QVERIFY2(result.err.contains("SHA-256") && result.err.contains("refusing"),
             qPrintable(result.err));
    QVERIFY2(result.err.contains("What to do"), qPrintable(result.err));
    QCOMPARE(entries_besides(cache_dir_), QStringList());
}

void TestFetchPublishers::a_wheel_without_the_file_is_refused_and_leaves_nothing() {
    const ProcessResult result =
        fetch(cache_dir_, wheels_dir_,
              "fakeengine==1.0:fakeengine/elsewhere.py:" + QString(64, QChar('0')));
    QCOMPARE(result.exit_code, 1);
    QVERIFY2(result.err.contains("cannot take fakeengine/elsewhere.py"), qPrintable(result.err));
    QCOMPARE(entries_besides(cache_dir_), QStringList());
}

void TestFetchPublishers::good_wheel_puts_the_file_and_its_manifest_in_place() {
    const QByteArray sha = sha256_hex(publisher_source);
    const ProcessResult result = fetch(cache_dir_, wheels_dir_, pin(sha));
    QVERIFY2(result.exit_code == 0, qPrintable(result.out + result.err));
    QVERIFY2(result.out.contains("fakeengine-1.0 publisher ready"), qPrintable(result.out));
    const QString target = cache_dir_ + "/fakeengine-1.0";
    QCOMPARE(read_all(target + "/" + member), publisher_source);
    // The wheel is gone; only the file and its manifest stay.
    QCOMPARE(entries_besides(cache_dir_, {"fakeengine-1.0"}), QStringList());
    QCOMPARE(entries_besides(target), (QStringList{"fakeengine", "manifest.json"}));
    const QJsonObject manifest =
        QJsonDocument::fromJson(read_all(target + "/manifest.json")).object();
    QCOMPARE(manifest["package"].toString(), QString("fakeengine"));
    QCOMPARE(manifest["version"].toString(), QString("1.0"));
    QCOMPARE(manifest["path"].toString(), member);
    QCOMPARE(manifest["sha256"].toString().toLatin1(), sha);
    QCOMPARE(manifest["wheel"].toString(), QString("fakeengine-1.0-py3-none-any.whl"));
    QCOMPARE(manifest["wheel_sha256"].toString().toLatin1(),
             sha256_hex(read_all(wheels_dir_ + "/fakeengine-1.0-py3-none-any.whl")));
}

void TestFetchPublishers::second_run_fetches_nothing() {
    // No wheel is reachable now: success proves nothing was downloaded.
    const ProcessResult result =
        fetch(cache_dir_, empty_wheels_dir_, pin(sha256_hex(publisher_source)));
    QVERIFY2(result.exit_code == 0, qPrintable(result.out + result.err));
    QVERIFY2(result.out.contains("already in place"), qPrintable(result.out));
}

void TestFetchPublishers::damaged_file_is_fetched_again() {
    const QString path = cache_dir_ + "/fakeengine-1.0/" + member;
    QFile file(path);
    QVERIFY(file.open(QIODevice::WriteOnly | QIODevice::Truncate));
    file.write("# cut sh");
    file.close();
    const ProcessResult result = fetch(cache_dir_, wheels_dir_, pin(sha256_hex(publisher_source)));
    QVERIFY2(result.exit_code == 0, qPrintable(result.out + result.err));
    QVERIFY2(result.out.contains("publisher ready"), qPrintable(result.out));
    QCOMPARE(read_all(path), publisher_source);
}

void TestFetchPublishers::unreachable_package_says_what_to_do() {
    const QString cache = work_.filePath("other-cache");
    const ProcessResult result = fetch(cache, empty_wheels_dir_, pin(sha256_hex(publisher_source)));
    QCOMPARE(result.exit_code, 1);
    QVERIFY2(result.err.contains("pip could not download fakeengine-1.0"), qPrintable(result.err));
    QVERIFY2(result.err.contains("What to do") && result.err.contains("--find-links"),
             qPrintable(result.err));
    QCOMPARE(entries_besides(cache), QStringList());
}

void TestFetchPublishers::the_venv_is_made_once() {
    const QString cache = work_.filePath("venv-cache");
    const QString sha = QString::fromLatin1(sha256_hex(publisher_source));
    ProcessResult result = fetch(cache, wheels_dir_, pin(sha.toLatin1()), true);
    QVERIFY2(result.exit_code == 0, qPrintable(result.out + result.err));
    QVERIFY2(result.out.contains("Publisher venv ready"), qPrintable(result.out));
    const QString venv_python = cache + "/venv/bin/python";
    const ProcessResult imported = run_process(
        venv_python, {"-c", "import zmq, msgspec, prometheus_client; "
                            "print(zmq.FAKE and msgspec.FAKE and prometheus_client.FAKE)"});
    QVERIFY2(imported.exit_code == 0 && imported.out.trimmed() == "True",
             qPrintable(imported.out + imported.err));
    QCOMPARE(entries_besides(cache, {"venv", "fakeengine-1.0"}), QStringList());

    result = fetch(cache, empty_wheels_dir_, pin(sha.toLatin1()), true);
    QVERIFY2(result.exit_code == 0, qPrintable(result.out + result.err));
    QVERIFY2(result.out.contains("Publisher venv already in place"), qPrintable(result.out));
}

QTEST_GUILESS_MAIN(TestFetchPublishers)
#include "tst_fetch_publishers.moc"
