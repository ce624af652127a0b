// Max-min fairness on the textbook cases, with the rates derived by hand.
#include "network/fluid_network.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>
#include <vector>

namespace dtsim::network {
namespace {

using LinkId = FluidNetwork::LinkId;

TEST(FluidNetworkTest, OneFlowGetsTheLinkCapacity) {
  FluidNetwork net;
  const LinkId link = net.AddLink(100);
  const auto flow = net.StartFlow(std::vector<LinkId>{link}, 50, 7);
  net.UpdateRates();
  EXPECT_DOUBLE_EQ(net.rate(flow), 100);
  // 50 B at 100 B/s: 0.5 s.
  EXPECT_EQ(net.NextCompletion(), TimeNs(500'000'000));
  net.Advance(TimeNs(500'000'000));
  EXPECT_EQ(net.TakeCompleted(), std::vector<uint64_t>{7});
  EXPECT_EQ(net.active_flows(), 0u);
}

TEST(FluidNetworkTest, FlowsOnALinkShareItEqually) {
  FluidNetwork net;
  const LinkId link = net.AddLink(90);
  const std::vector<LinkId> path = {link};
  const auto a = net.StartFlow(path, 30, 1);
  const auto b = net.StartFlow(path, 60, 2);
  const auto c = net.StartFlow(path, 90, 3);
  net.UpdateRates();
  for (auto flow : {a, b, c}) EXPECT_DOUBLE_EQ(net.rate(flow), 30);
  // a finishes at 1 s; then b and c share 90: b has 30 left at 45 B/s, done at 1 + 2/3 s.
  net.Advance(net.NextCompletion());
  EXPECT_EQ(net.TakeCompleted(), std::vector<uint64_t>{1});
  net.UpdateRates();
  EXPECT_DOUBLE_EQ(net.rate(b), 45);
  EXPECT_EQ(net.NextCompletion(), TimeNs(1'666'666'667));
}

TEST(FluidNetworkTest, ClassicMaxMinExample) {
  // Links L1 (capacity 10) and L2 (capacity 4). Flow x crosses both, y only L1, z only L2.
  // L2 is the bottleneck: x and z get 2 each; y gets what x leaves on L1: 10 - 2 = 8.
  FluidNetwork net;
  const LinkId l1 = net.AddLink(10);
  const LinkId l2 = net.AddLink(4);
  const auto x = net.StartFlow(std::vector<LinkId>{l1, l2}, 1, 0);
  const auto y = net.StartFlow(std::vector<LinkId>{l1}, 1, 0);
  const auto z = net.StartFlow(std::vector<LinkId>{l2}, 1, 0);
  net.UpdateRates();
  EXPECT_DOUBLE_EQ(net.rate(x), 2);
  EXPECT_DOUBLE_EQ(net.rate(z), 2);
  EXPECT_DOUBLE_EQ(net.rate(y), 8);
}

// A capped flow takes no more than its cap; what it leaves goes to the others max-min fairly.
// Link L (capacity 90) carries x (cap 10), y and z (uncapped): x gets 10, y and z (90 − 10)/2 =
// 40 each. A cap above the fair share changes nothing: with x capped at 50, all get 30. Over
// two links, L1 (100) with x (cap 20) and y, L2 (30) with y and z: L2 gives y and z 15 each
// (the bottleneck), x its 20, and L1 keeps 65 unused.
TEST(FluidNetworkTest, CappedFlowsLeaveTheRestToOthers) {
  FluidNetwork net;
  const LinkId link = net.AddLink(90);
  const std::vector<LinkId> path = {link};
  const auto x = net.StartFlow(path, 100, 1, 10);
  const auto y = net.StartFlow(path, 100, 2);
  const auto z = net.StartFlow(path, 100, 3);
  net.UpdateRates();
  EXPECT_DOUBLE_EQ(net.rate(x), 10);
  EXPECT_DOUBLE_EQ(net.rate(y), 40);
  EXPECT_DOUBLE_EQ(net.rate(z), 40);
  // 100 B at 40 B/s: y and z finish at 2.5 s; x alone then still runs at its cap of 10.
  net.Advance(net.NextCompletion());
  EXPECT_EQ(net.TakeCompleted().size(), 2u);
  net.UpdateRates();
  EXPECT_DOUBLE_EQ(net.rate(x), 10);

  FluidNetwork loose;
  const LinkId shared = loose.AddLink(90);
  const auto a = loose.StartFlow(std::vector<LinkId>{shared}, 1, 1, 50);
  const auto b = loose.StartFlow(std::vector<LinkId>{shared}, 1, 2);
  const auto c = loose.StartFlow(std::vector<LinkId>{shared}, 1, 3);
  loose.UpdateRates();
  for (auto flow : {a, b, c}) EXPECT_DOUBLE_EQ(loose.rate(flow), 30);

  FluidNetwork two;
  const LinkId l1 = two.AddLink(100);
  const LinkId l2 = two.AddLink(30);
  const auto capped = two.StartFlow(std::vector<LinkId>{l1}, 1, 1, 20);
  const auto both = two.StartFlow(std::vector<LinkId>{l1, l2}, 1, 2);
  const auto second = two.StartFlow(std::vector<LinkId>{l2}, 1, 3);
  two.UpdateRates();
  EXPECT_DOUBLE_EQ(two.rate(capped), 20);
  EXPECT_DOUBLE_EQ(two.rate(both), 15);
  EXPECT_DOUBLE_EQ(two.rate(second), 15);
}

TEST(FluidNetworkTest, ParkingLot) {
  // A chain of 3 links of capacity 1; one long flow crosses all, one short flow per link.
  // Every link has 2 flows: all rates 1/2 (the long flow is held to 1/2 everywhere).
  FluidNetwork net;
  std::vector<LinkId> chain;
  chain.reserve(3);
  for (int i = 0; i < 3; ++i) chain.push_back(net.AddLink(1));
  const auto long_flow = net.StartFlow(chain, 1, 0);
  std::vector<FluidNetwork::FlowId> short_flows;
  short_flows.reserve(chain.size());
  for (LinkId link : chain) short_flows.push_back(net.StartFlow(std::vector<LinkId>{link}, 1, 0));
  net.UpdateRates();
  EXPECT_DOUBLE_EQ(net.rate(long_flow), 0.5);
  for (auto flow : short_flows) EXPECT_DOUBLE_EQ(net.rate(flow), 0.5);
}

TEST(FluidNetworkTest, SlotsAreReused) {
  FluidNetwork net;
  const LinkId link = net.AddLink(1e9);
  for (int round = 0; round < 100; ++round) {
    net.StartFlow(std::vector<LinkId>{link}, 1e3, round);
    net.UpdateRates();
    net.Advance(net.NextCompletion());
    ASSERT_EQ(net.TakeCompleted().size(), 1u);
  }
  EXPECT_EQ(net.active_flows(), 0u);
}

}  // namespace
}  // namespace dtsim::network

namespace dtsim::network {
namespace {

// Max-min fairness by its definition (Bertsekas & Gallager §6.5.2): the rates are feasible
// (no link over capacity) and every flow has a bottleneck link — saturated, and no flow on it
// has a higher rate.
void ExpectMaxMinFair(const FluidNetwork& net, const std::vector<std::vector<uint32_t>>& paths,
                      const std::vector<FluidNetwork::FlowId>& ids, const std::vector<bool>& live,
                      const std::vector<double>& capacity) {
  std::vector<double> load(capacity.size(), 0);
  for (size_t f = 0; f < ids.size(); ++f) {
    if (!live[f]) continue;
    for (uint32_t link : paths[f]) load[link] += net.rate(ids[f]);
  }
  for (size_t l = 0; l < capacity.size(); ++l) EXPECT_LE(load[l], capacity[l] * (1 + 1e-9));
  for (size_t f = 0; f < ids.size(); ++f) {
    if (!live[f]) continue;
    bool has_bottleneck = false;
    for (uint32_t link : paths[f]) {
      bool fastest = true;
      for (size_t g = 0; g < ids.size(); ++g) {
        const bool shares =
            live[g] && std::find(paths[g].begin(), paths[g].end(), link) != paths[g].end();
        if (shares && net.rate(ids[g]) > net.rate(ids[f]) * (1 + 1e-9)) fastest = false;
      }
      has_bottleneck |= fastest && load[link] >= capacity[link] * (1 - 1e-9);
    }
    EXPECT_TRUE(has_bottleneck) << "flow " << f << " has no bottleneck link";
  }
}

TEST(FluidNetworkTest, StaysMaxMinFairAsFlowsComeAndGo) {
  // Four links of unequal capacity, twelve flows over one to three links each, of different
  // sizes, so they finish at different times and removal reshuffles every link's flow list.
  const std::vector<double> capacity = {6, 10, 3, 8};
  FluidNetwork net;
  for (double c : capacity) net.AddLink(c);
  std::vector<std::vector<uint32_t>> paths;
  std::vector<FluidNetwork::FlowId> ids;
  for (uint32_t i = 0; i < 12; ++i) {
    std::vector<uint32_t> path = {i % 4};
    if (i % 3 != 0) path.push_back((i + 1) % 4);
    if (i % 5 == 0) path.push_back((i + 2) % 4);
    paths.push_back(path);
    ids.push_back(net.StartFlow(path, 1.0 + 0.37 * i, i));
  }
  std::vector<bool> live(ids.size(), true);
  size_t finished = 0;
  net.UpdateRates();
  while (net.active_flows() > 0) {
    ExpectMaxMinFair(net, paths, ids, live, capacity);
    net.Advance(net.NextCompletion());
    for (uint64_t owner : net.TakeCompleted()) {
      ASSERT_TRUE(live[owner]) << "flow " << owner << " completed twice";
      live[owner] = false;
      ++finished;
    }
    net.UpdateRates();
  }
  EXPECT_EQ(finished, ids.size());
}

// A network whose flows a test starts with random paths and sizes and completes in turn,
// remembering each flow's path and whether it is live.
struct Churn {
  explicit Churn(std::vector<double> link_capacity) : capacity(std::move(link_capacity)) {
    for (double c : capacity) net.AddLink(c);
  }
  void Start(std::vector<uint32_t> path, double bytes) {
    const uint64_t owner = paths.size();
    paths.push_back(std::move(path));
    live.push_back(true);
    ids.push_back(net.StartFlow(paths.back(), bytes, owner));
  }
  // Advances to the next completion and retires the flows due then; returns how many.
  size_t CompleteNext() {
    net.Advance(net.NextCompletion());
    size_t completed = 0;
    for (uint64_t owner : net.TakeCompleted()) {
      EXPECT_TRUE(live[owner]) << "flow " << owner << " completed twice";
      live[owner] = false;
      ++completed;
    }
    return completed;
  }
  // Each live flow's rate equals its rate in a fresh network holding only the live flows and
  // their remaining bytes, recomputed from scratch — bit for bit, as the incremental path
  // promises.
  void ExpectRatesOfAFreshNetwork(size_t update) const {
    FluidNetwork fresh;
    for (double c : capacity) fresh.AddLink(c);
    std::vector<std::pair<size_t, FluidNetwork::FlowId>> twins;
    for (const auto& [owner, bytes] : net.ActiveFlows()) {
      twins.emplace_back(owner, fresh.StartFlow(paths[owner], bytes, owner));
    }
    fresh.UpdateRates();
    for (const auto& [owner, twin] : twins) {
      EXPECT_EQ(net.rate(ids[owner]), fresh.rate(twin))
          << "flow " << owner << ", update " << update;
    }
  }

