// `dtsim profile` without a GPU: the machine's own check names the missing driver; with the
// driver check and the injection library replaced, real programs run through the command —
// shell scripts standing in for a profiled program write the trace and the status line the
// injection library would — so argument handling, the environment the program gets, exit
// status pass-through and every failure message are tested on the CPU.
#include "tools/cli/profile_command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "profiler/kineto_writer.h"
#include "tests/profiler/synthetic_profile.h"
#include "tests/testing/temp_dir.h"

namespace dtsim::cli {
namespace {

using testing::HasSubstr;

class ProfileCommandTest : public testing_support::TempDirTest {
 protected:
  static ProfileEnvironment FakeGpu() {
    return {.probe_driver =
                [] {
                  return Expected<profiler::CudaDriverInfo>({1, 13000});
                },
            .injection_library = [] { return Expected<std::string>("/fake/libdtsim_inject.so"); }};
  }

  CommandOutcome Profile(std::vector<std::string> args,
                         const ProfileEnvironment& environment = FakeGpu()) {
    output_.str("");
    return ProfileCommand(args, output_, environment);
  }

  // `-o trace.json -- sh -c SCRIPT`
  CommandOutcome ProfileScript(const std::string& script) {
    return Profile(
        {"-o", Path("trace.json"), "--kinds", "kernel,memcpy", "--", "sh", "-c", script});
  }

  std::ostringstream output_;
};

TEST_F(ProfileCommandTest, WithoutAGpuTheMachineCheckNamesTheCause) {
  const Expected<profiler::CudaDriverInfo> driver = profiler::ProbeCudaDriver();
  if (driver.ok()) GTEST_SKIP() << "this machine has a GPU";
  const CommandOutcome outcome =
      Profile({"-o", Path("t.json"), "--", "true"}, MachineProfileEnvironment());
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(outcome.error->ToString(),
              HasSubstr("cannot profile here: " + driver.error().ToString()));
  EXPECT_THAT(profiler::ProbeCudaDriver("libdtsim_no_such_driver.so").error().ToString(),
              HasSubstr("no NVIDIA driver: libdtsim_no_such_driver.so cannot be loaded"));
}

TEST_F(ProfileCommandTest, AProfiledProgramsTraceIsReadBackAndSummarized) {
  ASSERT_TRUE(
      profiler::WriteKinetoTraceFile(Path("source.json"), profiler::SyntheticProfile()).ok());
  // What the injection library does at exit, once the environment is what dtsim promised.
  const std::string script =
      "test \"$CUDA_INJECTION64_PATH\" = /fake/libdtsim_inject.so && "
      "test \"$DTSIM_PROFILE_KINDS\" = kernel,memcpy && "
      "test \"$DTSIM_PROFILE_ALL_API_CALLS\" = 0 && "
      "test \"$DTSIM_PROFILE_CAPTURE_RANGE\" = whole && "
      "test \"$DTSIM_PROFILE_PARENT_PID\" = $PPID && "
      "test \"$DTSIM_PROFILE_PROGRAM\" != '' || exit 9; "
      "cp " +
      Path("source.json") +
      " \"$DTSIM_PROFILE_OUTPUT\" && "
      "echo \"ok $DTSIM_PROFILE_OUTPUT\" >> \"$DTSIM_PROFILE_STATUS\"";
  const CommandOutcome outcome = ProfileScript(script);
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  EXPECT_THAT(output_.str(), HasSubstr("dtsim profile: wrote " + Path("trace.json")));
  EXPECT_THAT(output_.str(), HasSubstr("3 kernels, 1 copies, 1 sets"));
  EXPECT_FALSE(std::filesystem::exists(Path("trace.json") + ".status-" + std::to_string(getpid())));
}

TEST_F(ProfileCommandTest, AllApiCallsAndCaptureRangeReachTheLibrary) {
  const std::string script =
      "test \"$DTSIM_PROFILE_ALL_API_CALLS\" = 1 || exit 9; "
      "test \"$DTSIM_PROFILE_CAPTURE_RANGE\" = cuda_profiler_api || exit 9; "
      "echo 'error stop here' >> \"$DTSIM_PROFILE_STATUS\"";
  const CommandOutcome outcome =
      Profile({"-o", Path("trace.json"), "--all-api-calls", "--capture-range", "cuda-profiler-api",
               "--", "sh", "-c", script});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(outcome.error->ToString(), HasSubstr("the profiler failed: stop here"));
}

TEST_F(ProfileCommandTest, AFailingProgramsStatusIsPassedThrough) {
  CommandOutcome outcome = ProfileScript("exit 3");
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kFailure);
  EXPECT_EQ(outcome.program_exit_status, 3);
  EXPECT_THAT(outcome.error->ToString(), HasSubstr("the program exited with status 3"));
  outcome = ProfileScript("kill -SEGV $$");
  EXPECT_EQ(outcome.program_exit_status, 128 + 11);
  EXPECT_THAT(outcome.error->ToString(), HasSubstr("killed by signal 11"));
  // A program that made no CUDA call never loaded the profiler.
  outcome = ProfileScript("true");
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kFailure);
  EXPECT_FALSE(outcome.program_exit_status.has_value());
  EXPECT_THAT(outcome.error->ToString(), HasSubstr("made no CUDA calls"));
  // The injection library's own failure (CUPTI taken by another profiler) is reported.
  outcome = ProfileScript(
      "echo 'error cuptiActivityEnable(CONCURRENT_KERNEL) failed: another "
      "profiler' >> \"$DTSIM_PROFILE_STATUS\"");
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(outcome.error->ToString(),
              HasSubstr("the profiler failed: cuptiActivityEnable(CONCURRENT_KERNEL) failed"));
}

