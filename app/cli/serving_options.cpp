#include "app/cli/serving_options.h"

namespace kvscope::cli {

void ServingOptions::add_to(CLI::App& app, bool several_policies) {
    app.add_flag("--no-prefix-caching", no_prefix_caching,
                 "Turn prefix caching off (on by default)");
    const std::string what = "Which cached prefix block to reclaim first when blocks run out: "
                             "lru (least recently used) or lfu (least frequently used)";
    CLI::Option* policy = several_policies
                              ? app.add_option("--cache-policy,--policy", cache_policies,
                                               what + "; several, comma-separated, compare them")
                                    ->delimiter(',')
                              : app.add_option("--cache-policy", cache_policies, what)->expected(1);
    policy->check(CLI::IsMember({"lru", "lfu"}))->capture_default_str();
    app.add_option("--max-num-seqs", max_num_seqs, "Most sequences in one step")
        ->check(CLI::Range(1, 1 << 16))
        ->capture_default_str();
    app.add_option("--max-num-batched-tokens", max_num_batched_tokens,
                   "Most tokens computed in one step")
        ->check(CLI::Range(1, 1 << 20))
        ->capture_default_str();
    app.add_flag("--no-chunked-prefill", no_chunked_prefill,
                 "Prefill each prompt in one step (it must fit --max-num-batched-tokens)");
    app.add_option("--preemption-victim", victim,
                   "Which request to preempt when blocks run out: newest, oldest or largest")
        ->check(CLI::IsMember({"newest", "oldest", "largest"}))
        ->capture_default_str();
}

void ServingOptions::apply(session::RunConfig& config) const {
    config.prefix_caching = !no_prefix_caching;
    config.cache_policy =
        kv::parse_cache_policy(cache_policies.front()).value_or(kv::CachePolicy::lru);
    config.scheduler.max_num_seqs = max_num_seqs;
    config.scheduler.max_num_batched_tokens = max_num_batched_tokens;
    config.scheduler.chunked_prefill = !no_chunked_prefill;
    config.scheduler.victim =
        sched::parse_victim_policy(victim).value_or(sched::VictimPolicy::newest);
}

} // namespace kvscope::cli