  // Starts 10 flows, then until none is left: checks every live flow's rate (against a fresh
  // network, and for max-min fairness when `fair`), completes the next ones and starts
  // `per_completion` more (0: as many as completed) while fewer than `total` have started.
  // Returns the rate updates made.
  size_t Run(const std::function<void()>& start, size_t total, size_t per_completion, bool fair) {
    for (int i = 0; i < 10; ++i) start();
    net.UpdateRates();
    size_t updates = 0;
    while (net.active_flows() > 0) {
      if (fair) ExpectMaxMinFair(net, paths, ids, live, capacity);
      ExpectRatesOfAFreshNetwork(updates);
      const size_t completed = CompleteNext();
      const size_t more = per_completion == 0 ? completed : per_completion;
      for (size_t k = 0; k < more && paths.size() < total; ++k) start();
      net.UpdateRates();
      ++updates;
    }
    EXPECT_EQ(paths.size(), total);
    EXPECT_EQ(std::count(live.begin(), live.end(), true), 0);
    return updates;
  }

  std::vector<double> capacity;
  FluidNetwork net;
  std::vector<std::vector<uint32_t>> paths;
  std::vector<FluidNetwork::FlowId> ids;
  std::vector<bool> live;
};

TEST(FluidNetworkTest, RecomputingOnlyTheChangedComponentGivesEveryFlowItsFairRate) {
  // Three groups of four links (as three nodes' NVLink ports) plus two links every group can
  // reach (as spine uplinks). Flows over one or two random links of a group (a quarter also
  // over a spine link) arrive two per completion while others are in flight, with random
  // sizes, so UpdateRates sees components that merge (a flow over a spine link joins two
  // groups) and split again. After every update each live flow's rate must equal a fresh
  // network's and be max-min fair.
  std::vector<double> capacity;
  capacity.reserve(14);
  for (int i = 0; i < 12; ++i) capacity.push_back(4 + i % 4);
  capacity.push_back(5);  // link 12: spine 0
  capacity.push_back(9);  // link 13: spine 1
  Churn churn(capacity);
  std::mt19937 random(20261122);  // raw draws only: the sequence is the same everywhere
  auto start = [&] {
    const uint32_t group = random() % 3;
    std::vector<uint32_t> path = {group * 4 + static_cast<uint32_t>(random() % 4)};
    const uint32_t second = group * 4 + static_cast<uint32_t>(random() % 4);
    if (second != path[0]) path.push_back(second);
    if (random() % 4 == 0) path.push_back(12 + static_cast<uint32_t>(random() % 2));
    churn.Start(path, 1.0 + static_cast<double>(random() % 1000) / 250);
  };
  EXPECT_GE(churn.Run(start, 60, 2, true), 25u);  // two per completion
}

TEST(FluidNetworkTest, ReusedSlotsKeepEachFlowsOwnPath) {
  // Flow slots are reused, and a slot whose span of the shared hop array is too short for its
  // new path moves to a longer one. 6,000 flows over 1 to 8 of 8 links (random, distinct),
  // about ten alive at once, so slots are reused hundreds of times with paths longer and
  // shorter than before. Every flow must keep its own path: after each update the rates equal
  // a fresh network's, and every flow completes exactly once.
  Churn churn({4, 7, 5, 9, 6, 3, 8, 5});
  std::mt19937 random(20261123);
  auto start = [&] {
    std::vector<uint32_t> links = {0, 1, 2, 3, 4, 5, 6, 7};
    for (uint32_t i = 7; i > 0; --i) std::swap(links[i], links[random() % (i + 1)]);
    links.resize(1 + random() % 8);
    churn.Start(links, 1.0 + static_cast<double>(random() % 1000) / 250);
  };
  churn.Run(start, 6000, 0, false);
}

TEST(FluidNetworkTest, APipelineCrossingALinkTwiceLoadsItTwice) {
  // Pipeline P crosses link A (90 B/s) twice and link B (1000 B/s) once; flow Q crosses A once.
  // Progressive filling counts crossings: A's share is 90 / 3 = 30, so P moves 30 B/s over
  // each of its edges (60 B/s on A) and Q 30 B/s. Q's 30 B are done at 1 s; then P alone has
  // A to itself, 90 / 2 = 45 B/s, and its 60 − 30 = 30 B left take 2/3 s more.
  FluidNetwork net;
  const LinkId a = net.AddLink(90);
  const LinkId b = net.AddLink(1000);
  const auto pipeline = net.StartFlow(std::vector<LinkId>{a, b, a}, 60, 1);
  const auto q = net.StartFlow(std::vector<LinkId>{a}, 30, 2);
  net.UpdateRates();
  EXPECT_DOUBLE_EQ(net.rate(pipeline), 30);
  EXPECT_DOUBLE_EQ(net.rate(q), 30);
  net.Advance(net.NextCompletion());
  EXPECT_EQ(net.TakeCompleted(), std::vector<uint64_t>{2});
  net.UpdateRates();
  EXPECT_DOUBLE_EQ(net.rate(pipeline), 45);
  EXPECT_EQ(net.NextCompletion(), TimeNs(1'666'666'667));
  net.Advance(net.NextCompletion());
  EXPECT_EQ(net.TakeCompleted(), std::vector<uint64_t>{1});
  EXPECT_FALSE(net.busy(a));
  EXPECT_FALSE(net.busy(b));
}

TEST(FluidNetworkTest, PathsCrossingLinksRepeatedlyComeAndGo) {
  // As ReusedSlotsKeepEachFlowsOwnPath, but 1,500 flows over 1 to 8 links drawn with
  // replacement from 5, so most paths cross some link more than once and removals move
  // crossings of the same flow within a link's list. After each update the rates equal a fresh
  // network's and are max-min fair; every flow completes exactly once and the links end empty.
  const std::vector<double> capacity = {4, 7, 5, 9, 6};
  Churn churn(capacity);
  std::mt19937 random(20261127);
  auto start = [&] {
    std::vector<uint32_t> links(1 + random() % 8);
    for (uint32_t& link : links) link = static_cast<uint32_t>(random() % 5);
    churn.Start(links, 1.0 + static_cast<double>(random() % 1000) / 250);
  };
  churn.Run(start, 1500, 0, true);
  for (LinkId link = 0; link < capacity.size(); ++link) EXPECT_FALSE(churn.net.busy(link));
}

}  // namespace
}  // namespace dtsim::network
