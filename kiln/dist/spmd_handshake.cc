#include "kiln/dist/spmd_handshake.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "kiln/base/error.h"
#include "kiln/ir/fingerprint.h"

namespace kiln::dist {
namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// "ranks 0,2" / "rank 1" (world ranks).
std::string ranks_text(const ProcessGroup& g, const std::vector<int>& members) {
  std::string s = members.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < members.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(g.world_ranks()[size_t(members[i])]);
  }
  return s;
}

}  // namespace

Handshake handshake_mode() {
  const char* env = std::getenv("KILN_SPMD_HANDSHAKE");
  std::string v = env ? env : "off";
  if (v == "off" || v.empty()) return Handshake::off;
  if (v == "compile") return Handshake::compile;
  if (v == "dispatch") return Handshake::dispatch;
  fail("KILN_SPMD_HANDSHAKE='", v, "': expected off, compile or dispatch");
}

void spmd_handshake(ProcessGroup& group, const ir::Graph& g, const std::string& what) {
  if (group.size() == 1) return;
  ir::Fingerprint f = ir::fingerprint(g, {});
  const int64_t mine[2] = {int64_t(f.shapeless), int64_t(f.dims)};
  std::vector<int64_t> all(size_t(2 * group.size()));
  group.all_gather(mine, all.data(), 2, DType::i64).wait();
  // Members by fingerprint, in order of their first member.
  std::vector<std::pair<std::pair<int64_t, int64_t>, std::vector<int>>> kinds;
  for (int r = 0; r < group.size(); ++r) {
    std::pair<int64_t, int64_t> key{all[size_t(2 * r)], all[size_t(2 * r + 1)]};
    auto it =
        std::find_if(kinds.begin(), kinds.end(), [&](const auto& k) { return k.first == key; });
    if (it == kinds.end())
      kinds.push_back({key, {r}});
    else
      it->second.push_back(r);
  }
  if (kinds.size() == 1) return;

  // Every member fails, with the same message: where the first two kinds part.
  std::vector<std::string> texts = all_gather_text(group, ir::to_text(g));
  int a = kinds[0].second[0], b = kinds[1].second[0];
  std::vector<std::string> la = lines_of(texts[size_t(a)]), lb = lines_of(texts[size_t(b)]);
  size_t line = 0;
  while (line < la.size() && line < lb.size() && la[line] == lb[line]) ++line;
  auto at = [&](const std::vector<std::string>& l) {
    return line < l.size() ? "`" + l[line] + "`" : std::string("(the end of its graph)");
  };
  std::string groups;
  for (const auto& k : kinds) groups += (groups.empty() ? "" : "; ") + ranks_text(group, k.second);
  fail("SPMD handshake before ", what, " on ", group.describe(),
       ": the ranks' graphs differ (", kinds.size(), " kinds: ", groups,
       "); first difference at line ", line + 1, " of the graph text: ",
       ranks_text(group, kinds[0].second), ": ", at(la), "; ",
       ranks_text(group, kinds[1].second), ": ", at(lb),
       ". Every rank must trace the same program: look for rank-dependent code or settings");
}

}  // namespace kiln::dist
