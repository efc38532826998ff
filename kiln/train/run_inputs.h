// What a run reads besides its initial weights: the training text (the data
// section's paths, or the default corpus), the tokenizer for it and the
// checkpoint it resumes from.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "kiln/data/text_source.h"
#include "kiln/data/tokenizer.h"
#include "kiln/models/config.h"
#include "kiln/train/checkpoint.h"
#include "kiln/train/config.h"

namespace kiln::train {

struct DataSource {
  std::vector<std::string> paths;
  data::TextSourceOptions source;
  std::string description;
};
DataSource data_source(const TrainConfig& c);

struct RunTokenizer {
  std::unique_ptr<Tokenizer> tokenizer;
  std::string path;  // the tokenizer.json (or folder) it was loaded from
};

// The run's checkpoint folder (<dump_folder>/<checkpoint.folder>).
std::string checkpoint_folder(const TrainConfig& c);
// The step a run resumes from: checkpoint.load_step when set, else (with
// checkpointing on) the newest complete checkpoint; none to start afresh.
std::optional<int64_t> resume_step(const TrainConfig& c, const CheckpointManager& checkpoints);

// The run's tokenizer, and a `tokenizer:` line saying which and why:
// - with checkpoint.initial_load_path, the folder's (model.tokenizer_path
//   may name one only if it encodes the same);
// - else model.tokenizer_path;
// - else, for a run resuming from a checkpoint, the dump folder's
//   tokenizer.json it was trained with;
// - else a byte-level BPE learned from the training text (replacing one a
//   run without checkpoints left).
// The lead rank decides; the others (`lead` false) load what it wrote.
RunTokenizer run_tokenizer(const TrainConfig& c, const ModelConfig& mc, const DataSource& src,
                           bool lead, std::ostream& out);

}  // namespace kiln::train
