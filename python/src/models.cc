// Models (kiln.models): CausalLM built from a registered config or loaded
// from a Hugging Face folder, run with its own parameters or with given
// values (how value_and_grad differentiates it); AdamW (kiln.optim) as a
// stateful wrapper of the functional C++ optimizer; generation with the KV
// cache; tokenizers.
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include "kiln/base/error.h"
#include "kiln/data/tokenizer.h"
#include "kiln/models/config.h"
#include "kiln/models/generate.h"
#include "kiln/models/hf_dir.h"
#include "kiln/models/model_fields.h"
#include "kiln/nn/module.h"
#include "kiln/optim/adamw.h"
#include "python/src/bindings.h"

namespace kiln::python {
namespace {

template <class M> struct member_type;
template <class T> struct member_type<T ModelConfig::*> { using type = T; };

// A registered config with some model_fields() changed.
ModelConfig config_with(const std::string& name, const nb::dict& overrides) {
  ModelConfig c = model_config(name);
  for (auto [k, v] : overrides) {
    std::string key = nb::cast<std::string>(k);
    const ModelField* field = nullptr;
    for (const ModelField& f : model_fields())
      if (key == f.key) field = &f;
    if (!field) {
      std::string keys;
      for (const ModelField& f : model_fields()) keys += cat(keys.empty() ? "" : ", ", f.key);
      throw Error(cat("kiln.models.build: '", key, "' is not a model setting; the settings are ",
                      keys));
    }
    std::visit([&](auto member) {
      using T = typename member_type<decltype(member)>::type;
      try {
        c.*member = nb::cast<T>(v);
      } catch (const nb::cast_error&) {
        throw Error(cat("kiln.models.build: ", key, " = ", nb::cast<std::string>(nb::repr(v)),
                        " has the wrong type"));
      }
    }, field->member);
    check_model_field(*field, c);
  }
  return c;
}

nb::dict config_dict(const ModelConfig& c) {
  nb::dict d;
  d["name"] = c.name;
  d["family"] = c.family;
  for (const ModelField& f : model_fields())
    std::visit([&](auto member) { d[f.key] = c.*member; }, f.member);
  d["seq_len"] = c.seq_len;
  d["max_position_embeddings"] = c.max_position_embeddings;
  return d;
}

// `params` as values for every parameter in named_parameters() order: a
// dict like state_dict() (exactly its names), or a list in that order.
std::vector<Tensor> parameter_values(const CausalLM& model, nb::handle params) {
  if (!nb::isinstance<nb::dict>(params)) return nb::cast<std::vector<Tensor>>(params);
  auto d = nb::borrow<nb::dict>(params);
  std::vector<Tensor> values;
  std::string missing;
  for (const auto& [name, slot] : model.named_parameters()) {
    if (d.contains(name.c_str()))
      values.push_back(nb::cast<Tensor>(d[name.c_str()]));
    else
      missing += cat(missing.empty() ? "" : ", ", name);
  }
  KILN_CHECK(missing.empty(), "params lacks the model's parameters ", missing);
  KILN_CHECK(d.size() == values.size(), "params has ", d.size() - values.size(),
             " entries that are no parameter of the model");
  return values;
}

// Runs `body` on the model with `params` in place of its parameters, or on
// its own when `params` is None.
template <class F>
Tensor with_params(CausalLM& model, nb::handle params, F body) {
  std::optional<std::vector<Tensor>> values;
  if (!params.is_none()) values = parameter_values(model, params);
  nb::gil_scoped_release nogil;
  if (!values) return body();
  nn::ParameterScope scope(model, *values);  // puts every parameter back
  return body();
}

struct PyAdamW {
  optim::AdamW opt;
  optim::AdamWState state;
};

nb::dict completion_dict(const Completion& c) {
  nb::dict d;
  d["ids"] = c.ids;
  d["logprobs"] = c.logprobs;
  d["finish_reason"] = c.finish_reason;
  return d;
}

}  // namespace

void bind_models(nb::module_& m) {
  m.def("model_names", &model_config_names, "The registered model configs.");

  nb::class_<CausalLM>(m, "CausalLM",
      "A Llama 3 / Qwen3 / Qwen3-MoE causal language model with Hugging Face's parameter names.")
      .def("__call__", [](CausalLM& model, const Tensor& ids, nb::handle params) {
            return with_params(model, params, [&] { return model.logits(ids); });
          }, nb::arg("ids"), nb::arg("params") = nb::none(),
          "ids [B, S] (int32/int64) -> logits [B, S, vocab_size]. With `params` (a dict like "
          "state_dict(), or a list in named_parameters() order) the model computes with those "
          "values in place of its parameters: how value_and_grad differentiates it.")
      .def("loss", [](CausalLM& model, const Tensor& ids, const Tensor& targets,
                      nb::handle params) {
            return with_params(model, params, [&] { return model.loss(ids, targets); });
          }, nb::arg("ids"), nb::arg("targets"), nb::arg("params") = nb::none(),
          "The training loss: mean cross-entropy of targets [B, S] (the next tokens; -100 "
          "ignored), plus the MoE routers' auxiliary losses.")
      .def("named_parameters", [](CausalLM& model) {
            std::vector<std::pair<std::string, Tensor>> out;
            for (auto& [name, slot] : model.named_parameters()) out.emplace_back(name, *slot);
            return out;
          })
      .def("state_dict", [](const CausalLM& model) { return model.state_dict(); },
           "name -> parameter (the tensors themselves: writing to one changes the model).")
      .def("load_state_dict", [](CausalLM& model, const nn::StateDict& d, bool strict) {
            nb::gil_scoped_release nogil;
            model.load_state_dict(d, strict);
          }, nb::arg("state_dict"), nb::arg("strict") = true)
      .def_prop_ro("num_parameters", &CausalLM::num_parameters)
      .def_prop_ro("config", [](const CausalLM& model) { return config_dict(model.config()); })
      .def("save_hf", [](const CausalLM& model, const std::string& dir, bool overwrite) {
            HfSaveOptions o;
            o.overwrite = overwrite;
            nb::gil_scoped_release nogil;
            save_hf_model(model, dir, o);
          }, nb::arg("dir"), nb::arg("overwrite") = false,
          "Writes config.json and model.safetensors into dir, atomically.");

  m.def("build_model", [](const std::string& name, nb::handle dtype, uint64_t seed,
                          const nb::dict& overrides) {
          ModelConfig c = config_with(name, overrides);
          DType d = dtype.is_none() ? DType::f32 : to_dtype(dtype);
          nb::gil_scoped_release nogil;
          return build_model(c, d, seed);
        }, nb::arg("name"), nb::arg("dtype") = nb::none(), nb::arg("seed") = 0,
        nb::arg("overrides") = nb::dict());
  m.def("load_hf_model", [](const std::string& dir, nb::handle dtype) {
          DType d = dtype.is_none() ? DType::f32 : to_dtype(dtype);
          nb::gil_scoped_release nogil;
          return load_hf_model(dir, d);
        }, nb::arg("dir"), nb::arg("dtype") = nb::none());

  nb::class_<PyAdamW>(m, "AdamW")
      .def("__init__", [](PyAdamW* self, const std::vector<std::string>& names,
                          const std::vector<Tensor>& params, double beta1, double beta2,
                          double eps, double weight_decay) {
            optim::AdamWOptions o{beta1, beta2, eps, weight_decay};
            optim::AdamW opt(o, optim::default_param_groups(names, params, weight_decay));
            optim::AdamWState state = opt.init(params);
            new (self) PyAdamW{std::move(opt), std::move(state)};
          }, nb::arg("names"), nb::arg("params"), nb::arg("beta1"), nb::arg("beta2"),
          nb::arg("eps"), nb::arg("weight_decay"))
      .def("step", [](PyAdamW& a, const std::vector<Tensor>& params,
                      const std::vector<Tensor>& grads, double lr) {
            nb::gil_scoped_release nogil;
            optim::AdamWUpdate u = a.opt.update(params, grads, a.state, lr);
            a.state = std::move(u.state);
            return u.params;
          }, nb::arg("params"), nb::arg("grads"), nb::arg("lr"))
      .def_prop_ro("steps", [](const PyAdamW& a) { return a.state.step; });

  m.def("generate", [](const CausalLM& model, const std::vector<std::vector<int32_t>>& prompts,
                       int64_t max_new_tokens, double temperature, int64_t top_k, double top_p,
                       std::vector<int32_t> eos_ids, uint64_t seed, int64_t max_length) {
          KILN_CHECK(!prompts.empty(), "generate: no prompts");
          GenerationOptions o;
          o.max_new_tokens = max_new_tokens;
          o.sampling = {temperature, top_k, top_p};
          o.eos_ids = std::move(eos_ids);
          o.seed = seed;
          check_sampling(o.sampling);
          std::vector<Completion> out;
          {
            nb::gil_scoped_release nogil;
            KVCacheDecoder decoder(model, int64_t(prompts.size()), max_length);
            out = generate(decoder, prompts, o);
          }
          nb::list l;
          for (const Completion& c : out) l.append(completion_dict(c));
          return l;
        }, nb::arg("model"), nb::arg("prompts"), nb::arg("max_new_tokens"),
        nb::arg("temperature"), nb::arg("top_k"), nb::arg("top_p"), nb::arg("eos_ids"),
        nb::arg("seed"), nb::arg("max_length"));

  nb::class_<Tokenizer>(m, "Tokenizer", "A byte-level BPE tokenizer (Hugging Face's).")
      .def_static("load", &Tokenizer::load, nb::arg("path"),
                  "tokenizer.json, a folder holding it (or vocab.json and merges.txt).")
      .def("encode", [](const Tokenizer& t, std::string_view text, bool special) {
            return special ? t.encode_with_special_tokens(text) : t.encode(text);
          }, nb::arg("text"), nb::arg("add_special_tokens") = false)
      .def("decode", [](const Tokenizer& t, const std::vector<int32_t>& ids, bool skip) {
            return t.decode(ids, skip);
          }, nb::arg("ids"), nb::arg("skip_special_tokens") = false)
      .def_prop_ro("vocab_size", &Tokenizer::vocab_size)
      .def("token_to_id", &Tokenizer::token_to_id, nb::arg("token"));
}

}  // namespace kiln::python
