// Run > Size the KV cache…: Llama-3-70B at 8K tokens in bf16 weighs 2.5 GiB
// a request in its own GQA (bold), 20 GiB as MHA; the figures follow the
// fields; the run's model (the tiny test model) is sized from its metadata.
#include "app/ui/main_window.h"
#include "app/ui/panels/sizing_dialog.h"
#include "tests/support/tiny_model.h"

#include <QTableWidget>
#include <QTest>

using namespace kvscope;

namespace {

// A built-in model at `context` tokens, `batch` requests, K and V in bf16, no
// device memory given.
void ask_in_bf16(ui::SizingDialog& dialog, const QString& model, int context, int batch) {
    dialog.choose_model(model);
    dialog.set_context(context);
    dialog.set_batch(batch);
    dialog.set_formats(kv::KvFormat::bf16, kv::KvFormat::bf16);
    dialog.set_memory_gib(0);
}

} // namespace

class TestSizingDialog : public QObject {
    Q_OBJECT

private slots:
    void sizesABuiltInModel() {
        ui::SizingDialog dialog(tiny_model_path());
        ask_in_bf16(dialog, "Llama-3-70B", 8192, 2);
        QTableWidget* table = dialog.table();
        QCOMPARE(table->rowCount(), 4);
        QCOMPARE(table->item(1, 0)->text(), QString("GQA (8 KV heads)"));
        QVERIFY(table->item(1, 0)->font().bold() && !table->item(0, 0)->font().bold());
        QCOMPARE(table->item(1, 2)->text(), QString("2.50 GiB"));
        QCOMPARE(table->item(1, 3)->text(), QString("5.00 GiB"));
        QCOMPARE(table->item(0, 2)->text(), QString("20.00 GiB"));
        QCOMPARE(table->item(1, 4)->text(), QString("-"));
        // 80 GiB cannot hold 70B at bf16; 640 GiB can.
        dialog.set_memory_gib(80);
        QVERIFY(dialog.summary().contains("do not fit"));
        dialog.set_memory_gib(640);
        QVERIFY(dialog.summary().contains("The cache gets"));
        QVERIFY(table->item(1, 4)->text().toDouble() > 1e6);
    }

    // Gemma 3 27B at 128k: its sliding layers keep a window and a block, so a
    // request weighs 10.4 GiB against 62 GiB were every layer global (the
    // last row); the summary says what a token keeps past the windows.
    void sizesAHybridModel() {
        ui::SizingDialog dialog(tiny_model_path());
        ask_in_bf16(dialog, "Gemma-3-27B", 131072, 1);
        QTableWidget* table = dialog.table();
        QCOMPARE(table->rowCount(), 5);
        QCOMPARE(table->item(1, 0)->text(), QString("GQA (16 KV heads)"));
        QVERIFY(table->item(1, 0)->font().bold());
        QCOMPARE(table->item(1, 2)->text(), QString("10.41 GiB"));
        QCOMPARE(table->item(4, 0)->text(), QString("the same, every layer global"));
        QCOMPARE(table->item(4, 2)->text(), QString("62.00 GiB"));
        QVERIFY2(dialog.summary().contains("sliding window of 1024") &&
                     dialog.summary().contains("past the windows keeps 80.00 KiB"),
                 qPrintable(dialog.summary()));
    }

    void sizesTheRunsModel() {
        ui::SizingDialog dialog(tiny_model_path());
        QVERIFY2(dialog.summary().contains("layers"), qPrintable(dialog.summary()));
        QVERIFY(dialog.table()->rowCount() >= 3);
        ui::SizingDialog missing("/nonexistent.gguf");
        QVERIFY(missing.summary().contains("cannot be read"));
        QCOMPARE(missing.table()->rowCount(), 0);
    }

    void opensFromTheRunMenu() {
        ui::MainWindow window;
        ui::SizingDialog* dialog = window.show_sizing();
        QVERIFY(dialog != nullptr && dialog->isVisible());
        dialog->close();
    }
};

QTEST_MAIN(TestSizingDialog)
#include "tst_sizing_dialog.moc"
