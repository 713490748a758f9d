// The typed events are the one statement of what each kind's flat columns
// mean: every kind round-trips through the flat row with every field intact
// (hashes past 2^63 included), no two fields of a kind share a column, the
// names the SQL views and JSON lines use are unique, and the old readers'
// column meanings (recordings already written) still hold.
#include "engine/events/typed_events.h"

#include <array>
#include <set>
#include <tuple>

#include <QTest>

using namespace kvscope::events;

namespace {

// A typed event whose every number field holds a distinct value derived from
// `seed` and whose text holds a distinct string.
template <class T>
T filled(std::int64_t seed) {
    T typed;
    std::int64_t next = seed;
    std::apply(
        [&](const auto&... f) {
            (
                [&](const auto& field) {
                    using Member = std::remove_reference_t<decltype(typed.*(field.member))>;
                    if constexpr (std::is_same_v<Member, std::string>) {
                        typed.*(field.member) = "text " + std::to_string(next++) + " \x01\xff";
                    } else if constexpr (std::is_same_v<Member, bool>) {
                        typed.*(field.member) = true;
                    } else if constexpr (std::is_same_v<Member, StepPhase>) {
                        typed.*(field.member) = StepPhase::mixed;
                    } else if constexpr (std::is_same_v<Member, std::uint64_t>) {
                        typed.*(field.member) =
                            0xfedc'ba98'7654'3210ull + static_cast<std::uint64_t>(next++);
                    } else {
                        typed.*(field.member) = static_cast<Member>(next++ * 1'000'003);
                    }
                }(f),
                ...);
        },
        T::fields());
    return typed;
}

} // namespace

class TestTypedEvents : public QObject {
    Q_OBJECT

private slots:
    void every_kind_round_trips_data();
    void every_kind_round_trips();
    void fields_name_distinct_columns_data();
    void fields_name_distinct_columns();
    void columns_keep_their_recorded_meaning();
    void unknown_fields_and_kinds_are_refused();
};

void TestTypedEvents::every_kind_round_trips_data() {
    QTest::addColumn<int>("kind");
    for (int k = 0; k < kEventKindCount; ++k) {
        QTest::newRow(std::string(event_kind_name(static_cast<EventKind>(k))).c_str()) << k;
    }
}

void TestTypedEvents::every_kind_round_trips() {
    QFETCH(int, kind);
    bool visited = false;
    visit_kind(static_cast<EventKind>(kind), [&]<class T>(std::type_identity<T>) {
        visited = true;
        const T typed = filled<T>(kind * 100 + 1);
        const EngineEvent flat = to_event(typed);
        QCOMPARE(static_cast<int>(flat.kind), kind);
        QVERIFY(as<T>(flat) == typed);
        // A flat row through a copy (what queues and the recorder do) too.
        EngineEvent copy = flat;
        copy.time_ns = 42;
        QVERIFY(as<T>(copy) == typed);
        // for_each_field visits every field, once, in declaration order.
        std::vector<std::string> names;
        for_each_field(flat, [&](std::string_view name, const auto&) { names.emplace_back(name); });
        std::vector<std::string> declared;
        for (const FieldColumn& f : field_columns(T::kind)) {
            declared.emplace_back(f.name);
        }
        QCOMPARE(names, declared);
        QCOMPARE(names.size(), std::tuple_size_v<decltype(T::fields())>);
    });
    QVERIFY(visited);
}

void TestTypedEvents::fields_name_distinct_columns_data() {
    every_kind_round_trips_data();
}

void TestTypedEvents::fields_name_distinct_columns() {
    QFETCH(int, kind);
    std::set<Column> columns;
    std::set<std::string_view> names;
    for (const FieldColumn& f : field_columns(static_cast<EventKind>(kind))) {
        QVERIFY2(columns.insert(f.column).second, "two fields in one column");
        QVERIFY2(names.insert(f.name).second, "two fields of one name");
        // The SQL views use the names as column names.
        QVERIFY(!f.name.empty());
        for (const char c : f.name) {
            QVERIFY((c >= 'a' && c <= 'z') || c == '_');
        }
        // request and block travel in their own columns and nowhere else.
        QCOMPARE(f.name == "request", f.column == Column::request);
        QCOMPARE(f.name == "block", f.column == Column::block);
    }
}

void TestTypedEvents::columns_keep_their_recorded_meaning() {
    // Recordings already written put these values in these columns; a typed
    // event that moved one would misread every older file.
    const auto row = [](EventKind kind, std::int64_t request, std::int32_t block,
                        std::array<std::int64_t, 4> abcd, std::string text = {}) {
        EngineEvent e;
        e.kind = kind;
        e.request = request;
        e.block = block;
        std::tie(e.a, e.b, e.c, e.d) = std::tuple_cat(abcd);
        e.text = std::move(text);
        return e;
    };
    QVERIFY(
        as<StepBegin>(row(EventKind::step_begin, -1, -1, {7, 300, 5, 3})) ==
        (StepBegin{.step = 7, .scheduled_tokens = 300, .sequences = 5, .phase = StepPhase::mixed}));
    // The hash travels as the int64 of the same bits: -2 is 0xffff'ffff'ffff'fffe.
    QVERIFY(as<BlockCached>(row(EventKind::block_cached, 4, 12, {-2, 32, 0, 0})) ==
            (BlockCached{
                .block = 12, .request = 4, .hash = 0xffff'ffff'ffff'fffeull, .first_token = 32}));
    QVERIFY(as<OpSlice>(row(EventKind::op_slice, -1, -1, {9'000, -1, 3, 0}, "attention")) ==
            (OpSlice{.end_ns = 9'000, .layer = -1, .step = 3, .op = "attention"}));
    QVERIFY(
        as<MemorySample>(row(EventKind::memory_sample, -1, -1, {1, 2, 3, 6})) ==
        (MemorySample{.used_blocks = 1, .cached_blocks = 2, .free_blocks = 3, .total_blocks = 6}));
    QVERIFY(as<AttachedMetric>(row(EventKind::attached_metric, -1, -1, {2, 0, 0, 0}, "{}")) ==
            (AttachedMetric{.source = 2, .sample = "{}"}));
    QVERIFY(as<RequestAdmitted>(row(EventKind::request_admitted, 3, -1, {64, 10, 4, 1})) ==
            (RequestAdmitted{.request = 3,
                             .cached_tokens = 64,
                             .computed_tokens = 10,
                             .blocks_hit = 4,
                             .blocks_missed = 1}));
}

void TestTypedEvents::unknown_fields_and_kinds_are_refused() {
    QCOMPARE(column_of(EventKind::step_end, "decode_tokens"), Column::c);
    QVERIFY_THROWS_EXCEPTION(std::logic_error, column_of(EventKind::step_end, "no_such_field"));
    bool called = false;
    QVERIFY(!visit_kind(static_cast<EventKind>(kEventKindCount), [&](auto) { called = true; }));
    QVERIFY(!called);
    EngineEvent unknown;
    unknown.kind = static_cast<EventKind>(kEventKindCount + 3);
    for_each_field(unknown, [&](std::string_view, const auto&) { called = true; });
    QVERIFY(!called);
    QVERIFY(field_columns(unknown.kind).empty());
}

QTEST_GUILESS_MAIN(TestTypedEvents)
#include "tst_typed_events.moc"
