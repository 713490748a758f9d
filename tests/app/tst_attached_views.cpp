// The attached views past a few thousand resident blocks build on a worker
// thread: the window's thread gets control back at once, and what arrives
// is what building on the spot gives (cells in tree order, the forest, the
// tooltips, the squares painted); a newer request wins over one under way.
#include "app/ui/models/attached_forest_model.h"
#include "app/ui/panels/attached_prefix_panel.h"
#include "app/ui/views/attached_blocks_view.h"
#include "app/ui/views/request_colors.h"
#include "profiler/attach/kv_event_source.h"
#include "profiler/store/run_store.h"

#include <QTest>
#include <QTreeView>

using namespace kvscope;
using namespace kvscope::ui;

namespace {

constexpr int kChains = 400;
constexpr int kChainBlocks = 30; // 12,000 blocks: past kInlineBlocks

// Chains of blocks stored at t = 1000 + chain; at t = 5000 every other
// chain is removed.
std::vector<events::EngineEvent> chain_rows() {
    using namespace kvscope::attach;
    std::vector<events::EngineEvent> rows;
    const auto stamp = [&rows](std::size_t first, std::int64_t t) {
        for (std::size_t r = first; r < rows.size(); ++r) {
            rows[r].time_ns = t;
        }
    };
    for (int chain = 0; chain < kChains; ++chain) {
        SourceBatch batch;
        batch.batch.ts = 1.7e9;
        std::vector<BlockHash> hashes;
        std::vector<std::int64_t> tokens;
        // Longer chains first: chain 0 is the largest tree.
        const int length = kChainBlocks + (chain == 0 ? 5 : 0);
        for (int b = 0; b < length; ++b) {
            hashes.push_back(
                BlockHash::from_uint(static_cast<std::uint64_t>(chain) * 1000 + b + 1));
            tokens.push_back(chain);
            tokens.push_back(b);
        }
        batch.batch.events.emplace_back(
            StoredBlocks{hashes, std::nullopt, tokens, 2, std::nullopt, "GPU", {}});
        const std::size_t first = rows.size();
        append_typed_events(0, batch, rows);
        stamp(first, 1000 + chain);
    }
    SourceBatch removal;
    for (int chain = 1; chain < kChains; chain += 2) {
        std::vector<BlockHash> hashes;
        for (int b = 0; b < kChainBlocks; ++b) {
            hashes.push_back(
                BlockHash::from_uint(static_cast<std::uint64_t>(chain) * 1000 + b + 1));
        }
        removal.batch.events.emplace_back(RemovedBlocks{hashes, "GPU", {}});
    }
    const std::size_t first = rows.size();
    append_typed_events(0, removal, rows);
    stamp(first, 5000);
    return rows;
}

} // namespace

class TestAttachedViews : public QObject {
    Q_OBJECT

    profiler::RunStore store_;

private slots:
    void initTestCase() {
        for (const events::EngineEvent& row : chain_rows()) {
            store_.append(row);
        }
        QCOMPARE(store_.attached().state().resident_blocks(),
                 std::size_t{(kChains / 2) * kChainBlocks + 5});
    }

    void blockMapBuildsOnAWorker() {
        AttachedBlocksView view;
        view.resize(900, 700);
        view.show();
        view.set_store(&store_);
        QVERIFY(view.rebuilding()); // the call returned before the build ended
        QTRY_VERIFY_WITH_TIMEOUT(!view.rebuilding(), 10'000);
        const std::vector<AttachedBlocksView::Section> expected =
            AttachedBlocksView::build_sections(*store_.attached().shared_state());
        QCOMPARE(view.sections().size(), std::size_t{1});
        QCOMPARE(view.sections()[0].title, expected[0].title);
        QCOMPARE(view.sections()[0].cells.size(), expected[0].cells.size());
        for (std::size_t i = 0; i < expected[0].cells.size(); ++i) {
            QVERIFY(view.sections()[0].cells[i].hash == expected[0].cells[i].hash);
            QCOMPARE(view.sections()[0].cells[i].tree, expected[0].cells[i].tree);
        }
        // The largest tree (chain 0) first, its root at the first square.
        QVERIFY(view.tooltip_for(0, 0).contains("0x0000000000000001"));
        QVERIFY(view.tooltip_for(0, 0).contains("a prompt's first block"));

        // The squares as painted: the first in the first tree's colour.
        const QImage shot = view.grab().toImage();
        const QRect grid = view.sections()[0].grid_rect;
        QCOMPARE(shot.pixelColor(grid.topLeft()).rgb(), request_color(0).rgb());

        // Scrubbing back while a rebuild runs: the newest request waits for
        // it and wins.
        view.set_time_ns(std::numeric_limits<qint64>::max());
        QVERIFY(view.rebuilding());
        view.set_time_ns(2000); // every chain stored, none removed yet
        QTRY_VERIFY_WITH_TIMEOUT(!view.rebuilding(), 10'000);
        QCOMPARE(
            view.sections()[0].title,
            QString("source 0 · rank 0 · GPU: %1 blocks resident").arg(kChains * kChainBlocks + 5));

        // A small store built on the spot while a worker still builds the
        // large one: the worker's result, older, is dropped when it comes.
        profiler::RunStore small;
        const std::vector<events::EngineEvent> rows = chain_rows();
        for (std::size_t r = 0; r < kChainBlocks + 5; ++r) {
            small.append(rows[r]); // chain 0, a row per block
        }
        view.set_store(&store_);
        QVERIFY(view.rebuilding());
        view.set_store(&small);
        const QString small_title("source 0 · rank 0 · GPU: 35 blocks resident");
        QCOMPARE(view.sections()[0].title, small_title);
        QTRY_VERIFY_WITH_TIMEOUT(!view.rebuilding(), 10'000);
        QCOMPARE(view.sections()[0].title, small_title);
        QVERIFY(view.tooltip_for(0, 0).contains("0x0000000000000001"));
    }

    void prefixForestBuildsOnAWorker() {
        AttachedPrefixPanel panel;
        panel.resize(900, 700);
        panel.show();
        panel.set_store(&store_);
        QVERIFY(panel.rebuilding());
        QTRY_VERIFY_WITH_TIMEOUT(!panel.rebuilding(), 10'000);
        AttachedForestModel* model = panel.model();
        QCOMPARE(model->rowCount(), 1);
        const QModelIndex tier = model->index(0, 0);
        QCOMPARE(model->index(0, AttachedForestModel::blocks_column).data().toLongLong(),
                 qint64{(kChains / 2) * kChainBlocks + 5});
        QVERIFY(panel.tree()->isExpanded(tier)); // tiers open the first time
        QCOMPARE(model->rowCount(tier), kChains / 2);
        const QModelIndex root = model->index(0, 0, tier);
        QCOMPARE(root.data().toString(), QString("0x0000000000000001"));
        QCOMPARE(model->index(0, AttachedForestModel::depth_column, tier).data().toInt(),
                 kChainBlocks + 5);

        // A row opened stays open across a rebuild built on the worker.
        panel.tree()->setExpanded(root, true);
        panel.set_time_ns(std::numeric_limits<qint64>::max());
        QTRY_VERIFY_WITH_TIMEOUT(!panel.rebuilding(), 10'000);
        QVERIFY(panel.tree()->isExpanded(panel.model()->index(0, 0, panel.model()->index(0, 0))));
    }
};

QTEST_MAIN(TestAttachedViews)
#include "tst_attached_views.moc"
