// llamact-oracle: the parity reference for llamact.
//
// A long-lived process speaking JSON lines: one request object per line on stdin,
//   {"id": ..., "op": "...", ...}
// one answer per line on stdout,
//   {"id": ..., "ok": true, "result": ...}  or  {"id": ..., "ok": false, "error": {"kind": "...", "message": "..."}}
// Every answer is computed by upstream's own code (llama-common, llama) built from the vendored pin.
// Errors are data: a bad request never ends the process (an upstream GGML_ASSERT still can; the
// client restarts it).
//
// The wall clock is replaced by a fixed, per-request settable epoch (see "clock shim" below), and
// TZ is forced to UTC, so date-dependent templates render deterministically.

#include "build-info.h"
#include "chat.h"
#include "common.h"
#include "json-schema-to-grammar.h"
#include "json.h"
#include "llama.h"
#include "log.h"
#include "peg-parser.h"
#include "chat-peg-parser.h"
#include "chat-auto-parser.h"
#include "chat-auto-parser-helpers.h"

#include "jinja/caps.h"
#include "jinja/lexer.h"
#include "jinja/parser.h"
#include "jinja/runtime.h"

// llama.cpp's own GBNF parser (src/, not a public header; its symbols are exported from libllama)
#include "llama-grammar.h"

#include <nlohmann/json.hpp>

#include <dlfcn.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <iostream>
#include <map>
#include <sstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

using ojson = nlohmann::ordered_json;

#ifndef LLAMACT_ORACLE_PIN_COMMIT
#define LLAMACT_ORACLE_PIN_COMMIT ""
#endif

// This mirrors the definition in common/chat.cpp token for token (the header only declares it), so
// that the oracle can set add_bos / add_eos for a template given as source, which upstream
// otherwise takes from a model's vocabulary.
struct common_chat_templates {
    bool add_bos;
    bool add_eos;
    bool has_explicit_template;  // Model had builtin template or template overridden was specified.
    std::unique_ptr<common_chat_template> template_default;  // always set (defaults to chatml)
    std::unique_ptr<common_chat_template> template_tool_use;
};

// ------------------------------------------------------------------------------------------------
// clock shim
//
// The executable defines and exports (ENABLE_EXPORTS / -rdynamic) time(), clock_gettime() and
// gettimeofday(). The dynamic linker resolves these names to the executable first, so calls made
// from libllama-common.so (jinja::context reads std::time; chat.cpp reads
// std::chrono::system_clock::now(), which libstdc++ implements with clock_gettime(CLOCK_REALTIME))
// see the fixed epoch. Monotonic and CPU clocks pass through to libc unchanged.
// ------------------------------------------------------------------------------------------------

static constexpr int64_t ORACLE_DEFAULT_NOW = 1768478400;  // 2026-01-15T12:00:00Z
static std::atomic<int64_t> g_oracle_now{ORACLE_DEFAULT_NOW};

using clock_gettime_fn = int (*)(clockid_t, struct timespec *);

static int real_clock_gettime(clockid_t clk, struct timespec * ts) {
    static clock_gettime_fn real = reinterpret_cast<clock_gettime_fn>(dlsym(RTLD_NEXT, "clock_gettime"));
    if (real) {
        return real(clk, ts);
    }
    return (int) syscall(SYS_clock_gettime, clk, ts);
}

static bool is_realtime_clock(clockid_t clk) {
    return clk == CLOCK_REALTIME
#ifdef CLOCK_REALTIME_COARSE
        || clk == CLOCK_REALTIME_COARSE
#endif
#ifdef CLOCK_TAI
        || clk == CLOCK_TAI
#endif
        ;
}

extern "C" {

time_t time(time_t * out) noexcept {
    const time_t now = (time_t) g_oracle_now.load();
    if (out) {
        *out = now;
    }
    return now;
}

int clock_gettime(clockid_t clk, struct timespec * ts) noexcept {
    if (is_realtime_clock(clk)) {
        if (ts) {
            ts->tv_sec  = (time_t) g_oracle_now.load();
            ts->tv_nsec = 0;
        }
        return 0;
    }
    return real_clock_gettime(clk, ts);
}

int gettimeofday(struct timeval * __restrict tv, void * __restrict /*tz*/) noexcept {
    if (tv) {
        tv->tv_sec  = (time_t) g_oracle_now.load();
        tv->tv_usec = 0;
    }
    return 0;
}

}  // extern "C"

// ------------------------------------------------------------------------------------------------
// errors and JSON helpers
// ------------------------------------------------------------------------------------------------

// A request the oracle cannot interpret (missing field, wrong type): kind "bad_request".
struct bad_request : std::runtime_error {
    using std::runtime_error::runtime_error;
};

static common_json to_common(const ojson & j) {
    return common_json::parse(j.dump());
}

static ojson from_common(const common_json & j) {
    return ojson::parse(j.dump());
}

static const ojson & require(const ojson & req, const char * key) {
    auto it = req.find(key);
    if (it == req.end()) {
        throw bad_request(std::string("missing field '") + key + "'");
    }
    return *it;
}

static std::string req_string(const ojson & req, const char * key) {
    const auto & v = require(req, key);
    if (!v.is_string()) {
        throw bad_request(std::string("field '") + key + "' must be a string");
    }
    return v.get<std::string>();
}

static std::string opt_string(const ojson & req, const char * key, const std::string & def) {
    auto it = req.find(key);
    if (it == req.end() || it->is_null()) {
        return def;
    }
    if (!it->is_string()) {
        throw bad_request(std::string("field '") + key + "' must be a string");
    }
    return it->get<std::string>();
}

static bool opt_bool(const ojson & req, const char * key, bool def) {
    auto it = req.find(key);
    if (it == req.end() || it->is_null()) {
        return def;
    }
    if (!it->is_boolean()) {
        throw bad_request(std::string("field '") + key + "' must be a boolean");
    }
    return it->get<bool>();
}

static int64_t opt_int(const ojson & req, const char * key, int64_t def) {
    auto it = req.find(key);
    if (it == req.end() || it->is_null()) {
        return def;
    }
    if (!it->is_number_integer()) {
        throw bad_request(std::string("field '") + key + "' must be an integer");
    }
    return it->get<int64_t>();
}

static const char * trigger_type_name(common_grammar_trigger_type type) {
    switch (type) {
        case COMMON_GRAMMAR_TRIGGER_TYPE_TOKEN:        return "token";
        case COMMON_GRAMMAR_TRIGGER_TYPE_WORD:         return "word";
        case COMMON_GRAMMAR_TRIGGER_TYPE_PATTERN:      return "pattern";
        case COMMON_GRAMMAR_TRIGGER_TYPE_PATTERN_FULL: return "pattern_full";
    }
    return "unknown";
}

static common_chat_format format_from_name(const std::string & name) {
    for (int i = 0; i < COMMON_CHAT_FORMAT_COUNT; i++) {
        auto fmt = (common_chat_format) i;
        if (name == common_chat_format_name(fmt)) {
            return fmt;
        }
    }
    throw bad_request("unknown chat format '" + name + "'");
}

static ojson msg_to_json(const common_chat_msg & msg) {
    ojson parts = ojson::array();
    for (const auto & part : msg.content_parts) {
        parts.push_back({{"type", part.type}, {"text", part.text}});
    }
    ojson calls = ojson::array();
    for (const auto & tc : msg.tool_calls) {
        calls.push_back({{"name", tc.name}, {"arguments", tc.arguments}, {"id", tc.id}});
    }
    return {
        {"role", msg.role},
        {"content", msg.content},
        {"content_parts", parts},
        {"reasoning_content", msg.reasoning_content},
        {"tool_calls", calls},
        {"tool_name", msg.tool_name},
        {"tool_call_id", msg.tool_call_id},
    };
}

