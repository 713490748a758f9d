#include "engine/events/typed_events.h"

#include <stdexcept>

namespace kvscope::events {

std::string_view column_name(Column column) {
    switch (column) {
    case Column::request:
        return "request";
    case Column::block:
        return "block";
    case Column::a:
        return "a";
    case Column::b:
        return "b";
    case Column::c:
        return "c";
    case Column::d:
        return "d";
    case Column::text:
        return "text";
    }
    return "?";
}

std::string_view step_phase_name(StepPhase phase) {
    switch (phase) {
    case StepPhase::idle:
        return "idle";
    case StepPhase::prefill:
        return "prefill";
    case StepPhase::decode:
        return "decode";
    case StepPhase::mixed:
        return "mixed";
    }
    return "idle";
}

std::string_view clear_cause_name(ClearCause cause) {
    switch (cause) {
    case ClearCause::all_blocks_cleared:
        return "all_blocks_cleared";
    case ClearCause::publisher_restarted:
        return "publisher_restarted";
    case ClearCause::events_lost:
        return "events_lost";
    }
    return "?";
}

std::vector<FieldColumn> field_columns(EventKind kind) {
    std::vector<FieldColumn> columns;
    visit_kind(kind, [&]<class T>(std::type_identity<T>) {
        std::apply(
            [&](const auto&... f) {
                (columns.push_back({f.name, f.column}), ...);
            },
            T::fields());
    });
    return columns;
}

Column column_of(EventKind kind, std::string_view field) {
    for (const FieldColumn& f : field_columns(kind)) {
        if (f.name == field) {
            return f.column;
        }
    }
    throw std::logic_error(std::string(event_kind_name(kind)) + " has no field " +
                           std::string(field));
}

} // namespace kvscope::events
