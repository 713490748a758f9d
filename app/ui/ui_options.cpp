#include "app/ui/ui_options.h"

#include "app/ui/run/teaching_presets.h"
#include "kvscope/build_info.h"

#include <QCommandLineParser>

namespace kvscope::ui {

UiOptionsResult parse_ui_options(const QStringList& arguments) {
    QCommandLineParser parser;
    parser.setApplicationDescription("kvscope-ui: see how LLM inference uses its KV cache.");
    const QCommandLineOption help_option = parser.addHelpOption();
    const QCommandLineOption version_option = parser.addVersionOption();
    QStringList demo_names;
    for (const TeachingPreset& preset : teaching_presets()) {
        demo_names << preset.id;
    }
    const QCommandLineOption demo_option(
        "demo", QString("Start a live demo at once: the default one (%1), or the teaching demo "
                        "NAME given after it (%2).")
                    .arg(demo_names.first(), demo_names.join(", ")));
    const QCommandLineOption screenshot_option(
        "screenshot", "Render the main window to FILE (PNG) and exit.", "FILE");
    const QCommandLineOption after_option(
        "screenshot-after", "Seconds to run before taking the screenshot (default 2).", "SECONDS",
        "2");
    const QCommandLineOption record_option(
        "record", "With --demo: record the live run into FILE (.sqlite; a new file).", "FILE");
    parser.addPositionalArgument(
        "recording", "A recording (.sqlite) to open for replay; after --demo, the demo's name.",
        "[FILE.sqlite | NAME]");
    parser.addOption(demo_option);
    parser.addOption(record_option);
    parser.addOption(screenshot_option);
    parser.addOption(after_option);

    UiOptionsResult result;
    if (!parser.parse(arguments)) {
        result.message = parser.errorText() + "\nRun 'kvscope-ui --help' for usage.";
        result.exit_code = 2;
        return result;
    }
    if (parser.isSet(help_option)) {
        result.message = parser.helpText();
        return result;
    }
    if (parser.isSet(version_option)) {
        result.message = QString("kvscope-ui %1").arg(build_info::version);
        return result;
    }
    if (parser.positionalArguments().size() > 1) {
        result.message = QString("Unexpected argument: %1 (one recording at a time)\nRun "
                                 "'kvscope-ui --help' for usage.")
                             .arg(parser.positionalArguments().at(1));
        result.exit_code = 2;
        return result;
    }

    UiOptions options;
    options.demo = parser.isSet(demo_option);
    if (!parser.positionalArguments().isEmpty()) {
        const QString argument = parser.positionalArguments().first();
        // With --demo, a name of a teaching demo; a file is a recording.
        if (options.demo && find_teaching_preset(argument) != nullptr) {
            options.demo_id = argument;
        } else if (options.demo && !argument.contains('.') && !argument.contains('/')) {
            result.message = QString("No demo called '%1': the demos are %2")
                                 .arg(argument, demo_names.join(", "));
            result.exit_code = 2;
            return result;
        } else if (options.demo) {
            result.message = "--demo and a recording: choose one (the demo runs live, a "
                             "recording replays)";
            result.exit_code = 2;
            return result;
        } else {
            options.recording_path = argument;
        }
    }
    options.record_path = parser.value(record_option);
    if (!options.record_path.isEmpty() && !options.demo) {
        result.message = "--record needs --demo (a live run to record)";
        result.exit_code = 2;
        return result;
    }
    options.screenshot_path = parser.value(screenshot_option);
    bool ok = false;
    options.screenshot_after_s = parser.value(after_option).toDouble(&ok);
    if (!ok || options.screenshot_after_s < 0 || options.screenshot_after_s > 3600) {
        result.message = QString("--screenshot-after needs a number of seconds from 0 to 3600, "
                                 "not '%1'")
                             .arg(parser.value(after_option));
        result.exit_code = 2;
        return result;
    }
    if (parser.isSet(after_option) && options.screenshot_path.isEmpty()) {
        result.message = "--screenshot-after needs --screenshot FILE";
        result.exit_code = 2;
        return result;
    }
    result.options = options;
    return result;
}

} // namespace kvscope::ui
