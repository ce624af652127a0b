#include "tools/cli/ops_command.h"

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <string>

#include "models/gpu.h"
#include "tools/cli/command_line.h"
#include "tools/cli/trace_report.h"
#include "traces/kineto_reader.h"
#include "traces/op_profile.h"
#include "traces/trace_format.h"

namespace dtsim::cli {
namespace {

namespace po = boost::program_options;

struct OpsOptions {
  std::string trace;
  std::string output_path;
  std::string gpu;
  int top = 15;
  bool help = false;
};

po::options_description Describe(OpsOptions& o) {
  po::options_description description(
      "Usage: dtsim ops TRACE [options]\n\n"
      "Attributes every GPU op of a PyTorch profiler (Kineto) trace to the innermost framework\n"
      "op that launched it, groups the ops by signature (GEMMs as m, n, k; other ops by their\n"
      "ATen name and input shapes) and prints count, mean, median and min GPU time per\n"
      "signature. -o writes them as a measured op-cost table (docs/formats/op-costs.md).\n"
      "The trace must be recorded with record_shapes=True for ops to be keyed.\n\nOptions");
  description.add_options()("help,h", po::bool_switch(&o.help), "show this help")(
      "output,o", po::value(&o.output_path)->value_name("FILE"),
      "write the op-cost table (dtsim.op_costs) here")(
      "gpu", po::value(&o.gpu)->value_name("NAME"),
      "the GPU the table is for (default: the trace's device name)")(
      "top", AtLeastValue(&o.top, 0, "top"), "print the N signatures with the most GPU time");
  return description;
}

std::string Us(DurationNs duration) { return fmt::format("{:.1f}", duration.ns() / 1e3); }

std::string Dims(const traces::OpSignature& signature) {
  std::string text;
  for (const auto& [name, value] : signature.dims) {
    text += fmt::format("{}{}={}", text.empty() ? "" : " ", name, value);
  }
  return text;
}

Status Execute(const OpsOptions& options, std::ostream& out) {
  DTSIM_RETURN_IF_ERROR(RefuseOutputsOverInputs({options.trace}, {options.output_path}));
  DTSIM_ASSIGN_OR_RETURN(const traces::TraceFormat format,
                         traces::DetectTraceFormat(options.trace));
  if (traces::IsChakraFormat(format)) {
    return Error(
               "a Chakra execution trace: op tables are built from profiler (Kineto) traces, "
               "which have the kernels' times per op")
        .InFile(options.trace);
  }
  DTSIM_ASSIGN_OR_RETURN(const traces::Trace trace, traces::ReadKinetoTrace(options.trace));
  // --gpu names the table's GPU (a preset where the device name is none); a GPU of another
  // family than the one the trace ran on would label one GPU's times as another's.
  const std::string traced = models::GpuFamilyOf(trace.gpu_name);
  const std::string named = models::GpuFamilyOf(options.gpu);
  if (!traced.empty() && !named.empty() && traced != named) {
    return Error(fmt::format("the trace ran on {} ({}), not on the GPU --gpu names ({}): a "
                             "table holds the times of the GPU they were measured on",
                             trace.gpu_name, traced, named),
                 "--gpu", options.gpu)
        .InFile(options.trace);
  }
  DTSIM_ASSIGN_OR_RETURN(const traces::OpProfile profile,
                         traces::BuildOpProfile(trace, options.gpu));
  const traces::OpProfileStats& s = profile.stats;
  fmt::print(out, "dtsim ops {}\n\n", options.trace);
  PrintImportStats(out, trace);
  fmt::print(out,
             "  ops        {} GPU ops (collectives excluded), {} launched inside a framework op; "
             "{} op instances, {} keyed into {} signatures\n",
             s.gpu_ops, s.attributed_gpu_ops, s.op_instances, s.keyed_instances,
             profile.table.ops().size());
  for (const auto& [reason, count] : s.left_out) {
    fmt::print(out, "  left out   {} {}\n", count, reason);
  }
  std::vector<const traces::MeasuredOp*> ops;
  for (const traces::MeasuredOp& op : profile.table.ops()) ops.push_back(&op);
  std::sort(ops.begin(), ops.end(), [](const auto* a, const auto* b) {
    return a->duration.ns() * a->samples > b->duration.ns() * b->samples;
  });
  if (!ops.empty() && options.top > 0) {
    fmt::print(out, "\n  {:<24} {:<6} {:>6} {:>10} {:>10} {:>10} {:>11}  {}\n", "op", "dtype",
               "count", "mean us", "median us", "min us", "total ms", "dims");
    for (size_t i = 0; i < ops.size() && i < static_cast<size_t>(options.top); ++i) {
      const traces::MeasuredOp& op = *ops[i];
      fmt::print(out, "  {:<24} {:<6} {:>6} {:>10} {:>10} {:>10} {:>11.3f}  {}\n", op.signature.op,
                 DTypeName(op.signature.dtype), op.samples, Us(op.duration),
                 Us(op.median.value_or(op.duration)), Us(op.min.value_or(op.duration)),
                 static_cast<double>(op.duration.ns() * op.samples) / 1e6, Dims(op.signature));
    }
  }
  if (!options.output_path.empty()) {
    // A table without ops prices nothing: a config naming it would run on the roofline alone
    // with nothing said.
    if (profile.table.ops().empty()) {
      return Error(fmt::format("no op could be keyed into a signature ({} op instances, none "
                               "keyed; see \"left out\" above): nothing written{}",
                               s.op_instances,
                               s.op_instances > 0 && s.keyed_instances == 0
                                   ? "; record the trace with record_shapes=True"
                                   : ""))
          .InFile(options.output_path);
    }
    DTSIM_RETURN_IF_ERROR(traces::WriteOpCostTable(profile.table, options.output_path));
  }
  return Status::Ok();
}

}  // namespace

CommandOutcome OpsCommand(std::span<const std::string> args, std::ostream& out) {
  OpsOptions options;
  const po::options_description description = Describe(options);
  return RunCommandLine(args, description, "trace", options.trace, options.help,
                        "a profiler trace to aggregate", out,
                        [&] { return FailureUnlessOk(Execute(options, out)); });
}

}  // namespace dtsim::cli
