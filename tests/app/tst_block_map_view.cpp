// The block map paints every block's state at the moment shown (live or
// scrubbed back), says in its tooltip what a block holds down to the text of
// its tokens, selects a block's request on a click, and exports as PNG/SVG.
#include "app/ui/export/plot_export.h"
#include "app/ui/views/block_map_view.h"
#include "app/ui/views/request_colors.h"
#include "engine/events/typed_events.h"
#include "profiler/store/run_store.h"
#include "tests/app/sample_kv_run.h"

#include <memory>

#include <QAction>
#include <QFile>
#include <QImage>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

using kvscope::ui::BlockMapView;
using kvscope::ui::request_color;
using kvscope::ui::request_tint;
namespace test = kvscope::test;

class TestBlockMapView : public QObject {
    Q_OBJECT

private slots:
    void init();
    void every_block_has_its_own_square();
    void thousand_blocks_fit_a_small_view();
    void big_cache_paints_tiny_squares();
    void a_hybrid_cache_gets_a_band_per_group();
    void tooltip_data();
    void tooltip();
    void colours_show_use_and_owner();
    void earlier_time_shows_earlier_state();
    void live_refresh_follows_the_store();
    void click_selects_the_owner();
    void legend_counts_blocks_and_names_the_format();
    void no_store_shows_nothing();
    void exports_png_and_svg();
    void export_to_unwritable_path_fails_cleanly();

private:
    void show_at(qint64 t_ms);
    QImage shot() { return view_->grab().toImage(); }
    QRgb centre_of(const QImage& image, int block) {
        return image.pixel(view_->block_rect(block).center());
    }

    std::unique_ptr<kvscope::profiler::RunStore> store_;
    std::unique_ptr<BlockMapView> view_;
};

void TestBlockMapView::init() {
    store_ = std::make_unique<kvscope::profiler::RunStore>();
    test::append_all(*store_, test::sample_run_events());
    view_ = std::make_unique<BlockMapView>();
    view_->resize(600, 400);
    view_->set_store(store_.get());
    view_->show();
    QVERIFY(QTest::qWaitForWindowExposed(view_.get()));
}

void TestBlockMapView::show_at(qint64 t_ms) {
    view_->set_time_ns(t_ms * test::kMs);
}

void TestBlockMapView::every_block_has_its_own_square() {
    QCOMPARE(view_->block_count(), 16);
    for (int block = 0; block < view_->block_count(); ++block) {
        const QRect square = view_->block_rect(block);
        QVERIFY2(square.isValid() && view_->rect().contains(square),
                 qPrintable(QString::number(block)));
        QCOMPARE(square.width(), square.height());
        QCOMPARE(view_->block_at(square.center()), block);
        QCOMPARE(view_->block_at(square.topLeft()), block);
        if (block > 0) {
            QVERIFY(!square.intersects(view_->block_rect(block - 1)));
        }
    }
    QCOMPARE(view_->block_at(QPoint(-3, 10)), -1);
    QCOMPARE(view_->block_at(QPoint(300, 398)), -1); // the legend
    QVERIFY(!view_->block_rect(16).isValid());
}

void TestBlockMapView::thousand_blocks_fit_a_small_view() {
    kvscope::profiler::RunStore store;
    store.append(test::kv_event(1, kvscope::events::EventKind::run_config, -1, -1, 1024, 16));
    store.append(test::kv_event(2, kvscope::events::EventKind::block_allocated, 7, 1023));
    BlockMapView view;
    view.resize(600, 400);
    view.set_store(&store);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    QCOMPARE(view.block_count(), 1024);
    const QRect last = view.block_rect(1023);
    QVERIFY(last.isValid());
    QVERIFY(view.rect().contains(last));
    QVERIFY2(last.width() >= 8, qPrintable(QString::number(last.width())));
    QCOMPARE(view.block_at(last.center()), 1023);
    const QImage image = view.grab().toImage();
    QCOMPARE(image.pixel(last.center()), request_color(7).rgb());
    QCOMPARE(image.pixel(view.block_rect(1022).center()), BlockMapView::free_color().rgb());
}

