// This machine's rank table: hccn.conf, the default route, the choice of
// server_id, and the table made from a fake system root; and writing a table
// atomically.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <vector>

#include "davincirun/errors.hpp"
#include "davincirun/machine_rank_table.hpp"
#include "rank_table/machine_facts.hpp"
#include "test_rank_table_support.hpp"
#include "test_support.hpp"

using Catch::Matchers::Contains;
using davincirun::ConfigError;
using davincirun::MachineRankTableOptions;
using davincirun::OptionError;
using davincirun::detail::choose_server_address;
using davincirun::detail::default_route_interface;
using davincirun::detail::InterfaceAddress;
using davincirun::detail::parse_hccn_conf;
using davincirun_test::TempDir;
using davincirun_test::write_file;
using namespace rank_table_test;

namespace {

// A root with dev/davinci<N> (regular files) and, when given, etc/hccn.conf.
struct FakeRoot {
  TempDir dir;
  explicit FakeRoot(const std::vector<std::string>& dev_names, const std::optional<std::string>& hccn = std::nullopt) {
    std::filesystem::create_directories(dir / "dev");
    std::filesystem::create_directories(dir / "etc");
    for (const auto& name : dev_names) write_file(dir / ("dev/" + name), "");
    if (hccn) write_file(dir / "etc/hccn.conf", *hccn);
  }
  MachineRankTableOptions options(std::optional<std::string> server_id = std::string("10.0.0.11")) const {
    MachineRankTableOptions o;
    o.system_root = dir.path();
    o.server_id = std::move(server_id);
    return o;
  }
};

// hccn_tool's lines for devices 0..3, with their neighbours.
const std::string hccn_conf = R"(# written by hccn_tool
address_0=192.168.100.101
netmask_0=255.255.255.0
netdetect_0=192.168.100.1
gateway_0=192.168.100.1
send_arp_status_0=1

address_1 = 192.168.101.101
netmask_1=255.255.255.0
address_3=192.168.103.101
address_2=192.168.102.101
)";

template <typename Call>
std::string config_error(Call&& call) {
  try {
    call();
  } catch (const ConfigError& e) {
    return e.what();
  }
  FAIL("expected a ConfigError");
  return "";
}

}  // namespace

TEST_CASE("hccn.conf: address_<N> lines, the rest skipped, bad lines named by line", "[machine_table]") {
  const auto addresses = parse_hccn_conf(hccn_conf, "hccn.conf");
  REQUIRE(addresses.size() == 4);
  CHECK(addresses.at(0) == "192.168.100.101");
  CHECK(addresses.at(1) == "192.168.101.101");
  CHECK(addresses.at(3) == "192.168.103.101");
  CHECK(parse_hccn_conf("", "hccn.conf").empty());
  CHECK(parse_hccn_conf("netmask_0=255.0.0.0\r\n# address_0=x\n", "hccn.conf").empty());

  CHECK(config_error([] { parse_hccn_conf("\naddress_0=192.168.1.300\n", "/etc/hccn.conf"); }) ==
        "/etc/hccn.conf:2: the address of device 0 is not an IP address: '192.168.1.300'");
  CHECK(config_error([] { parse_hccn_conf("address_x=1.2.3.4", "h"); }) ==
        "h:1: expected address_<device>=<IP address>, got 'address_x=1.2.3.4'");
  CHECK(config_error([] { parse_hccn_conf("address_0 1.2.3.4", "h"); }) ==
        "h:1: expected address_<device>=<IP address>, got 'address_0 1.2.3.4'");
  CHECK(config_error([] { parse_hccn_conf("address_0=1.2.3.4\naddress_0=1.2.3.5", "h"); }) ==
        "h:2: device 0 is given an address twice (also on line 1)");
  CHECK(config_error([] { parse_hccn_conf("address_0=1.2.3.4\n\naddress_1=1.2.3.4", "h"); }) ==
        "h:3: address 1.2.3.4 is given to devices 0 (line 1) and 1");
}

TEST_CASE("the default route's interface, from /proc/net/route", "[machine_table]") {
  const std::string header = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n";
  CHECK_FALSE(default_route_interface(""));
  CHECK_FALSE(default_route_interface(header));
  // A network route only, then a default route, then a better one, then one that is down.
  const std::string routes = header +
                             "eth1\t0000000A\t00000000\t0001\t0\t0\t0\t000000FF\t0\t0\t0\n"
                             "eth1\t00000000\t0100000A\t0003\t0\t0\t200\t00000000\t0\t0\t0\n"
                             "eth0\t00000000\t0102000A\t0003\t0\t0\t100\t00000000\t0\t0\t0\n"
                             "eth2\t00000000\t0103000A\t0002\t0\t0\t1\t00000000\t0\t0\t0\n";
  CHECK(default_route_interface(routes) == std::optional<std::string>("eth0"));
  CHECK(default_route_interface(header + "eth1\t0000000A\t00000000\t0001\t0\t0\t0\t000000FF\t0\t0\t0\n") ==
        std::nullopt);
}

