// davincirun: launch and supervise distributed training on Ascend NPU
// machines from an HCCL rank table. One header for consumers; the data flows
// through the others in this order:
//
//   common      job_types.hpp, supervisor_options.hpp, lifecycle.hpp, errors.hpp, version.hpp
//   rank table  rank_table.hpp, rank_table_loader.hpp, machine_rank_table.hpp, rank_table_merge.hpp
//   plan        server_identity.hpp, socket_interface.hpp, device_allocation.hpp, environment.hpp,
//               plan.hpp
//   output      log_streamer.hpp, console_sink.hpp, display_width.hpp, output_queue.hpp,
//               non_blocking_sink.hpp, polled_sink.hpp
//   process     process.hpp, supervisor.hpp, device_lock.hpp
//   job         job.hpp, failure_report.hpp
//
// Typical use: plan_launch(options, Environment::current()), then
// Job(plan, ConsoleTarget::stdio).wait(); errors are in errors.hpp.
#pragma once

#include "davincirun/console_sink.hpp"
#include "davincirun/device_allocation.hpp"
#include "davincirun/device_lock.hpp"
#include "davincirun/display_width.hpp"
#include "davincirun/environment.hpp"
#include "davincirun/errors.hpp"
#include "davincirun/failure_report.hpp"
#include "davincirun/job.hpp"
#include "davincirun/job_types.hpp"
#include "davincirun/lifecycle.hpp"
#include "davincirun/log_streamer.hpp"
#include "davincirun/machine_rank_table.hpp"
#include "davincirun/non_blocking_sink.hpp"
#include "davincirun/output_queue.hpp"
#include "davincirun/plan.hpp"
#include "davincirun/platform_environment.hpp"
#include "davincirun/polled_sink.hpp"
#include "davincirun/process.hpp"
#include "davincirun/rank_table.hpp"
#include "davincirun/rank_table_loader.hpp"
#include "davincirun/rank_table_merge.hpp"
#include "davincirun/root_cause.hpp"
#include "davincirun/server_identity.hpp"
#include "davincirun/socket_interface.hpp"
#include "davincirun/supervisor.hpp"
#include "davincirun/supervisor_options.hpp"
#include "davincirun/unique_fd.hpp"
#include "davincirun/version.hpp"
