// The Prometheus text parser against pages the real client library wrote
// (tests/profiler/data/metrics/*.prom, from make_fixtures.py with
// prometheus_client and vLLM's and SGLang's metric names, types and labels),
// the grammar's corners by hand, the metrics kvscope keeps and their rows'
// JSON, and random bytes, which must never crash it.
#include "profiler/attach/attached_metrics.h"
#include "profiler/attach/prometheus_text.h"
#include "tests/support/metrics_pages.h"

#include <cmath>
#include <fstream>
#include <random>
#include <sstream>

#include <QTest>

using namespace kvscope;
using namespace kvscope::attach;

namespace {

const PrometheusSample* find(const PrometheusText& text, std::string_view name) {
    for (const PrometheusSample& s : text.samples) {
        if (s.name == name) {
            return &s;
        }
    }
    return nullptr;
}

const MetricSample* find(const std::vector<MetricSample>& samples, std::string_view name) {
    for (const MetricSample& s : samples) {
        if (s.name == name) {
            return &s;
        }
    }
    return nullptr;
}

// A model name with a quote and a backslash, as make_fixtures.py sets it.
const std::string kModel = "Qwen/Qwen3-0.6B \"chat\"\\v1";

} // namespace

class TestPrometheusText : public QObject {
    Q_OBJECT

private slots:
    void vllmPageFromPrometheusClient() {
        const std::string page = kvscope::test::metrics_page("vllm.prom");
        QVERIFY(!page.empty());
        const PrometheusText text = parse_prometheus_text(page);
        QCOMPARE(text.bad_lines, std::int64_t{0});
        QVERIFY2(text.first_error.empty(), text.first_error.c_str());

        const PrometheusSample* usage = find(text, "vllm:kv_cache_usage_perc");
        QVERIFY(usage != nullptr);
        QCOMPARE(usage->value, 0.25);
        QCOMPARE(usage->label("model_name"), std::string_view(kModel));
        QCOMPARE(usage->label("engine"), std::string_view("0"));
        QCOMPARE(text.type_of("vllm:kv_cache_usage_perc"), std::string_view("gauge"));
        // The client exposes counters with _total and declares them so.
        QCOMPARE(find(text, "vllm:prefix_cache_queries_total")->value, 1000.0);
        QCOMPARE(text.type_of("vllm:prefix_cache_queries_total"), std::string_view("counter"));
        QCOMPARE(text.type_of("vllm:time_to_first_token_seconds_bucket"),
                 std::string_view("histogram"));
        // A histogram's buckets parse (kvscope keeps none of them).
        bool inf_bucket = false;
        for (const PrometheusSample& s : text.samples) {
            inf_bucket = inf_bucket || (s.name == "vllm:time_to_first_token_seconds_bucket" &&
                                        s.label("le") == "+Inf" && s.value == 1.0);
        }
        QVERIFY(inf_bucket);

        const std::vector<MetricSample> kept = kept_metrics(text);
        QCOMPARE(kept.size(), std::size_t{5}); // usage, queries, hits, preemptions, config
        QCOMPARE(find(kept, "vllm:prefix_cache_queries")->value, 1000.0);
        QCOMPARE(find(kept, "vllm:prefix_cache_hits")->value, 400.0);
        QCOMPARE(find(kept, "vllm:num_preemptions")->value, 0.0);
        QVERIFY(find(kept, "vllm:num_requests_running") == nullptr);
        QVERIFY(find(kept, "vllm:prefix_cache_queries_created") == nullptr);
        const MetricSample* config = find(kept, "vllm:cache_config_info");
        QVERIFY(config != nullptr);
        QCOMPARE(config->labels.at("num_gpu_blocks"), std::string("27215"));
        QCOMPARE(config->labels.at("block_size"), std::string("16"));
    }