TEST_F(ProfileCommandTest, BadCommandLinesAndMissingProgramsAreTheirOwnErrors) {
  const auto usage = [&](std::vector<std::string> args) {
    const CommandOutcome outcome = Profile(std::move(args));
    EXPECT_EQ(outcome.kind, CommandOutcome::Kind::kUsage);
    return outcome.error ? outcome.error->ToString() : "";
  };
  EXPECT_THAT(usage({"--", "true"}), HasSubstr("-o TRACE.json is required"));
  EXPECT_THAT(usage({"-o", "t.json"}), HasSubstr("no program to profile"));
  EXPECT_THAT(usage({"-o", "t.json", "true"}), HasSubstr("goes after --"));
  EXPECT_THAT(usage({"--bogus", "-o", "t.json", "--", "true"}), HasSubstr("--bogus"));
  EXPECT_THAT(usage({"-o", "t.json", "--capture-range", "cudaProfilerApi", "--", "true"}),
              HasSubstr("--capture-range: must be whole or cuda-profiler-api"));
  EXPECT_THAT(usage({"-o", "t.json", "--kinds", "kernal", "--", "true"}),
              HasSubstr("did you mean \"kernel\""));
  EXPECT_THAT(usage({"-o", "t.json", "--max-buffer-mb", "0", "--", "true"}),
              HasSubstr("--max-buffer-mb"));
  EXPECT_EQ(usage({"-o", "/dev/null", "--", "true"}),
            "-o: the trace must be a file path, not a device, a pipe or a /dev or /proc path, "
            "got \"/dev/null\"");

  EXPECT_THAT(Profile({"-o", Path("no/such/dir/t.json"), "--", "true"}).error->ToString(),
              HasSubstr("no/such/dir/t.json: cannot write here: the directory"));

  CommandOutcome missing = Profile({"-o", "t.json", "--", "dtsim-no-such-program"});
  EXPECT_EQ(missing.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(missing.error->ToString(),
              HasSubstr("program \"dtsim-no-such-program\" is not found on PATH"));
  missing = Profile({"-o", "t.json", "--", Path("nope")});
  EXPECT_THAT(missing.error->ToString(), HasSubstr("does not exist"));

  ProfileEnvironment without_cupti = FakeGpu();
  without_cupti.injection_library = [] {
    return Expected<std::string>(Error("this dtsim was built without CUPTI"));
  };
  EXPECT_THAT(Profile({"-o", "t.json", "--", "true"}, without_cupti).error->ToString(),
              HasSubstr("built without CUPTI"));
}

}  // namespace
}  // namespace dtsim::cli
