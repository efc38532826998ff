// Checkpoints: a run of 6 steps and a run of 3 steps, saved, loaded into a
// fresh model/optimizer/loader and continued for 3 more, give identical
// losses and bit-identical parameters. Also: keeping the latest K,
// temporary directories from killed writers, corrupt files, step choice,
// shards from several writers, and the Hugging Face export.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>

#include "kiln/base/error.h"
#include "kiln/data/bpe_trainer.h"
#include "kiln/data/loader.h"
#include "kiln/data/tokenizer.h"
#include "kiln/models/hf_dir.h"
#include "kiln/models/transformer.h"
#include "kiln/ops/elementwise.h"
#include "kiln/optim/adamw.h"
#include "kiln/optim/clip.h"
#include "kiln/optim/schedule.h"
#include "kiln/runtime/backend.h"
#include "kiln/train/async_checkpoint.h"
#include "kiln/train/checkpoint.h"
#include "kiln/train/checkpoint_manifest.h"
#include "tests/support/temp_dir.h"

namespace kiln::train {
namespace {

namespace fs = std::filesystem;

ModelConfig tiny_config() {
  ModelConfig c = model_config("llama3_debug");
  c.dim = 32;
  c.n_layers = 1;
  c.n_heads = 2;
  c.n_kv_heads = 1;
  c.head_dim = 16;
  c.ffn_dim = 48;
  c.vocab_size = 64;
  c.seq_len = 8;
  return c;
}

std::shared_ptr<const data::TokenCorpus> corpus() {
  std::vector<std::vector<int32_t>> docs;
  uint64_t x = 7;
  for (int d = 0; d < 30; ++d) {
    std::vector<int32_t> doc;
    for (int i = 0; i < 4 + d % 9; ++i) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      doc.push_back(int32_t(3 + (x >> 33) % 61));
    }
    docs.push_back(doc);
  }
  return std::make_shared<data::TokenCorpus>(data::TokenCorpus::from_documents(docs));
}

// Everything a training run holds, built fresh (the model from `init_seed`).
struct TrainRun {
  std::unique_ptr<CausalLM> model;
  std::vector<std::string> names;
  optim::AdamW opt;
  optim::AdamWState state;
  optim::LRSchedule sched;
  data::DataLoader loader;
  Generator rng{42};
  int64_t step = 0;

  static data::LoaderOptions loader_options() {
    data::LoaderOptions o;
    o.packing.seq_len = 8;
    o.packing.bos_id = 1;
    o.packing.eos_id = 2;
    o.local_batch_size = 2;
    o.seed = 5;
    return o;
  }
  static std::vector<std::string> param_names(CausalLM& m) {
    std::vector<std::string> n;
    for (auto& [name, p] : m.named_parameters()) n.push_back(name);
    return n;
  }

  explicit TrainRun(uint64_t init_seed)
      : model(build_model(tiny_config(), DType::f32, init_seed)),
        names(param_names(*model)),
        opt({0.9, 0.95, 1e-8, 0.1},
            optim::default_param_groups(names, model->parameters(), 0.1)),
        state(opt.init(model->parameters())),
        sched({3e-3, 2, std::nullopt, optim::DecayType::cosine, 0.1}, 6),
        loader(corpus(), loader_options()) {}

  // One step; returns the loss.
  float train_step() {
    data::Batch b = loader.next();
    auto out = nn::value_and_grad(*model, [&] {
      return std::vector<Tensor>{model->loss(b.ids, b.targets, {b.doc_ids, b.positions})};
    });
    auto clipped = optim::clip_grad_norm(out.grads, 1.0);
    // Gradient noise from the run's generator, so that its state matters.
    std::vector<Tensor> grads;
    for (const auto& g : clipped.grads) grads.push_back(g + randn(g.shape(), rng) * 1e-4);
    auto upd = opt.update(model->parameters(), grads, state, sched.lr(step));
    model->set_parameters(upd.params);
    state = upd.state;
    ++step;
    return out.values[0].item<float>();
  }

