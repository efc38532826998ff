// The Jinja engine of chat templates, construct by construct, and the
// ChatTemplate around it (reading tokenizer configs, checking messages).
// Every expected string is what jinja2 renders with transformers' settings
// (trim_blocks, lstrip_blocks, its tojson and raise_exception);
// chat_template_oracle_test.cc checks more against transformers live.
#include "kiln/data/jinja.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "kiln/base/error.h"
#include "kiln/data/chat_template.h"
#include "tests/support/support.h"
#include "tests/support/temp_dir.h"

namespace {

using kiln::data::ChatTemplate;
using kiln::data::check_messages;
using kiln::data::JinjaTemplate;
using kiln::test::error_of;
using kiln::test::expect_error;
using json = nlohmann::json;

std::string render(std::string_view source, const json& context = json::object()) {
  return JinjaTemplate(source).render(context);
}

struct Case {
  const char* source;
  const char* expected;
};

// Renders each case with `context`, reporting every mismatch.
void expect_renders(const std::vector<Case>& cases, const json& context = json::object()) {
  for (const Case& c : cases) {
    std::string got;
    try {
      got = render(c.source, context);
    } catch (const kiln::Error& e) {
      ADD_FAILURE() << c.source << "\n  threw: " << e.what();
      continue;
    }
    EXPECT_EQ(got, c.expected) << "template: " << c.source;
  }
}

TEST(Jinja, TextAndOutput) {
  expect_renders({
      {"plain text", "plain text"},
      {"Hello {{ name }}!", "Hello Ada!"},
      {"{{ 'a' }}{{ \"b\" }}{{ 'c' 'd' }}", "abcd"},
      {"{{ 'tab\\there\\n' }}|{{ '\\x41\\u00e9\\U0001F600\\101' }}|{{ '\\q\\\\' }}", "tab\there\n|Aé😀A|\\q\\"},
      {"{{ 42 }} {{ -7 }} {{ 1_000 }} {{ 0x1F }} {{ 0b101 }} {{ 0o17 }}", "42 -7 1000 31 5 15"},
      {"{{ 1.0 }} {{ 1.5e3 }} {{ 0.1 + 0.2 }} {{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} {{ 0.00001 }} {{ -0.0 }}",
       "1.0 1500.0 0.30000000000000004 1e+16 1000000000000000.0 0.0001 1e-05 -0.0"},
      {"{{ true }} {{ False }} {{ none }} {{ None }}", "True False None None"},
      {"{{ [1, 'a', none, true, 1.5, {'k': \"it's\"}] }}", "[1, 'a', None, True, 1.5, {'k': \"it's\"}]"},
      {"{{ (1, 2) | length }}{{ [] }}{{ {} }}", "2[]{}"},
      {"{{ {'a': {'b': 1}} }}", "{'a': {'b': 1}}"},
      {"{{ name ~ 1 ~ 1.0 ~ none ~ true }}", "Ada11.0NoneTrue"},
  }, {{"name", "Ada"}});
}

TEST(Jinja, CommentsAndWhitespaceControl) {
  expect_renders({
      {"a{# a comment #}b", "ab"},
      {"a {#- c -#} b", "ab"},
      {"a \n {%- if true -%} \n x \n {%- endif -%} \n b", "axb"},
      {"{{- 'a' -}}  \n  {{ 'b' }}", "ab"},
      {"x  {{- 'y' }}", "xy"},
      {"{{ 'y' -}}\n\n z", "yz"},
  });
}

// transformers renders chat templates with trim_blocks and lstrip_blocks.
TEST(Jinja, TrimBlocksAndLstripBlocks) {
  expect_renders({
      {"a\n  {% if true %}\n    x\n  {% endif %}\nb\n", "a\n    x\nb"},
      {"a  {% if true %}x{% endif %}  b", "a  x  b"},
      {"  {{ 1 }}\n  {# c #}\nz", "  1\nz"},
      {"a\n  {%+ if true %}x{% endif +%}\nb", "a\n  x\nb"},
      {"  {% set x = 1 %}x", "x"},
      {"x {% set x = 1 %}\n  y", "x   y"},
      {"{% set x = 1 %}\n{{ x }}", "1"},
      {"a\r\nb\rc\n\n", "a\nb\nc\n"},
      {"{% for i in [1, 2] %}\n  {{ i }}\n{% endfor %}\n", "  1\n  2\n"},
  });
}

TEST(Jinja, IfElifElse) {
  expect_renders({
      {"{% if n > 2 %}big{% elif n > 0 %}small{% else %}none{% endif %}", "small"},
      {"{% if missing %}a{% elif n == 1 %}b{% endif %}", "b"},
      {"{% if not missing and n %}yes{% endif %}", "yes"},
      {"{% if n is odd %}odd{% else %}even{% endif %}", "odd"},
  }, {{"n", 1}});
}

TEST(Jinja, ForLoops) {
  json ctx = {{"xs", {"a", "b", "c"}}, {"d", {{"k1", 1}, {"k2", 2}}}};
  expect_renders({
      {"{% for x in xs %}{{ loop.index }}{{ x }}{{ ',' if not loop.last }}{% endfor %}", "1a,2b,3c"},
      {"{% for x in xs %}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.length }}|{% endfor %}",
       "032True3|121False3|210False3|"},
      {"{% for x in [] %}x{% else %}empty{% endfor %}", "empty"},
      {"{% for x in xs if x != 'b' %}{{ loop.index }}{{ x }}{{ loop.length }}{% endfor %}", "1a22c2"},
      {"{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", "k1=1;k2=2;"},
      {"{% for k in d %}{{ k }}{% endfor %}{% for c in 'hé' %}[{{ c }}]{% endfor %}", "k1k2[h][é]"},
      {"{% for x in xs %}{% if x == 'b' %}{% continue %}{% endif %}{% if x == 'c' %}{% break %}{% endif %}{{ x }}{% endfor %}", "a"},
      {"{% for i in [1, 2] %}{% for j in [3] %}{{ loop.index }}{% endfor %}{{ loop.index }}{% endfor %}", "1112"},
      {"{% for x in missing %}x{% endfor %}", ""},
      {"{% for i in range(3) %}{{ i }}{% endfor %}{% for i in range(1, 7, 2) %}{{ i }}{% endfor %}", "012135"},
  }, ctx);
}

// A for loop's body is a new scope each iteration: `set` inside it does not
// outlive the iteration, which is what namespace() is for.
TEST(Jinja, Scoping) {
  expect_renders({
      {"{% for i in [1, 2] %}{% if i == 2 %}[{{ x }}]{% endif %}{% set x = i %}{% endfor %}", "[]"},
      {"{% set x = 0 %}{% for i in [1, 2] %}[{{ x }}]{% set x = i %}{% endfor %}{{ x }}", "[0][0]0"},
      {"{% for i in [1, 2] %}{% set x = i %}{% endfor %}{{ x }}", ""},
      {"{% if true %}{% set x = 5 %}{% endif %}{{ x }}", "5"},
      {"{% set ns = namespace(n=0, s='') %}{% for i in [1, 2, 3] %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}", "6"},
      {"{% set ns = namespace(a=1) %}{% set ns.b = 'x' %}{{ ns.a }}{{ ns.b }}{{ ns }}", "1x<Namespace {'a': 1, 'b': 'x'}>"},
  });
}

TEST(Jinja, SetAndMacros) {
  expect_renders({
      {"{% set a, b = [1, 2] %}{{ b }}{{ a }}", "21"},
      {"{% set t = 1, 2 %}{{ t | length }}", "2"},
      {"{% set x %}  hi {{ 1 }}{% endset %}[{{ x }}]", "[  hi 1]"},
      {"{% set g = 1 %}{% macro m(a, b=2) %}{{ a }}{{ b }}{{ g }}{% endmacro %}{% set g = 3 %}{{ m(1) }}{{ m(1, b=5) }}",
       "123153"},
      {"{% macro hi(who) %}<{{ who }}>{% endmacro %}{% for w in ['a', 'b'] %}{{ hi(w) }}{% endfor %}", "<a><b>"},
      {"{% macro m(x) %}{{ x is defined }}{% endmacro %}{{ m() }}", "False"},
      {"{% generation %}ab{% endgeneration %}", "ab"},
  });
}

TEST(Jinja, Expressions) {
  expect_renders({
      {"{{ 1 / 2 }} {{ 4 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 2 ** 10 }} {{ 2 ** -1 }}",
       "0.5 2.0 3 -4 2 -2 1024 0.5"},
      {"{{ 10 // 3.0 }} {{ -7 % 3.0 }} {{ 2.0 ** 2 }} {{ 1 + 2 * 3 - 4 }} {{ (1 + 2) * 3 }} {{ -2 ** 2 }}",
       "3.0 2.0 4.0 3 9 4"},
      {"{{ 'ab' * 2 }}{{ [1] * 2 }}{{ [1] + [2] }}{{ 'a' + 'b' }}", "abab[1, 1][1, 2]ab"},
      {"{{ 1 < 2 < 3 }}{{ 3 > 2 > 2 }}{{ 1 == 1.0 }}{{ true == 1 }}{{ 'a' < 'b' }}{{ [1, 2] < [1, 3] }}",
       "TrueFalseTrueTrueTrueTrue"},
      {"{{ 'b' in 'abc' }}{{ 2 in [1, 2] }}{{ 'k' in {'k': 1} }}{{ 3 not in [1] }}{{ 'a' in missing }}",
       "TrueTrueTrueTrueFalse"},
      {"{{ 0 or 'x' }}{{ 'a' and 'b' }}{{ none or [] }}{{ not 0 }}", "xb[]True"},
      {"{{ 'y' if 1 else 'n' }}{{ 'y' if 0 else 'n' }}[{{ 'y' if 0 }}]{{ (1 if 0) is defined }}", "yn[]False"},
      {"{{ -3|abs }}{{ ('a' ~ 'b')|upper }}", "3AB"},
  });
}

TEST(Jinja, AttributesSubscriptsAndSlices) {
  json ctx = {{"m", {{"role", "user"}, {"content", "héllo"}}}, {"xs", {1, 2, 3, 4, 5}}};
  expect_renders({
      {"{{ m.role }}{{ m['role'] }}{{ m.content[1] }}{{ m.content[-1] }}", "useruseréo"},
      {"{{ m.content[1:3] }}|{{ m.content[::-1] }}|{{ xs[::2] }}{{ xs[-2:] }}{{ xs[5:] }}{{ xs[::-2] }}{{ xs[:-3] }}",
       "él|olléh|[1, 3, 5][4, 5][][5, 3, 1][1, 2]"},
      {"{{ xs[0] }}{{ xs.0 }}{{ xs[-1] }}[{{ xs[9] }}][{{ m.missing }}][{{ m['missing'] }}]", "115[][][]"},
      {"[{{ none.foo }}][{{ 'str'.foo }}][{{ 5[0] }}]", "[][][]"},
  }, ctx);
}

TEST(Jinja, Tests) {
  expect_renders({
      {"{{ x is defined }}{{ y is defined }}{{ y is undefined }}{{ x is not defined }}", "TrueFalseTrueFalse"},
      {"{{ none is none }}{{ 0 is none }}{{ 'a' is string }}{{ 1 is string }}", "TrueFalseTrueFalse"},
      {"{{ 1 is number }}{{ 1.5 is number }}{{ true is number }}{{ 1 is integer }}{{ 1.0 is integer }}{{ 1.0 is float }}",
       "TrueTrueTrueTrueFalseTrue"},
      {"{{ {} is mapping }}{{ [] is mapping }}{{ '' is iterable }}{{ 1 is iterable }}{{ [] is sequence }}",
       "TrueFalseTrueFalseTrue"},
      {"{{ true is true }}{{ 1 is true }}{{ false is false }}{{ 0 is false }}{{ true is boolean }}", "TrueFalseTrueFalseTrue"},
      {"{{ 4 is even }}{{ 3 is odd }}{{ 9 is divisibleby 3 }}{{ 9 is divisibleby(2) }}", "TrueTrueTrueFalse"},
      {"{{ 2 is eq 2 }}{{ 2 is ne 2 }}{{ 3 is gt 2 }}{{ 1 is in [1] }}{{ 'ab' is lower }}{{ 'AB' is upper }}",
       "TrueFalseTrueTrueTrueTrue"},
      {"{{ range is callable }}{{ x is callable }}", "TrueFalse"},
  }, {{"x", 1}});
}

TEST(Jinja, Filters) {
  json ctx = {{"ms", {{{"role", "system"}, {"n", 1}}, {{"role", "user"}, {"n", 2}}, {{"role", "user"}, {"n", 3}}}}};
  expect_renders({
      {"{{ 'héllo'|length }}{{ [1, 2]|count }}{{ {'a': 1}|length }}{{ missing|length }}", "5210"},
      {"[{{ '  a b \\n'|trim }}][{{ 'xxaxx'|trim('x') }}]", "[a b][a]"},
      {"{{ 'hello wORLD they\\'re'|title }}|{{ 'hELLO'|capitalize }}|{{ 'ß'|upper }}|{{ 'ÀB'|lower }}",
       "Hello World They're|Hello|SS|àb"},
      {"{{ missing|default('d') }}|{{ none|default('d') }}|{{ none|default('d', true) }}|{{ ''|d('e', boolean=true) }}",
       "d|None|d|e"},
      {"{{ [1, 2]|join }}|{{ [1, none, 'a']|join(', ') }}|{{ 'abc'|join('-') }}|{{ ms|join(',', attribute='role') }}",
       "12|1, None, a|a-b-c|system,user,user"},
      {"{{ [1, 2]|first }}{{ [1, 2]|last }}{{ 'xyz'|first }}[{{ []|first }}]", "12x[]"},
      {"{{ 3|string }}{{ none|string }}{{ [1, 'a']|string }}{{ missing|string }}", "3None[1, 'a']"},
      {"{{ '12'|int }}{{ '1.9'|int }}{{ 1.9|int }}{{ 'x'|int }}{{ 'x'|int(7) }}{{ none|int }}{{ true|int }}",
       "12110701"},
      {"{{ '0x1A'|int(base=16) }}{{ ' 3 '|int }}{{ '1_000'|int }}{{ '2.5'|float }}{{ 'x'|float }}{{ 3|float }}",
       "26310002.50.03.0"},
      {"{{ 'ab'|list }}{{ {'a': 1}|list }}{% for k, v in {'a': 1, 'b': 2}|items %}{{ k }}{{ v }}{% endfor %}{{ missing|items|list }}",
       "['a', 'b']['a']a1b2[]"},
      {"{{ 'aaa'|replace('a', 'b') }}{{ 'aaa'|replace('a', 'b', 2) }}{{ 'abc'|reverse }}{{ [1, 2]|reverse|list }}",
       "bbbbbacba[2, 1]"},
      {"{{ ms|map(attribute='n')|list }}{{ ['a', 'b']|map('upper')|join }}{{ ms|map(attribute='x', default=0)|list }}",
       "[1, 2, 3]AB[0, 0, 0]"},
      {"{{ ms|selectattr('role', 'equalto', 'user')|map(attribute='n')|list }}{{ ms|rejectattr('role', 'eq', 'user')|list|length }}",
       "[2, 3]1"},
      {"{{ [0, 1, 2]|select|list }}{{ [1, 2, 3, 4]|select('odd')|list }}{{ [1, 2, 3]|reject('gt', 1)|list }}",
       "[1, 2][1, 3][1]"},
      {"{{ -2.5|abs }}{{ [3, 1]|first|abs }}", "2.53"},
  }, ctx);
}

// transformers' tojson is json.dumps(x, ensure_ascii=False) by default.
TEST(Jinja, ToJson) {
  json ctx = {{"tool", {{"name", "get_weather"}, {"args", {{"city", "Zürich"}, {"days", 3}}}}}};
  expect_renders({
      {"{{ 'é\"\\n\\x01'|tojson }}", "\"é\\\"\\n\\u0001\""},
      {"{{ {'a': [1, 2.0, none, true], 'b': {}}|tojson }}", "{\"a\": [1, 2.0, null, true], \"b\": {}}"},
      {"{{ tool|tojson }}", "{\"args\": {\"city\": \"Zürich\", \"days\": 3}, \"name\": \"get_weather\"}"},
      {"{{ 'é😀'|tojson(ensure_ascii=true) }}", "\"\\u00e9\\ud83d\\ude00\""},
      {"{{ {'b': 1, 'a': [1, {'c': 2}], 'e': []}|tojson(indent=2) }}",
       "{\n  \"b\": 1,\n  \"a\": [\n    1,\n    {\n      \"c\": 2\n    }\n  ],\n  \"e\": []\n}"},
      {"{{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }}{{ [1, 2]|tojson(separators=[',', ':']) }}",
       "{\"a\": 2, \"b\": 1}[1,2]"},
      {"{{ 1e16|tojson }}{{ 0.5|tojson }}", "1e+160.5"},
  }, ctx);
}

TEST(Jinja, StringAndDictMethods) {
  json ctx = {{"s", "<think>\nplan\n</think>\n\nanswer"}, {"d", {{"a", 1}, {"b", 2}}}};
  expect_renders({
      {"{{ s.split('</think>')[-1].lstrip('\\n') }}|{{ s.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') }}",
       "answer|plan"},
      {"{{ s.startswith('<think>') }}{{ s.endswith('x') }}{{ s.startswith(('x', '<')) }}", "TrueFalseTrue"},
      {"{{ '  a  b '.split() }}{{ 'a,b,,c'.split(',') }}{{ 'a b c'.split(' ', 1) }}{{ '  a b c '.split(none, 1) }}",
       "['a', 'b']['a', 'b', '', 'c']['a', 'b c']['a', 'b c ']"},
      {"[{{ ' x '.strip() }}][{{ ' x '.lstrip() }}][{{ ' x '.rstrip() }}][{{ '\\nx\\n'.strip('\\n') }}]",
       "[x][x ][ x][x]"},
      {"{{ 'aXbX'.replace('X', '-') }}{{ 'ab'.replace('', '.') }}{{ 'ab'.upper() }}{{ 'AB'.lower() }}", "a-b-.a.b.ABab"},
      {"{{ \"hello wORLD they're\".title() }}|{{ 'hELLO'.capitalize() }}", "Hello World They'Re|Hello"},
      {"{% for k, v in d.items() %}{{ k }}{{ v }}{% endfor %}{{ d.keys()|list }}{{ d.values()|list }}", "a1b2['a', 'b'][1, 2]"},
      {"{{ d.get('a') }}{{ d.get('z') }}{{ d.get('z', 9) }}{{ d.get('z') is none }}", "1None9True"},
  }, ctx);
}

TEST(Jinja, DictLiteralsKeepTheirOrder) {
  EXPECT_EQ(render("{{ {'b': 1, 'a': 2}|tojson }}{% for k in {'z': 1, 'y': 2} %}{{ k }}{% endfor %}"),
            "{\"b\": 1, \"a\": 2}zy");
}

// jinja2's default Undefined: falsy, renders as "", iterates as empty, and
// `is defined` is false; arithmetic, calls and attribute access on it fail.
TEST(Jinja, UndefinedSemantics) {
  json ctx = {{"d", json::object()}};
  expect_renders({
      {"[{{ x }}][{{ d.y }}]{{ x is defined }}{{ d.y is defined }}{{ not x }}{{ x == x }}{{ x is none }}",
       "[][]FalseFalseTrueTrueFalse"},
      {"{% if x %}a{% else %}b{% endif %}{% for i in x %}i{% endfor %}{{ x|length }}{{ x ~ 'z' }}", "b0z"},
  }, ctx);
  EXPECT_EQ(error_of([&] { render("{{ x.y }}"); }), "template line 1: 'x' is undefined");
  EXPECT_EQ(error_of([&] { render("\n{{ d.y.z }}", ctx); }), "template line 2: 'dict object' has no attribute 'y'");
  EXPECT_EQ(error_of([&] { render("{{ x + 1 }}"); }), "template line 1: 'x' is undefined");
  EXPECT_EQ(error_of([&] { render("{{ x['a'] }}"); }), "template line 1: 'x' is undefined");
  EXPECT_EQ(error_of([&] { render("{{ x() }}"); }), "template line 1: 'x' is undefined");
  EXPECT_EQ(error_of([&] { render("{{ -x }}"); }), "template line 1: 'x' is undefined");
  EXPECT_EQ(error_of([&] { render("{{ x < 1 }}"); }), "template line 1: 'x' is undefined");
  expect_error([&] { render("{{ x|tojson }}"); }, "'x' is undefined");
  expect_error([&] { render("{{ x|int }}"); }, "'x' is undefined");
}

TEST(Jinja, RaiseExceptionIsAnErrorWithItsMessage) {
  const char* source =
      "{% for m in messages %}\n"
      "{% if m.role not in ['user', 'assistant'] %}\n"
      "{{ raise_exception('Conversation roles must be user or assistant, not ' + m.role) }}\n"
      "{% endif %}\n"
      "{% endfor %}";
  JinjaTemplate t(source, "chat template");
  EXPECT_EQ(t.render({{"messages", {{{"role", "user"}}}}}), "");
  EXPECT_EQ(error_of([&] { t.render({{"messages", {{{"role", "tool"}}}}}); }),
            "chat template line 3: Conversation roles must be user or assistant, not tool");
}

TEST(Jinja, UnsupportedConstructsAreErrorsWithTheLine) {
  auto error = [](const char* source) { return error_of([&] { JinjaTemplate t(source, "chat template"); }); };
  EXPECT_EQ(error("a\n\n{{ x|wordwrap }}"), "chat template line 3: unsupported filter 'wordwrap'");
  EXPECT_EQ(error("{% if x is sameas y %}{% endif %}"), "chat template line 1: unsupported test 'sameas'");
  EXPECT_EQ(error("\n{% include 'other.html' %}"), "chat template line 2: unsupported tag 'include'");
  EXPECT_EQ(error("{% extends 'base' %}"), "chat template line 1: unsupported tag 'extends'");
  EXPECT_EQ(error("{% raw %}{{ x }}{% endraw %}"), "chat template line 1: unsupported tag 'raw'");
  EXPECT_EQ(error("{% for x in xs recursive %}{% endfor %}"), "chat template line 1: unsupported: recursive for loops");
  EXPECT_EQ(error("{% set x | upper %}a{% endset %}"), "chat template line 1: unsupported: filters on a {% set %} block");
  EXPECT_EQ(error("{{ f(*args) }}"), "chat template line 1: unsupported: *args and **kwargs in a call");
  EXPECT_EQ(error("{% for x in y %}{% macro m() %}{% endmacro %}{% endfor %}"),
            "chat template line 1: unsupported: a macro defined inside a for loop or macro");
  // Known only when rendering: what a value's type supports.
  auto render_error = [](const char* source) { return error_of([&] { JinjaTemplate(source, "chat template").render(json::object()); }); };
  EXPECT_EQ(render_error("{{ 'a'.format(1) }}"), "chat template line 1: unsupported method 'format' of a str");
  EXPECT_EQ(render_error("{{ [1].append(2) }}"), "chat template line 1: unsupported method 'append' of a list");
  EXPECT_EQ(render_error("{{ '%s' % 1 }}"), "chat template line 1: unsupported: '%' string formatting");
  EXPECT_EQ(render_error("{% for x in [1] %}{{ loop.previtem }}{% endfor %}"),
            "chat template line 1: unsupported loop attribute 'loop.previtem'");
}

TEST(Jinja, SyntaxErrors) {
  auto error = [](const char* source) { return error_of([&] { JinjaTemplate t(source); }); };
  EXPECT_EQ(error("{{ x "), "template line 1: unterminated tag: no }}");
  EXPECT_EQ(error("{# x"), "template line 1: unterminated comment: no #}");
  EXPECT_EQ(error("{% if x %}\nx"), "template line 2: the template ended where {% elif %} or {% else %} or {% endif %} was expected");
  EXPECT_EQ(error("{% endif %}"), "template line 1: unexpected {% endif %}");
  EXPECT_EQ(error("{% break %}"), "template line 1: {% break %} outside a for loop");
  EXPECT_EQ(error("{{ 'abc }}"), "template line 1: unterminated string literal");
  EXPECT_EQ(error("{{ 1 + }}"), "template line 1: unexpected '}}'");
  EXPECT_EQ(error("{{ x) }}"), "template line 1: unexpected ')'");
  EXPECT_EQ(error("{{ 012 }}"), "template line 1: invalid integer literal '012' (leading zeros)");
  EXPECT_EQ(error("{{ a b }}"), "template line 1: expected }}, found 'b'");
  EXPECT_EQ(error("{{ x @ y }}"), "template line 1: unexpected character '@' in a tag");
  std::string deep = std::string(200, '(') + "1" + std::string(200, ')');
  EXPECT_EQ(error(("{{ " + deep + " }}").c_str()), "template line 1: unsupported: nesting deeper than 100 levels");
}

TEST(Jinja, RenderErrors) {
  auto error = [](const char* source) { return error_of([&] { render(source); }); };
  EXPECT_EQ(error("{{ 'a' + 1 }}"), "template line 1: unsupported operand type(s) for +: 'str' and 'int'");
  EXPECT_EQ(error("{{ 1 / 0 }}"), "template line 1: division by zero");
  EXPECT_EQ(error("{{ 1 < 'a' }}"), "template line 1: '<' not supported between instances of 'int' and 'str'");
  EXPECT_EQ(error("{% for x in 5 %}{% endfor %}"), "template line 1: 'int' object is not iterable");
  EXPECT_EQ(error("{% set a, b = [1] %}"), "template line 1: cannot unpack 1 values into 2 names");
  EXPECT_EQ(error("{% set x = 1 %}{% set x.y = 2 %}"),
            "template line 1: cannot set attribute 'y' of 'x': it is a int, not a namespace()");
  EXPECT_EQ(error("{{ 'abc'.split('') }}"), "template line 1: str.split: empty separator");
  EXPECT_EQ(error("{{ 2 ** 64 }}"),
            "template line 1: integer overflow (Python's integers are unbounded, kiln's are 64-bit)");
  EXPECT_EQ(error("{{ {1: 2} }}"), "template line 1: dict keys must be strings here, not int");
  EXPECT_EQ(error("{{ 'x'|join(1, 2, 3) }}"), "template line 1: filter 'join' takes at most 2 argument(s), got 3");
  EXPECT_EQ(error("{{ [1]|tojson(bad=1) }}"), "template line 1: filter 'tojson' got an unexpected keyword argument 'bad'");
  EXPECT_EQ(error("{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}"),
            "template line 1: macro calls nested more than 100 deep");
  EXPECT_EQ(error("{{ range(200000)|length }}"),
            "template line 1: range() too big: at most 100000 items (jinja2's sandbox limit)");
  EXPECT_EQ(error_of([] { JinjaTemplate("x").render(json::array()); }),
            "template: the context must be a JSON object, not array");
}

// Runaway templates (from a download) fail quickly instead of hanging or
// exhausting memory.
TEST(Jinja, RunawayTemplatesAreBounded) {
  auto error = [](const char* source) { return error_of([&] { render(source); }); };
  EXPECT_EQ(error("{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}"),
            "template line 1: the template ran more than 10000000 statements and loop iterations (a runaway loop?)");
  EXPECT_EQ(error("{% set ns = namespace(s='xx') %}{% for i in range(40) %}"
                  "{% set ns.s = ns.s + ns.s %}{% endfor %}"),
            "template line 1: a string or list of 134217728 bytes or items: more than 67108864");
  EXPECT_EQ(error("{{ 'ab' * 100000000 }}"),
            "template line 1: a string or list of 67108865 bytes or items: more than 67108864");
  EXPECT_EQ(error("{% set ns = namespace(s='xx') %}{% for i in range(40) %}"
                  "{% set ns.s = ns.s ~ ns.s %}{% endfor %}"),
            "template line 1: a string or list of 134217728 bytes or items: more than 67108864");
  EXPECT_EQ(error("{% for i in range(99999) %}{{ 'x' * 1000 }}{% endfor %}"),
            "template line 1: the rendered text exceeds 64 MiB");
}

TEST(Jinja, StrftimeNowIsToday) {
  std::string year = render("{{ strftime_now('%Y') }}");
  EXPECT_EQ(year.size(), 4u);
  EXPECT_GE(std::stoi(year), 2024);
  EXPECT_EQ(render("{{ strftime_now is defined }}"), "True");
}

// Parsed once, a template renders many contexts, from several threads too.
TEST(Jinja, RendersManyTimesAndConcurrently) {
  JinjaTemplate t("{% set ns = namespace(n=0) %}{% for x in xs %}{% set ns.n = ns.n + x %}{% endfor %}{{ ns.n }}");
  std::vector<std::thread> threads;
  std::vector<std::string> got(4);
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&, k] {
      for (int rep = 0; rep < 50; ++rep) got[size_t(k)] = t.render({{"xs", {k, k, k}}});
    });
  for (auto& th : threads) th.join();
  for (int k = 0; k < 4; ++k) EXPECT_EQ(got[size_t(k)], std::to_string(3 * k));
}

