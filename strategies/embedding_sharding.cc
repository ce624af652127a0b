#include "strategies/embedding_sharding.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <numeric>
#include <string>
#include <tuple>

#include "sim/base/strings.h"

namespace dtsim::strategies {
namespace {

constexpr std::array<std::string_view, 4> kShardingNames = {"table_wise", "row_wise",
                                                            "data_parallel", "table_row_wise"};

Expected<EmbeddingSharding> ShardingAt(const Json& value, const std::string& path) {
  if (value.is_string()) {
    const std::string name = value.get<std::string>();
    for (size_t i = 0; i < kShardingNames.size(); ++i) {
      if (kShardingNames[i] == name) return static_cast<EmbeddingSharding>(i);
    }
    return Error(fmt::format("unknown sharding{}; known: {}", DidYouMean(name, kShardingNames),
                             JoinQuoted(kShardingNames)),
                 path, Quote(name));
  }
  return Error(
      fmt::format("expected one of {}, or a list of one per table", JoinQuoted(kShardingNames)),
      path, JsonValueForError(value));
}

}  // namespace

std::span<const std::string_view> EmbeddingShardingNames() { return kShardingNames; }

Expected<std::vector<EmbeddingSharding>> EmbeddingShardingFromJson(const Json& value,
                                                                   const std::string& path) {
  if (!value.is_array()) {
    DTSIM_ASSIGN_OR_RETURN(const EmbeddingSharding sharding, ShardingAt(value, path));
    return std::vector<EmbeddingSharding>{sharding};
  }
  if (value.empty()) return Error("expected a non-empty list", path, "[]");
  std::vector<EmbeddingSharding> sharding;
  for (size_t i = 0; i < value.size(); ++i) {
    DTSIM_ASSIGN_OR_RETURN(const EmbeddingSharding one,
                           ShardingAt(value[i], JsonIndexPath(path, i)));
    sharding.push_back(one);
  }
  return sharding;
}

Status ReadEmbeddingSharding(JsonObjectReader& parallelism, ParallelPlan& plan) {
  constexpr std::string_view kKey = "embedding_sharding";
  parallelism.Allow(kKey);
  const Json* value = parallelism.Find(kKey);
  if (value == nullptr) return Status::Ok();
  DTSIM_ASSIGN_OR_RETURN(
      plan.embedding_sharding,
      EmbeddingShardingFromJson(*value, JsonChildPath(parallelism.path(), kKey)));
  return Status::Ok();
}

std::string EmbeddingShardingLabel(const std::vector<EmbeddingSharding>& sharding) {
  if (!sharding.empty() &&
      std::any_of(sharding.begin(), sharding.end(),
                  [&sharding](EmbeddingSharding s) { return s != sharding.front(); })) {
    return "mixed";
  }
  constexpr std::array<std::string_view, 4> kLabels = {"table-wise", "row-wise", "replicated",
                                                       "table-row-wise"};
  return std::string(
      kLabels[static_cast<size_t>(sharding.empty() ? EmbeddingSharding::kTableWise : sharding[0])]);
}

Status CheckEmbeddingSharding(const models::DlrmSpec& spec,
                              const std::vector<EmbeddingSharding>& sharding,
                              const std::string& path) {
  const size_t given = sharding.size();
  if (given > 1 && given != spec.table_rows.size()) {
    return Error(fmt::format("one sharding for every table, or one per table: the model has {} "
                             "tables",
                             spec.table_rows.size()),
                 path, fmt::format("{} entries", given));
  }
  return Status::Ok();
}

EmbeddingLayout LayoutEmbeddings(const models::DlrmSpec& spec,
                                 const std::vector<EmbeddingSharding>& sharding, int ranks,
                                 int64_t micro_batch, DType dtype, int ranks_per_node) {
  DTSIM_CHECK(ranks >= 1 && micro_batch >= 1, "LayoutEmbeddings needs ranks and samples");
  const int per_node = ranks_per_node <= 0 || ranks_per_node > ranks || ranks % ranks_per_node != 0
                           ? ranks
                           : ranks_per_node;
  const int nodes = ranks / per_node;
  const auto tables = static_cast<int>(spec.table_rows.size());
  const int64_t dim = spec.embedding_dim;
  const int64_t lookups = spec.lookups_per_table;
  const int64_t global = micro_batch * ranks;  // samples a micro-batch, over every rank
  EmbeddingLayout layout;
  layout.ranks_per_node = per_node;
  layout.ranks.resize(static_cast<size_t>(ranks));
  layout.sharding.resize(static_cast<size_t>(tables), EmbeddingSharding::kTableWise);
  for (int t = 0; t < tables; ++t) {
    if (!sharding.empty()) {
      layout.sharding[static_cast<size_t>(t)] =
          sharding[sharding.size() == 1 ? 0 : static_cast<size_t>(t)];
    }
  }
  const auto add = [&](RankEmbeddings& rank, int table, int64_t rows_held, int64_t rows_read,
                       int64_t outputs) {
    rank.lookups.push_back({.table = table, .rows_read = rows_read, .outputs = outputs});
    rank.parameters += rows_held * dim;
    rank.lookup_bytes += static_cast<double>(rows_read * dim);
  };
  // Rows split evenly over `count` ranks from `first` (TorchRec's block size ceil(rows /
  // count)); indices hash uniformly over them, so each reads 1/count of every sample's rows and
  // writes every sample's partial sum.
  const auto split_rows = [&](int t, int64_t rows, int first, int count) {
    const int64_t block = (rows + count - 1) / count;
    for (int r = 0; r < count; ++r) {
      const int64_t held = std::clamp<int64_t>(rows - r * block, 0, block);
      add(layout.ranks[static_cast<size_t>(first) + static_cast<size_t>(r)], t, held,
          (global * lookups + count - 1) / count, global);
    }
  };
  std::vector<double> node_work(static_cast<size_t>(nodes), 0);
  std::vector<int64_t> node_rows(static_cast<size_t>(nodes), 0);
  std::vector<int> node_tables(static_cast<size_t>(nodes), 0);
  // Largest first: a table-wise table's whole global batch of lookups on one rank, a
  // table-row-wise table's on one node.
  std::vector<int> order(static_cast<size_t>(tables));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&spec](int a, int b) {
    return spec.table_rows[static_cast<size_t>(a)] > spec.table_rows[static_cast<size_t>(b)];
  });
  for (const int t : order) {
    const int64_t rows = spec.table_rows[static_cast<size_t>(t)];
    switch (layout.sharding[static_cast<size_t>(t)]) {
      case EmbeddingSharding::kTableWise: {
        const auto least = std::min_element(layout.ranks.begin(), layout.ranks.end(),
                                            [](const RankEmbeddings& a, const RankEmbeddings& b) {
                                              return std::tuple(a.lookup_bytes, a.parameters) <
                                                     std::tuple(b.lookup_bytes, b.parameters);
                                            });
        least->tables.push_back(t);
        add(*least, t, rows, global * lookups, global);
        ++layout.table_wise;
        break;
      }
      case EmbeddingSharding::kRowWise:
        split_rows(t, rows, 0, ranks);
        ++layout.row_wise;
        break;
      case EmbeddingSharding::kTableRowWise: {
        size_t node = 0;
        for (size_t n = 1; n < node_work.size(); ++n) {
          if (std::tuple(node_work[n], node_rows[n]) <
              std::tuple(node_work[node], node_rows[node])) {
            node = n;
          }
        }
        split_rows(t, rows, static_cast<int>(node) * per_node, per_node);
        node_work[node] += static_cast<double>(global * lookups * dim);
        node_rows[node] += rows;
        ++node_tables[node];
        ++layout.table_row_wise;
        break;
      }
      case EmbeddingSharding::kDataParallel:
        for (RankEmbeddings& rank : layout.ranks) {
          add(rank, t, rows, micro_batch * lookups, micro_batch);
        }
        layout.replicated_parameters += rows * dim;
        ++layout.replicated;
        break;
    }
  }
  for (size_t r = 0; r < layout.ranks.size(); ++r) {
    if (layout.ranks[r].lookup_bytes >
        layout.ranks[static_cast<size_t>(layout.busiest)].lookup_bytes) {
      layout.busiest = static_cast<int>(r);
    }
  }
  const auto e = static_cast<int64_t>(DTypeBytes(dtype));
  // Each rank's samples: their indices and one length per (sample, table), to the owners.
  layout.index_all_to_all =
      Bytes(micro_batch * (layout.table_wise + layout.row_wise + layout.table_row_wise) *
            (lookups * kIndexBytes + kLengthBytes));
  size_t most_tables = 0;
  for (const RankEmbeddings& rank : layout.ranks)
    most_tables = std::max(most_tables, rank.tables.size());
  // An owner sends every sample's pooled vector of each of its tables, a slice to each rank.
  layout.output_all_to_all = Bytes(global * static_cast<int64_t>(most_tables) * dim * e);
  layout.output_reduce_scatter = Bytes(global * layout.row_wise * dim * e);
  layout.gradient_all_gather = Bytes(micro_batch * layout.row_wise * dim * e);
  // Table-row-wise (TorchRec's TWRW output dist): the node's partial sums of its tables for
  // every sample reduce-scattered inside the node, each rank left with the sums of 1/per_node of
  // the samples — those of its local index on every node — then an all-to-all among the ranks of
  // that local index sends each node's samples home; the gradients the reverse way.
  const int most_node_tables = *std::max_element(node_tables.begin(), node_tables.end());
  layout.node_reduce_scatter = Bytes(global * most_node_tables * dim * e);
  layout.node_all_gather = Bytes(global / per_node * most_node_tables * dim * e);
  layout.cross_node_all_to_all = nodes > 1 ? layout.node_all_gather : Bytes(0);
  return layout;
}

Json EmbeddingShardingJson(const std::vector<EmbeddingSharding>& sharding) {
  const auto name = [](EmbeddingSharding s) { return kShardingNames[static_cast<size_t>(s)]; };
  if (sharding.size() == 1) return Json(name(sharding.front()));
  Json list = Json::array();
  for (const EmbeddingSharding s : sharding) list.push_back(name(s));
  return list;
}

}  // namespace dtsim::strategies