TEST_CASE("server_id: the default route's interface's address, else the first, saying which", "[machine_table]") {
  const std::vector<InterfaceAddress> addresses = {{"docker0", "172.17.0.1"}, {"eth0", "10.0.0.11"}};
  auto chosen = choose_server_address(addresses, std::string("eth0"));
  REQUIRE(chosen);
  CHECK(chosen->address == "10.0.0.11");
  CHECK(chosen->reason == "the address of eth0, the interface of the default route");
  chosen = choose_server_address(addresses, std::nullopt);
  REQUIRE(chosen);
  CHECK(chosen->address == "172.17.0.1");
  CHECK(chosen->reason == "the first IPv4 address of this machine (docker0; no default route)");
  chosen = choose_server_address(addresses, std::string("ppp0"));
  REQUIRE(chosen);
  CHECK(chosen->reason ==
        "the first IPv4 address of this machine (docker0; the default route's interface ppp0 has none)");
  CHECK_FALSE(choose_server_address({}, std::string("eth0")));
  // This machine's own, whatever they are: never loopback or link-local.
  for (const auto& a : davincirun::detail::interface_addresses()) {
    CHECK(a.address.rfind("127.", 0) != 0);
    CHECK(a.address.rfind("169.254.", 0) != 0);
    CHECK_FALSE(a.interface.empty());
  }
}

TEST_CASE("this machine's table: its davinci<N> in order, their addresses, one server", "[machine_table]") {
  const FakeRoot root({"davinci3", "davinci0", "davinci1", "davinci2", "davinci10", "davinci_manager", "davinci_hdc",
                       "davinci", "davinci1x", "davinci_manager_docker_1"},
                      hccn_conf + "address_10=192.168.110.101\n");
  const auto made = davincirun::machine_rank_table(root.options());
  CHECK(made.server_reason == "given");
  CHECK(made.warnings.empty());
  const auto& table = made.table;
  CHECK(table.format == davincirun::RankTableFormat::v1_0);
  CHECK(table.status == "completed");
  CHECK(table.world_size == 5);
  REQUIRE(table.servers.size() == 1);
  CHECK(table.servers[0].server_id == "10.0.0.11");
  const std::vector<int> ids = {0, 1, 2, 3, 10};
  for (std::size_t r = 0; r < ids.size(); ++r) {
    CAPTURE(r);
    CHECK(table.servers[0].devices[r].device_id == ids[r]);
    CHECK(table.servers[0].devices[r].rank_id == static_cast<int>(r));
  }
  CHECK(table.servers[0].devices[4].device_ip == std::optional<std::string>("192.168.110.101"));
  // The layout of hccl_tools.py and the corpus: strings, host_nic_ip reserved.
  const Json doc = Json::parse(table.normalized_json);
  CHECK(doc.dump() == Json::parse(R"({"version": "1.0", "server_count": "1", "server_list": [{"server_id": "10.0.0.11",
      "device": [{"device_id": "0", "device_ip": "192.168.100.101", "rank_id": "0"},
                 {"device_id": "1", "device_ip": "192.168.101.101", "rank_id": "1"},
                 {"device_id": "2", "device_ip": "192.168.102.101", "rank_id": "2"},
                 {"device_id": "3", "device_ip": "192.168.103.101", "rank_id": "3"},
                 {"device_id": "10", "device_ip": "192.168.110.101", "rank_id": "4"}],
      "host_nic_ip": "reserve"}], "status": "completed"})")
                          .dump());

  auto some_devices = root.options();
  some_devices.devices = std::vector<int>{10, 2};
  const auto narrowed = davincirun::machine_rank_table(some_devices).table;
  REQUIRE(narrowed.servers[0].devices.size() == 2);
  CHECK(narrowed.servers[0].devices[0].device_id == 2);
  CHECK(narrowed.servers[0].devices[1].device_id == 10);
  CHECK(narrowed.servers[0].devices[1].rank_id == 1);
}

TEST_CASE("this machine's table: devices without an address are listed without one, with a warning",
          "[machine_table]") {
  const FakeRoot partial({"davinci0", "davinci1", "davinci2"}, std::string("address_1=192.168.1.1\n"));
  auto made = davincirun::machine_rank_table(partial.options());
  CHECK_FALSE(made.table.servers[0].devices[0].device_ip);
  CHECK(made.table.servers[0].devices[1].device_ip == std::optional<std::string>("192.168.1.1"));
  REQUIRE(made.warnings.size() == 1);
  CHECK_THAT(made.warnings[0], Contains("devices 0, 2 have no address_<N> line in " + partial.dir.path() +
                                        "/etc/hccn.conf: listed without device_ip") &&
                                   Contains("hccn_tool"));

  const FakeRoot no_conf({"davinci4"});
  made = davincirun::machine_rank_table(no_conf.options());
  REQUIRE(made.warnings.size() == 1);
  CHECK_THAT(made.warnings[0],
             Contains("there is no " + no_conf.dir.path() + "/etc/hccn.conf (device 4 has no address)"));
}

