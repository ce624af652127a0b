// Result files read back: `dtsim report RESULT...` checks each with its family's reader before
// plotting (simulate, sweep, search, replay), and `dtsim diff A.json B.json` compares two of any
// family (their provenance, then every number). The input is one result, or two separated by a
// line "--- B" (without one, the result is compared with itself); each is handed to every
// family's reader (run and validation reports and op lists too) and the two to `dtsim diff`.
#include <array>
#include <sstream>

#include "sim/base/json_reader.h"
#include "tests/fuzz/fuzz_support.h"
#include "tools/cli/diff_command.h"
#include "tools/results/op_list.h"
#include "tools/results/replay_result.h"
#include "tools/results/run_result.h"
#include "tools/results/search_results.h"
#include "tools/results/simulate_result.h"
#include "tools/results/sweep_result.h"
#include "tools/results/validation_report.h"

namespace {

void ReadAsEveryFamily(std::string_view text, const std::string& name) {
  using namespace dtsim;  // NOLINT(google-build-using-namespace): a harness's helper
  const Expected<Json> json = ParseJson(text, name);
  if (!fuzz::Succeeded(json)) return;
  (void)fuzz::Succeeded(results::SimulateResultFromJson(*json));
  (void)fuzz::Succeeded(results::SweepFromJson(*json));
  (void)fuzz::Succeeded(results::SearchFileFromJson(*json, name));
  (void)fuzz::Succeeded(results::ReplayResultFromJson(*json));
  (void)fuzz::Succeeded(results::RunResultFromJson(*json));
  (void)fuzz::Succeeded(results::ValidationReportFromJson(*json));
  (void)fuzz::Succeeded(results::OpListFromJson(*json));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dtsim;  // NOLINT(google-build-using-namespace): a harness's one function
  constexpr std::string_view kSeparator = "\n--- B\n";
  const std::string_view text = fuzz::Text(data, size);
  const size_t split = text.find(kSeparator);
  const std::string_view a = text.substr(0, split);
  const std::string_view b =
      split == std::string_view::npos ? a : text.substr(split + kSeparator.size());
  ReadAsEveryFamily(a, "a.json");
  if (split != std::string_view::npos) ReadAsEveryFamily(b, "b.json");
  const std::array<std::string, 4> args = {fuzz::ScratchFile("a.json", a),
                                           fuzz::ScratchFile("b.json", b), "--limit", "0"};
  std::ostringstream out;
  const cli::CommandOutcome outcome = cli::DiffCommand(args, out);
  if (outcome.kind != cli::CommandOutcome::Kind::kOk) {
    if (!outcome.error) __builtin_trap();  // a failure must say why
    fuzz::CheckError(*outcome.error);
  }
  return 0;
}