json message(const char* role, const char* content) { return {{"role", role}, {"content", content}}; }

TEST(ChatTemplate, CheckMessagesNamesTheMessageAndTheProblem) {
  check_messages(json::array({message("system", "s"), message("user", "u")}));
  EXPECT_EQ(error_of([] { check_messages(json::object()); }),
            "messages must be a list of {\"role\", \"content\"} objects, not object");
  EXPECT_EQ(error_of([] { check_messages(json::array()); }), "messages is empty: a conversation needs at least one message");
  EXPECT_EQ(error_of([] { check_messages(json::array({message("user", "u"), "text"})); }),
            "messages[1] must be an object with \"role\" and \"content\", not string");
  EXPECT_EQ(error_of([] { check_messages(json::array({{{"content", "no role"}}})); }), "messages[0] has no \"role\"");
  EXPECT_EQ(error_of([] { check_messages(json::array({message("user", "u"), {{"role", "user"}}})); }),
            "messages[1] has no \"content\"");
  EXPECT_EQ(error_of([] { check_messages(json::array({{{"role", "user"}, {"content", json::array({"a"})}}})); }),
            "messages[0].content must be a string, not array");
  EXPECT_EQ(error_of([] { check_messages(json::array({{{"role", 1}, {"content", "c"}}})); }),
            "messages[0].role must be a string, not number");
}

