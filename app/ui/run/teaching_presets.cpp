#include "app/ui/run/teaching_presets.h"

#include <QObject>

namespace kvscope::ui {
namespace {

TeachingPreset prefix_caching() {
    TeachingPreset p;
    p.id = "prefix-caching";
    p.title = QObject::tr("Prefix caching");
    p.explanation = QObject::tr(
        "<p>Every request starts with the same long system prompt. The first one computes its "
        "K/V; the engine hashes each full block and keeps it, so later requests <b>share</b> "
        "those blocks instead of computing them again.</p>"
        "<p><b>Watch:</b> in the block map, blocks with a dark border and a number are shared by "
        "that many requests. <i>Prefix hits</i> shows cached (reused) against computed prompt "
        "tokens per request and the hit rate climbing; the prefix tree shows the shared "
        "system-prompt blocks with their reuse counts. In the requests table, time to first "
        "token (TTFT) drops once the prefix is cached.</p>"
        "<p><b>Try:</b> record this run, untick <i>Prefix caching</i>, record again, and compare "
        "the two recordings (File › Compare): the hit rate falls to zero and TTFT rises.</p>");
    p.settings.workload = "shared-prefix";
    p.settings.preset.requests = 24;
    p.settings.preset.rate = 3.0;
    p.settings.preset.max_tokens = 40;
    return p;
}

TeachingPreset paging() {
    TeachingPreset p;
    p.id = "paging";
    p.title = QObject::tr("Paging and fragmentation");
    p.explanation = QObject::tr(
        "<p>The KV cache is split into fixed-size <b>blocks</b> (pages). A request holds a list "
        "of blocks that need not be contiguous, so memory is handed out and returned in small "
        "pieces without copying. The price is <b>internal fragmentation</b>: each request's last "
        "block is only partly filled.</p>"
        "<p><b>Watch:</b> the block map fills and empties in scattered places as independent "
        "chats arrive and finish; the occupancy chart's fragmentation line is the share of "
        "reserved slots that hold no token yet. With 64-token blocks it is high.</p>"
        "<p><b>Try:</b> set the block size to 8 and run again: fragmentation falls, but the "
        "block tables grow and every block is smaller.</p>");
    p.settings.workload = "poisson";
    p.settings.block_size = 64;
    p.settings.cache.num_blocks = 96;
    p.settings.prefix_caching = false;
    p.settings.preset.requests = 24;
    p.settings.preset.rate = 4.0;
    p.settings.preset.max_tokens = 48;
    return p;
}

TeachingPreset eviction() {
    TeachingPreset p;
    p.id = "eviction";
    p.title = QObject::tr("Token eviction (StreamingLLM)");
    p.explanation = QObject::tr(
        "<p>Questions over one long document: every request's context is long. With "
        "<b>StreamingLLM</b> eviction each sequence keeps only 4 attention-sink tokens and a "
        "recent window (a 256-token budget); older entries are dropped and whole blocks return "
        "to the pool.</p>"
        "<p><b>Watch:</b> the used blocks in the occupancy chart and the KV bytes row of the "
        "timeline stay low however long the document: blocks go back to the pool as tokens are "
        "dropped. The memory saved is the gap to the same run without eviction.</p>"
        "<p><b>Quality lost:</b> dropped tokens change the model's answers. When the run ends, "
        "<i>Quality lost</i> below scores the first 512 tokens of an evaluation text against a "
        "full f32 cache (KL divergence, top-1 agreement); <code>kvscope eval --eviction "
        "streaming --kv-budget 256</code> does it for whole texts.</p>");
    p.settings.workload = "long-doc";
    p.settings.preset.requests = 6;
    p.settings.preset.rate = 1.0;
    p.settings.preset.max_tokens = 32;
    p.settings.cache.num_blocks = 256;
    p.settings.eviction.kind = kv::EvictionKind::streaming;
    p.settings.eviction.budget = 256;
    return p;
}

TeachingPreset quantisation() {
    TeachingPreset p;
    p.id = "quantisation";
    p.title = QObject::tr("KV quantisation");
    p.explanation = QObject::tr(
        "<p>Keys stored as <b>q8_0</b> and values as <b>q4_0</b> (blocks of 32 values with "
        "an fp16 scale) instead of f16: the same cache bytes hold about 2.5 times as many "
        "tokens.</p>"
        "<p><b>Watch:</b> the block map's legend shows the formats and bytes per block; the KV "
        "bytes row of the timeline stays far below an f16 run's for the same blocks.</p>"
        "<p><b>Quality lost:</b> when the run ends, <i>Quality lost</i> below reports the bytes "
        "per token against f16 and the KL divergence of next-token distributions against an "
        "f32 cache on the first 512 tokens of an evaluation text; <code>kvscope eval "
        "--cache-type-k q8_0 --cache-type-v q4_0</code> does it for whole texts.</p>");
    p.settings.workload = "shared-prefix";
    p.settings.preset.requests = 16;
    p.settings.preset.rate = 3.0;
    p.settings.cache_format.key = kv::KvFormat::q8_0;
    p.settings.cache_format.value = kv::KvFormat::q4_0;
    return p;
}

TeachingPreset preemption() {
    TeachingPreset p;
    p.id = "preemption";
    p.title = QObject::tr("Preemption under pressure");
    p.explanation = QObject::tr(
        "<p>A cache far too small for the requests arriving: when a running sequence needs a "
        "new block and none is free, the scheduler <b>preempts</b> the newest request, frees "
        "its blocks and later computes its K/V again (recompute, as vLLM does).</p>"
        "<p><b>Watch:</b> red stretches in the request lanes of the timeline are preemptions; "
        "the block map is almost always full; the requests table counts preemptions per "
        "request, and their TTFT grows.</p>"
        "<p><b>Try:</b> double the cache blocks and the preemptions vanish.</p>");
    p.settings.workload = "mixed";
    p.settings.preset.requests = 20;
    p.settings.preset.rate = 6.0;
    p.settings.preset.max_tokens = 64;
    p.settings.block_size = 16;
    p.settings.cache.num_blocks = 40;
    return p;
}

} // namespace

TeachingPreset speculative_decoding() {
    TeachingPreset p;
    p.id = "speculative-decoding";
    p.title = QObject::tr("Speculative decoding");
    p.explanation = QObject::tr(
        "<p>Each request asks the model to write a passage out again, so its answer quotes its "
        "prompt. <b>Prompt lookup</b> drafts the 4 tokens that followed the last few tokens' "
        "earlier occurrence; one pass of the model checks all of them and keeps those it agrees "
        "with, plus one of its own. The cache slots of rejected draft tokens are "
        "<b>rolled back</b>: the sequence's length stops before them, whole blocks past it go "
        "back to the pool, and they are never hashed for the prefix cache.</p>"
        "<p><b>Watch:</b> in the timeline, green steps verified drafts: <i>V3/4</i> kept 3 of 4 "
        "(the tooltip says what was rolled back). In the block map a red band marks the slots a "
        "rejected draft wrote at the end of a block, until the next step writes over them. "
        "Steps produce several tokens each, so requests finish in fewer steps.</p>"
        "<p><b>Try:</b> record it, set <i>Speculative</i> to none, record again and compare: "
        "the output is the same token for token (greedy), the step count is not. Then try the "
        "self-draft: the model's own first 24 layers draft, and rarely agree with all 30.</p>");
    p.settings.workload = "copy-edit";
    p.settings.preset.requests = 6;
    p.settings.preset.rate = 1.0;
    p.settings.preset.max_tokens = 96;
    p.settings.speculative.method = spec::DraftMethod::ngram;
    p.settings.speculative.draft_tokens = 4;
    return p;
}

TeachingPreset offload_tier() {
    TeachingPreset p;
    p.id = "offload-tier";
    p.title = QObject::tr("Offloading to a second tier");
    p.explanation = QObject::tr(
        "<p>Questions over six documents, asked in turn. The 64-block cache holds two or three "
        "of them, so by the time a document comes round again the pool has reclaimed its "
        "blocks for the others: without help, every repeat computes the document again. An "
        "<b>offload tier</b> in host memory (as vLLM's CPU offloading and SGLang's "
        "hierarchical cache) keeps the blocks the pool lets go; a prefix lookup that misses "
        "the pool but finds them there <b>loads them back</b>, a copy instead of a "
        "prefill.</p>"
        "<p><b>Watch:</b> in the block map a teal corner marks blocks loaded back from the "
        "tier, and the legend counts the tier's blocks; the occupancy chart's dashed line is "
        "the tier filling up. From the seventh request on, the run summary's prefix hits come "
        "from the tier, and time to first token drops.</p>"
        "<p><b>Try:</b> record it, set <i>Offload</i> to none, record again and compare: the "
        "prefix hit rate falls from about half to almost nothing, and time to first token "
        "about doubles. Try a file on disk (real reads and writes) or write-through, which "
        "saves blocks as soon as they are cached (a purple corner).</p>");
    p.settings.workload = "rotating-docs";
    p.settings.preset.requests = 12;
    p.settings.preset.rate = 1.0;
    p.settings.preset.max_tokens = 16;
    p.settings.cache.num_blocks = 64;
    p.settings.offload.medium = kv::TierMedium::memory;
    p.settings.offload.capacity_blocks = 512;
    return p;
}

TeachingPreset hybrid_attention() {
    TeachingPreset p;
    p.id = "hybrid-attention";
    p.title = QObject::tr("Hybrid local/global attention");
    p.explanation = QObject::tr(
        "<p><b>Gemma 3</b> attends over the whole context in one layer of six only; the other "
        "five see a <b>sliding window</b> of the last 512 tokens. Their keys and values older "
        "than the window are never read again. A <b>hybrid cache</b> (vLLM's hybrid KV-cache "
        "manager) gives the window layers block tables of their own: as the window moves on, "
        "the blocks it left go back to the pool (and stay in the prefix cache). Here the "
        "model answers questions over one long document of several thousand tokens.</p>"
        "<p><b>Watch:</b> the block map has a band per group: the global group's band grows "
        "with the document while each window group's stays small, the blocks of the last 512 "
        "tokens (the document's end, shared by the requests reading it) and each question's "
        "own few. In the occupancy chart, <i>Used, global</i> climbs, <i>Used, window "
        "512</i> stays low, and the dotted <i>Plain cache would hold</i> line is what a cache "
        "keeping every layer's whole context would need for the same requests: the gap is "
        "the memory saved. The timeline's group rows show the same per step.</p>"
        "<p><b>Try:</b> record it, untick <i>Own block tables</i>, record again and compare: "
        "the same answers, several times the KV bytes. <code>kvscope stats</code> on the "
        "hybrid recording says what a plain cache would have held; <code>kvscope size "
        "--model gemma-3-270m --context 32768</code> sizes it for any context.</p>"
        "<p>Needs the Gemma 3 270M model that the set-up fetches "
        "(<code>scripts/setup.sh</code>).</p>");
    p.settings.model_path = "gemma-3-270m";
    p.settings.workload = "long-doc";
    p.settings.preset.requests = 4;
    p.settings.preset.rate = 0.3;
    p.settings.preset.max_tokens = 24;
    p.settings.block_size = 16;
    // Bytes, not blocks: a hybrid block holds a group's 3 layers, a plain
    // one all 18, so the same count would not be the same memory.
    p.settings.cache.num_blocks = 0;
    p.settings.cache.memory_bytes = std::int64_t{96} << 20;
    return p;
}

const std::vector<TeachingPreset>& teaching_presets() {
    static const std::vector<TeachingPreset> presets{
        prefix_caching(),       paging(),       eviction(),        quantisation(), preemption(),
        speculative_decoding(), offload_tier(), hybrid_attention()};
    return presets;
}

const TeachingPreset* find_teaching_preset(const QString& id) {
    for (const TeachingPreset& preset : teaching_presets()) {
        if (preset.id == id) {
            return &preset;
        }
    }
    return nullptr;
}

} // namespace kvscope::ui