void TestBlockMapView::a_hybrid_cache_gets_a_band_per_group() {
    // A global group (blocks 0-5 of request 1) and two window groups
    // (blocks 6-8 and 9-11; block 6 let go by the window, still cached),
    // in a pool of 40: one band per group, by id, then the free blocks.
    using kvscope::events::EventKind;
    kvscope::profiler::RunStore store;
    store.append(test::kv_event(1, EventKind::run_config, -1, -1, 40, 4));
    for (int block = 0; block < 12; ++block) {
        store.append(test::kv_event(2, EventKind::block_allocated, 1, block,
                                    block / 6 == 0 ? 0
                                    : block < 9    ? 1
                                                   : 2));
    }
    store.append(test::kv_event(3, EventKind::block_cached, 1, 6, 77, 0, 1));
    // Freed, stays cached, group 1, left the window.
    store.append(test::kv_event(4, EventKind::block_freed, 1, 6, 1, 1, 1));
    for (int group = 0; group < 3; ++group) {
        kvscope::events::EngineEvent e = kvscope::events::to_event(
            kvscope::events::GroupBlocks{.group = group,
                                         .window = group == 0 ? 0 : 8,
                                         .used_blocks = group == 0   ? 6
                                                        : group == 1 ? 2
                                                                     : 3,
                                         .cached_blocks = group == 1 ? 1 : 0});
        e.time_ns = 4 * test::kMs;
        store.append(e);
    }
    BlockMapView view;
    view.resize(600, 400);
    view.set_store(&store);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    QCOMPARE(view.band_labels(), QStringList({"Group 0, global: 6 used, 0 cached",
                                              "Group 1, window 8: 2 used, 1 cached",
                                              "Group 2, window 8: 3 used, 0 cached", "Free: 28"}));
    // Each band starts on a row of its own, below the one before.
    QVERIFY(view.block_rect(6).top() > view.block_rect(5).bottom());
    QVERIFY(view.block_rect(9).top() > view.block_rect(8).bottom());
    QVERIFY(view.block_rect(12).top() > view.block_rect(11).bottom());
    QCOMPARE(view.block_rect(7).top(), view.block_rect(6).top());
    for (int block = 0; block < 40; ++block) {
        const QRect square = view.block_rect(block);
        QVERIFY2(square.isValid(), qPrintable(QString::number(block)));
        QCOMPARE(view.block_at(square.center()), block);
    }
    const QImage image = view.grab().toImage();
    QCOMPARE(image.pixel(view.block_rect(0).center()), request_color(1).rgb());
    QCOMPARE(image.pixel(view.block_rect(20).center()), BlockMapView::free_color().rgb());
    QVERIFY(view.tooltip_for_block(7).contains("KV group 1 (window of 8 positions)"));

    // A plain run keeps the grid by id, without bands.
    QVERIFY(view_->band_labels().isEmpty());
}

