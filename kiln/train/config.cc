#include "kiln/train/config.h"

#include <toml++/toml.h>

#include <charconv>
#include <cmath>
#include <sstream>
#include <variant>

#include "kiln/base/error.h"
#include "kiln/base/nearest.h"
#include "kiln/data/text_source.h"
#include "kiln/models/lora.h"
#include "kiln/optim/schedule.h"
#include "kiln/runtime/device.h"
#include "kiln/runtime/threads.h"
#include "kiln/train/initial_model.h"
#include "kiln/train/recipes.h"
#include "kiln/train/toml_shape.h"

namespace kiln::train {
namespace {

using FieldRef = std::variant<bool*, int64_t*, double*, std::string*, std::optional<int64_t>*,
                              std::optional<double>*, std::optional<bool>*,
                              std::optional<std::string>*>;

struct Field {
  const char* section;
  const char* key;
  FieldRef ref;
  std::vector<std::string> choices;  // accepted values of a string field; empty: any
  // Printed above the key by to_toml; a component's lists its implementations.
  std::string help;
  std::string name() const { return std::string(section) + "." + key; }
};

// A model field's config entry: its choices and help from the table and,
// for a component, from its registry.
Field model_field(const ModelField& f, ModelChanges::Value& value) {
  Field out{"model", f.key, std::visit([](auto& v) -> FieldRef { return &v; }, value), {}, f.help};
  if (!f.registry) return out;
  out.choices = f.registry->names();
  out.help += " (--override " + f.registry->component() + "=...):";
  for (const std::string& impl : out.choices)
    out.help += "\n  " + impl + ": " + f.registry->description(impl);
  return out;
}

// data.format: the text sources' formats and chat.
std::vector<std::string> data_formats() {
  std::vector<std::string> names = data::source_format_names();
  names.push_back("chat");
  return names;
}

// The single list of every key: parsing, errors and printing all read it.
std::vector<Field> fields(TrainConfig& c) {
  const std::vector<std::string> dtypes = {"float32", "bfloat16"};
  std::vector<Field> all = {
      {"job", "dump_folder", &c.job.dump_folder},
      {"job", "description", &c.job.description},

      {"model", "name", &c.model.name, model_config_names()},
      {"model", "tokenizer_path", &c.model.tokenizer_path},
      {"model", "hf_dir", &c.model.hf_dir},
  };
  // Then the model's overridable fields, declared in kiln/models/model_fields.h.
  for (size_t i = 0; i < model_fields().size(); ++i)
    all.push_back(model_field(model_fields()[i], c.model.changes.values()[i]));
  all.insert(all.end(), {
      {"training", "steps", &c.training.steps},
      {"training", "seed", &c.training.seed},
      {"training", "local_batch_size", &c.training.local_batch_size},
      {"training", "global_batch_size", &c.training.global_batch_size},
      {"training", "seq_len", &c.training.seq_len},
      {"training", "max_norm", &c.training.max_norm},
      {"training", "mixed_precision_param", &c.training.mixed_precision_param, dtypes},
      {"training", "device", &c.training.device, {},
       "where the run computes: cpu, cuda or cuda:N; under mpirun, cuda is each rank's own GPU\n"
       "(its local rank's)"},

      {"optimizer", "name", &c.optimizer.name, {"AdamW"}},
      {"optimizer", "lr", &c.optimizer.lr},
      {"optimizer", "beta1", &c.optimizer.beta1},
      {"optimizer", "beta2", &c.optimizer.beta2},
      {"optimizer", "eps", &c.optimizer.eps},
      {"optimizer", "weight_decay", &c.optimizer.weight_decay},
      {"optimizer", "decay_norms_and_embeddings", &c.optimizer.decay_norms_and_embeddings},

      {"lr_scheduler", "warmup_steps", &c.lr_scheduler.warmup_steps},
      {"lr_scheduler", "decay_ratio", &c.lr_scheduler.decay_ratio},
      {"lr_scheduler",
       "decay_type",
       &c.lr_scheduler.decay_type,
       optim::decay_type_names()},
      {"lr_scheduler", "min_lr_factor", &c.lr_scheduler.min_lr_factor},

      {"data", "path", &c.data.path},
      {"data", "format", &c.data.format, data_formats()},
      {"data", "train_on", &c.data.train_on, {"completion", "prompt", "all"}},
      {"data", "text_key", &c.data.text_key},
      {"data", "text_split", &c.data.text_split, data::text_split_names()},
      {"data", "delimiter", &c.data.delimiter},
      {"data", "val_fraction", &c.data.val_fraction},
      {"data", "add_bos", &c.data.add_bos},
      {"data", "add_eos", &c.data.add_eos},
      {"data", "shuffle", &c.data.shuffle},
      {"data", "document_mask", &c.data.document_mask},

      {"checkpoint", "enable", &c.checkpoint.enable},
      {"checkpoint", "folder", &c.checkpoint.folder},
      {"checkpoint", "interval", &c.checkpoint.interval},
      {"checkpoint", "load_step", &c.checkpoint.load_step},
      {"checkpoint", "keep_latest_k", &c.checkpoint.keep_latest_k},
      {"checkpoint", "async_mode", &c.checkpoint.async_mode, {"disabled", "async"}},
      {"checkpoint", "timeout_seconds", &c.checkpoint.timeout_seconds},
      {"checkpoint", "initial_load_path", &c.checkpoint.initial_load_path},
      {"checkpoint", "last_save_in_hf", &c.checkpoint.last_save_in_hf},
      {"checkpoint", "export_dtype", &c.checkpoint.export_dtype, {"auto", "float32", "bfloat16"}},

      {"lora", "rank", &c.lora.rank},
      {"lora", "alpha", &c.lora.alpha},
      {"lora", "targets", &c.lora.targets},

      {"validation", "enable", &c.validation.enable},
      {"validation", "freq", &c.validation.freq},
      {"validation", "steps", &c.validation.steps},

      {"metrics", "log_freq", &c.metrics.log_freq},
      {"metrics", "enable_tensorboard", &c.metrics.enable_tensorboard},
      {"metrics", "save_tb_folder", &c.metrics.save_tb_folder},
      {"metrics", "progress_bar", &c.metrics.progress_bar},

      {"compile", "enable", &c.compile.enable},
      {"compile", "graph_trainer", &c.compile.graph_trainer},
      {"compile", "graph_split", &c.compile.graph_split},
      {"compile", "graph_split_layers", &c.compile.graph_split_layers},
      {"compile", "background", &c.compile.background},
      {"compile", "replay", &c.compile.replay},
      {"compile", "scan_layers", &c.compile.scan_layers},
      {"compile", "spmd_safe", &c.compile.spmd_safe},
      {"compile", "overlap_collectives", &c.compile.overlap_collectives},

      {"parallelism", "data_parallel_replicate_degree",
       &c.parallelism.data_parallel_replicate_degree},
      {"parallelism", "data_parallel_shard_degree", &c.parallelism.data_parallel_shard_degree},
      {"parallelism", "tensor_parallel_degree", &c.parallelism.tensor_parallel_degree},
      {"parallelism", "context_parallel_degree", &c.parallelism.context_parallel_degree},
      {"parallelism", "pipeline_parallel_degree", &c.parallelism.pipeline_parallel_degree},
      {"parallelism", "expert_parallel_degree", &c.parallelism.expert_parallel_degree},
      {"parallelism",
       "expert_dispatcher",
       &c.parallelism.expert_dispatcher,
       {"auto", "local", "all_to_all", "capacity"}},
      {"parallelism", "expert_capacity_factor", &c.parallelism.expert_capacity_factor},

      {"comm", "timeout_seconds", &c.comm.timeout_seconds},

      {"activation_checkpoint",
       "mode",
       &c.activation_checkpoint.mode,
       {"none", "full", "selective", "offload"}},

      {"profiler", "enable_profiling", &c.profiler.enable_profiling},
      {"profiler", "save_traces_folder", &c.profiler.save_traces_folder},
      {"profiler", "profile_freq", &c.profiler.profile_freq},
      {"profiler", "active_steps", &c.profiler.active_steps},

      {"runtime", "eager_mode", &c.runtime.eager_mode, {"strict", "debug", "defer_and_fuse"}},
      {"runtime", "num_threads", &c.runtime.num_threads},
  });
  return all;
}

// The candidate a mistyped `name` most likely meant: one it abbreviates (a
// prefix, else a subsequence, the shortest such), else the nearest by edit
// distance.
std::string suggest(std::string_view name, const std::vector<std::string>& candidates) {
  auto shortest_where = [&](auto&& pred) {
    std::string best;
    for (const std::string& c : candidates)
      if (pred(c) && (best.empty() || c.size() < best.size())) best = c;
    return best;
  };
  auto subsequence = [&](const std::string& c) {
    size_t i = 0;
    for (char ch : c)
      if (i < name.size() && name[i] == ch) ++i;
    return i == name.size();
  };
  if (std::string s = shortest_where([&](const std::string& c) { return c.starts_with(name); });
      !s.empty())
    return s;
  if (std::string s = shortest_where(subsequence); !s.empty()) return s;
  return nearest(name, candidates);
}

std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

std::vector<std::string> section_names(std::vector<Field>& all) {
  std::vector<std::string> out;
  for (const Field& f : all)
    if (out.empty() || out.back() != f.section) out.push_back(f.section);
  return out;
}

// The field called `name` ("section.key"); an unknown one is an error
// naming the nearest key (and the keys of the section when it exists).
Field& find_field(std::vector<Field>& all, std::string_view name, const std::string& where) {
  std::vector<std::string> names;
  for (Field& f : all) {
    if (f.name() == name) return f;
    names.push_back(f.name());
  }
  std::string section(name.substr(0, name.find('.')));
  std::vector<std::string> keys;
  for (const Field& f : all)
    if (section == f.section) keys.push_back(f.key);
  std::string known = keys.empty() ? "sections: " + join(section_names(all))
                                   : "keys of [" + section + "]: " + join(keys);
  fail(where, "unknown config key '", name, "' (did you mean '", suggest(name, names), "'?); ",
       known);
}

std::string type_name(const FieldRef& ref) {
  struct {
    std::string operator()(bool*) { return "true or false"; }
    std::string operator()(std::optional<bool>*) { return "true or false"; }
    std::string operator()(int64_t*) { return "an integer"; }
    std::string operator()(std::optional<int64_t>*) { return "an integer"; }
    std::string operator()(double*) { return "a finite number"; }
    std::string operator()(std::optional<double>*) { return "a finite number"; }
    std::string operator()(std::string*) { return "a string"; }
    std::string operator()(std::optional<std::string>*) { return "a string"; }
  } v;
  return std::visit(v, ref);
}

[[noreturn]] void bad_value(const Field& f, std::string_view value, const std::string& where) {
  std::string accepted = f.choices.empty() ? type_name(f.ref) : "one of " + join(f.choices);
  fail(where, "bad value '", value, "' for ", f.name(), ": expected ", accepted);
}

void check_choice(const Field& f, const std::string& value, const std::string& where) {
  if (f.choices.empty()) return;
  for (const std::string& c : f.choices)
    if (c == value) return;
  std::string accepted = "one of " + join(f.choices);
  fail(where, "bad value '", value, "' for ", f.name(), " (did you mean '",
       suggest(value, f.choices), "'?): expected ", accepted);
}

std::optional<int64_t> parse_int(std::string_view s) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

std::optional<double> parse_double(std::string_view s) {
  double v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty() || !std::isfinite(v))
    return std::nullopt;
  return v;
}

std::optional<bool> parse_bool(std::string_view s) {
  if (s == "true" || s == "1") return true;
  if (s == "false" || s == "0") return false;
  return std::nullopt;
}

template <class T>
T need(std::optional<T> parsed, const Field& f, std::string_view text, const std::string& where) {
  if (!parsed) bad_value(f, text, where);
  return *parsed;
}

// Sets a field from command-line text.
void set_from_text(Field& f, std::string_view text, const std::string& where) {
  struct Visitor {
    Field& f;
    std::string_view text;
    const std::string& where;
    void operator()(bool* p) { *p = need(parse_bool(text), f, text, where); }
    void operator()(std::optional<bool>* p) { *p = need(parse_bool(text), f, text, where); }
    void operator()(int64_t* p) { *p = need(parse_int(text), f, text, where); }
    void operator()(std::optional<int64_t>* p) { *p = need(parse_int(text), f, text, where); }
    void operator()(double* p) { *p = need(parse_double(text), f, text, where); }
    void operator()(std::optional<double>* p) { *p = need(parse_double(text), f, text, where); }
    void operator()(std::string* p) {
      check_choice(f, std::string(text), where);
      *p = text;
    }
    void operator()(std::optional<std::string>* p) {
      check_choice(f, std::string(text), where);
      *p = std::string(text);
    }
  };
  std::visit(Visitor{f, text, where}, f.ref);
}

// The shortest text that reads back as the same double, always with a
// '.' or exponent so that TOML reads a float.
std::string double_text(double v) {
  char buf[64];
  double a = std::fabs(v);
  auto format =
      a == 0 || (a >= 1e-4 && a < 1e15) ? std::chars_format::fixed : std::chars_format::scientific;
  auto [p, ec] = std::to_chars(buf, buf + sizeof(buf), v, format);
  std::string s(buf, p);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

std::string toml_quoted(const std::string& s) {
  std::string out = "\"";
  for (unsigned char ch : s) {
    if (ch == '"' || ch == '\\')
      out += '\\', out += char(ch);
    else if (ch == '\n')
      out += "\\n";
    else if (ch == '\t')
      out += "\\t";
    else if (ch < 0x20 || ch == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", ch);
      out += buf;
    } else
      out += char(ch);
  }
  return out + "\"";
}

// A TOML value as the recipe wrote it, for errors: 2.0 is not 2, nor "2".
std::string toml_text(const toml::node& n) {
  std::ostringstream os;
  if (n.is_string())
    os << toml_quoted(*n.value<std::string>());
  else if (n.is_table())
    os << "a table";
  else if (n.is_array())
    os << "an array";
  else if (auto v = n.value<double>(); v && n.is_floating_point())
    os << double_text(*v);
  else if (n.is_integer())
    os << *n.value<int64_t>();
  else if (n.is_boolean())
    os << (*n.value<bool>() ? "true" : "false");
  else
    os << "this value";
  return os.str();
}

// A TOML value of type T (an integer is accepted for a double, infinity and
// NaN are not), or nothing.
template <class T>
std::optional<T> toml_value(const toml::node& n) {
  if constexpr (std::is_same_v<T, double>)
    return n.is_number() && std::isfinite(*n.value<double>()) ? n.value<double>() : std::nullopt;
  else if constexpr (std::is_same_v<T, int64_t>)
    return n.is_integer() ? n.value<int64_t>() : std::nullopt;
  else if constexpr (std::is_same_v<T, bool>)
    return n.is_boolean() ? n.value<bool>() : std::nullopt;
  else
    return n.is_string() ? n.value<std::string>() : std::nullopt;
}

template <class T>
struct Unwrap {
  using type = T;
};
template <class T>
struct Unwrap<std::optional<T>> {
  using type = T;
};

// Sets a field from a TOML value, which must have the field's type.
void set_from_toml(Field& f, const toml::node& n, const std::string& where) {
  std::visit(
      [&](auto* p) {
        using T = typename Unwrap<std::remove_pointer_t<decltype(p)>>::type;
        *p = need(toml_value<T>(n), f, toml_text(n), where);
      },
      f.ref);
  if (auto* s = std::get_if<std::string*>(&f.ref)) check_choice(f, **s, where);
  if (auto* s = std::get_if<std::optional<std::string>*>(&f.ref)) check_choice(f, ***s, where);
}

// The value as TOML, or nothing for an unset optional.
std::optional<std::string> value_text(const FieldRef& ref) {
  struct {
    std::optional<std::string> operator()(bool* p) { return *p ? "true" : "false"; }
    std::optional<std::string> operator()(int64_t* p) { return std::to_string(*p); }
    std::optional<std::string> operator()(double* p) { return double_text(*p); }
    std::optional<std::string> operator()(std::string* p) { return toml_quoted(*p); }
    std::optional<std::string> operator()(std::optional<bool>* p) {
      if (!*p) return std::nullopt;
      return **p ? "true" : "false";
    }
    std::optional<std::string> operator()(std::optional<int64_t>* p) {
      if (!*p) return std::nullopt;
      return std::to_string(**p);
    }
    std::optional<std::string> operator()(std::optional<double>* p) {
      if (!*p) return std::nullopt;
      return double_text(**p);
    }
    std::optional<std::string> operator()(std::optional<std::string>* p) {
      if (!*p) return std::nullopt;
      return toml_quoted(**p);
    }
  } v;
  return std::visit(v, ref);
}

// Errors from finalize() name the key and where the value came from.
#define KILN_CONFIG_CHECK(cond, key, ...) KILN_CHECK(cond, "config: ", key, ": ", __VA_ARGS__)

}  // namespace

std::vector<std::string> config_keys() {
  TrainConfig c;
  std::vector<std::string> out;
  for (const Field& f : fields(c)) out.push_back(f.name());
  return out;
}

void apply_toml(TrainConfig& config, std::string_view text, const std::string& origin) {
  check_toml_shape(text, origin);
  toml::table root;
  try {
    root = toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    const auto& at = e.source().begin;
    fail(origin, ":", at.line, ":", at.column, ": not valid TOML: ", e.description());
  }
  std::vector<Field> all = fields(config);
  for (const auto& [section_key, section] : root) {
    std::string section_name(section_key.str());
    auto where = [&](const toml::node& n) { return cat(origin, ":", n.source().begin.line, ": "); };
    const toml::table* table = section.as_table();
    if (!table) {
      // A top-level key: name the nearest section.key, as for a typo'd key.
      find_field(all, section_name, where(section));
      fail(where(section), "'", section_name, "' is not a [section]");
    }
    for (const auto& [key, value] : *table) {
      std::string name = section_name + "." + std::string(key.str());
      Field& f = find_field(all, name, where(value));
      set_from_toml(f, value, where(value));
    }
  }
}

void apply_setting(TrainConfig& config, std::string_view key, std::string_view value) {
  std::vector<Field> all = fields(config);
  std::string where = cat("--", key, ": ");
  set_from_text(find_field(all, key, where), value, where);
}

void apply_override(TrainConfig& config, std::string_view spec) {
  std::string where = cat("--override ", spec, ": ");
  size_t eq = spec.find('=');
  KILN_CHECK(eq != std::string_view::npos, where, "expected component=impl, e.g. attention=flash");
  std::string path(spec.substr(0, eq));
  if (path.starts_with("model.")) path = path.substr(6);
  std::vector<std::string> names;
  for (const ModelField& f : model_fields()) {
    if (!f.registry) continue;
    if (f.registry->component() == path)
      return apply_setting(config, cat("model.", f.key), spec.substr(eq + 1));
    names.push_back(f.registry->component());
  }
  fail(where, "unknown component '", path, "' (did you mean '", suggest(path, names),
       "'?); components: ", join(names));
}

std::string component_choices() {
  std::string out;
  for (const ModelField& f : model_fields())
    if (f.registry)
      out += cat(out.empty() ? "" : ", ", f.registry->component(), "=",
                 join(f.registry->names(), "|"));
  return out;
}

namespace {

// The registry entry with the model section's changes.
ModelConfig recipe_model(const TrainConfig& c) {
  return c.model.changes.applied_to(kiln::model_config(c.model.name));
}

// The rotary tables cover the training sequence length.
ModelConfig with_sequence_length(ModelConfig m, const TrainConfig& c) {
  m.seq_len = c.training.seq_len;
  m.max_position_embeddings = std::max(m.max_position_embeddings, m.seq_len);
  return m;
}

}  // namespace

void finalize(TrainConfig& c) {
  std::string& initial = c.checkpoint.initial_load_path;
  KILN_CONFIG_CHECK(c.model.hf_dir.empty() || initial.empty() || initial == c.model.hf_dir,
                    "model.hf_dir", "is '", c.model.hf_dir, "' but checkpoint.initial_load_path is '",
                    initial, "': both name the folder to start from; set one");
  if (!c.model.hf_dir.empty()) initial = c.model.hf_dir;
  // What the recipe leaves unset comes from the registry entry (an unknown
  // name was already refused by its choices) or, for a fine-tune, the
  // folder's architecture, which resolve_model_config checks the recipe's
  // settings against. (A finalized config sets every field: the folder is
  // not read again, and may be gone.)
  ModelConfig registered = kiln::model_config(c.model.name);
  if (!initial.empty() && !c.model.changes.all_set())
    registered = with_folder_architecture(std::move(registered), initial);
  c.model.changes.fill_from(registered);

  const TrainingSection& t = c.training;
  KILN_CONFIG_CHECK(!c.job.dump_folder.empty(), "job.dump_folder",
                    "must name the folder the run writes to");
  KILN_CONFIG_CHECK(t.steps >= 1, "training.steps", "must be at least 1, got ", t.steps);
  KILN_CONFIG_CHECK(t.local_batch_size >= 1, "training.local_batch_size",
                    "must be at least 1, got ", t.local_batch_size);
  KILN_CONFIG_CHECK(t.global_batch_size == -1 || (t.global_batch_size >= t.local_batch_size &&
                                                  t.global_batch_size % t.local_batch_size == 0),
                    "training.global_batch_size",
                    "must be -1 or a multiple of training.local_batch_size (", t.local_batch_size,
                    "), got ", t.global_batch_size);
  KILN_CONFIG_CHECK(t.seq_len >= 1, "training.seq_len", "must be at least 1, got ", t.seq_len);
  KILN_CONFIG_CHECK(t.seed >= 0, "training.seed", "must be non-negative, got ", t.seed);
  KILN_CONFIG_CHECK(c.optimizer.lr > 0, "optimizer.lr", "must be positive, got ", c.optimizer.lr);
  KILN_CONFIG_CHECK(c.optimizer.beta1 >= 0 && c.optimizer.beta1 < 1, "optimizer.beta1",
                    "must be in [0, 1), got ", c.optimizer.beta1);
  KILN_CONFIG_CHECK(c.optimizer.beta2 >= 0 && c.optimizer.beta2 < 1, "optimizer.beta2",
                    "must be in [0, 1), got ", c.optimizer.beta2);
  KILN_CONFIG_CHECK(c.optimizer.eps > 0, "optimizer.eps", "must be positive, got ",
                    c.optimizer.eps);
  KILN_CONFIG_CHECK(c.optimizer.weight_decay >= 0, "optimizer.weight_decay",
                    "must be non-negative, got ", c.optimizer.weight_decay);
  KILN_CONFIG_CHECK(c.lr_scheduler.warmup_steps >= 0, "lr_scheduler.warmup_steps",
                    "must be non-negative, got ", c.lr_scheduler.warmup_steps);
  const auto& ratio = c.lr_scheduler.decay_ratio;
  KILN_CONFIG_CHECK(!ratio || (*ratio >= 0 && *ratio <= 1), "lr_scheduler.decay_ratio",
                    "must be in [0, 1], got ", ratio.value_or(0));
  KILN_CONFIG_CHECK(c.lr_scheduler.min_lr_factor >= 0 && c.lr_scheduler.min_lr_factor <= 1,
                    "lr_scheduler.min_lr_factor", "must be in [0, 1], got ",
                    c.lr_scheduler.min_lr_factor);
  KILN_CONFIG_CHECK(c.data.val_fraction >= 0 && c.data.val_fraction < 1, "data.val_fraction",
                    "must be in [0, 1), got ", c.data.val_fraction);
  KILN_CONFIG_CHECK(c.data.format != "chat" || !c.data.path.empty(), "data.format",
                    "chat needs --data.path: JSONL files of {\"messages\": [...]}");
  KILN_CONFIG_CHECK(c.data.format != "chat" || !c.model.tokenizer_path.empty() ||
                        !c.checkpoint.initial_load_path.empty(),
                    "data.format", "chat renders conversations with a tokenizer's chat template: "
                    "set --model.tokenizer_path or --checkpoint.initial_load_path to a folder "
                    "with tokenizer.json and tokenizer_config.json");
  KILN_CONFIG_CHECK(c.checkpoint.interval >= 1, "checkpoint.interval", "must be at least 1, got ",
                    c.checkpoint.interval);
  KILN_CONFIG_CHECK(c.checkpoint.keep_latest_k >= 0, "checkpoint.keep_latest_k",
                    "must be non-negative (0 keeps all), got ", c.checkpoint.keep_latest_k);
  KILN_CONFIG_CHECK(c.lora.rank >= 0, "lora.rank", "must be non-negative (0: no LoRA), got ",
                    c.lora.rank);
  KILN_CONFIG_CHECK(c.lora.alpha > 0 && std::isfinite(c.lora.alpha), "lora.alpha",
                    "must be a positive number, got ", c.lora.alpha);
  try {
    parse_lora_targets(c.lora.targets);
  } catch (const Error& e) {
    fail("config: lora.targets: ", e.what());
  }
  KILN_CONFIG_CHECK(c.lora.rank == 0 || (c.parallelism.tensor_parallel_degree == 1 &&
                                         c.parallelism.expert_parallel_degree == 1),
                    "lora.rank", "LoRA runs on data parallelism (DDP, SimpleFSDP, HSDP); with "
                    "tensor or expert parallelism it is not implemented yet: set "
                    "parallelism.tensor_parallel_degree and expert_parallel_degree to 1");
  KILN_CONFIG_CHECK(c.validation.freq >= 1, "validation.freq", "must be at least 1, got ",
                    c.validation.freq);
  KILN_CONFIG_CHECK(c.validation.steps == -1 || c.validation.steps >= 1, "validation.steps",
                    "must be -1 (the whole split) or at least 1, got ", c.validation.steps);
  KILN_CONFIG_CHECK(c.metrics.log_freq >= 1, "metrics.log_freq", "must be at least 1, got ",
                    c.metrics.log_freq);
  KILN_CONFIG_CHECK(c.profiler.profile_freq >= 1, "profiler.profile_freq",
                    "must be at least 1, got ", c.profiler.profile_freq);
  const int64_t active = c.profiler.active_steps;
  KILN_CONFIG_CHECK(!c.profiler.enable_profiling ||
                        (active >= 1 && active <= c.profiler.profile_freq),
                    "profiler.active_steps", "must be between 1 and profiler.profile_freq (",
                    c.profiler.profile_freq, "), got ", active);
  const CompileSection& compile = c.compile;
  KILN_CONFIG_CHECK(!compile.graph_split || compile.graph_trainer, "compile.graph_split",
                    "splits the graph trainer's step, so it needs --compile.graph_trainer "
                    "(per-block compile already runs each block as a program of its own)");
  KILN_CONFIG_CHECK(!compile.graph_split || !compile.scan_layers, "compile.graph_split",
                    "does not work with compile.scan_layers: the layers run inside one scan, "
                    "so there is no forward and backward per layer to split; drop one of them");
  KILN_CONFIG_CHECK(compile.graph_split_layers >= 0, "compile.graph_split_layers",
                    "must be non-negative (0: all layers in one forward and one backward "
                    "program), got ", compile.graph_split_layers);
  KILN_CONFIG_CHECK(compile.graph_split_layers == 0 || compile.graph_split,
                    "compile.graph_split_layers", "groups the layers of a graph split; set "
                    "--compile.graph_split too");
  KILN_CONFIG_CHECK(!compile.replay || compile.enable || compile.graph_trainer, "compile.replay",
                    "replays compiled programs; turn on --compile.enable or "
                    "--compile.graph_trainer too");
  KILN_CONFIG_CHECK(!compile.background || compile.graph_trainer, "compile.background",
                    "builds the graph trainer's step program while the first steps run op by "
                    "op, so it needs --compile.graph_trainer (per-block compile builds each "
                    "block's small programs as it reaches them)");
  KILN_CONFIG_CHECK(c.runtime.num_threads >= 0 && c.runtime.num_threads <= kMaxThreads,
                    "runtime.num_threads", "must be from 0 (all cores) to ", kMaxThreads,
                    ", got ", c.runtime.num_threads);
  const ParallelismSection& p = c.parallelism;
  KILN_CONFIG_CHECK(p.data_parallel_shard_degree == -1 || p.data_parallel_shard_degree >= 1,
                    "parallelism.data_parallel_shard_degree", "must be -1 or at least 1, got ",
                    p.data_parallel_shard_degree);
  for (auto [key, degree] :
       {std::pair{"data_parallel_replicate_degree", p.data_parallel_replicate_degree},
        {"tensor_parallel_degree", p.tensor_parallel_degree},
        {"context_parallel_degree", p.context_parallel_degree},
        {"pipeline_parallel_degree", p.pipeline_parallel_degree},
        {"expert_parallel_degree", p.expert_parallel_degree}})
    KILN_CONFIG_CHECK(degree >= 1, cat("parallelism.", key), "must be at least 1, got ", degree);
  KILN_CONFIG_CHECK(p.expert_capacity_factor > 0 && std::isfinite(p.expert_capacity_factor),
                    "parallelism.expert_capacity_factor", "must be a positive number, got ",
                    p.expert_capacity_factor);
  try {
    parse_device(c.training.device);
  } catch (const Error& e) {
    fail("config: training.device: ", e.what());
  }
  // (Made milliseconds: an infinite one would overflow.)
  for (auto [timeout, field] : {std::pair{c.comm.timeout_seconds, "comm.timeout_seconds"},
                                {c.checkpoint.timeout_seconds, "checkpoint.timeout_seconds"}})
    KILN_CONFIG_CHECK(timeout > 0 && std::isfinite(timeout), field,
                      "must be a positive number of seconds, got ", timeout);
  // The model's own consistency rules (heads, experts, ...) name its fields.
  // (A checkpoint.initial_load_path folder is read when the model is built:
  // `--print-config` may come before the folder exists.)
  try {
    with_sequence_length(recipe_model(c), c).validate();
  } catch (const Error& e) {
    fail("config: [model] ", e.what());
  }
}

std::string to_toml(const TrainConfig& config) {
  TrainConfig copy = config;
  std::vector<Field> all = fields(copy);
  std::ostringstream os;
  const char* section = "";
  for (const Field& f : all) {
    if (std::string_view(section) != f.section) {
      os << (*section ? "\n" : "") << "[" << f.section << "]\n";
      section = f.section;
    }
    std::istringstream help(f.help);
    for (std::string line; std::getline(help, line);) os << "# " << line << "\n";
    std::optional<std::string> v = value_text(f.ref);
    if (!v) {
      os << "# " << f.key << " is unset\n";
      continue;
    }
    os << f.key << " = " << *v;
    if (f.help.empty() && f.choices.size() > 1 && f.choices.size() <= 8)
      os << "  # " << join(f.choices, " | ");
    os << "\n";
  }
  return os.str();
}

ModelConfig resolve_model_config(const TrainConfig& c) {
  ModelConfig m = recipe_model(c);
  if (!c.checkpoint.initial_load_path.empty())
    m = initial_folder_model(c.checkpoint.initial_load_path, m);
  return with_sequence_length(m, c);
}

ModelConfig resolve_model_config(const TrainConfig& c, const ModelConfig& architecture,
                                 const std::string& source) {
  return with_sequence_length(with_recipe_components(architecture, recipe_model(c), source), c);
}

LoraOptions lora_options(const TrainConfig& c) {
  LoraOptions o;
  o.rank = c.lora.rank;
  o.alpha = c.lora.alpha;
  o.targets = parse_lora_targets(c.lora.targets);
  return o;
}

bool saves_in_background(const TrainConfig& c) {
  return c.checkpoint.enable && c.checkpoint.async_mode == "async";
}

int64_t grad_accum_steps(const TrainConfig& c, int64_t dp_degree) {
  const TrainingSection& t = c.training;
  if (t.global_batch_size == -1) return 1;
  const int64_t per_microbatch = t.local_batch_size * dp_degree;
  KILN_CONFIG_CHECK(t.global_batch_size % per_microbatch == 0, "training.global_batch_size",
                    t.global_batch_size, " is not a multiple of training.local_batch_size (",
                    t.local_batch_size, ") x the ", dp_degree,
                    " data-parallel ranks; choose a multiple of ", per_microbatch);
  return t.global_batch_size / per_microbatch;
}

namespace {
// --world-size's value: a whole number of ranks, at least 1.
int parse_world_size(const std::string& text) {
  size_t used = 0;
  int n = 0;
  try {
    n = std::stoi(text, &used);
  } catch (const std::exception&) {
  }
  KILN_CHECK(used == text.size() && n >= 1, "--world-size ", text,
             ": expected a number of ranks, at least 1");
  return n;
}
}  // namespace

TrainCommandLine parse_train_command_line(const std::vector<std::string>& args) {
  TrainCommandLine out;
  TrainConfig probe;
  std::vector<Field> all = fields(probe);
  std::string bare_switch;  // the previous argument when it was a bool flag alone
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const std::string after = std::exchange(bare_switch, "");
    auto next = [&](const char* what) -> std::string {
      KILN_CHECK(i + 1 < args.size(), a, " needs ", what);
      return args[++i];
    };
    if (a == "--print-config") {
      out.print_config = true;
    } else if (a == "--dry-run") {
      out.dry_run = true;
    } else if (a == "--json") {
      out.json = true;
    } else if (a == "--world-size" || a.starts_with("--world-size=")) {
      std::string n = a == "--world-size" ? next("a number of ranks") : a.substr(13);
      out.world_size = parse_world_size(n);
    } else if (a == "--config" || a.starts_with("--config=")) {
      out.config = a == "--config" ? next("a recipe file or name") : a.substr(9);
    } else if (a == "--override" || a.starts_with("--override=")) {
      out.settings.emplace_back("--override",
                                a == "--override" ? next("component=impl") : a.substr(11));
    } else if (a.starts_with("--") && a.find('.') != std::string::npos) {
      std::string key = a.substr(2), value;
      if (size_t eq = key.find('='); eq != std::string::npos) {
        value = key.substr(eq + 1);
        key = key.substr(0, eq);
      } else {
        Field& f = find_field(all, key, cat("--", key, ": "));
        bool is_bool = std::holds_alternative<bool*>(f.ref) ||
                       std::holds_alternative<std::optional<bool>*>(f.ref);
        // A bool flag alone means true; other keys take the next argument.
        if (is_bool && (i + 1 >= args.size() || !parse_bool(args[i + 1]))) {
          value = "true";
          bare_switch = a;
        } else {
          value = next(cat("a value (", type_name(f.ref), ")").c_str());
        }
      }
      find_field(all, key, cat("--", key, ": "));
      out.settings.emplace_back(key, value);
    } else {
      KILN_CHECK(after.empty(), "unexpected argument '", a, "' after ", after,
                 ", a switch (alone it means true; its values are true and false: ", after,
                 "=false)");
      fail("unexpected argument '", a,
           "'; kiln train takes --config FILE, --print-config, --dry-run [--world-size N] "
           "[--json], --override component=impl and --section.key=value settings");
    }
  }
  KILN_CHECK(out.dry_run || (out.world_size == 0 && !out.json),
             "--world-size and --json are for --dry-run; a run takes its world from mpirun -n");
  return out;
}

TrainConfig load_train_config(const TrainCommandLine& cl) {
  Recipe recipe = cl.config.empty() ? default_recipe() : find_recipe(cl.config);
  TrainConfig c;
  apply_toml(c, recipe.text, recipe.origin);
  for (const auto& [key, value] : cl.settings) {
    if (key == "--override")
      apply_override(c, value);
    else
      apply_setting(c, key, value);
  }
  finalize(c);
  return c;
}

}  // namespace kiln::train
