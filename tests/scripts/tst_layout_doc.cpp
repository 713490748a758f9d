// docs/layout.md is the map a newcomer reads first, so it must name every
// folder of the tree: each top-level folder and each folder one level below
// it (two below app/, whose cli/ and ui/ are rooms of their own) has its
// own row, or is named as `name/` in the row of the folder above it. A
// folder added without a word there fails here.
#include <QDir>
#include <QFile>
#include <QRegularExpression>
#include <QTest>

namespace {

const QString kSource = QStringLiteral(KVSCOPE_SOURCE_DIR);

// Folders that hold data, not code: named by their parent's row as a whole.
bool is_data(const QString& name) {
    static const QStringList names = {"data",   "corpus",  "regressions", "dicts",
                                      "images", "results", "publishers",  "__pycache__"};
    return names.contains(name);
}

// The folders the map must show, from the root: `depth` levels down.
void collect(const QString& relative, int depth, QStringList& out) {
    const QDir dir(kSource + "/" + relative);
    for (const QString& name : dir.entryList(QDir::Dirs | QDir::NoDotAndDotDot | QDir::Hidden)) {
        const bool top = relative.isEmpty();
        // Build trees and tools' folders are not the project's (.ci is).
        if ((name.startsWith('.') && name != ".ci") || (top && name.startsWith("build")) ||
            is_data(name)) {
            continue;
        }
        const QString path = relative + name + "/";
        out << path;
        if (depth > 1) {
            collect(path, depth - 1, out);
        }
    }
}

} // namespace

class TestLayoutDoc : public QObject {
    Q_OBJECT

private slots:
    void every_folder_is_on_the_map();
};

void TestLayoutDoc::every_folder_is_on_the_map() {
    QFile file(kSource + "/docs/layout.md");
    QVERIFY(file.open(QIODevice::ReadOnly | QIODevice::Text));
    // Each table row by the folder in its first cell: "| `engine/` | ... |".
    QMap<QString, QString> rows;
    static const QRegularExpression row(QStringLiteral("^\\| `([^`]+/)` \\|(.*)$"));
    for (const QString& line : QString::fromUtf8(file.readAll()).split('\n')) {
        const QRegularExpressionMatch match = row.match(line);
        if (match.hasMatch()) {
            rows.insert(match.captured(1), match.captured(2));
        }
    }
    QVERIFY2(rows.size() > 5, "docs/layout.md has no table of folders");

    QStringList folders;
    collect({}, 2, folders);
    collect("app/ui/", 1, folders);
    QStringList missing;
    for (const QString& folder : folders) {
        if (rows.contains(folder)) {
            continue;
        }
        // A folder whose own folders have rows (app/) is a plain container.
        const bool container = std::any_of(rows.keyBegin(), rows.keyEnd(),
                                           [&](const QString& r) { return r.startsWith(folder); });
        // Else the nearest folder above with a row names it.
        QString above = folder.chopped(1);
        above = above.left(above.lastIndexOf('/') + 1);
        while (!above.isEmpty() && !rows.contains(above)) {
            above.chop(1);
            above = above.left(above.lastIndexOf('/') + 1);
        }
        const QString name = folder.mid(above.size());
        const bool named = !above.isEmpty() && rows.value(above).contains("`" + name + "`");
        if (!container && !named) {
            missing << folder;
        }
    }
    QVERIFY2(missing.isEmpty(),
             qPrintable("docs/layout.md does not name: " + missing.join(", ") +
                        " (a row of its own, or `name/` in the row of the folder above)"));
}

QTEST_GUILESS_MAIN(TestLayoutDoc)
#include "tst_layout_doc.moc"