void TestBlockMapView::big_cache_paints_tiny_squares() {
    using kvscope::events::EventKind;
    kvscope::profiler::RunStore store;
    store.append(test::kv_event(1, EventKind::run_config, -1, -1, 8000, 16));
    store.append(test::kv_event(2, EventKind::block_allocated, 5, 10));
    store.append(test::kv_event(2, EventKind::block_allocated, 5, 11));
    store.append(test::kv_event(2, EventKind::block_shared, 6, 11));
    store.append(test::kv_event(2, EventKind::block_allocated, 7, 12));
    store.append(test::kv_event(3, EventKind::block_cached, 7, 12, 99, 0));
    store.append(test::kv_event(4, EventKind::block_freed, 7, 12, 1));
    store.append(test::kv_event(4, EventKind::block_allocated, 8, 7999));
    BlockMapView view;
    view.resize(400, 300);
    view.set_store(&store);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    // Squares of at most 3 pixels are painted from an image, pixel for pixel
    // as larger ones would be.
    const QRect used = view.block_rect(10);
    QVERIFY2(used.width() == 3, qPrintable(QString::number(used.width())));
    const QImage image = view.grab().toImage();
    QCOMPARE(image.pixel(used.center()), request_color(5).rgb());
    QVERIFY(qGray(image.pixel(view.block_rect(11).topLeft())) < 60);
    QCOMPARE(image.pixel(view.block_rect(11).center()), request_color(5).rgb());
    QCOMPARE(image.pixel(view.block_rect(12).center()), request_tint(7).rgb());
    QCOMPARE(image.pixel(view.block_rect(13).center()), BlockMapView::free_color().rgb());
    QCOMPARE(image.pixel(view.block_rect(7999).center()), request_color(8).rgb());
    QCOMPARE(view.block_at(view.block_rect(7999).center()), 7999);
}

void TestBlockMapView::tooltip_data() {
    QTest::addColumn<qint64>("t_ms");
    QTest::addColumn<int>("block");
    QTest::addColumn<QStringList>("has");
    QTest::addColumn<QStringList>("lacks");

    QTest::newRow("shared prefix block")
        << qint64(25) << 1 << QStringList{"<b>Block 1</b>",
                                          "shared by 2 requests",
                                          "Hash: 0x1111222233334444",
                                          "Ref count: 2",
                                          "Owners: 1, 2",
                                          "Tokens 4\u20138 of request 1",
                                          "\u201c the mat. It\u201d",
                                          "Reuses: 1"}
        << QStringList{};
    QTest::newRow("block still filling") << qint64(25) << 2
                                         << QStringList{"State: used",
                                                        "Ref count: 1",
                                                        "Owners: 2",
                                                        "Tokens 8\u201310 of request 2",
                                                        "\u201c was happy\u201d",
                                                        "Reuses: 0"}
                                         << QStringList{"Hash"};
    QTest::newRow("cached block") << qint64(45) << 0
                                  << QStringList{"State: cached",
                                                 "Hash: 0xabcdef0123456789",
                                                 "Ref count: 0",
                                                 "Tokens 0\u20134 of request 1",
                                                 "\u201cThe cat sat on\u201d",
                                                 "Reuses: 1"}
                                  << QStringList{"Owners"};
    QTest::newRow("hit again later")
        << qint64(1000) << 0 << QStringList{"Owners: 4", "Reuses: 2"} << QStringList{};
    QTest::newRow("text is escaped")
        << qint64(1000) << 3 << QStringList{"Tokens 0\u20134 of request 3", "A dog ran x&lt;y"}
        << QStringList{"x<y"};
    QTest::newRow("evicted and reused")
        << qint64(1000) << 1
        << QStringList{"Hash: 0x9999aaaabbbbcccc", "Owners: 3", "\u201c and then it slept\u201d",
                       "Reuses: 0"}
        << QStringList{"the mat"};
    QTest::newRow("free block") << qint64(1000) << 9
                                << QStringList{"<b>Block 9</b>", "State: free", "Ref count: 0"}
                                << QStringList{"Tokens", "Hash", "Owners"};
}

void TestBlockMapView::tooltip() {
    QFETCH(qint64, t_ms);
    QFETCH(int, block);
    QFETCH(QStringList, has);
    QFETCH(QStringList, lacks);
    show_at(t_ms);
    const QString tip = view_->tooltip_for_block(block);
    for (const QString& part : has) {
        QVERIFY2(tip.contains(part), qPrintable(part + " not in " + tip));
    }
    for (const QString& part : lacks) {
        QVERIFY2(!tip.contains(part), qPrintable(part + " in " + tip));
    }
    QCOMPARE(view_->tooltip_for_block(16), QString());
    QCOMPARE(view_->tooltip_for_block(-1), QString());
}

