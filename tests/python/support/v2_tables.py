"""Format 2.0 rank tables (Ascend 950 generation) for the Python tests, in
the shape of HCCL's guide (docs/rank-tables.md, "Format 2.0")."""

import json


def v2_rank(rank_id, device_id, layer0, host_ip=None):
    """One rank on NPU `device_id` of the server whose own network is `layer0`,
    with its host address when given."""
    ipv4 = "172.%d.%d.%d" % (16 + rank_id // 65536, rank_id // 256 % 256, rank_id % 256)
    rank = {"rank_id": rank_id, "device_id": device_id, "local_id": device_id}
    if host_ip is not None:
        rank["host_ip"] = host_ip
    rank["level_list"] = [
        {"net_layer": 0, "net_instance_id": layer0, "net_type": "TOPO_FILE_DESC", "net_attr": "",
         "rank_addr_list": [{"addr_type": "EID", "addr": "000000000000000000100000dfdf%04x" % (rank_id % 65536),
                             "ports": ["0/4"], "plane_id": "plane0"}]},
        {"net_layer": 1, "net_instance_id": "az0", "net_type": "CLOS", "net_attr": "",
         "rank_addr_list": [{"addr_type": "IPV4", "addr": ipv4,
                             "ports": ["1/5", "1/6"]}]},
    ]
    return rank


def write_v2_table(path, servers, host_ips=None, **top_level):
    """A 2.0 table of `servers` (a list of device id lists, one per server,
    ranks numbered in that order), its servers named by `host_ips` when given
    (one per server), else by their net_layer 0 ("az0-rack0-pod<s>"). Returns the path."""
    ranks = []
    for s, devices in enumerate(servers):
        host_ip = host_ips[s] if host_ips else None
        for d in devices:
            ranks.append(v2_rank(len(ranks), d, "az0-rack0-pod%d" % s, host_ip))
    table = dict({"status": "completed", "version": "2.0", "rank_count": len(ranks)}, **top_level)
    table["rank_list"] = ranks
    with open(path, "w") as f:
        json.dump(table, f, indent=2)
    return str(path)
