#include "kiln/data/jinja.h"

#include "kiln/base/error.h"
#include "kiln/data/jinja_eval.h"
#include "kiln/data/jinja_parser.h"

namespace kiln::data {

JinjaTemplate::JinjaTemplate(std::string_view source, std::string name)
    : program_(std::make_shared<const jinja::Program>(jinja::parse(source, std::move(name)))) {}

std::string JinjaTemplate::render(const nlohmann::ordered_json& context) const {
  KILN_CHECK(context.is_object(), program_->name, ": the context must be a JSON object, not ", context.type_name());
  return jinja::render(*program_, jinja::Json(context));
}

}  // namespace kiln::data