  CheckpointData checkpoint() const {
    CheckpointData d;
    d.step = step;
    for (auto& [name, p] : model->state_dict()) d.model.emplace_back(name, p);
    d.optimizer = optim::adamw_state_tensors(state, names);
    d.optimizer_state = optim::adamw_state_json(state, opt.options());
    d.scheduler = sched.to_json();
    d.loader = loader.to_json();
    d.rng = rng_to_json(rng);
    d.config = {{"model", "tiny"}};
    return d;
  }

  void restore(const LoadedCheckpoint& c) {
    model->load_state_dict({c.model.begin(), c.model.end()});
    state = optim::adamw_state_from_tensors(c.optimizer, c.optimizer_state["step"].get<int64_t>(),
                                            names, model->parameters());
    loader.load_json(c.loader);
    rng = rng_from_json(c.rng);
    step = c.step;
  }
};

std::vector<uint32_t> bits(const Tensor& t) {
  auto v = t.contiguous().to_vector<float>();
  std::vector<uint32_t> b(v.size());
  std::memcpy(b.data(), v.data(), v.size() * 4);
  return b;
}

TEST(Checkpoint, ResumeIsBitIdentical) {
  test::TempDir dir;
  TrainRun straight(0);
  std::vector<float> want;
  for (int i = 0; i < 6; ++i) want.push_back(straight.train_step());
  EXPECT_LT(want.back(), want.front());

  std::vector<float> got;
  {
    TrainRun first(0);
    for (int i = 0; i < 3; ++i) got.push_back(first.train_step());
    CheckpointManager(dir.path()).save(first.checkpoint());
  }
  TrainRun resumed(99);  // other initial weights: all must come from the checkpoint
  resumed.restore(CheckpointManager(dir.path()).load());
  EXPECT_EQ(resumed.step, 3);
  for (int i = 0; i < 3; ++i) got.push_back(resumed.train_step());

  for (int i = 0; i < 6; ++i) EXPECT_EQ(got[size_t(i)], want[size_t(i)]) << "loss of step " << i;
  auto a = straight.model->parameters(), b = resumed.model->parameters();
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(bits(a[i]), bits(b[i])) << "parameter " << straight.names[i];
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(bits(straight.state.m[i]), bits(resumed.state.m[i]));
    EXPECT_EQ(bits(straight.state.v[i]), bits(resumed.state.v[i]));
  }
  EXPECT_EQ(straight.rng.offset(), resumed.rng.offset());
  EXPECT_EQ(straight.loader.to_json(), resumed.loader.to_json());
}

CheckpointData small(int64_t step, float value) {
  CheckpointData d;
  d.step = step;
  d.model = {{"w", full({2, 3}, value)}};
  d.optimizer = {{"optim.m.w", zeros({2, 3})}};
  d.loader = {{"samples", step * 4}};
  return d;
}

TEST(Checkpoint, KeepsLatestAndIgnoresIncompleteOnes) {
  test::TempDir dir;
  CheckpointManager m(dir / "ckpt", 2);
  EXPECT_FALSE(m.latest_step());
  EXPECT_THROW(m.load(), Error);
  // A writer killed mid-save leaves a temporary directory (pid 0x3fffff: none).
  dir.write("ckpt/step-9.tmp.4194303/model.safetensors", "partial");
  dir.write("ckpt/step-8/model.safetensors", "no manifest: never complete");
  for (int64_t s : {1, 2, 3}) m.save(small(s, float(s)));
  EXPECT_EQ(m.steps(), (std::vector<int64_t>{2, 3}));
  EXPECT_FALSE(fs::exists(dir / "ckpt/step-1"));
  EXPECT_FALSE(fs::exists(dir / "ckpt/step-9.tmp.4194303"));
  LoadedCheckpoint latest = m.load();
  EXPECT_EQ(latest.step, 3);
  EXPECT_EQ(latest.model.at("w").to_vector<float>(), std::vector<float>(6, 3.0f));
  EXPECT_EQ(latest.loader["samples"], 12);
  EXPECT_EQ(m.load(2).model.at("w").to_vector<float>(), std::vector<float>(6, 2.0f));
  try {
    m.load(7);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("steps there: 2, 3"), std::string::npos) << e.what();
  }
  // Saving the same step again replaces it.
  m.save(small(3, 5.0f));
  EXPECT_EQ(m.load().model.at("w").to_vector<float>(), std::vector<float>(6, 5.0f));
}