// The inverse of msg_to_json; a tool call may also be given OpenAI-style ({"function": {...}}).
static common_chat_msg msg_from_json(const ojson & j) {
    if (!j.is_object()) {
        throw bad_request("a message must be an object");
    }
    common_chat_msg msg;
    msg.role              = opt_string(j, "role", "assistant");
    msg.reasoning_content = opt_string(j, "reasoning_content", "");
    msg.tool_name         = opt_string(j, "tool_name", "");
    msg.tool_call_id      = opt_string(j, "tool_call_id", "");
    auto content = j.find("content");
    if (content != j.end() && content->is_string()) {
        msg.content = content->get<std::string>();
    } else if (content != j.end() && content->is_array()) {
        for (const auto & part : *content) {
            msg.content_parts.push_back({opt_string(part, "type", "text"), opt_string(part, "text", "")});
        }
    }
    auto parts = j.find("content_parts");
    if (parts != j.end() && parts->is_array()) {
        for (const auto & part : *parts) {
            msg.content_parts.push_back({opt_string(part, "type", "text"), opt_string(part, "text", "")});
        }
    }
    auto calls = j.find("tool_calls");
    if (calls != j.end() && calls->is_array()) {
        for (const auto & call : *calls) {
            const ojson & fn = call.contains("function") ? call.at("function") : call;
            common_chat_tool_call tc;
            tc.name = opt_string(fn, "name", "");
            auto args = fn.find("arguments");
            if (args != fn.end() && !args->is_null()) {
                tc.arguments = args->is_string() ? args->get<std::string>() : args->dump();
            }
            tc.id = opt_string(call, "id", "");
            msg.tool_calls.push_back(tc);
        }
    }
    return msg;
}

static common_peg_arena arena_from_request(const ojson & req, const char * key) {
    common_peg_arena arena;
    auto it = req.find(key);
    if (it == req.end() || it->is_null()) {
        return arena;
    }
    if (it->is_string()) {
        if (!it->get<std::string>().empty()) {
            arena.load(it->get<std::string>());
        }
        return arena;
    }
    if (!it->is_object()) {
        throw bad_request(std::string("field '") + key + "' must be the parser arena as JSON (object or string)");
    }
    return common_peg_arena::from_json(to_common(*it));
}

// ------------------------------------------------------------------------------------------------
// models (cached by path for the process lifetime)
// ------------------------------------------------------------------------------------------------

struct model_entry {
    llama_model * model = nullptr;
};

static std::map<std::string, model_entry> g_models;

static llama_model * get_model(const std::string & path) {
    auto it = g_models.find(path);
    if (it != g_models.end()) {
        return it->second.model;
    }
    llama_model_params mparams = llama_model_default_params();
    llama_model * model = llama_model_load_from_file(path.c_str(), mparams);
    if (!model) {
        throw std::runtime_error("failed to load model: " + path);
    }
    g_models[path].model = model;
    return model;
}

// Vocabulary-only loads (no weights), for the grammar parser's token references; cached by path.
static std::map<std::string, llama_model *> g_vocab_models;

static const llama_vocab * get_vocab(const std::string & path) {
    auto it = g_vocab_models.find(path);
    if (it != g_vocab_models.end()) {
        return llama_model_get_vocab(it->second);
    }
    llama_model_params mparams = llama_model_default_params();
    mparams.vocab_only = true;
    llama_model * model = llama_model_load_from_file(path.c_str(), mparams);
    if (!model) {
        throw std::runtime_error("failed to load the vocabulary of model: " + path);
    }
    g_vocab_models[path] = model;
    return llama_model_get_vocab(model);
}

static std::vector<llama_token> tokenize(const llama_vocab * vocab, const std::string & text, bool add_special,
                                         bool parse_special) {
    std::vector<llama_token> tokens(text.size() + 8);
    int32_t n = llama_tokenize(vocab, text.data(), (int32_t) text.size(), tokens.data(), (int32_t) tokens.size(),
                               add_special, parse_special);
    if (n < 0) {
        tokens.resize(-n);
        n = llama_tokenize(vocab, text.data(), (int32_t) text.size(), tokens.data(), (int32_t) tokens.size(),
                           add_special, parse_special);
    }
    if (n < 0) {
        throw std::runtime_error("llama_tokenize failed");
    }
    tokens.resize(n);
    return tokens;
}

static std::string token_piece(const llama_vocab * vocab, llama_token token, bool special) {
    std::string piece(64, '\0');
    int32_t n = llama_token_to_piece(vocab, token, piece.data(), (int32_t) piece.size(), 0, special);
    if (n < 0) {
        piece.resize(-n);
        n = llama_token_to_piece(vocab, token, piece.data(), (int32_t) piece.size(), 0, special);
    }
    if (n < 0) {
        throw std::runtime_error("llama_token_to_piece failed");
    }
    piece.resize(n);
    return piece;
}

// ------------------------------------------------------------------------------------------------
// operations
// ------------------------------------------------------------------------------------------------

static ojson op_version(const ojson &) {
    return {
        {"commit", LLAMACT_ORACLE_PIN_COMMIT},
        {"build_commit", llama_commit()},
        {"build_number", llama_build_number()},
        {"build", llama_build_info()},
        {"compiler", llama_compiler()},
        {"target", llama_build_target()},
        {"default_now", ORACLE_DEFAULT_NOW},
    };
}

static ojson op_jinja_render(const ojson & req) {
    const std::string src = req_string(req, "template");
    ojson context = req.contains("context") && !req.at("context").is_null() ? req.at("context") : ojson::object();
    if (!context.is_object()) {
        throw bad_request("field 'context' must be an object");
    }
    const bool mark_input = opt_bool(req, "mark_input", true);

    jinja::lexer lexer;
    auto lexed = lexer.tokenize(src);
    jinja::program prog = jinja::parse_from_tokens(lexed);

    jinja::context ctx(src);
    jinja::global_from_json(ctx, to_common(context), mark_input);
    jinja::runtime runtime(ctx);
    const jinja::value results = runtime.execute(prog);
    return jinja::runtime::gather_string_parts(results)->as_string().str();
}

// For benchmarks: lex + parse once, then render `iterations` times as upstream's chat path does
// per request (context from JSON, execute, gather), timed inside the process with a monotonic
// clock so that the JSON-lines transport is not in the figures.
static ojson op_jinja_render_timing(const ojson & req) {
    const std::string src = req_string(req, "template");
    const ojson context = req.contains("context") ? req.at("context") : ojson::object();
    const int64_t iterations = opt_int(req, "iterations", 10);
    if (!context.is_object() || iterations < 1 || iterations > 100000) {
        throw bad_request("need an object 'context' and 1 <= 'iterations' <= 100000");
    }
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    jinja::lexer lexer;
    auto lexed = lexer.tokenize(src);
    jinja::program prog = jinja::parse_from_tokens(lexed);
    const auto t1 = clock::now();
    const common_json input = to_common(context);
    ojson render_us = ojson::array();
    std::string out;
    for (int64_t i = 0; i < iterations; i++) {
        const auto r0 = clock::now();
        jinja::context ctx(src);
        jinja::global_from_json(ctx, input, true);
        jinja::runtime runtime(ctx);
        const jinja::value results = runtime.execute(prog);
        out = jinja::runtime::gather_string_parts(results)->as_string().str();
        render_us.push_back(std::chrono::duration<double, std::micro>(clock::now() - r0).count());
    }
    return {
        {"parse_us", std::chrono::duration<double, std::micro>(t1 - t0).count()},
        {"render_us", render_us},
        {"output_size", out.size()},
    };
}

static ojson op_caps(const ojson & req) {
    common_chat_template tmpl(req_string(req, "template"), "", "");
    ojson out = ojson::object();
    for (const auto & [key, value] : tmpl.original_caps().to_map()) {
        out[key] = value;
    }
    return out;
}

