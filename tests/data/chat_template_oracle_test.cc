// kiln's chat templates against transformers: every conversation is rendered
// by kiln and by tokenizer.apply_chat_template(messages, tokenize=False, ...)
// (and every template snippet by transformers' jinja2 environment), and the
// strings must be equal. Objects keep their keys' order on both sides (tojson
// prints them so). One Python run computes all references.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "kiln/base/error.h"
#include "kiln/data/chat_template.h"
#include "kiln/data/jinja.h"
#include "tests/support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;
using kiln::data::ChatTemplate;
using kiln::data::JinjaTemplate;

fs::path tokenizers() { return fs::path(KILN_SOURCE_DIR) / ".." / "shared" / "assets" / "tokenizers"; }

// Renders each case of cases.json as transformers does; writes, for each,
// {"text": ...} or {"error": ...} to the output file.
constexpr const char* kOracle = R"(
import json, sys
from transformers import AutoTokenizer
from transformers.utils.chat_template_utils import _compile_jinja_template

cases = json.load(open(sys.argv[1], encoding="utf-8"))
loaded = {}
results = []
for case in cases:
    try:
        if case["kind"] == "chat":
            folder = case["tokenizer"]
            if folder not in loaded:
                loaded[folder] = AutoTokenizer.from_pretrained(folder)
            text = loaded[folder].apply_chat_template(
                case["messages"], tokenize=False, add_generation_prompt=case["add_generation_prompt"],
                chat_template=case.get("template"), **case["extra"])
        else:
            text = _compile_jinja_template(case["template"]).render(**case["context"])
        results.append({"text": text})
    except Exception as e:
        results.append({"error": f"{type(e).__name__}: {e}"})
json.dump(results, open(sys.argv[2], "w", encoding="utf-8"), ensure_ascii=False)
)";

json message(const char* role, const char* content) { return {{"role", role}, {"content", content}}; }

// Conversations of both chat templates: with and without a system prompt,
// one and several turns, unicode, padding, text that looks like a template.
std::vector<json> conversations() {
  return {
      {message("user", "Hello!")},
      {message("system", "You are a helpful assistant."), message("user", "What is 2+2?")},
      {message("system", "Be brief."), message("user", "Hi"), message("assistant", "Hello! How can I help?"),
       message("user", "Tell me a joke.")},
      {message("user", "Capital of France?"), message("assistant", "Paris.")},
      {message("user", "Grüße aus Zürich 👋 — 日本語もOK"), message("assistant", "Ça va très bien ✓")},
      {message("user", "  padded with spaces and newlines\n\n"), message("assistant", "\n  answer  \n")},
      {message("user", "{{ not a tag }} {% raw %} {# nor a comment #}"), message("assistant", "")},
  };
}

// Qwen3 conversations with reasoning: inline <think> blocks (dropped from
// turns before the last user message), a reasoning_content field and its
// "reasoning" alias, and a tool call with its response.
std::vector<json> qwen3_conversations() {
  json tool_call = {{"type", "function"},
                    {"function", {{"name", "get_weather"}, {"arguments", {{"city", "Paris"}, {"unit", "celsius"}}}}}};
  return {
      {message("user", "What is 2+2?"), message("assistant", "<think>\nSimple sum.\n</think>\n\nIt is 4.")},
      {message("user", "What is 2+2?"), message("assistant", "<think>\nSimple sum.\n</think>\n\nIt is 4."),
       message("user", "And 3+3?"), message("assistant", "<think>\nAnother sum.\n</think>\n\n6.")},
      {message("user", "Why?"), {{"role", "assistant"}, {"content", "Because."}, {"reasoning_content", "Think first."}}},
      {message("user", "Why?"), {{"role", "assistant"}, {"content", "Because."}, {"reasoning", "Aliased reasoning."}}},
      {message("system", "You can call tools."), message("user", "Weather in Paris?"),
       {{"role", "assistant"}, {"content", ""}, {"tool_calls", {tool_call}}},
       message("tool", "{\"temperature\": 21}"), message("assistant", "It is 21 °C in Paris.")},
  };
}

json chat_case(const std::string& group, const std::string& family, const json& messages, bool add_generation_prompt,
               const json& extra = json::object()) {
  return {{"group", group},
          {"kind", "chat"},
          {"tokenizer", (tokenizers() / family).string()},
          {"messages", messages},
          {"add_generation_prompt", add_generation_prompt},
          {"extra", extra}};
}

json template_case(const std::string& family, const std::string& source, const json& messages,
                   bool add_generation_prompt, const json& extra = json::object()) {
  json c = chat_case("other templates", family, messages, add_generation_prompt, extra);
  c["template"] = source;
  return c;
}

json jinja_case(const std::string& source, const json& context = json::object()) {
  return {{"group", "jinja"}, {"kind", "jinja"}, {"template", source}, {"context", context}};
}

// Chat templates in the styles of other Hugging Face models, written for
// this test: Mistral's (system folded into the first user turn, roles
// checked with raise_exception), Gemma's (roles renamed, trim), Llama 3.1's
// (tools as indented JSON in the first user message) and a ChatML one.
const char* kMistralStyle = R"({%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}

