#include "sim/base/temp_files.h"

#include <unistd.h>

#include <array>
#include <atomic>
#include <climits>
#include <csignal>
#include <cstring>

namespace dtsim {
namespace {

constexpr int kSlots = 256;

struct Slot {
  std::atomic<bool> used{false};  // claimed by a writer
  std::atomic<bool> live{false};  // `path` is complete: the handler may remove it
  std::array<char, PATH_MAX> path{};
};

std::array<Slot, kSlots>& Slots() {
  static std::array<Slot, kSlots> slots;  // NOLINT: process-wide by design, see the header
  return slots;
}

extern "C" void RemoveAndReraise(int signal_number) {
  for (Slot& slot : Slots()) {
    if (slot.live.load(std::memory_order_acquire)) ::unlink(slot.path.data());
  }
  std::signal(signal_number, SIG_DFL);
  std::raise(signal_number);
}

}  // namespace

int RecordTemporaryFile(const std::string& path) {
  if (path.size() >= PATH_MAX) return -1;
  std::array<Slot, kSlots>& slots = Slots();
  for (int i = 0; i < kSlots; ++i) {
    bool expected = false;
    if (!slots[i].used.compare_exchange_strong(expected, true)) continue;
    std::memcpy(slots[i].path.data(), path.c_str(), path.size() + 1);
    slots[i].live.store(true, std::memory_order_release);
    return i;
  }
  return -1;
}

void ForgetTemporaryFile(int slot) {
  if (slot < 0 || slot >= kSlots) return;
  Slot& entry = Slots()[slot];
  entry.live.store(false, std::memory_order_release);
  entry.used.store(false, std::memory_order_release);
}

void RemoveTemporaryFilesOnSignals() {
  for (const int signal_number : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) {
    struct sigaction current {};
    if (::sigaction(signal_number, nullptr, &current) != 0) continue;
    if (current.sa_handler == SIG_IGN) continue;  // NOLINT: the C API's macro
    struct sigaction action {};
    action.sa_handler = RemoveAndReraise;
    sigemptyset(&action.sa_mask);
    ::sigaction(signal_number, &action, nullptr);
  }
}

}  // namespace dtsim