static common_chat_templates_inputs inputs_from_json(const ojson & in) {
    if (!in.is_object()) {
        throw bad_request("field 'inputs' must be an object");
    }
    common_chat_templates_inputs inputs;
    inputs.messages = common_chat_msgs_parse_oaicompat(to_common(require(in, "messages")));
    auto tools = in.find("tools");
    if (tools != in.end() && !tools->is_null()) {
        inputs.tools = common_chat_tools_parse_oaicompat(to_common(*tools));
    }
    inputs.tool_choice         = common_chat_tool_choice_parse_oaicompat(opt_string(in, "tool_choice", "auto"));
    inputs.parallel_tool_calls = opt_bool(in, "parallel_tool_calls", false);
    inputs.reasoning_format    = common_reasoning_format_from_name(opt_string(in, "reasoning_format", "none"));
    inputs.enable_thinking     = opt_bool(in, "enable_thinking", true);
    inputs.grammar             = opt_string(in, "grammar", "");
    inputs.add_generation_prompt = opt_bool(in, "add_generation_prompt", true);
    inputs.use_jinja             = opt_bool(in, "use_jinja", true);
    inputs.force_pure_content    = opt_bool(in, "force_pure_content", false);
    auto schema = in.find("json_schema");
    if (schema != in.end() && !schema->is_null()) {
        inputs.json_schema = schema->is_string() ? schema->get<std::string>() : schema->dump();
    }
    auto cont = in.find("continue_final_message");
    if (cont != in.end() && !cont->is_null()) {
        inputs.continue_final_message = common_chat_continuation_parse(to_common(*cont));
    }
    auto kwargs = in.find("chat_template_kwargs");
    if (kwargs != in.end() && !kwargs->is_null()) {
        if (!kwargs->is_object()) {
            throw bad_request("field 'chat_template_kwargs' must be an object");
        }
        // as upstream's server passes them: each value as JSON text
        for (const auto & [key, value] : kwargs->items()) {
            inputs.chat_template_kwargs[key] = value.dump();
        }
    }
    return inputs;
}

static ojson params_to_json(const common_chat_params & p) {
    ojson triggers = ojson::array();
    for (const auto & t : p.grammar_triggers) {
        triggers.push_back({{"type", trigger_type_name(t.type)}, {"value", t.value}, {"token", t.token}});
    }
    return {
        {"format", common_chat_format_name(p.format)},
        {"prompt", p.prompt},
        {"generation_prompt", p.generation_prompt},
        {"grammar", p.grammar},
        {"grammar_lazy", p.grammar_lazy},
        {"grammar_triggers", triggers},
        {"preserved_tokens", p.preserved_tokens},
        {"additional_stops", p.additional_stops},
        {"supports_thinking", p.supports_thinking},
        {"thinking_start_tag", p.thinking_start_tag},
        {"thinking_end_tags", p.thinking_end_tags},
        {"parser", p.parser.empty() ? ojson(nullptr) : ojson::parse(p.parser)},
        {"message_delimiters", from_common(p.message_delimiters.to_json())},
    };
}

static ojson op_chat_apply(const ojson & req) {
    const std::string src = opt_string(req, "template", "");
    const std::string model_path = opt_string(req, "model", "");
    llama_model * model = model_path.empty() ? nullptr : get_model(model_path);
    if (src.empty() && !model) {
        throw bad_request("chat_apply needs 'template' (Jinja source) or 'model' (a GGUF path)");
    }
    auto tmpls = common_chat_templates_init(model, src, opt_string(req, "bos_token", ""),
                                            opt_string(req, "eos_token", ""));
    if (!model) {
        tmpls->add_bos = opt_bool(req, "add_bos", false);
        tmpls->add_eos = opt_bool(req, "add_eos", false);
    }
    const auto inputs = inputs_from_json(require(req, "inputs"));
    return params_to_json(common_chat_templates_apply(tmpls.get(), inputs));
}

// For benchmarks: upstream's cost of a request, timed in-process. `init_us`: a fresh
// common_chat_templates_init (compile + caps probing) per iteration; `apply_us`: apply on templates
// initialised once, as llama-server does per request (the autoparser's analysis included).
static ojson op_chat_apply_timing(const ojson & req) {
    const std::string src = req_string(req, "template");
    const int64_t iterations = opt_int(req, "iterations", 5);
    if (iterations < 1 || iterations > 10000) {
        throw bad_request("need 1 <= 'iterations' <= 10000");
    }
    const auto inputs = inputs_from_json(require(req, "inputs"));
    const std::string bos = opt_string(req, "bos_token", "");
    const std::string eos = opt_string(req, "eos_token", "");
    using clock = std::chrono::steady_clock;
    ojson init_us = ojson::array();
    ojson apply_us = ojson::array();
    size_t checksum = 0;
    auto kept = common_chat_templates_init(nullptr, src, bos, eos);
    for (int64_t i = 0; i < iterations; i++) {
        const auto t0 = clock::now();
        auto tmpls = common_chat_templates_init(nullptr, src, bos, eos);
        init_us.push_back(std::chrono::duration<double, std::micro>(clock::now() - t0).count());
        const auto t1 = clock::now();
        const auto params = common_chat_templates_apply(kept.get(), inputs);
        apply_us.push_back(std::chrono::duration<double, std::micro>(clock::now() - t1).count());
        checksum += params.prompt.size() + params.grammar.size() + params.parser.size();
    }
    return {{"init_us", init_us}, {"apply_us", apply_us}, {"checksum", checksum}};
}

static ojson op_chat_parse(const ojson & req) {
    common_chat_parser_params params;
    params.format               = format_from_name(opt_string(req, "format", common_chat_format_name(COMMON_CHAT_FORMAT_CONTENT_ONLY)));
    params.reasoning_format     = common_reasoning_format_from_name(opt_string(req, "reasoning_format", "none"));
    params.generation_prompt    = opt_string(req, "generation_prompt", "");
    params.reasoning_in_content = opt_bool(req, "reasoning_in_content", false);
    params.parse_tool_calls     = opt_bool(req, "parse_tool_calls", true);
    params.is_continuation      = opt_bool(req, "is_continuation", false);
    params.echo                 = opt_bool(req, "echo", false);
    params.parser               = arena_from_request(req, "parser");
    const std::string text = req_string(req, "text");
    return msg_to_json(common_chat_parse(text, opt_bool(req, "is_partial", false), params));
}

// This thread's CPU time in microseconds: unlike the wall clock, not inflated when other processes
// share the cores (benchmarks compare it with Python's time.thread_time()).
static double thread_cpu_us() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

// Upstream's parse cost for a stream: common_chat_parse on each given prefix end (partial), and
// the whole text (final), timed with a monotonic clock (`step_us`, `full_us`) and in thread CPU
// time (`step_cpu_us`); prefix ends are byte offsets.
static ojson op_chat_parse_timing(const ojson & req) {
    common_chat_parser_params params;
    params.format            = format_from_name(opt_string(req, "format", common_chat_format_name(COMMON_CHAT_FORMAT_CONTENT_ONLY)));
    params.generation_prompt = opt_string(req, "generation_prompt", "");
    params.parser            = arena_from_request(req, "parser");
    const std::string text = req_string(req, "text");
    const ojson ends = require(req, "ends");
    using clock = std::chrono::steady_clock;
    ojson step_us = ojson::array();
    ojson step_cpu_us = ojson::array();
    size_t checksum = 0;
    for (const auto & e : ends) {
        const size_t end = std::min<size_t>(e.get<size_t>(), text.size());
        const double c0 = thread_cpu_us();
        const auto t0 = clock::now();
        const common_chat_msg msg = common_chat_parse(text.substr(0, end), true, params);
        step_us.push_back(std::chrono::duration<double, std::micro>(clock::now() - t0).count());
        step_cpu_us.push_back(thread_cpu_us() - c0);
        checksum += msg.content.size() + msg.reasoning_content.size() + msg.tool_calls.size();
    }
    ojson full_us = ojson::array();
    for (int64_t i = 0; i < opt_int(req, "full_iterations", 5); i++) {
        const auto t0 = clock::now();
        const common_chat_msg msg = common_chat_parse(text, false, params);
        full_us.push_back(std::chrono::duration<double, std::micro>(clock::now() - t0).count());
        checksum += msg.content.size();
    }
    return {{"step_us", step_us}, {"step_cpu_us", step_cpu_us}, {"full_us", full_us}, {"checksum", checksum}};
}

