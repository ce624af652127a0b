#include "traces/job_collectives.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <map>
#include <optional>

namespace dtsim::traces {
namespace {

// How many of a group's collectives per rank vote on the clock offset: enough to outvote
// chance agreements, few enough to keep the pairwise vote cheap (256² differences).
constexpr size_t kVoters = 256;
// The clock offset is where the differences between the ends of compatible collectives are
// densest: first within a coarse window (one collective's ends agree within a few µs on one
// host; a sampled trace's kernels of one collective within 0.4 ms), then the densest fine
// window inside it.
constexpr DurationNs kCoarseWindow = Milliseconds(1);
constexpr DurationNs kFineWindow = Microseconds(20);
// Two ranks' kernels are one collective when their ends, clocks aligned, differ by at most
// half the distance to the reference rank's neighbouring collective, within these bounds.
constexpr DurationNs kMinTolerance = Microseconds(20);
constexpr DurationNs kMaxTolerance = Milliseconds(1);
// Clocks further apart than this are not a clock offset but corrupt timestamps; bounding the
// offsets keeps every time derived from them (timestamps are at most 2^61 ns) within int64.
constexpr DurationNs kMaxOffset = DurationNs(int64_t{1} << 61);

// One rank's collectives of one process group, in end order.
struct Member {
  uint32_t collective = 0;
  TimeNs start;
  TimeNs end;
  DurationNs duration;
};

// A process group as the traces name it: its name and ranks when recorded (PyTorch ≥ 2.1),
// else only its size.
std::string GroupKey(const CollectiveInfo& info) {
  if (info.process_group.empty() && info.group_ranks.empty()) {
    return fmt::format("size {}", info.group_size);
  }
  return fmt::format("{} {}", info.process_group, fmt::join(info.group_ranks, ","));
}

bool Matchable(const CollectiveInfo& info) {
  return !info.size_unknown && info.kind != graph::CommKind::kSendRecv;
}

// Whether two ranks' collectives can be one: the same kind and size where both traces record
// them; an inferred kind or size (from annotations, which a sampled trace may have lost) leaves
// it to the timing.
bool Compatible(const CollectiveInfo& a, const CollectiveInfo& b) {
  if (a.size_inferred || b.size_inferred) return true;
  return a.kind == b.kind && a.bytes == b.bytes;
}

// Per job index and group key, the rank's collectives in end order.
using Groups = std::map<std::string, std::vector<std::vector<Member>>>;

Groups GroupCollectives(std::span<const Trace* const> job) {
  Groups groups;
  for (uint32_t rank = 0; rank < job.size(); ++rank) {
    const Trace& trace = *job[rank];
    for (const DeviceEvent& op : trace.device) {
      if (op.collective == kNone || op.collective >= trace.collectives.size()) continue;
      const CollectiveInfo& info = trace.collectives[op.collective];
      if (!Matchable(info)) continue;
      std::vector<std::vector<Member>>& members = groups[GroupKey(info)];
      members.resize(job.size());
      members[rank].push_back({op.collective, op.start, op.end(), op.duration});
    }
  }
  for (auto& [key, members] : groups) {
    for (std::vector<Member>& rank : members) {
      std::stable_sort(rank.begin(), rank.end(),
                       [](const Member& x, const Member& y) { return x.end < y.end; });
    }
  }
  return groups;
}

struct Vote {
  DurationNs offset;
  size_t votes = 0;
};

// The densest window of `sorted` of width `window` inside [from, to): its first index and size.
// Of windows as dense, the one whose middle value is closest to zero: clocks of one job are
// more likely close than far, and a trace that shares one collective with the reference has
// as many candidate pairings as the reference has collectives.
std::pair<size_t, size_t> Densest(const std::vector<DurationNs>& sorted, size_t from, size_t to,
                                  DurationNs window) {
  std::pair<size_t, size_t> best{from, 0};
  const auto middle = [&](size_t first, size_t size) {
    return std::abs(sorted[first + size / 2].ns());
  };
  size_t last = from;
  for (size_t first = from; first < to; ++first) {
    last = std::max(last, first);
    while (last < to && sorted[last] - sorted[first] <= window) ++last;
    const size_t size = last - first;
    if (size > best.second ||
        (size == best.second && size > 0 && middle(first, size) < middle(best.first, size))) {
      best = {first, size};
    }
  }
  return best;
}

// Rank b's clock minus rank a's, from the ends of their compatible collectives of one group.
std::optional<Vote> OffsetVote(const Trace& a_trace, const std::vector<Member>& a,
                               const Trace& b_trace, const std::vector<Member>& b) {
  std::vector<DurationNs> differences;
  for (size_t i = 0; i < a.size() && i < kVoters; ++i) {
    for (size_t j = 0; j < b.size() && j < kVoters; ++j) {
      if (Compatible(a_trace.collectives[a[i].collective], b_trace.collectives[b[j].collective])) {
        differences.push_back(b[j].end - a[i].end);
      }
    }
  }
  if (differences.empty()) return std::nullopt;
  std::sort(differences.begin(), differences.end());
  const auto [coarse_first, coarse_size] =
      Densest(differences, 0, differences.size(), kCoarseWindow);
  const auto [fine_first, fine_size] =
      Densest(differences, coarse_first, coarse_first + coarse_size, kFineWindow);
  return Vote{differences[fine_first + fine_size / 2], coarse_size};
}

// Each job index's clock offset from the first trace's: breadth first over the pairs of ranks
// that voted, from job index 0 (and from the next unreached index, unaligned, for ranks that
// share nothing with it).
void ResolveOffsets(const std::map<std::pair<uint32_t, uint32_t>, Vote>& votes,
                    JobCollectives& job) {
  const size_t ranks = job.clock_offset.size();
  std::vector<bool> reached(ranks, false);
  for (uint32_t root = 0; root < ranks; ++root) {
    if (reached[root]) continue;
    reached[root] = true;
    job.aligned[root] = root == 0;
    std::deque<uint32_t> queue{root};
    while (!queue.empty()) {
      const uint32_t from = queue.front();
      queue.pop_front();
      for (const auto& [pair, vote] : votes) {
        const bool forward = pair.first == from;
        const uint32_t to = forward ? pair.second : pair.first;
        if ((!forward && pair.second != from) || reached[to]) continue;
        reached[to] = true;
        job.aligned[to] = job.aligned[from];
        const DurationNs step = forward ? vote.offset : DurationNs::Zero() - vote.offset;
        job.clock_offset[to] =
            std::clamp(job.clock_offset[from] + step, DurationNs::Zero() - kMaxOffset, kMaxOffset);
        queue.push_back(to);
      }
    }
  }
}

// Half the distance from member i's end to its nearest neighbour's, within the bounds.
DurationNs Tolerance(const std::vector<Member>& members, size_t i) {
  DurationNs nearest = kMaxTolerance * 2;
  if (i > 0) nearest = std::min(nearest, members[i].end - members[i - 1].end);
  if (i + 1 < members.size()) nearest = std::min(nearest, members[i + 1].end - members[i].end);
  return std::clamp(DurationNs(nearest.ns() / 2), kMinTolerance, kMaxTolerance);
}

// Pairs the reference rank's collectives of a group with rank b's, in order: per reference
// collective, the index into b it matched, or none.
std::vector<std::optional<size_t>> PairInOrder(const Trace& a_trace, const std::vector<Member>& a,
                                               DurationNs a_offset, const Trace& b_trace,
                                               const std::vector<Member>& b, DurationNs b_offset) {
  std::vector<std::optional<size_t>> pairs(a.size());
  size_t i = 0;
  size_t j = 0;
  while (i < a.size() && j < b.size()) {
    const DurationNs difference = (b[j].end - b_offset) - (a[i].end - a_offset);
    const bool close = std::abs(difference.ns()) <= Tolerance(a, i).ns();
    if (close &&
        Compatible(a_trace.collectives[a[i].collective], b_trace.collectives[b[j].collective])) {
      pairs[i++] = j++;
    } else if (difference < DurationNs::Zero()) {
      ++j;
    } else {
      ++i;
    }
  }
  return pairs;
}

}  // namespace

JobCollectives MatchJobCollectives(std::span<const Trace* const> job) {
  JobCollectives result;
  result.of_rank.resize(job.size());
  for (size_t rank = 0; rank < job.size(); ++rank) {
    result.of_rank[rank].assign(job[rank]->collectives.size(), kNone);
  }
  result.clock_offset.assign(job.size(), DurationNs::Zero());
  result.aligned.assign(job.size(), job.size() == 1);
  result.unmatched.assign(job.size(), 0);
  const Groups groups = GroupCollectives(job);

  // The clocks, from every group's votes (the best vote per pair of ranks).
  std::map<std::pair<uint32_t, uint32_t>, Vote> votes;
  for (const auto& [key, members] : groups) {
    std::optional<uint32_t> reference;
    for (uint32_t rank = 0; rank < members.size(); ++rank) {
      if (members[rank].empty()) continue;
      if (!reference) {
        reference = rank;
        continue;
      }
      const std::optional<Vote> vote =
          OffsetVote(*job[*reference], members[*reference], *job[rank], members[rank]);
      if (!vote) continue;
      Vote& best = votes[{*reference, rank}];
      if (vote->votes > best.votes) best = *vote;
    }
  }
  ResolveOffsets(votes, result);

  for (const auto& [key, members] : groups) {
    std::optional<uint32_t> reference;
    std::vector<std::vector<std::optional<size_t>>> pairs(members.size());
    for (uint32_t rank = 0; rank < members.size(); ++rank) {
      if (members[rank].empty()) continue;
      if (!reference) {
        reference = rank;
        continue;
      }
      pairs[rank] =
          PairInOrder(*job[*reference], members[*reference], result.clock_offset[*reference],
                      *job[rank], members[rank], result.clock_offset[rank]);
    }
    if (!reference) continue;
    const std::vector<Member>& base = members[*reference];
    for (size_t i = 0; i < base.size(); ++i) {
      JobCollective collective{{{*reference, base[i].collective}},
                               base[i].duration,
                               base[i].start - result.clock_offset[*reference]};
      // A group of known size takes no more members than it has: traces that do not record a
      // group's ranks cannot tell two tensor-parallel pairs apart, whose collectives end
      // together; the ranks first in the job are taken, as launchers number a group's ranks.
      const int32_t group_size = job[*reference]->collectives[base[i].collective].group_size;
      for (uint32_t rank = *reference + 1; rank < members.size(); ++rank) {
        if (pairs[rank].empty() || !pairs[rank][i]) continue;
        if (group_size > 0 && static_cast<int64_t>(collective.members.size()) >= group_size) break;
        const Member& member = members[rank][*pairs[rank][i]];
        collective.members.emplace_back(rank, member.collective);
        collective.transfer = std::min(collective.transfer, member.duration);
        collective.last_arrival =
            std::max(collective.last_arrival, member.start - result.clock_offset[rank]);
      }
      if (collective.members.size() < 2) continue;
      const auto index = static_cast<uint32_t>(result.collectives.size());
      for (const auto& [rank, collective_index] : collective.members) {
        result.of_rank[rank][collective_index] = index;
      }
      result.collectives.push_back(std::move(collective));
    }
  }
  for (size_t rank = 0; rank < job.size(); ++rank) {
    for (size_t c = 0; c < job[rank]->collectives.size(); ++c) {
      if (result.of_rank[rank][c] == kNone && Matchable(job[rank]->collectives[c])) {
        ++result.unmatched[rank];
      }
    }
  }
  return result;
}

}  // namespace dtsim::traces
