// The model a run fine-tunes from checkpoint.initial_load_path, a Hugging
// Face folder: its config.json decides the architecture, including what a
// recipe cannot express (Llama 3.1 rope scaling, Qwen3-MoE's
// norm_topk_prob, dense layers in an MoE model, ...). Where the recipe sets
// an architecture field to another value the folder's weights cannot be
// those of the recipe's model, so that is refused naming both. The
// component implementations (attention_impl, loss_impl, ...: how the model
// runs, not what it computes) and the training-only fields (the router's
// z-loss and balancing rate, which config.json has no key for) stay the
// recipe's.
#pragma once
#include <string>

#include "kiln/models/config.h"

namespace kiln::train {

ModelConfig initial_folder_model(const std::string& dir, const ModelConfig& recipe);

// `registered` (the recipe's model.name) with the architecture fields of
// folder `dir`'s config.json: what a fine-tune's recipe leaves unset. With
// no config.json there (yet: `--print-config` may come before the folder),
// `registered` as it is; initial_folder_model refuses such a folder.
ModelConfig with_folder_architecture(ModelConfig registered, const std::string& dir);

// `architecture` (a folder's config.json, or the one a fine-tune's
// checkpoint records) with the recipe's component implementations; an
// architecture field the recipe sets otherwise is refused naming `source`.
ModelConfig with_recipe_components(ModelConfig architecture, const ModelConfig& recipe,
                                   const std::string& source);

}  // namespace kiln::train