static ojson diffs_to_json(const std::vector<common_chat_msg_diff> & diffs) {
    ojson out = ojson::array();
    for (const auto & d : diffs) {
        out.push_back({
            {"reasoning_content_delta", d.reasoning_content_delta},
            {"content_delta", d.content_delta},
            {"tool_call_index", d.tool_call_index == std::string::npos ? ojson(nullptr) : ojson(d.tool_call_index)},
            {"tool_call_delta",
             {{"name", d.tool_call_delta.name}, {"arguments", d.tool_call_delta.arguments}, {"id", d.tool_call_delta.id}}},
        });
    }
    return out;
}

// A model output as the server streams it (server-task.cpp update_chat_msg): the text grows one
// UTF-8-safe prefix at a time, each prefix is parsed partially (the whole text finally not), tool
// calls get stable ids ("call_<n>" here, random upstream) and each step's diffs against the
// previous message are computed. One request instead of one per prefix keeps corpora cheap.
// Optional "ends": the byte offsets (ascending) where the text is parsed, as tokens would cut it;
// by default every UTF-8-safe offset from 0.
static ojson op_chat_parse_stream(const ojson & req) {
    common_chat_parser_params params;
    params.format               = format_from_name(opt_string(req, "format", common_chat_format_name(COMMON_CHAT_FORMAT_CONTENT_ONLY)));
    params.reasoning_format     = common_reasoning_format_from_name(opt_string(req, "reasoning_format", "none"));
    params.generation_prompt    = opt_string(req, "generation_prompt", "");
    params.parser               = arena_from_request(req, "parser");
    const std::string text = req_string(req, "text");

    common_chat_msg previous;
    std::vector<std::string> ids_cache;
    size_t next_id = 0;
    auto gen_id = [&next_id]() { return "call_" + std::to_string(next_id++); };

    std::vector<size_t> ends;
    if (req.contains("ends")) {
        for (const auto & e : require(req, "ends")) {
            if (!e.is_number_unsigned() || e.get<size_t>() > text.size() || (!ends.empty() && e.get<size_t>() < ends.back())) {
                throw bad_request("'ends' must be ascending byte offsets within 'text'");
            }
            ends.push_back(e.get<size_t>());
        }
        if (ends.empty() || ends.back() != text.size()) {
            ends.push_back(text.size());
        }
    } else {
        for (size_t end = 0; end <= text.size(); end++) {
            if (end == text.size() || (static_cast<unsigned char>(text[end]) & 0xC0) != 0x80) {
                ends.push_back(end);
            }
        }
    }

    ojson steps = ojson::array();
    for (size_t i = 0; i < ends.size(); i++) {
        const size_t end = ends[i];
        for (const bool is_partial : {true, false}) {
            if (!is_partial && i + 1 != ends.size()) {
                continue;  // the final parse once, at the whole text
            }
            ojson step = {{"end", end}, {"is_partial", is_partial}};
            common_chat_msg msg;
            try {
                msg = common_chat_parse(text.substr(0, end), is_partial, params);
            } catch (const std::exception & e) {
                step["error"] = e.what();
                steps.push_back(step);
                continue;
            }
            step["message"] = msg_to_json(msg);
            if (!msg.empty()) {
                // as the server: the new message replaces the previous one before the diffs,
                // which may throw ("Invalid diff: ...") while the parse itself succeeded
                msg.set_tool_call_ids(ids_cache, gen_id);
                const common_chat_msg prv = previous;
                previous = msg;
                try {
                    step["diffs"] = diffs_to_json(common_chat_msg_diff::compute_diffs(prv, msg));
                } catch (const std::exception & e) {
                    step["diffs_error"] = e.what();
                }
            }
            steps.push_back(step);
        }
    }
    return steps;
}

static ojson op_msg_diffs(const ojson & req) {
    const auto prv = msg_from_json(require(req, "previous"));
    const auto cur = msg_from_json(require(req, "new"));
    return diffs_to_json(common_chat_msg_diff::compute_diffs(prv, cur));
}

static ojson op_json_schema_to_grammar(const ojson & req) {
    return json_schema_to_grammar(to_common(require(req, "schema")), opt_bool(req, "force_gbnf", false));
}

static ojson op_peg_grammar(const ojson & req) {
    const common_peg_arena arena = arena_from_request(req, "parser");
    if (arena.empty()) {
        throw bad_request("field 'parser' must hold a non-empty arena");
    }
    const bool lazy = opt_bool(req, "lazy", false);
    return build_grammar([&](const common_grammar_builder & builder) { arena.build_grammar(builder, lazy); });
}

// --- PEG executor and builder, below the chat layer --------------------------------------------

static std::string text_from_request(const ojson & req) {
    auto hex = req.find("text_hex");
    if (hex == req.end()) {
        return req_string(req, "text");
    }
    if (!hex->is_string() || hex->get<std::string>().size() % 2 != 0) {
        throw bad_request("field 'text_hex' must be a string of hex digit pairs");
    }
    const std::string h = hex->get<std::string>();
    std::string out;
    for (size_t i = 0; i < h.size(); i += 2) {
        out.push_back(static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16)));
    }
    return out;
}

static ojson ast_to_json(const common_peg_ast_arena & ast, common_peg_ast_id id) {
    const auto & node = ast.get(id);
    ojson invalid = ojson::array();
    for (const auto & run : node.invalid_utf8) {
        invalid.push_back({run.pos, run.len});
    }
    ojson children = ojson::array();
    for (auto child : node.children) {
        children.push_back(ast_to_json(ast, child));
    }
    return {{"rule", node.rule}, {"tag", node.tag}, {"start", node.start}, {"end", node.end},
            {"is_partial", node.is_partial}, {"invalid_utf8", invalid}, {"children", children}};
}

static ojson peg_result_to_json(const common_peg_arena & arena, const std::string & text, common_peg_parse_flags flags,
                                size_t start) {
    common_peg_parse_context ctx(text, flags);
    const auto result = arena.parse(ctx, start);
    ojson nodes = ojson::array();
    for (auto id : result.nodes) {
        nodes.push_back(ast_to_json(ctx.ast, id));
    }
    ojson invalid = ojson::array();
    for (const auto & run : result.invalid_utf8) {
        invalid.push_back({run.pos, run.len});
    }
    return {{"type", common_peg_parse_result_type_name(result.type)}, {"start", result.start}, {"end", result.end},
            {"nodes", nodes}, {"invalid_utf8", invalid}};
}

// One raw parse: the result (type, start, end, invalid runs) and the AST reachable from it.
static ojson op_peg_parse(const ojson & req) {
    const common_peg_arena arena = arena_from_request(req, "parser");
    common_peg_parse_flags flags = opt_bool(req, "lenient", true) ? COMMON_PEG_PARSE_FLAG_LENIENT : COMMON_PEG_PARSE_FLAG_NONE;
    return peg_result_to_json(arena, text_from_request(req), flags, (size_t) opt_int(req, "start", 0));
}

// peg_parse on every UTF-8-safe prefix of the text that is at least 'from' bytes long, answered
// as the 64-bit FNV-1a digest (hex) of each result's compact JSON: cheap to carry for long streams.
static ojson op_peg_parse_stream(const ojson & req) {
    const common_peg_arena arena = arena_from_request(req, "parser");
    common_peg_parse_flags flags = opt_bool(req, "lenient", true) ? COMMON_PEG_PARSE_FLAG_LENIENT : COMMON_PEG_PARSE_FLAG_NONE;
    const std::string text = text_from_request(req);
    ojson out = ojson::array();
    for (size_t end = (size_t) opt_int(req, "from", 0); end <= text.size(); end++) {
        if (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) {
            continue;
        }
        const std::string dumped = peg_result_to_json(arena, text.substr(0, end), flags, 0).dump();
        uint64_t h = 14695981039346656037ULL;
        for (unsigned char c : dumped) {
            h = (h ^ c) * 1099511628211ULL;
        }
        char hex[17];
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long) h);
        out.push_back({{"end", end}, {"digest", hex}});
    }
    return out;
}

static std::vector<std::string> opt_strings(const ojson & req, const char * key) {
    std::vector<std::string> out;
    auto it = req.find(key);
    if (it != req.end() && !it->is_null()) {
        for (const auto & s : *it) {
            out.push_back(s.get<std::string>());
        }
    }
    return out;
}

static common_json opt_json(const ojson & req, const char * key) {
    auto it = req.find(key);
    return it == req.end() ? common_json() : to_common(*it);
}