TEST(Checkpoint, CorruptFilesAreErrorsNamingThem) {
  test::TempDir dir;
  CheckpointManager m(dir.path());
  std::string path = m.save(small(4, 1.0f));
  auto expect = [&](const std::string& file) {
    try {
      m.load();
      ADD_FAILURE() << "loaded a corrupt checkpoint";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
    }
  };
  std::string model = path + "/model.safetensors";
  auto size = fs::file_size(model);
  {
    std::fstream f(model, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(std::streamoff(size - 1));
    f.put('\x7f');
  }
  expect("model.safetensors");
  fs::resize_file(model, size / 2);
  expect("model.safetensors");
  m.save(small(4, 1.0f));
  fs::remove(path + "/optimizer.safetensors");
  expect("optimizer.safetensors");
  m.save(small(4, 1.0f));
  std::ofstream(path + "/manifest.json") << "{truncated";
  expect("manifest.json");
}

// A manifest whose fields have the wrong type or range is refused naming
// the field (a hostile manifest, as the fuzz target makes them).
TEST(CheckpointManifest, WrongFieldsAreErrorsNamingThem) {
  CheckpointManifest m;
  m.step = 7;
  for (const char* stem : kCheckpointStems)
    m.files[checkpoint_shard_file(stem, 0, 1)] = {10, 0xabc};
  const nlohmann::json good = nlohmann::json::parse(checkpoint_manifest_text(m));
  EXPECT_EQ(checkpoint_manifest_text(parse_checkpoint_manifest(good.dump(), "m")),
            checkpoint_manifest_text(m));
  auto expect = [&](const char* pointer, const nlohmann::json& value, const std::string& says) {
    nlohmann::json bad = good;
    bad[nlohmann::json::json_pointer(pointer)] = value;
    try {
      parse_checkpoint_manifest(bad.dump(), "m");
      ADD_FAILURE() << pointer << " = " << value.dump() << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  expect("/step", -1, "\"step\" must be an integer in [0, ");
  expect("/files/model.safetensors/bytes", "10", "entry 'model.safetensors' \"bytes\"");
  expect("/files/optimizer.safetensors/xxh64", "xyz", "16 hex digits");
  expect("/shards", {{"count", 1 << 20}}, "\"count\" must be an integer in [0, 65536]");
  expect("/shards", {{"count", 2}, {"rows", {{"w", -3}}}}, "rows of 'w'");
  expect("/rng", 5, "\"rng\" must be an object");
  // The counters a resume reads: 1e30 would convert to an integer undefined.
  expect("/optimizer", {{"step", 1e30}}, "'m' \"optimizer\" \"step\" must be an integer in [0, ");
  expect("/loader", {{"samples", -100}}, "'m' \"loader\" \"samples\" must be an integer in [0, ");
  expect("/loader", {{"samples", 4}, {"micro", "1"}}, "\"loader\" \"micro\" must be an integer");
  expect("/version", 2, "this kiln reads version 1");
}

// Three writers' shards of a 5 x 2 tensor (padded to 6 rows, 2 each) and of
// a 2-row one (padded to 3): one directory, one manifest, full tensors back.
TEST(Checkpoint, ShardsFromSeveralWritersLoadAsFullTensors) {
  test::TempDir dir;
  CheckpointManager m(dir / "ckpt");
  std::vector<float> w(10), b{7, 8};
  for (size_t i = 0; i < w.size(); ++i) w[i] = float(i);
  auto shard = [&](int64_t i) {
    CheckpointData d;
    d.step = 6;
    d.shard_index = i, d.shard_count = 3;
    d.full_rows = {{"w", 5}, {"b", 2}, {"optim.m.w", 5}};
    std::vector<float> rows(4, 0.0f), brow{i < 2 ? b[size_t(i)] : 0.0f};
    for (size_t j = 0; j < 4 && 4 * size_t(i) + j < w.size(); ++j) rows[j] = w[4 * size_t(i) + j];
    Tensor wt = from_vector<float>(rows, {2, 2});
    d.model = {{"w", wt}, {"b", from_vector<float>(brow, {1})}};
    d.optimizer = {{"optim.m.w", wt * 2.0}};
    return d;
  };
  std::string temp = m.begin(6);
  std::vector<ShardDigest> digests;
  for (int64_t i : {2, 0, 1}) digests.push_back(m.write_shard(temp, shard(i)));
  // Every shard must be there before the step is published.
  EXPECT_THROW(m.commit(shard(0), {digests[0], digests[1]}), Error);
  EXPECT_FALSE(m.latest_step());
  temp = m.begin(6);
  for (int64_t i : {0, 1, 2}) digests[size_t(i)] = m.write_shard(temp, shard(i));
  std::string path = m.commit(shard(0), digests);
  EXPECT_TRUE(fs::exists(path + "/model-00003-of-00003.safetensors"));
  LoadedCheckpoint c = m.load();
  EXPECT_EQ(c.model.at("w").shape(), Shape({5, 2}));
  EXPECT_EQ(c.model.at("w").to_vector<float>(), w);
  EXPECT_EQ(c.model.at("b").to_vector<float>(), b);
  std::vector<float> m2 = w;
  for (float& x : m2) x *= 2;
  EXPECT_EQ(c.optimizer.at("optim.m.w").to_vector<float>(), m2);
}

std::string file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(Checkpoint, AHostCopySavesTheFilesOfTheTensorsAsTheyWereWhenCopied) {
  test::TempDir dir;
  std::vector<float> w(12);
  for (size_t i = 0; i < w.size(); ++i) w[i] = float(i) / 3;
  Tensor wt = from_vector<float>(w, {3, 4});
  CheckpointData d;
  d.step = 3;
  d.model = {{"w", wt},
             {"w_t", wt.transpose(0, 1)},  // a strided view
             {"w_bf16", wt.to(DType::bf16)},
             {"empty", from_vector<float>({}, {0, 4})}};
  d.optimizer = {{"optim.m.w", wt * 2.0}};
  d.scheduler = {{"last_step", 3}};
  const std::string plain = CheckpointManager(dir / "plain").save(d);
  CheckpointData copy = d.on_host();
  EXPECT_TRUE(copy.model.empty() && copy.optimizer.empty() && copy.host);
  // The live tensor changes after the copy (the next step's update).
  std::fill_n(static_cast<float*>(wt.impl().storage->data) + wt.impl().offset, w.size(), -1.0f);
  const std::string copied = CheckpointManager(dir / "copied").save(copy);
  int files = 0;
  for (const auto& e : fs::directory_iterator(plain)) {
    EXPECT_EQ(file_bytes(e.path()), file_bytes(fs::path(copied) / e.path().filename()))
        << e.path().filename();
    ++files;
  }
  EXPECT_EQ(files, 3);
  EXPECT_EQ(CheckpointManager(dir / "copied").load().model.at("w").to_vector<float>(), w);
}

// A checkpoint's data of one tensor, x, at `step`.
CheckpointData one_tensor(int64_t step, float x) {
  CheckpointData d;
  d.step = step;
  d.model = {{"w", from_vector<float>({x, x}, {2})}};
  return d;
}

TEST(AsyncCheckpointer, RunsEachSaveBesideTheCallerAndReportsItWhenWaitedFor) {
  AsyncCheckpointer saves;
  EXPECT_FALSE(saves.wait());
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  EXPECT_FALSE(saves.start(one_tensor(1, 1), [released](const CheckpointData& d) {
    released.wait();  // returns only once the caller goes on past start()
    return cat("ckpt/step-", d.step);
  }));
  EXPECT_TRUE(saves.pending());
  EXPECT_FALSE(saves.finished());
  release.set_value();
  std::optional<AsyncCheckpointer::Saved> first =
      saves.start(one_tensor(2, 2), [](const CheckpointData&) -> std::string {
        fail("cannot write ckpt/step-2: No space left on device");
      });
  ASSERT_TRUE(first);
  EXPECT_EQ(first->step, 1);
  EXPECT_EQ(first->path, "ckpt/step-1");
  EXPECT_GE(first->seconds, 0);
  // The failed save's error comes with the next call, which then starts nothing.
  bool ran = false;
  try {
    saves.start(one_tensor(3, 3), [&ran](const CheckpointData&) {
      ran = true;
      return std::string();
    });
    ADD_FAILURE() << "the failed save was not reported";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("saving checkpoint step 2 in the background: cannot "
                                         "write ckpt/step-2: No space left on device"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(ran);
  EXPECT_FALSE(saves.pending());
}

TEST(AsyncCheckpointer, SavesHostCopiesInTheLastCopysBuffers) {
  AsyncCheckpointer saves;
  std::vector<const char*> buffers;
  std::vector<float> seen;
  auto save = [&](const CheckpointData& d) {
    EXPECT_TRUE(d.host && d.model.empty());
    const HostTensor& w = d.host->model.at(0).second;
    buffers.push_back(w.data.get());
    seen.push_back(reinterpret_cast<const float*>(w.data.get())[1]);
    return std::string();
  };
  for (int step = 1; step <= 3; ++step) saves.start(one_tensor(step, float(step) / 2), save);
  saves.wait();
  EXPECT_EQ(seen, (std::vector<float>{0.5f, 1.0f, 1.5f}));
  ASSERT_EQ(buffers.size(), 3u);
  EXPECT_EQ(buffers[1], buffers[0]);
  EXPECT_EQ(buffers[2], buffers[0]);
}

TEST(Checkpoint, DueAndRng) {
  EXPECT_TRUE(checkpoint_due(10, 25, 5));
  EXPECT_FALSE(checkpoint_due(11, 25, 5));
  EXPECT_TRUE(checkpoint_due(25, 25, 0));
  EXPECT_FALSE(checkpoint_due(5, 25, 0));
  Generator g(3, 17);
  Generator h = rng_from_json(nlohmann::json::parse(rng_to_json(g).dump()));
  EXPECT_EQ(h.seed(), 3u);
  EXPECT_EQ(h.offset(), 17u);
  EXPECT_THROW(rng_from_json({{"seed", -1}}), Error);
}

TEST(Checkpoint, ExportHuggingFaceWithTokenizer) {
  test::TempDir dir;
  BpeTrainerOptions o;
  o.vocab_size = 300;
  o.special_tokens = {"<s>", "</s>"};
  BpeTrainer t(o);
  t.add_text("hello world hello");
  std::string tok = dir.write("tok/tokenizer.json", t.train().json);
  auto model = build_model(tiny_config(), DType::f32, 3);
  export_hf(*model, tok, dir / "hf");
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"})
    EXPECT_TRUE(fs::exists(dir / cat("hf/", f))) << f;
  auto back = load_hf_model(dir / "hf");
  auto a = model->parameters(), b = back->parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(bits(a[i]), bits(b[i]));
  EXPECT_NO_THROW(Tokenizer::load(dir / "hf"));
  export_hf(*model, tok, dir / "hf");  // replaces an earlier export
}

}  // namespace
}  // namespace kiln::train