TEST_CASE("this machine's table: what cannot be listed is refused by name", "[machine_table]") {
  const FakeRoot empty({"davinci_manager"});
  CHECK(config_error([&] { davincirun::machine_rank_table(empty.options()); }) ==
        "no NPU on this machine: no " + empty.dir.path() + "/dev/davinci<N> (the NPUs' device files)");

  const FakeRoot root({"davinci0", "davinci1"}, std::string("address_0=1.2.3.4\naddress_1=1.2.3\n"));
  CHECK(config_error([&] { davincirun::machine_rank_table(root.options()); }) ==
        root.dir.path() + "/etc/hccn.conf:2: the address of device 1 is not an IP address: '1.2.3'");

  const FakeRoot good({"davinci0", "davinci1"});
  auto options = good.options();
  options.devices = std::vector<int>{1, 5};
  try {
    davincirun::machine_rank_table(options);
    FAIL("expected an OptionError");
  } catch (const OptionError& e) {
    CHECK(e.option() == "devices");
    CHECK(std::string(e.what()) ==
          "devices: device 5 is not on this machine (" + good.dir.path() + "/dev/davinci<N>: 0,1)");
  }
  options.devices = std::vector<int>{1, 1};
  CHECK_THROWS_WITH(davincirun::machine_rank_table(options), "devices: device 1 is given twice");

  options = good.options(std::string(65, 'a'));
  try {
    davincirun::machine_rank_table(options);
    FAIL("expected an OptionError");
  } catch (const OptionError& e) {
    CHECK(e.option() == "server_id");
    CHECK_THAT(std::string(e.what()), Contains("server_id is longer than 64 bytes"));
  }
}

TEST_CASE("this machine's table: server_id from the machine when none is given", "[machine_table]") {
  const FakeRoot root({"davinci0"});
  const auto addresses = davincirun::detail::interface_addresses();
  if (addresses.empty()) {
    CHECK_THROWS_AS(davincirun::machine_rank_table(root.options(std::nullopt)), OptionError);
    return;
  }
  const auto made = davincirun::machine_rank_table(root.options(std::nullopt));
  const std::string& id = made.table.servers[0].server_id;
  CHECK(std::any_of(addresses.begin(), addresses.end(), [&](const InterfaceAddress& a) { return a.address == id; }));
  CHECK_THAT(made.server_reason, Contains("the address of") || Contains("the first IPv4 address"));
}

TEST_CASE("a table file is written whole, mode 0644, replacing the old one", "[machine_table]") {
  TempDir dir;
  const auto table = davincirun::load_rank_table(corpus_dir + "valid/v1_integers_not_strings.json");
  const std::string path = dir / "hccl.json";
  write_file(path, "old");
  const mode_t umask = ::umask(077);  // the mode is 0644 whatever the umask
  davincirun::write_rank_table_file(table, path);
  ::umask(umask);
  struct stat info{};
  REQUIRE(::stat(path.c_str(), &info) == 0);
  CHECK((info.st_mode & 07777) == 0644);
  CHECK(read_text(path) == table.normalized_json + "\n");
  CHECK(davincirun::load_rank_table(path).world_size == 4);
  // Nothing else is left in the directory: the temporary file took the name.
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path()), std::filesystem::directory_iterator()) == 1);

  // A symlink at the path is replaced, not written through.
  write_file(dir / "target.json", "theirs");
  std::filesystem::create_symlink(dir / "target.json", dir / "link.json");
  davincirun::write_rank_table_file(table, dir / "link.json");
  CHECK(read_text(dir / "target.json") == "theirs");
  CHECK_FALSE(std::filesystem::is_symlink(dir / "link.json"));

  CHECK_THROWS_WITH(davincirun::write_rank_table_file(table, dir / "no/such/dir.json"),
                    "write rank table " + dir / "no/such/dir.json" + ": No such file or directory");
  std::filesystem::create_directory(dir / "taken");
  CHECK_THROWS_AS(davincirun::write_rank_table_file(table, dir / "taken"), davincirun::SystemError);
  CHECK(std::filesystem::is_directory(dir / "taken"));
  CHECK_THROWS_AS(davincirun::write_rank_table_file(davincirun::RankTable{}, dir / "x.json"), std::invalid_argument);
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path()), std::filesystem::directory_iterator()) == 4);
}