// Upstream's builder helpers by name; the result becomes the root. Parser arguments are literals.
static common_peg_parser build_helper(common_chat_peg_builder & p, const ojson & req) {
    const std::string helper = req_string(req, "helper");
    auto literals = [&](const char * key) {
        std::vector<common_peg_parser> out;
        for (const auto & s : opt_strings(req, key)) {
            out.push_back(p.literal(s));
        }
        return out;
    };
    if (helper == "standard_json_tools") {
        return p.standard_json_tools(opt_string(req, "section_start", ""), opt_string(req, "section_end", ""),
                                     opt_json(req, "tools"), opt_bool(req, "parallel_tool_calls", false),
                                     opt_bool(req, "force_tool_calls", false), opt_string(req, "name_key", ""),
                                     opt_string(req, "args_key", ""), opt_bool(req, "array_wrapped", false),
                                     opt_bool(req, "function_is_key", false), opt_string(req, "call_id_key", ""),
                                     opt_string(req, "gen_call_id_key", ""), opt_strings(req, "parameters_order"),
                                     opt_bool(req, "accept_openai_wrapper", false));
    }
    if (helper == "standard_constructed_tools") {
        std::map<std::string, std::string> markers;
        auto it = req.find("markers");
        if (it != req.end() && it->is_object()) {
            for (const auto & [k, v] : it->items()) {
                markers[k] = v.get<std::string>();
            }
        }
        return p.standard_constructed_tools(markers, opt_json(req, "tools"), opt_bool(req, "parallel_tool_calls", false),
                                            opt_bool(req, "force_tool_calls", false));
    }
    if (helper == "python_style_tool_calls") {
        return p.python_style_tool_calls(opt_json(req, "tools"), opt_bool(req, "parallel_tool_calls", false),
                                         opt_bool(req, "allow_json_literals", false));
    }
    if (helper == "permute") {
        return p.permute(opt_string(req, "rule_prefix", "perm"), literals("literals"));
    }
    if (helper == "prefix") {
        return p.prefix(req_string(req, "s"), opt_string(req, "delimiter", ""));
    }
    if (helper == "optspace") {
        return p.optspace(req_string(req, "s"));
    }
    if (helper == "tag_with_safe_content") {
        return p.tag_with_safe_content(req_string(req, "tag_name"), opt_string(req, "marker", ""),
                                       p.literal(req_string(req, "literal")));
    }
    if (helper == "schema") {
        return p.schema(p.json(), req_string(req, "name"), opt_json(req, "schema"), opt_bool(req, "raw", false));
    }
    if (helper == "chars") {
        return p.chars(req_string(req, "classes"), (int) opt_int(req, "min", 1), (int) opt_int(req, "max", -1));
    }
    if (helper == "json") { return p.json(); }
    if (helper == "python_value") { return p.python_value(); }
    if (helper == "quoted_string") { return p.quoted_string(); }
    if (helper == "marker") { return p.marker(); }
    if (helper == "json_member") { return p.json_member(req_string(req, "key"), p.json()); }
    throw bad_request("unknown builder helper '" + helper + "'");
}

static ojson op_peg_build(const ojson & req) {
    common_chat_peg_builder builder;
    builder.set_root(build_helper(builder, req));
    const common_peg_arena arena = builder.build();
    ojson out = {{"parser", from_common(arena.to_json())}};
    for (const bool lazy : {false, true}) {
        try {
            out[lazy ? "grammar_lazy" : "grammar"] =
                build_grammar([&](const common_grammar_builder & b) { arena.build_grammar(b, lazy); });
        } catch (const std::exception & e) {
            out[lazy ? "grammar_lazy" : "grammar"] = {{"error", e.what()}};
        }
    }
    return out;
}

static ojson op_tokenize(const ojson & req) {
    llama_model * model = get_model(req_string(req, "model"));
    return tokenize(llama_model_get_vocab(model), req_string(req, "text"), opt_bool(req, "add_special", true),
                    opt_bool(req, "parse_special", false));
}

// upstream's regex_escape (common.cpp), which common_sampler_init applies to WORD grammar triggers
static ojson op_regex_escape(const ojson & req) {
    return regex_escape(req_string(req, "text"));
}

static ojson op_generate_greedy(const ojson & req) {
    llama_model * model = get_model(req_string(req, "model"));
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const int64_t n_predict = opt_int(req, "n_predict", 32);
    if (n_predict < 0) {
        throw bad_request("n_predict must be >= 0");
    }
    const auto prompt = tokenize(vocab, req_string(req, "prompt"), opt_bool(req, "add_special", true),
                                 opt_bool(req, "parse_special", true));
    if (prompt.empty()) {
        throw bad_request("the prompt tokenizes to nothing");
    }

    llama_context_params cparams = llama_context_default_params();
    cparams.n_ctx   = (uint32_t) opt_int(req, "n_ctx", 4096);
    cparams.n_batch = (uint32_t) opt_int(req, "n_batch", 2048);
    cparams.n_ubatch = (uint32_t) opt_int(req, "n_ubatch", 512);
    const int64_t n_threads = opt_int(req, "n_threads", 0);
    if (n_threads > 0) {
        cparams.n_threads       = (int32_t) n_threads;
        cparams.n_threads_batch = (int32_t) n_threads;
    }
    cparams.no_perf = true;

    std::unique_ptr<llama_context, decltype(&llama_free)> ctx(llama_init_from_model(model, cparams), llama_free);
    if (!ctx) {
        throw std::runtime_error("failed to create the context");
    }
    const uint32_t n_ctx   = llama_n_ctx(ctx.get());
    const uint32_t n_batch = llama_n_batch(ctx.get());
    if (prompt.size() > n_ctx) {
        throw std::runtime_error("the prompt does not fit the context");
    }

    llama_sampler_chain_params sparams = llama_sampler_chain_default_params();
    sparams.no_perf = true;
    std::unique_ptr<llama_sampler, decltype(&llama_sampler_free)> smpl(llama_sampler_chain_init(sparams), llama_sampler_free);
    llama_sampler_chain_add(smpl.get(), llama_sampler_init_greedy());

    std::vector<llama_token> prompt_buf = prompt;
    for (size_t start = 0; start < prompt_buf.size(); start += n_batch) {
        const int32_t count = (int32_t) std::min<size_t>(n_batch, prompt_buf.size() - start);
        if (llama_decode(ctx.get(), llama_batch_get_one(prompt_buf.data() + start, count)) != 0) {
            throw std::runtime_error("llama_decode failed on the prompt");
        }
    }

    std::vector<llama_token> out;
    std::string text;
    std::string stop = "length";
    size_t n_past = prompt.size();
    while ((int64_t) out.size() < n_predict) {
        llama_token token = llama_sampler_sample(smpl.get(), ctx.get(), -1);
        if (llama_vocab_is_eog(vocab, token)) {
            stop = "eog";
            break;
        }
        out.push_back(token);
        text += token_piece(vocab, token, true);
        if ((int64_t) out.size() >= n_predict) {
            break;
        }
        if (n_past >= n_ctx) {
            stop = "context";
            break;
        }
        if (llama_decode(ctx.get(), llama_batch_get_one(&token, 1)) != 0) {
            throw std::runtime_error("llama_decode failed while generating");
        }
        n_past++;
    }
    return {{"prompt_tokens", prompt}, {"tokens", out}, {"text", text}, {"stop", stop}};
}

// --- the differential autoparser's analysis (chat-diff-analyzer.cpp) ------------------------------

template <typename T>
static std::string enum_name(const T & value) {
    std::ostringstream os;
    os << value;  // upstream's own operator<< (chat-auto-parser.h)
    return os.str();
}

// The template exactly as chat_apply analyses it: through common_chat_templates_init (source
// patches included), the default template.
static common_chat_templates_ptr templates_from_request(const ojson & req) {
    return common_chat_templates_init(nullptr, req_string(req, "template"), opt_string(req, "bos_token", ""),
                                      opt_string(req, "eos_token", ""));
}

