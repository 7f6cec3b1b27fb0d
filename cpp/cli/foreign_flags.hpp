// The flags of the launchers davincirun replaces (msrun, torchrun) that
// their users type: each is taken as ours, or refused with a message that
// names what does its work here.
#pragma once

#include <string>
#include <string_view>

namespace davincirun::cli {

/// One flag of another launcher.
struct ForeignFlag {
  std::string_view flag;       ///< "--log_dir"
  std::string_view launchers;  ///< whose flag it is: "msrun", "torchrun", "msrun and torchrun"
  /// The flag of ours it is taken as ("--log-dir"); "" when it is refused;
  /// "-" when it is accepted and needs nothing here (msrun's --join).
  std::string_view ours;
  std::string_view meaning;  ///< what does its work here, a clause
};

/// The entry for `flag` (as typed, without "=value"); nullptr for none.
/// Sources: MindSpore 2.10 mindspore/parallel/cluster/run.py (msrun's
/// argparse flags), torch 2.x torch/distributed/run.py (torchrun's).
const ForeignFlag* find_foreign_flag(std::string_view flag);

/// The error for a refused flag: "--master_addr is msrun's and torchrun's
/// flag; here rank 0's server in the rank table ...".
std::string refused_flag_message(const ForeignFlag& flag);

/// The information line for a flag taken: "msrun's --log_dir is taken as --log-dir: ...".
std::string taken_flag_note(const ForeignFlag& flag);

}  // namespace davincirun::cli
