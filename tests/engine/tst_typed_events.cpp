// The typed events are the one statement of what each kind's flat columns
// mean: every kind round-trips through the flat row with every field intact
// (hashes past 2^63 included), no two fields of a kind share a column, the
// names the SQL views and JSON lines use are unique, and the old readers'
// column meanings (recordings already written) still hold.
#include "engine/events/typed_events.h"

#include <set>

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
    EngineEvent e;
    e.kind = EventKind::step_begin;
    e.a = 7;
    e.b = 300;
    e.c = 5;
    e.d = 3;
    const StepBegin begin = as<StepBegin>(e);
    QCOMPARE(begin.step, 7);
    QCOMPARE(begin.scheduled_tokens, 300);
    QCOMPARE(begin.sequences, 5);
    QCOMPARE(begin.phase, StepPhase::mixed);

    e = {};
    e.kind = EventKind::block_cached;
    e.block = 12;
    e.request = 4;
    e.a = -2; // the bits of 0xffff'ffff'ffff'fffe
    e.b = 32;
    const BlockCached cached = as<BlockCached>(e);
    QCOMPARE(cached.block, 12);
    QCOMPARE(cached.request, 4);
    QCOMPARE(cached.hash, 0xffff'ffff'ffff'fffeull);
    QCOMPARE(cached.first_token, 32);

    e = {};
    e.kind = EventKind::op_slice;
    e.a = 9'000;
    e.b = -1;
    e.c = 3;
    e.text = "attention";
    const OpSlice op = as<OpSlice>(e);
    QCOMPARE(op.end_ns, 9'000);
    QCOMPARE(op.layer, -1);
    QCOMPARE(op.step, 3);
    QCOMPARE(op.op, std::string("attention"));

    e = {};
    e.kind = EventKind::memory_sample;
    e.a = 1;
    e.b = 2;
    e.c = 3;
    e.d = 6;
    const MemorySample memory = as<MemorySample>(e);
    QCOMPARE(memory.used_blocks, 1);
    QCOMPARE(memory.cached_blocks, 2);
    QCOMPARE(memory.free_blocks, 3);
    QCOMPARE(memory.total_blocks, 6);

    e = {};
    e.kind = EventKind::request_admitted;
    e.request = 3;
    e.a = 64;
    e.b = 10;
    e.c = 4;
    e.d = 1;
    const RequestAdmitted admitted = as<RequestAdmitted>(e);
    QCOMPARE(admitted.cached_tokens, 64);
    QCOMPARE(admitted.computed_tokens, 10);
    QCOMPARE(admitted.blocks_hit, 4);
    QCOMPARE(admitted.blocks_missed, 1);
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