// upstream's struct autoparser in the shape of llamact's AutoparserAnalysis.to_json() (same keys, same order)
static ojson analysis_to_json(const autoparser::autoparser & a) {
    ojson caps = ojson::object();
    for (const auto & [key, value] : a.jinja_caps.to_map()) {
        caps[key] = value;
    }
    const auto & f = a.tools.format;
    const auto & fn = a.tools.function;
    const auto & args = a.tools.arguments;
    const auto & id = a.tools.call_id;
    return {
        {"jinja_caps", caps},
        {"user_start", a.user_start},
        {"assistant_start", a.assistant_start},
        {"reasoning", {{"mode", enum_name(a.reasoning.mode)}, {"start", a.reasoning.start}, {"end", a.reasoning.end}}},
        {"content", {{"mode", enum_name(a.content.mode)}, {"start", a.content.start}, {"end", a.content.end},
                     {"requires_nonnull_content", a.content.requires_nonnull_content}}},
        {"tools", {
            {"format", {{"mode", enum_name(f.mode)}, {"section_start", f.section_start}, {"section_end", f.section_end},
                        {"per_call_start", f.per_call_start}, {"per_call_end", f.per_call_end},
                        {"fun_name_is_key", f.fun_name_is_key}, {"tools_array_wrapped", f.tools_array_wrapped},
                        {"openai_wrapper_trigger", f.openai_wrapper_trigger}, {"function_field", f.function_field},
                        {"name_field", f.name_field}, {"args_field", f.args_field}, {"id_field", f.id_field},
                        {"gen_id_field", f.gen_id_field}, {"parameter_order", f.parameter_order}}},
            {"function", {{"name_prefix", fn.name_prefix}, {"name_suffix", fn.name_suffix},
                          {"args_separator", fn.args_separator}, {"close", fn.close}}},
            {"arguments", {{"start", args.start}, {"end", args.end}, {"name_prefix", args.name_prefix},
                           {"name_suffix", args.name_suffix}, {"value_prefix", args.value_prefix},
                           {"value_suffix", args.value_suffix}, {"separator", args.separator},
                           {"tolerate_intertag_whitespace", args.tolerate_intertag_whitespace}}},
            {"call_id", {{"pos", enum_name(id.pos)}, {"prefix", id.prefix}, {"suffix", id.suffix}}},
        }},
        {"analysis_complete", a.analysis_complete},
        {"preserved_tokens", a.preserved_tokens},
        {"additional_stops", a.additional_stops},
    };
}

// autoparser::analyze_template on the template; upstream's exceptions come back as error data.
static ojson op_analyze(const ojson & req) {
    const auto tmpls = templates_from_request(req);
    autoparser::autoparser analysis;
    analysis.analyze_template(*tmpls->template_default);
    return analysis_to_json(analysis);
}

// The inverse of analysis_to_json (a field left out keeps upstream's default).
template <typename E>
static E enum_from_name(const ojson & obj, const char * key, E def, std::initializer_list<E> values) {
    auto it = obj.find(key);
    if (it == obj.end()) {
        return def;
    }
    if (!it->is_string()) {
        throw bad_request(std::string("field '") + key + "' must be a string");
    }
    for (E value : values) {
        if (enum_name(value) == it->get<std::string>()) {
            return value;
        }
    }
    throw bad_request(std::string("field '") + key + "' has an unknown value: " + it->get<std::string>());
}

static const ojson & opt_object(const ojson & obj, const char * key) {
    static const ojson empty = ojson::object();
    auto it = obj.find(key);
    if (it == obj.end()) {
        return empty;
    }
    if (!it->is_object()) {
        throw bad_request(std::string("field '") + key + "' must be an object");
    }
    return *it;
}

static autoparser::autoparser analysis_from_json(const ojson & j) {
    using namespace autoparser;
    autoparser::autoparser a;
    const ojson & caps = opt_object(j, "jinja_caps");
    const std::pair<const char *, bool *> flags[] = {
        {"supports_tools", &a.jinja_caps.supports_tools},
        {"supports_tool_calls", &a.jinja_caps.supports_tool_calls},
        {"supports_system_role", &a.jinja_caps.supports_system_role},
        {"supports_parallel_tool_calls", &a.jinja_caps.supports_parallel_tool_calls},
        {"supports_preserve_reasoning", &a.jinja_caps.supports_preserve_reasoning},
        {"supports_reasoning_effort", &a.jinja_caps.supports_reasoning_effort},
        {"supports_string_content", &a.jinja_caps.supports_string_content},
        {"supports_typed_content", &a.jinja_caps.supports_typed_content},
        {"supports_object_arguments", &a.jinja_caps.supports_object_arguments},
    };
    for (const auto & [key, dst] : flags) {
        *dst = opt_bool(caps, key, *dst);
    }
    a.user_start      = opt_string(j, "user_start", "");
    a.assistant_start = opt_string(j, "assistant_start", "");
    const ojson & r = opt_object(j, "reasoning");
    a.reasoning.mode  = enum_from_name(r, "mode", reasoning_mode::NONE,
                                       {reasoning_mode::NONE, reasoning_mode::TAG_BASED, reasoning_mode::TOOLS_ONLY});
    a.reasoning.start = opt_string(r, "start", "");
    a.reasoning.end   = opt_string(r, "end", "");
    const ojson & c = opt_object(j, "content");
    a.content.mode  = enum_from_name(c, "mode", content_mode::PLAIN,
                                     {content_mode::PLAIN, content_mode::ALWAYS_WRAPPED, content_mode::WRAPPED_WITH_REASONING});
    a.content.start = opt_string(c, "start", "");
    a.content.end   = opt_string(c, "end", "");
    a.content.requires_nonnull_content = opt_bool(c, "requires_nonnull_content", false);
    const ojson & t = opt_object(j, "tools");
    const ojson & f = opt_object(t, "format");
    auto & fmt = a.tools.format;
    fmt.mode = enum_from_name(f, "mode", tool_format::NONE, {tool_format::NONE, tool_format::JSON_NATIVE,
                                                              tool_format::TAG_WITH_JSON, tool_format::TAG_WITH_TAGGED});
    fmt.section_start          = opt_string(f, "section_start", "");
    fmt.section_end            = opt_string(f, "section_end", "");
    fmt.per_call_start         = opt_string(f, "per_call_start", "");
    fmt.per_call_end           = opt_string(f, "per_call_end", "");
    fmt.fun_name_is_key        = opt_bool(f, "fun_name_is_key", false);
    fmt.tools_array_wrapped    = opt_bool(f, "tools_array_wrapped", false);
    fmt.openai_wrapper_trigger = opt_bool(f, "openai_wrapper_trigger", false);
    fmt.function_field         = opt_string(f, "function_field", fmt.function_field);
    fmt.name_field             = opt_string(f, "name_field", fmt.name_field);
    fmt.args_field             = opt_string(f, "args_field", fmt.args_field);
    fmt.id_field               = opt_string(f, "id_field", "");
    fmt.gen_id_field           = opt_string(f, "gen_id_field", "");
    fmt.parameter_order        = opt_strings(f, "parameter_order");
    const ojson & fn = opt_object(t, "function");
    a.tools.function.name_prefix    = opt_string(fn, "name_prefix", "");
    a.tools.function.name_suffix    = opt_string(fn, "name_suffix", "");
    a.tools.function.args_separator = opt_string(fn, "args_separator", "");
    a.tools.function.close          = opt_string(fn, "close", "");
    const ojson & args = opt_object(t, "arguments");
    auto & arg = a.tools.arguments;
    arg.start        = opt_string(args, "start", "");
    arg.end          = opt_string(args, "end", "");
    arg.name_prefix  = opt_string(args, "name_prefix", "");
    arg.name_suffix  = opt_string(args, "name_suffix", "");
    arg.value_prefix = opt_string(args, "value_prefix", "");
    arg.value_suffix = opt_string(args, "value_suffix", "");
    arg.separator    = opt_string(args, "separator", "");
    arg.tolerate_intertag_whitespace = opt_bool(args, "tolerate_intertag_whitespace", false);
    const ojson & id = opt_object(t, "call_id");
    a.tools.call_id.pos    = enum_from_name(id, "pos", call_id_position::NONE,
                                            {call_id_position::NONE, call_id_position::PRE_FUNC_NAME,
                                             call_id_position::BETWEEN_FUNC_AND_ARGS, call_id_position::POST_ARGS});
    a.tools.call_id.prefix = opt_string(id, "prefix", "");
    a.tools.call_id.suffix = opt_string(id, "suffix", "");
    a.analysis_complete = opt_bool(j, "analysis_complete", false);
    a.preserved_tokens  = opt_strings(j, "preserved_tokens");
    a.additional_stops  = opt_strings(j, "additional_stops");
    return a;
}

