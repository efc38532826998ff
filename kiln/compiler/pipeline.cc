#include "kiln/compiler/pipeline.h"

#include "kiln/base/error.h"
#include "kiln/compiler/collective_schedule.h"
#include "kiln/compiler/cse.h"
#include "kiln/compiler/dce.h"
#include "kiln/compiler/fuse.h"
#include "kiln/compiler/simplify.h"

namespace kiln::compiler {

std::string to_string(const PassOptions& o) {
  return cat("simplify=", int(o.simplify), ",cse=", int(o.cse), ",dce=", int(o.dce),
             ",fuse=", int(o.fuse), ",overlap=", int(o.overlap_collectives));
}

ir::Graph optimize(const ir::Graph& g, const PassOptions& options) {
  ir::Graph cur = g;
  if (options.simplify) cur = simplify(cur);
  if (options.cse) cur = cse(cur);
  if (options.dce) cur = dce(cur);
  if (options.fuse) cur = fuse(cur);
  if (options.overlap_collectives) cur = schedule_collectives(cur);
  return cur;
}

}  // namespace kiln::compiler