void TestBlockMapView::colours_show_use_and_owner() {
    show_at(25);
    QImage image = shot();
    QCOMPARE(centre_of(image, 2), request_color(2).rgb());
    QCOMPARE(centre_of(image, 9), BlockMapView::free_color().rgb());
    // A shared block: its first owner's colour inside a dark border.
    const QRect shared = view_->block_rect(0);
    QVERIFY(qGray(image.pixel(shared.topLeft())) < 60);
    QCOMPARE(image.pixel(shared.topLeft() + QPoint(6, 6)), request_color(1).rgb());

    // Cached: the first owner's tint, hatched; distinct from used and free.
    show_at(45);
    image = shot();
    const QRect cached = view_->block_rect(0);
    int tint = 0;
    for (int y = cached.top(); y <= cached.bottom(); ++y) {
        for (int x = cached.left(); x <= cached.right(); ++x) {
            tint += image.pixel(x, y) == request_tint(1).rgb() ? 1 : 0;
        }
    }
    const int area = cached.width() * cached.height();
    QVERIFY2(tint > area / 2 && tint < area, qPrintable(QString("%1 of %2").arg(tint).arg(area)));
    QVERIFY(request_tint(1).rgb() != BlockMapView::free_color().rgb());
    QVERIFY(request_tint(1).rgb() != request_color(1).rgb());
    QCOMPARE(centre_of(image, 2), BlockMapView::free_color().rgb());
    // Different requests, different colours.
    QVERIFY(request_color(1).rgb() != request_color(2).rgb());
    QVERIFY(request_color(2).rgb() != request_color(3).rgb());
}

void TestBlockMapView::earlier_time_shows_earlier_state() {
    show_at(1000);
    QCOMPARE(centre_of(shot(), 2), BlockMapView::free_color().rgb());
    QCOMPARE(centre_of(shot(), 1), request_color(3).rgb());
    // b2 is freed at 40 ms: before that it is r2's.
    show_at(35);
    QCOMPARE(centre_of(shot(), 2), request_color(2).rgb());
    QVERIFY(view_->tooltip_for_block(2).contains("State: used"));
    QVERIFY(view_->tooltip_for_block(1).contains("Owners: 2"));
    // Events at the moment shown count.
    show_at(40);
    QCOMPARE(centre_of(shot(), 2), BlockMapView::free_color().rgb());
    show_at(5);
    QVERIFY(view_->tooltip_for_block(0).contains("State: free"));
}

void TestBlockMapView::live_refresh_follows_the_store() {
    kvscope::profiler::RunStore store;
    const std::vector<kvscope::events::EngineEvent> events = test::sample_run_events();
    const std::vector<kvscope::events::EngineEvent> early = test::sample_run_events(21);
    test::append_all(store, early);
    BlockMapView latest; // never given a time: follows the store's end
    BlockMapView pinned;
    for (BlockMapView* view : {&latest, &pinned}) {
        view->resize(400, 300);
        view->set_store(&store);
    }
    pinned.set_time_ns(store.end_ns());
    QVERIFY(latest.tooltip_for_block(2).contains("Owners: 2"));
    QVERIFY(pinned.tooltip_for_block(2).contains("Owners: 2"));

    for (std::size_t i = early.size(); i < events.size(); ++i) {
        store.append(events[i]);
    }
    latest.refresh();
    pinned.refresh();
    QVERIFY(latest.tooltip_for_block(2).contains("State: free"));
    QVERIFY(latest.tooltip_for_block(4).contains("Owners: 4"));
    // A view pinned to a moment keeps showing that moment as the store grows.
    QVERIFY(pinned.tooltip_for_block(2).contains("Owners: 2"));
    QVERIFY(pinned.tooltip_for_block(4).contains("State: free"));
}