    void twoEnginesSummed() {
        const std::vector<MetricSample> kept = kept_metrics(
            parse_prometheus_text(kvscope::test::metrics_page("vllm_two_engines.prom")));
        MetricSeriesMap series;
        for (const MetricSample& s : kept) {
            add_metric(series, s, 1);
        }
        const MetricsSummary m = summarize_metrics(series);
        QCOMPARE(*m.kv_usage, 0.375); // engines at 25% and 50%
        QCOMPARE(*m.prefix_queries, 3000.0);
        QCOMPARE(*m.prefix_hits, 1200.0);
        QCOMPARE(*m.prefix_hit_rate, 0.4);
        QCOMPARE(*m.preemptions, 3.0);
        QCOMPARE(*m.num_gpu_blocks, std::int64_t{27215});
        QCOMPARE(*m.block_size, std::int64_t{16});
        QVERIFY(!m.prefix_hit_rate_since); // one sample: no growth yet

        // Counters grow: the rate since attaching is over the growth only.
        for (MetricSample s : kept) {
            if (s.name == "vllm:prefix_cache_queries") {
                s.value += 100;
            } else if (s.name == "vllm:prefix_cache_hits") {
                s.value += 90;
            }
            add_metric(series, s, 2);
        }
        QCOMPARE(*summarize_metrics(series).prefix_hit_rate_since, 0.9);
    }

    void sglangPageWithNanAndInf() {
        const PrometheusText text =
            parse_prometheus_text(kvscope::test::metrics_page("sglang.prom"));
        QCOMPARE(text.bad_lines, std::int64_t{0});
        QVERIFY(std::isnan(find(text, "sglang:num_running_reqs")->value));
        QVERIFY(std::isinf(find(text, "sglang:gen_throughput")->value));
        MetricSeriesMap series;
        for (const MetricSample& s : kept_metrics(text)) {
            add_metric(series, s, 1);
        }
        QCOMPARE(series.size(), std::size_t{2});
        const MetricsSummary m = summarize_metrics(series);
        QCOMPARE(*m.kv_usage, 0.125);
        QCOMPARE(*m.prefix_hit_rate, 0.5);
        QVERIFY(!m.num_gpu_blocks);
    }

    void grammarCorners() {
        const PrometheusText text = parse_prometheus_text(
            "# a comment\n"
            "#\n"
            "# HELP x with \\\\ and \\n in help\n"
            "# TYPE x gauge\n"
            "x 1\n"
            "  y{a=\"line\\nbreak\",b=\"q\\\"uote\",c=\"back\\\\slash\",d=\"other\\tescape\",} "
            "-2.5e3 1700000000000\r\n"
            "z{} NaN\n"
            "w\t+Inf\t-5\n"
            "v -Inf\n"
            "u { a = \"1\" } 0x10\n" // hex is not the format's
            "t{a=\"unclosed} 1\n"
            "s{1a=\"x\"} 1\n"
            "r 1 2 3\n"
            "q 1 1.5\n"
            "9p 1\n"
            "# TYPE o frobnicator\n"
            "n{a=\"x\"}\n"
            "vllm:num_preemptions 7\n" // a counter without _total (an older client)
            "\n");
        QCOMPARE(text.samples.size(), std::size_t{6});
        QCOMPARE(text.samples[0].name, std::string("x"));
        QCOMPARE(text.type_of("x"), std::string_view("gauge"));
        const PrometheusSample& y = text.samples[1];
        QCOMPARE(y.label("a"), std::string_view("line\nbreak"));
        QCOMPARE(y.label("b"), std::string_view("q\"uote"));
        QCOMPARE(y.label("c"), std::string_view("back\\slash"));
        QCOMPARE(y.label("d"), std::string_view("other\\tescape"));
        QCOMPARE(y.value, -2500.0);
        QCOMPARE(*y.timestamp_ms, std::int64_t{1700000000000});
        QVERIFY(std::isnan(text.samples[2].value));
        QVERIFY(text.samples[2].labels.empty());
        QVERIFY(std::isinf(text.samples[3].value) && text.samples[3].value > 0);
        QCOMPARE(*text.samples[3].timestamp_ms, std::int64_t{-5});
        QVERIFY(std::isinf(text.samples[4].value) && text.samples[4].value < 0);
        QCOMPARE(text.samples[5].name, std::string("vllm:num_preemptions"));
        QCOMPARE(text.bad_lines, std::int64_t{8}); // u, t, s, r, q, 9p, o's TYPE, n
        QVERIFY2(text.first_error.starts_with("line 10: "), text.first_error.c_str());
        QCOMPARE(kept_metrics(text).size(), std::size_t{1});
        QCOMPARE(kept_metrics(text)[0].name, std::string("vllm:num_preemptions"));
        // An empty page, or one of only comments, is no error.
        QCOMPARE(parse_prometheus_text("").bad_lines, std::int64_t{0});
        QCOMPARE(parse_prometheus_text("# HELP a b\n").samples.size(), std::size_t{0});
    }

