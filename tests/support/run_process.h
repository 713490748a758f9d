// Runs a program to completion for a test and keeps what it printed.
#pragma once

#include <QProcess>
#include <QProcessEnvironment>
#include <QString>
#include <QStringList>

namespace kvscope::test {

struct ProcessResult {
    bool started = false;
    bool finished = false; // false: killed after the time limit
    int exit_code = -1;
    QString out;
    QString err;
};

inline ProcessResult
run_process(const QString& program, const QStringList& arguments,
            const QProcessEnvironment& environment = QProcessEnvironment::systemEnvironment(),
            int timeout_ms = 120'000) {
    QProcess process;
    process.setProcessEnvironment(environment);
    process.start(program, arguments);
    ProcessResult result;
    result.started = process.waitForStarted(10'000);
    if (!result.started) {
        result.err = process.errorString();
        return result;
    }
    result.finished = process.waitForFinished(timeout_ms);
    if (!result.finished) {
        process.kill();
        process.waitForFinished(5'000);
    }
    result.exit_code = process.exitStatus() == QProcess::NormalExit ? process.exitCode() : -1;
    result.out = QString::fromUtf8(process.readAllStandardOutput());
    result.err = QString::fromUtf8(process.readAllStandardError());
    return result;
}

} // namespace kvscope::test
