// One rank table from the tables of several servers, as MindSpore's
// merge_hccl.py made one from the files hccl_tools.py wrote on each machine
// (what davincirunsdk 0.1.x users ran); `davincirun --merge-rank-tables`
// and Python's merge_rank_tables().
#pragma once

#include <string>
#include <vector>

#include "davincirun/rank_table.hpp"

namespace davincirun {

/// Reads each table of `inputs` (any format parse_rank_table reads but 1.2,
/// each "completed") and makes one table of all their servers: format 1.0
/// from 1.0 and 0.1 tables, format 2.0 from 2.0 tables (their ranks listed
/// in the order of `inputs`, each input's in its file order, the first
/// input's other top-level fields kept):
///
/// - servers in the order of `inputs`, as merge_hccl.py ordered them (its
///   README: "the server order in the output config file comes from the
///   order of input file list"), and within one input in its rank order;
/// - ranks renumbered consecutively across servers: a server's ranks follow
///   the previous server's, each device keeping its place within its server;
/// - server_count (2.0: rank_count) updated, status "completed", each
///   server's other fields (host_ip, host_nic_ip...) and its devices' (2.0:
///   each rank's) kept.
///
/// The result is validated by parse_rank_table under the name `source`
/// (normally the file it will be written to). Throws RankTableError: what
/// load_rank_table throws for an input (naming it); kind bad_value for an
/// input whose status is not "completed"; unsupported for a 1.2 input, and
/// for 2.0 inputs beside inputs of another format (naming both files);
/// inconsistent for 2.0
/// inputs whose ranks have a host_ip in one and not in another;
/// duplicate for a server_id or device_ip (compared as addresses) found in
/// two inputs, naming the second input and pointer and the first input and
/// pointer (2.0: naming the server); missing for a device without device_ip
/// when a 1.0 result has several servers (naming its input, server and
/// device). std::invalid_argument when `inputs` is empty.
RankTable merge_rank_tables(const std::vector<std::string>& inputs, const std::string& source);

}  // namespace davincirun
