#include "tests/support/mesh_runs.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "tests/support/train_run.h"

namespace kiln::test {

Curve read_curve(const std::string& dump) {
  Curve c;
  for (const auto& j : read_metrics(dump)) {
    c.loss.push_back(j["loss"].get<double>());
    c.grad_norm.push_back(j["grad_norm"].get<double>());
    if (j.contains("val_loss")) c.val_loss.push_back(j["val_loss"].get<double>());
  }
  return c;
}

std::string mpirun(int ranks) {
  const char* mpiexec = std::getenv("KILN_MPIEXEC");
  EXPECT_TRUE(mpiexec) << "ctest sets KILN_MPIEXEC";
  return std::string(mpiexec ? mpiexec : "mpirun") + " -n " + std::to_string(ranks);
}

void expect_close(const Curve& got, const Curve& want, size_t first_step, const std::string& what) {
  ASSERT_EQ(got.loss.size() + first_step, want.loss.size()) << what;
  for (size_t i = 0; i < got.loss.size(); ++i) {
    size_t s = first_step + i;
    EXPECT_NEAR(got.loss[i], want.loss[s], 1e-5 * want.loss[s]) << what << ", step " << s + 1;
    EXPECT_NEAR(got.grad_norm[i], want.grad_norm[s], 1e-4 * want.grad_norm[s])
        << what << ", step " << s + 1;
  }
  // Validation splits its global batches over the dp ranks too.
  for (size_t i = 0; i < got.val_loss.size(); ++i) {
    size_t v = want.val_loss.size() - got.val_loss.size() + i;
    EXPECT_NEAR(got.val_loss[i], want.val_loss[v], 1e-5 * want.val_loss[v])
        << what << ", validation " << v + 1;
  }
}

}  // namespace kiln::test