{{- bos_token }}
{%- for message in loop_messages %}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{- raise_exception('After the optional system message, conversation roles must alternate user/assistant/user/assistant/...') }}
    {%- endif %}
    {%- if message['role'] == 'user' %}
        {%- if loop.first and system_message is defined %}
            {{- ' [INST] ' + system_message + '\n\n' + message['content'] + ' [/INST]' }}
        {%- else %}
            {{- ' [INST] ' + message['content'] + ' [/INST]' }}
        {%- endif %}
    {%- elif message['role'] == 'assistant' %}
        {{- ' ' + message['content'] + eos_token}}
    {%- endif %}
{%- endfor %}
)";

const char* kGemmaStyle =
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
    "{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}"
    "{% endif %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}";

const char* kLlama31Style = R"({{- bos_token }}
{%- if not date_string is defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}
{{- "<|start_header_id|>system<|end_header_id|>\n\n" }}
{{- "Today Date: " + date_string + "\n\n" }}
{{- system_message }}
{{- "<|eot_id|>" }}
{%- if tools is not none %}
    {%- set first_user_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
    {{- '<|start_header_id|>user<|end_header_id|>\n\n' -}}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
    {{- first_user_message + "<|eot_id|>"}}
{%- endif %}
{%- for message in messages %}
    {%- if not (message.role == 'tool' or 'tool_calls' in message) %}
        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' }}
    {%- elif 'tool_calls' in message %}
        {%- set tool_call = message.tool_calls[0].function %}
        {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
        {{- '{"name": "' + tool_call.name + '", "parameters": ' + tool_call.arguments | tojson + "}<|eot_id|>" }}
    {%- else %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\n\n" }}
        {{- message.content | tojson if message.content is mapping else message.content }}
        {{- "<|eot_id|>" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}
)";

// ChatML with a macro, namespace bookkeeping and selectattr.
const char* kChatMlStyle = R"({% macro turn(role, text) -%}
<|im_start|>{{ role }}
{{ text }}<|im_end|>
{% endmacro -%}
{% set ns = namespace(users=0) -%}
{% set system = messages | selectattr('role', 'equalto', 'system') | list -%}
{% if not system %}{{ turn('system', 'You are a helpful assistant.') }}{% endif -%}
{% for message in messages -%}
  {% if message.role == 'user' %}{% set ns.users = ns.users + 1 %}{% endif -%}
  {{ turn(message.role, message.content.strip()) }}
{%- endfor -%}
{% if add_generation_prompt %}<|im_start|>assistant
{% endif -%}
{# users: {{ ns.users }} #})";

std::vector<json> all_cases() {
  std::vector<json> cases;
  for (const char* family : {"llama3", "qwen3"})
    for (const json& conversation : conversations())
      for (bool prompt : {false, true}) cases.push_back(chat_case(family, family, conversation, prompt));
  for (const json& conversation : qwen3_conversations())
    for (bool prompt : {false, true}) cases.push_back(chat_case("qwen3", "qwen3", conversation, prompt));
  for (bool thinking : {false, true})
    for (const json& conversation : {conversations()[1], qwen3_conversations()[1]})
      cases.push_back(chat_case("qwen3", "qwen3", conversation, true, {{"enable_thinking", thinking}}));
  json tools = json::array({{{"type", "function"},
                             {"function",
                              {{"name", "get_weather"},
                               {"description", "Current weather in a city."},
                               {"parameters",
                                {{"type", "object"},
                                 {"properties", {{"city", {{"type", "string"}, {"description", "Città, e.g. Zürich"}}}}},
                                 {"required", {"city"}}}}}}}});
  cases.push_back(chat_case("qwen3", "qwen3", qwen3_conversations()[4], true, {{"tools", tools}}));

  json alternating = {message("system", "Be terse."), message("user", "Hi"), message("assistant", "Hello."),
                      message("user", "Bye")};
  json two_users = {message("user", "Hi"), message("user", "Hi again")};
  for (const char* source : {kMistralStyle, kChatMlStyle})
    for (const json& conversation : {alternating, conversations()[4], two_users})
      cases.push_back(template_case("llama3", source, conversation, false));
  for (const json& conversation : {alternating, conversations()[3], conversations()[5]})
    for (bool prompt : {false, true}) cases.push_back(template_case("llama3", kGemmaStyle, conversation, prompt));
  cases.push_back(template_case("llama3", kLlama31Style, alternating, true));
  cases.push_back(template_case("llama3", kLlama31Style, qwen3_conversations()[4], true,
                                {{"tools", tools}, {"date_string", "1 Jan 2025"}}));

  json ctx = {{"messages", alternating}, {"n", 7}, {"x", 2.5}, {"s", " Mixed Case\tText\n"}, {"d", {{"b", 1}, {"a", 2}}}};
  for (const char* source : {
           "{% for m in messages %}\n  {{- m.role }}:{{ m.content }}\n  {% if not loop.last %}|{% endif %}\n{% endfor %}",
           "  {% if n > 5 %}\n    big\n  {% else %}\n    small\n  {% endif %}\n  tail",
           "{{ n / 2 }} {{ n // 2 }} {{ n % 4 }} {{ -n // 2 }} {{ x * 2 }} {{ x ** 2 }} {{ n * x }} {{ 1e-7 }} {{ 3.0e20 }}",
           "{{ s|trim }}|{{ s.strip() }}|{{ s|upper }}|{{ s|lower }}|{{ s|title }}|{{ s.title() }}|{{ s.split() }}",
           "{{ d|tojson }} {{ d|tojson(indent=1) }} {{ messages|tojson }} {{ d|length }} {{ d.a }}",
           "{{ messages[1:]|map(attribute='role')|join(',') }} {{ messages[::-1][0].content }} {{ messages|last|tojson }}",
           "{% set ns = namespace(found=false) %}{% for m in messages %}{% if m.role == 'assistant' %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.found }}",
           "{{ 'é' < 'z' }} {{ 'abc'[1:] ~ 'xyz'[:-1] }} {{ [1, 2, 3] | select('odd') | list }} {{ 'a-b c(d' | title }}",
           "{{ missing is defined }} {{ missing | default('fallback') }} {{ messages[9] is defined }} [{{ messages[9] }}]",
           "{%- for m in messages if m.role != 'system' -%}\n{{ loop.index }}/{{ loop.length }} {{ m.content }}\n{% endfor -%}",
           "{{ raise_exception('stop: ' ~ n) }}",
           "{{ missing.attribute }}",
           "{{ messages[0].nothing.deeper }}",
       })
    cases.push_back(jinja_case(source, ctx));
  return cases;
}

// kiln's rendering of one case, as the oracle script reads it.
std::string kiln_render(const json& c) {
  if (c["kind"] == "jinja") return JinjaTemplate(c["template"].get<std::string>()).render(c["context"]);
  fs::path config = fs::path(c["tokenizer"].get<std::string>()) / "tokenizer_config.json";
  if (!c.contains("template"))
    return ChatTemplate::from_tokenizer_config(config).render(c["messages"], c["add_generation_prompt"], c["extra"]);
  std::ifstream in(config);
  json tokens = json::parse(in);
  auto token = [&](const char* key) { return tokens.value(key, json()).is_string() ? tokens[key].get<std::string>() : ""; };
  return ChatTemplate(c["template"], token("bos_token"), token("eos_token"))
      .render(c["messages"], c["add_generation_prompt"], c["extra"]);
}

// The references, computed once for all tests.
struct Oracle {
  std::vector<json> cases;
  json results;
  std::string failure;  // why there are no results
};

const Oracle& oracle() {
  static const Oracle o = [] {
    Oracle r;
    r.cases = all_cases();
    kiln::test::TempDir dir;
    std::string script = dir.write("oracle.py", kOracle);
    std::string input = dir.write("cases.json", json(r.cases).dump());
    std::string output = dir / "results.json", log = dir / "python.log";
    std::string cmd = std::string("\"") + KILN_PYTHON + "\" " + script + " " + input + " " + output + " > " + log + " 2>&1";
    if (std::system(cmd.c_str()) != 0) {
      std::ifstream l(log);
      std::stringstream text;
      text << l.rdbuf();
      r.failure = "`" + cmd + "` failed:\n" + text.str();
      return r;
    }
    std::ifstream in(output);
    r.results = json::parse(in);
    return r;
  }();
  return o;
}

// Every case of `group` renders in kiln exactly as in Python (or fails in both).
void expect_group_matches(const std::string& group) {
  if (!fs::is_directory(tokenizers())) GTEST_SKIP() << "no " << tokenizers() << " here";
  const Oracle& o = oracle();
  ASSERT_TRUE(o.failure.empty()) << o.failure;
  ASSERT_EQ(o.results.size(), o.cases.size());
  int checked = 0;
  for (size_t i = 0; i < o.cases.size(); ++i) {
    const json& c = o.cases[i];
    if (c["group"] != group) continue;
    ++checked;
    const json& want = o.results[i];
    std::string got, error;
    try {
      got = kiln_render(c);
    } catch (const kiln::Error& e) {
      error = e.what();
    }
    std::string what = c["kind"] == "jinja" ? c["template"].dump() : c["messages"].dump() + " " + c["extra"].dump();
    if (want.contains("error")) {
      EXPECT_FALSE(error.empty()) << "case " << i << ": Python failed (" << want["error"] << ") but kiln rendered "
                                  << json(got).dump() << "\n  " << what;
    } else {
      EXPECT_EQ(error, "") << "case " << i << ": " << what;
      EXPECT_EQ(got, want["text"].get<std::string>()) << "case " << i << ": " << what;
    }
  }
  EXPECT_GT(checked, 0) << group;
}

TEST(ChatTemplateOracle, Llama3MatchesTransformers) { expect_group_matches("llama3"); }
TEST(ChatTemplateOracle, Qwen3MatchesTransformers) { expect_group_matches("qwen3"); }
TEST(ChatTemplateOracle, OtherTemplateStylesMatchTransformers) { expect_group_matches("other templates"); }
TEST(ChatTemplateOracle, TemplateSnippetsMatchJinja2) { expect_group_matches("jinja"); }

}  // namespace
