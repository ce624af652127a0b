// `dtsim import nemo`: a NeMo training config's YAML read as JSON values
// (sim/base/yaml_reader.h), then its interpolations resolved and its keys turned into a config
// and checked (strategies/nemo_import.h). Without a first line that names the vocabulary
// ("# vocab N"), the tokenizer must be GPT-2's.
#include <charconv>

#include "sim/base/yaml_reader.h"
#include "strategies/nemo_import.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dtsim;  // NOLINT(google-build-using-namespace): a harness's one function
  const std::string_view text = fuzz::Text(data, size);
  strategies::ImportTarget target{.cluster = {{"preset", "dgx-h100"}, {"gpu", "h100-sxm5-80gb"}}};
  constexpr std::string_view kVocab = "# vocab ";
  if (text.starts_with(kVocab)) {
    int64_t vocab = 0;
    const char* digits = text.data() + kVocab.size();
    std::from_chars(digits, text.data() + text.size(), vocab);
    if (vocab > 0) target.vocab = vocab;
  }
  Expected<Json> yaml = ParseYaml(text, "config.yaml");
  if (!fuzz::Succeeded(yaml)) return 0;
  (void)fuzz::Succeeded(strategies::ImportNemoConfig(*yaml, "config.yaml", target));
  return 0;
}