// peg_generator::generate_parser on the template with a given analysis (any shape, not only what a
// template's analysis finds) and generation_params as the apply pipeline hands them over
// (messages/tools as OpenAI JSON, continuation already resolved); the result as chat_apply's.
static ojson op_autoparser_generate(const ojson & req) {
    const auto tmpls = templates_from_request(req);
    const auto analysis = analysis_from_json(require(req, "analysis"));
    const ojson & in = require(req, "params");
    autoparser::generation_params params;
    params.messages = to_common(require(in, "messages"));
    auto tools = in.find("tools");
    if (tools != in.end() && !tools->is_null()) {
        params.tools = to_common(*tools);
    }
    params.tool_choice = common_chat_tool_choice_parse_oaicompat(opt_string(in, "tool_choice", "auto"));
    auto schema = in.find("json_schema");
    if (schema != in.end() && !schema->is_null()) {
        params.json_schema = to_common(*schema);
    }
    params.parallel_tool_calls   = opt_bool(in, "parallel_tool_calls", false);
    params.reasoning_format      = common_reasoning_format_from_name(opt_string(in, "reasoning_format", "none"));
    params.enable_thinking       = opt_bool(in, "enable_thinking", true);
    params.add_generation_prompt = opt_bool(in, "add_generation_prompt", true);
    auto cont = in.find("continue_final_message");
    if (cont != in.end() && !cont->is_null()) {
        params.continue_final_message = common_chat_continuation_parse(to_common(*cont));
        params.continue_msg           = msg_from_json(require(in, "continue_msg"));
    }
    params.extra_context = to_common(opt_object(in, "extra_context"));
    return params_to_json(autoparser::peg_generator::generate_parser(*tmpls->template_default, params, analysis));
}

// For benchmarks: the analysis `iterations` times on one compiled template, each timed in-process.
static ojson op_analyze_timing(const ojson & req) {
    const auto tmpls = templates_from_request(req);
    const int64_t iterations = opt_int(req, "iterations", 5);
    if (iterations < 1 || iterations > 10000) {
        throw bad_request("need 1 <= 'iterations' <= 10000");
    }
    using clock = std::chrono::steady_clock;
    ojson us = ojson::array();
    for (int64_t i = 0; i < iterations; i++) {
        const auto t0 = clock::now();
        autoparser::autoparser analysis;
        analysis.analyze_template(*tmpls->template_default);
        us.push_back(std::chrono::duration<double, std::micro>(clock::now() - t0).count());
    }
    return {{"analysis_us", us}};
}

static ojson diff_split_to_json(const diff_split & d) {
    return {{"prefix", d.prefix}, {"suffix", d.suffix}, {"left", d.left}, {"right", d.right}};
}

static ojson segments_to_json(const std::vector<segment> & segs) {
    ojson out = ojson::array();
    for (const auto & seg : segs) {
        out.push_back({{"type", enum_name(seg.type)}, {"value", seg.value}});
    }
    return out;
}

// The analysis' pure string helpers (chat-auto-parser-helpers.h), by name.
static ojson op_autoparser_helper(const ojson & req) {
    const std::string helper = req_string(req, "helper");
    if (helper == "calculate_diff_split") {
        return diff_split_to_json(calculate_diff_split(req_string(req, "left"), req_string(req, "right")));
    }
    if (helper == "until_common_prefix") {
        return until_common_prefix(req_string(req, "full"), req_string(req, "left"), req_string(req, "right"));
    }
    if (helper == "after_common_suffix") {
        return after_common_suffix(req_string(req, "full"), req_string(req, "left"), req_string(req, "right"));
    }
    if (helper == "segmentize_markers") {
        return segments_to_json(segmentize_markers(req_string(req, "text")));
    }
    if (helper == "prune_whitespace_segments") {
        return segments_to_json(prune_whitespace_segments(segmentize_markers(req_string(req, "text"))));
    }
    if (helper == "trim_whitespace") { return trim_whitespace(req_string(req, "text")); }
    if (helper == "trim_leading_whitespace") { return trim_leading_whitespace(req_string(req, "text")); }
    if (helper == "trim_trailing_whitespace") { return trim_trailing_whitespace(req_string(req, "text")); }
    if (helper == "trim_trailing_newlines") { return trim_trailing_newlines(req_string(req, "text")); }
    if (helper == "compare_variants") {
        // template_params A and B as JSON: {messages, tools, add_generation_prompt, enable_thinking, extra_context}
        const auto tmpls = templates_from_request(req);
        auto params_from = [](const ojson & j) {
            template_params p;
            p.messages = to_common(require(j, "messages"));
            auto tools = j.find("tools");
            if (tools != j.end()) {
                p.tools = to_common(*tools);
            }
            p.add_generation_prompt = opt_bool(j, "add_generation_prompt", false);
            p.enable_thinking       = opt_bool(j, "enable_thinking", true);
            auto extra = j.find("extra_context");
            if (extra != j.end() && !extra->is_null()) {
                p.extra_context = to_common(*extra);
            }
            return p;
        };
        const template_params a = params_from(require(req, "a"));
        const template_params b = params_from(require(req, "b"));
        const auto result = autoparser::compare_variants(*tmpls->template_default, a,
                                                         [&](template_params & p) { p = b; });
        if (!result) {
            return nullptr;
        }
        return {{"diff", diff_split_to_json(result->diff)}, {"output_A", result->output_A},
                {"output_B", result->output_B}};
    }
    throw bad_request("unknown autoparser helper '" + helper + "'");
}

// --- small facts about upstream's building blocks ------------------------------------------------

// The default capabilities (a default-constructed jinja::caps, before any probing).
static ojson op_caps_defaults(const ojson &) {
    ojson out = ojson::object();
    for (const auto & [key, value] : jinja::caps{}.to_map()) {
        out[key] = value;
    }
    return out;
}

// common_json's dump() of doubles given as IEEE-754 bit patterns ("bits": 16 hex digits each, so
// that -0.0, subnormals and every last bit travel exactly); one answer string per double, in order.
static ojson op_json_dump_doubles(const ojson & req) {
    const ojson & bits = require(req, "bits");
    if (!bits.is_array()) {
        throw bad_request("field 'bits' must be an array of 16-digit hex strings");
    }
    ojson out = ojson::array();
    for (const auto & b : bits) {
        if (!b.is_string() || b.get<std::string>().size() != 16) {
            throw bad_request("field 'bits' must be an array of 16-digit hex strings");
        }
        const uint64_t u = std::stoull(b.get<std::string>(), nullptr, 16);
        double d;
        static_assert(sizeof d == sizeof u, "double is 64 bits");
        std::memcpy(&d, &u, sizeof d);
        out.push_back(common_json(d).dump());
    }
    return out;
}