    void rowJsonRoundTrips() {
        for (const double value :
             {0.25, -3.0, 1e300, std::nan(""), std::stod("inf"), -std::stod("inf")}) {
            MetricSample sample{"vllm:kv_cache_usage_perc", value, {{"model_name", kModel}}};
            events::AttachedMetric row;
            row.sample = metric_json(sample);
            const std::optional<MetricSample> back = metric_of(row);
            QVERIFY2(back.has_value(), row.sample.c_str());
            QCOMPARE(back->name, sample.name);
            QCOMPARE(back->labels, sample.labels);
            QVERIFY(std::isnan(value) ? std::isnan(back->value) : back->value == value);
        }
        // Bytes that are not UTF-8 in a label do not throw.
        const MetricSample odd{"sglang:token_usage", 1, {{"model_name", "\xff\xfe"}}};
        events::AttachedMetric row;
        row.sample = metric_json(odd);
        QVERIFY(metric_of(row).has_value());
        for (const char* bad :
             {"", "[]", "{}", "{\"name\":1,\"value\":1}", "{\"name\":\"a\",\"value\":\"x\"}",
              "{\"name\":\"a\",\"value\":1,\"labels\":[1]}",
              "{\"name\":\"a\",\"value\":1,\"labels\":{\"k\":2}}", "{\"name\":"}) {
            row.sample = bad;
            QVERIFY2(!metric_of(row).has_value(), bad);
        }
    }

    void randomBytesNeverCrash() {
        std::mt19937_64 random(15);
        // Bytes biased towards the grammar's, so the parser gets deep.
        const std::string alphabet = "ab_:{}=\",\\n# \t\r\n0123456789.eE+-InfNaTYPEHELP\x80\xff";
        const std::string page = kvscope::test::metrics_page("vllm_two_engines.prom");
        std::int64_t samples = 0;
        for (int round = 0; round < 20'000; ++round) {
            std::string text;
            if (round % 2 == 0) {
                const std::size_t length = random() % 300;
                for (std::size_t i = 0; i < length; ++i) {
                    text += round % 4 == 0 ? static_cast<char>(random() & 0xff)
                                           : alphabet[random() % alphabet.size()];
                }
            } else {
                // The real page with a few bytes changed, cut or repeated.
                text = page;
                for (int edits = 1 + static_cast<int>(random() % 8); edits > 0; --edits) {
                    const std::size_t at = random() % text.size();
                    switch (random() % 3) {
                    case 0:
                        text[at] = alphabet[random() % alphabet.size()];
                        break;
                    case 1:
                        text.erase(at, random() % 20);
                        break;
                    default:
                        text.insert(at, text.substr(at, random() % 20));
                        break;
                    }
                    if (text.empty()) {
                        text = "x";
                    }
                }
            }
            const PrometheusText parsed = parse_prometheus_text(text);
            for (const MetricSample& s : kept_metrics(parsed)) {
                events::AttachedMetric row;
                row.sample = metric_json(s);
                QVERIFY(metric_of(row).has_value());
                ++samples;
            }
        }
        QVERIFY(samples > 0); // the mutated pages still gave some
    }
};

QTEST_GUILESS_MAIN(TestPrometheusText)
#include "tst_prometheus_text.moc"