TEST(ChatTemplate, RendersWithTheTransformersContext) {
  ChatTemplate t(
      "{{ bos_token }}{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}"
      "{{ tools is none }}{{ documents is none }}{{ flag is defined }}{% if add_generation_prompt %}>{% endif %}{{ eos_token }}",
      "<s>", "</s>");
  json chat = json::array({message("user", "hi")});
  EXPECT_EQ(t.render(chat, false), "<s>[user:hi]TrueTrueFalse</s>");
  EXPECT_EQ(t.render(chat, true, {{"flag", 1}, {"tools", json::array()}}), "<s>[user:hi]FalseTrueTrue></s>");
  // An empty token is not defined at all, as for a tokenizer without one.
  EXPECT_EQ(ChatTemplate("{{ bos_token is defined }}", "", "e").render(chat, false), "False");
  // transformers copies a message's reasoning to reasoning_content and thinking.
  ChatTemplate reasoning("{% for m in messages %}{{ m.reasoning_content }}/{{ m.thinking }}{% endfor %}", "", "");
  EXPECT_EQ(reasoning.render(json::array({{{"role", "assistant"}, {"content", ""}, {"reasoning", "r"}}}), false), "r/r");
}

TEST(ChatTemplate, RenderRefusesMalformedArguments) {
  ChatTemplate t("{{ messages|length }}", "", "");
  EXPECT_EQ(error_of([&] { t.render(json::object(), false); }),
            "chat template: messages must be a list of message objects, not object");
  EXPECT_EQ(error_of([&] { t.render(json::array({"hi"}), false); }), "chat template: messages[0] must be an object, not string");
  EXPECT_EQ(error_of([&] { t.render(json::array(), false, json::array()); }),
            "chat template: the extra variables must be a JSON object, not array");
  EXPECT_EQ(error_of([&] { t.render(json::array(), false, {{"messages", 1}}); }),
            "chat template: extra must not set \"messages\": it is an argument of render()");
  // Content that is not a string reaches the template, which fails on it as jinja2 would.
  ChatTemplate concat("{% for m in messages %}{{ m.role + ': ' + m.content }}{% endfor %}", "", "");
  EXPECT_EQ(error_of([&] { concat.render(json::array({{{"role", "user"}, {"content", {1, 2}}}}), false); }),
            "chat template line 1: unsupported operand type(s) for +: 'str' and 'list'");
}