// llama.cpp's GBNF parser (llama_grammar_parser::parse, as llama_grammar_init_impl runs it first)
// on each of "grammars": {parsed, root (the start symbol exists), error (what it printed)}. With
// "model" (a GGUF path) the parser gets that model's vocabulary (loaded without weights) for token
// references. The left-recursion check and stack building of llama_grammar_init_impl are not run:
// some grammars make them loop for ever. Beware: "{m,n}" with m > n makes the parser itself loop.
static ojson op_gbnf_parse(const ojson & req) {
    const ojson & grammars = require(req, "grammars");
    if (!grammars.is_array()) {
        throw bad_request("field 'grammars' must be an array of strings");
    }
    const std::string root = opt_string(req, "root", "root");
    const std::string model_path = opt_string(req, "model", "");
    const llama_vocab * vocab = model_path.empty() ? nullptr : get_vocab(model_path);
    ojson out = ojson::array();
    for (const auto & g : grammars) {
        if (!g.is_string()) {
            throw bad_request("field 'grammars' must be an array of strings");
        }
        // the parser reports its error on stderr only: catch it there
        fflush(stderr);
        FILE * capture = tmpfile();
        const int saved = dup(STDERR_FILENO);
        if (capture) {
            dup2(fileno(capture), STDERR_FILENO);
        }
        llama_grammar_parser parser(vocab);
        const bool parsed = parser.parse(g.get<std::string>().c_str());
        fflush(stderr);
        std::string printed;
        if (capture) {
            dup2(saved, STDERR_FILENO);
            rewind(capture);
            char buf[4096];
            size_t n;
            while ((n = fread(buf, 1, sizeof buf, capture)) > 0 && printed.size() < 65536) {
                printed.append(buf, n);
            }
            fclose(capture);
        }
        close(saved);
        std::string error;
        const std::string head = "error parsing grammar: ";
        const size_t at = printed.find(head);
        if (at != std::string::npos) {
            const size_t from = at + head.size();
            error = printed.substr(from, printed.find('\n', from) - from);
        }
        const bool has_root = parsed && parser.symbol_ids.count(root) > 0;
        out.push_back({{"parsed", parsed && !parser.rules.empty()}, {"root", has_root}, {"error", error}});
    }
    return out;
}

using op_fn = ojson (*)(const ojson &);

static ojson op_batch(const ojson & req);

static const std::map<std::string, op_fn> & operations() {
    static const std::map<std::string, op_fn> ops = {
        {"version", op_version},
        {"jinja_render", op_jinja_render},
        {"jinja_render_timing", op_jinja_render_timing},
        {"caps", op_caps},
        {"caps_defaults", op_caps_defaults},
        {"chat_apply", op_chat_apply},
        {"chat_apply_timing", op_chat_apply_timing},
        {"chat_parse", op_chat_parse},
        {"chat_parse_stream", op_chat_parse_stream},
        {"chat_parse_timing", op_chat_parse_timing},
        {"msg_diffs", op_msg_diffs},
        {"json_schema_to_grammar", op_json_schema_to_grammar},
        {"json_dump_doubles", op_json_dump_doubles},
        {"gbnf_parse", op_gbnf_parse},
        {"peg_grammar", op_peg_grammar},
        {"peg_parse", op_peg_parse},
        {"peg_parse_stream", op_peg_parse_stream},
        {"peg_build", op_peg_build},
        {"analyze", op_analyze},
        {"analyze_timing", op_analyze_timing},
        {"autoparser_generate", op_autoparser_generate},
        {"autoparser_helper", op_autoparser_helper},
        {"tokenize", op_tokenize},
        {"generate_greedy", op_generate_greedy},
        {"regex_escape", op_regex_escape},
        {"batch", op_batch},
    };
    return ops;
}

// ------------------------------------------------------------------------------------------------
// main loop
// ------------------------------------------------------------------------------------------------

static ojson error_answer(const ojson & id, const std::string & kind, const std::string & message) {
    return {{"id", id}, {"ok", false}, {"error", {{"kind", kind}, {"message", message}}}};
}

// One request object (its own "now" applies to it alone): the answer, never an exception.
static ojson dispatch(const ojson & req, const ojson & id) {
    try {
        if (!req.is_object()) {
            throw bad_request("a request must be a JSON object");
        }
        const std::string op = req_string(req, "op");
        auto it = operations().find(op);
        if (it == operations().end()) {
            return error_answer(id, "unknown_op", "unknown op '" + op + "'");
        }
        g_oracle_now = opt_int(req, "now", ORACLE_DEFAULT_NOW);
        ojson result = it->second(req);
        g_oracle_now = ORACLE_DEFAULT_NOW;
        return {{"id", id}, {"ok", true}, {"result", std::move(result)}};
    } catch (const bad_request & e) {
        g_oracle_now = ORACLE_DEFAULT_NOW;
        return error_answer(id, "bad_request", e.what());
    } catch (const common_json_error & e) {
        g_oracle_now = ORACLE_DEFAULT_NOW;
        return error_answer(id, "json_error", e.what());
    } catch (const std::invalid_argument & e) {
        g_oracle_now = ORACLE_DEFAULT_NOW;
        return error_answer(id, "invalid_argument", e.what());
    } catch (const std::runtime_error & e) {
        g_oracle_now = ORACLE_DEFAULT_NOW;
        return error_answer(id, "runtime_error", e.what());
    } catch (const std::exception & e) {
        g_oracle_now = ORACLE_DEFAULT_NOW;
        return error_answer(id, "exception", e.what());
    } catch (...) {
        g_oracle_now = ORACLE_DEFAULT_NOW;
        return error_answer(id, "unknown", "unknown exception");
    }
}

static ojson handle(const std::string & line) {
    ojson req;
    try {
        req = ojson::parse(line);
    } catch (const std::exception & e) {
        return error_answer(nullptr, "json_parse", e.what());
    }
    ojson id = req.is_object() && req.contains("id") ? req.at("id") : ojson(nullptr);
    return dispatch(req, id);
}

// Many requests in one line, for throughput (the fuzzer): each answered as if sent alone, without
// "id"; an answer holding invalid UTF-8 gets U+FFFD replacements and "lossy_utf8": true.
static ojson op_batch(const ojson & req) {
    const ojson & requests = require(req, "requests");
    if (!requests.is_array()) {
        throw bad_request("field 'requests' must be an array of request objects");
    }
    ojson out = ojson::array();
    for (const auto & sub : requests) {
        ojson answer = dispatch(sub, nullptr);
        answer.erase("id");
        try {
            (void) answer.dump();
        } catch (const ojson::type_error &) {
            answer = ojson::parse(answer.dump(-1, ' ', false, ojson::error_handler_t::replace));
            answer["lossy_utf8"] = true;
        }
        out.push_back(std::move(answer));
    }
    return out;
}

// Strict UTF-8 first; an answer holding invalid UTF-8 (e.g. a template slicing a string by bytes)
// is sent with U+FFFD replacements and "lossy_utf8": true rather than lost.
static std::string dump_answer(ojson & answer) {
    try {
        return answer.dump();
    } catch (const ojson::type_error &) {
        answer["lossy_utf8"] = true;
        return answer.dump(-1, ' ', false, ojson::error_handler_t::replace);
    }
}

static void quiet_log(enum ggml_log_level level, const char * text, void * /*user*/) {
    if (level == GGML_LOG_LEVEL_ERROR || level == GGML_LOG_LEVEL_WARN) {
        fputs(text, stderr);
    }
}

int main(int argc, char ** argv) {
    // Answers go to the original stdout; anything else the libraries print goes to stderr.
    const int answer_fd = dup(STDOUT_FILENO);
    if (answer_fd < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
        perror("llamact-oracle: dup");
        return 1;
    }
    FILE * answers = fdopen(answer_fd, "w");
    if (!answers) {
        perror("llamact-oracle: fdopen");
        return 1;
    }

    setenv("TZ", "UTC", 1);
    tzset();

    if (argc > 1 && std::string(argv[1]) == "--version") {
        fprintf(answers, "%s\n", op_version(ojson::object()).dump().c_str());
        return 0;
    }

    if (!getenv("LLAMACT_ORACLE_VERBOSE")) {
        llama_log_set(quiet_log, nullptr);
        common_log_set_verbosity_thold(-1);
    }
    llama_backend_init();

    std::ios::sync_with_stdio(false);
    std::string line;
    while (std::getline(std::cin, line)) {
        if (line.empty() || line.find_first_not_of(" \t\r") == std::string::npos) {
            continue;
        }
        ojson answer = handle(line);
        const std::string text = dump_answer(answer);
        fwrite(text.data(), 1, text.size(), answers);
        fputc('\n', answers);
        fflush(answers);
    }

    for (auto & [path, entry] : g_models) {
        llama_model_free(entry.model);
    }
    for (auto & [path, model] : g_vocab_models) {
        llama_model_free(model);
    }
    llama_backend_free();
    return 0;
}
