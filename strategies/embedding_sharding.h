// A DLRM's embedding tables placed over the ranks (docs/strategies.md, "DLRM"), as TorchRec
// shards them: table-wise tables whole on one rank each, row-wise tables split by rows over
// every rank, data-parallel tables replicated. From the placement: what each rank looks up per
// micro-batch, what it holds, and the bytes of the exchanges that move sparse indices to the
// tables and pooled embeddings (and their gradients) back to the samples.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/model_spec.h"
#include "models/ops.h"
#include "sim/base/json_reader.h"
#include "sim/base/status.h"
#include "sim/base/units.h"
#include "strategies/config.h"

namespace dtsim::strategies {

// Reads `parallelism.embedding_sharding`: a sharding name for every table, or a list of one per
// table (its length is checked against the model by CheckEmbeddingSharding).
Status ReadEmbeddingSharding(JsonObjectReader& parallelism, ParallelPlan& plan);
// One such value at `path`.
Expected<std::vector<EmbeddingSharding>> EmbeddingShardingFromJson(const Json& value,
                                                                   const std::string& path);
// "table-wise", "row-wise", "replicated" (one for every table, or an empty list: table-wise), or
// "mixed" (a list of several).
std::string EmbeddingShardingLabel(const std::vector<EmbeddingSharding>& sharding);
// As parallelism.embedding_sharding takes it: a name, or a list of one per table.
Json EmbeddingShardingJson(const std::vector<EmbeddingSharding>& sharding);

// A sharding against its DLRM: one entry or one per table; errors name `path`.
Status CheckEmbeddingSharding(const models::DlrmSpec& spec,
                              const std::vector<EmbeddingSharding>& sharding,
                              const std::string& path);

// Bytes of a sparse index (TorchRec's KeyedJaggedTensor values, int64) and of a length (int32).
inline constexpr int64_t kIndexBytes = 8;
inline constexpr int64_t kLengthBytes = 4;

struct RankEmbeddings {
  std::vector<int> tables;                   // the table-wise tables it owns
  std::vector<models::TableLookup> lookups;  // its lookups per micro-batch, every kind
  int64_t parameters = 0;                    // embedding rows × dim it holds
  double lookup_bytes = 0;                   // rows read × dim: its embedding work
};

struct EmbeddingLayout {
  std::vector<EmbeddingSharding> sharding;  // per table
  std::vector<RankEmbeddings> ranks;
  int busiest = 0;  // the rank with the most embedding work (the one a symmetric run simulates)
  int table_wise = 0, row_wise = 0, replicated = 0, table_row_wise = 0;  // tables of each kind
  int ranks_per_node = 1;  // the node groups table-row-wise tables are split over
  // Per micro-batch, sizes per rank as dtsim's collectives take them (all-to-all: a rank's whole
  // buffer; reduce-scatter: its input; all-gather: its share).
  Bytes index_all_to_all;       // each rank's samples' indices and lengths to the owners
  Bytes output_all_to_all;      // table-wise pooled embeddings, the largest sender's buffer
  Bytes output_reduce_scatter;  // row-wise partial sums of every sample
  Bytes gradient_all_gather;    // row-wise: each rank's samples' pooled gradients
  // Table-row-wise: the node's partial sums of every sample (reduce-scatter over the node's
  // ranks), then each rank's slice to the samples' nodes (all-to-all over the ranks of its local
  // index; none on one node); backward the all-to-all and an all-gather of the slice.
  Bytes node_reduce_scatter;
  Bytes cross_node_all_to_all;
  Bytes node_all_gather;
  int64_t replicated_parameters = 0;  // data-parallel tables', all-reduced with the dense grads
};

// The placement over `ranks` ranks of `micro_batch` samples each, `ranks_per_node` to a node
// (0, or one that does not divide the ranks: all on one): table-wise tables go, largest first, to
// the rank with the least lookup work so far (then the fewest parameters), table-row-wise
// tables likewise to a node, as TorchRec's greedy partitioner balances its perf estimates.
EmbeddingLayout LayoutEmbeddings(const models::DlrmSpec& spec,
                                 const std::vector<EmbeddingSharding>& sharding, int ranks,
                                 int64_t micro_batch, DType dtype, int ranks_per_node = 0);

}  // namespace dtsim::strategies