TEST(ChatTemplate, FromTokenizerConfig) {
  kiln::test::TempDir dir;
  auto config = [&](const json& j) { return std::filesystem::path(dir.write("tokenizer_config.json", j.dump())); };
  json chat = json::array({message("user", "hi")});
  ChatTemplate plain = ChatTemplate::from_tokenizer_config(
      config({{"chat_template", "{{ bos_token }}{{ messages[0].content }}{{ eos_token }}"},
              {"bos_token", {{"__type", "AddedToken"}, {"content", "<s>"}}},
              {"eos_token", "</s>"}}));
  EXPECT_EQ(plain.render(chat, false), "<s>hi</s>");
  ChatTemplate named = ChatTemplate::from_tokenizer_config(
      config({{"chat_template", {{{"name", "tool_use"}, {"template", "tools"}}, {{"name", "default"}, {"template", "default"}}}}}));
  EXPECT_EQ(named.render(chat, false), "default");

  std::filesystem::path path = config({{"eos_token", "</s>"}});
  EXPECT_EQ(error_of([&] { ChatTemplate::from_tokenizer_config(path); }),
            path.string() + ": no chat_template, and no chat_template.jinja beside it (this tokenizer has no "
                            "chat template to render conversations with)");
  path = config({{"chat_template", {{{"name", "tool_use"}, {"template", "t"}}}}});
  EXPECT_EQ(error_of([&] { ChatTemplate::from_tokenizer_config(path); }),
            path.string() + ": chat_template has no template named \"default\" (it has: tool_use)");
  path = config({{"chat_template", "x\n{{ m|wordwrap }}"}});
  EXPECT_EQ(error_of([&] { ChatTemplate::from_tokenizer_config(path); }),
            path.string() + ": chat template line 2: unsupported filter 'wordwrap'");
  path = config({{"chat_template", "x"}, {"bos_token", 5}});
  EXPECT_EQ(error_of([&] { ChatTemplate::from_tokenizer_config(path); }),
            path.string() + ": bos_token must be a string or an object with a string \"content\"");
  path = dir.write("broken.json", "{");
  kiln::test::expect_error([&] { ChatTemplate::from_tokenizer_config(path); }, path.string() + ": not valid JSON");
  kiln::test::expect_error([&] { ChatTemplate::from_tokenizer_config(dir / "absent.json"); }, "absent.json: cannot open");

  // A chat_template.jinja beside the config is the template, as transformers reads it.
  dir.write("chat_template.jinja", "[{{ messages[0].content }}]{{ eos_token }}");
  EXPECT_EQ(ChatTemplate::from_tokenizer_config(config({{"chat_template", "old"}, {"eos_token", "</s>"}}))
                .render(chat, false),
            "[hi]</s>");
}

// The shipped tokenizers' templates, without Python (the oracle test
// compares many more conversations with transformers).
TEST(ChatTemplate, ShippedTemplates) {
  std::filesystem::path tokenizers = std::filesystem::path(KILN_SOURCE_DIR) / ".." / "shared" / "assets" / "tokenizers";
  if (!std::filesystem::is_directory(tokenizers)) GTEST_SKIP() << "no " << tokenizers << " here";
  json chat = json::array({message("user", "hi é")});
  EXPECT_EQ(ChatTemplate::from_tokenizer_config(tokenizers / "qwen3" / "tokenizer_config.json").render(chat, true),
            "<|im_start|>user\nhi é<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(ChatTemplate::from_tokenizer_config(tokenizers / "llama3" / "tokenizer_config.json").render(chat, true),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi é<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

}  // namespace