void TestBlockMapView::click_selects_the_owner() {
    QSignalSpy selected(view_.get(), &BlockMapView::request_selected);
    show_at(25);
    QTest::mouseClick(view_.get(), Qt::LeftButton, {}, view_->block_rect(2).center());
    QTest::mouseClick(view_.get(), Qt::LeftButton, {}, view_->block_rect(0).center());
    QTest::mouseClick(view_.get(), Qt::LeftButton, {}, view_->block_rect(9).center()); // free
    show_at(45);
    QTest::mouseClick(view_.get(), Qt::LeftButton, {}, view_->block_rect(1).center()); // cached
    QCOMPARE(selected.count(), 3);
    QCOMPARE(selected.at(0).at(0).toLongLong(), 2);
    QCOMPARE(selected.at(1).at(0).toLongLong(), 1);
    QCOMPARE(selected.at(2).at(0).toLongLong(), 1);
}

void TestBlockMapView::legend_counts_blocks_and_names_the_format() {
    show_at(25);
    const QStringList entries = view_->legend_entries();
    QCOMPARE(entries.size(), 5);
    QCOMPARE(entries[0], QString("Used (colour = request): 3"));
    QCOMPARE(entries[1], QString("Shared \u00d7N: 2"));
    QCOMPARE(entries[2], QString("Cached (prefix, reusable): 0"));
    QCOMPARE(entries[3], QString("Free: 13"));
    QVERIFY2(entries[4].contains("KV f16") && entries[4].contains("90.0 KiB per block"),
             qPrintable(entries[4]));
    show_at(45);
    QCOMPARE(view_->legend_entries()[2], QString("Cached (prefix, reusable): 2"));
}

void TestBlockMapView::no_store_shows_nothing() {
    view_->set_store(nullptr);
    QCOMPARE(view_->block_count(), 0);
    QCOMPARE(view_->block_at(QPoint(20, 20)), -1);
    QCOMPARE(view_->tooltip_for_block(0), QString());
    QVERIFY(!shot().isNull());
}

void TestBlockMapView::exports_png_and_svg() {
    QTemporaryDir dir;
    show_at(25);
    const QString png = dir.filePath("map.png");
    QCOMPARE(kvscope::ui::export_widget(*view_, png), QString());
    const QImage image(png);
    QVERIFY(!image.isNull());
    QCOMPARE(image.size(), view_->size() * view_->devicePixelRatio());
    QCOMPARE(image.pixel(view_->block_rect(2).center()), request_color(2).rgb());

    const QString svg = dir.filePath("map.SVG");
    QCOMPARE(kvscope::ui::export_widget(*view_, svg), QString());
    QFile file(svg);
    QVERIFY(file.open(QIODevice::ReadOnly));
    const QByteArray text = file.readAll();
    QVERIFY(text.startsWith("<?xml") || text.contains("<svg"));
    QVERIFY(text.contains("</svg>"));
    // The squares are vector shapes in the request's colour.
    QVERIFY2(text.contains(request_color(2).name().toLatin1()),
             qPrintable(request_color(2).name()));

    // The view offers export from its context menu.
    QCOMPARE(view_->contextMenuPolicy(), Qt::ActionsContextMenu);
    bool found = false;
    for (const QAction* action : view_->actions()) {
        found = found || action->text() == kvscope::ui::export_action_text();
    }
    QVERIFY(found);
}

void TestBlockMapView::export_to_unwritable_path_fails_cleanly() {
    const QString path = "/nonexistent-dir/for/kvscope/map.svg";
    for (const QString& target : {path, QString(path).replace(".svg", ".png")}) {
        const QString error = kvscope::ui::export_widget(*view_, target);
        QVERIFY2(error.contains(target), qPrintable(error));
        QVERIFY(!QFile::exists(target));
    }
    QTemporaryDir dir;
    const QString jpeg = dir.filePath("map.jpg");
    const QString error = kvscope::ui::export_widget(*view_, jpeg);
    QVERIFY2(error.contains(".png or .svg"), qPrintable(error));
    QVERIFY(!QFile::exists(jpeg));
}

QTEST_MAIN(TestBlockMapView)
#include "tst_block_map_view.moc"
