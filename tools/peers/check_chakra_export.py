#!/usr/bin/python3
"""Decodes a dtsim Chakra export with Chakra's own schema and checks the graph (issue 36).

dtsim writes Chakra ET files with its own protobuf wire code (traces/chakra_writer.h); this
reads them the way ASTRA-sim and Chakra's tools do, through the classes protoc generates from
Chakra's `schema/protobuf/et_def.proto`, so a field number, wire type or enum that dtsim's
writer and reader agree on but Chakra does not shows up here. The schema is not in this
repository (it is Chakra's, and dtsim keeps no copy): give a Chakra source tree — ASTRA-sim's
`extern/graph_frontend/chakra` submodule, or a clone of github.com/mlcommons/chakra.

  tools/peers/check_chakra_export.py --chakra-src DIR PREFIX

PREFIX is what `dtsim simulate CONFIG --chakra PREFIX` was given: it reads PREFIX.<rank>.et for
every rank and PREFIX.comm_groups.json. Needs Debian's protobuf-compiler and python3-protobuf.

Checked, each failure named by file and record:
  - every record decodes with the schema, and re-encodes to the same bytes (no field the
    schema lacks, nothing encoded two ways);
  - GlobalMetadata: the schema version dtsim writes (0.0.4), `rank` = the file's rank, one
    `rank_count` in every file;
  - nodes: a node type dtsim writes, ids unique across all files, every data dependency a node
    of the same file, the dependencies acyclic;
  - collectives: a CollectiveCommType, `comm_size` > 0, `pg_name` a group id >= 1 that the comm
    group file lists with this rank among its members; every member of a group issues the same
    sequence of (type, size) on it;
  - sends and receives: `comm_src` (a send's is its own rank) and `comm_dst` (a receive's),
    `comm_tag`, `comm_size`; every send has exactly one receive of the same source,
    destination, tag and size on the destination's file, and every receive its send.
Prints what it read (files, nodes by type, dependencies, collectives by type and group, pairs)
and exits 1 when any check fails.
"""
import argparse
import collections
import importlib
import json
import os
import subprocess
import sys
import tempfile

SCHEMA = os.path.join("schema", "protobuf", "et_def.proto")
VERSION = "0.0.4"
MAX_ERRORS = 20


def load_schema(chakra_src, workdir):
    """Compiles Chakra's et_def.proto with protoc and imports the generated module."""
    proto = os.path.join(chakra_src, SCHEMA)
    if not os.path.isfile(proto):
        sys.exit(f"check_chakra_export: {proto}: no such file (give --chakra-src a Chakra "
                 f"source tree, e.g. ASTRA-sim's extern/graph_frontend/chakra)")
    try:
        subprocess.run(["protoc", f"--proto_path={os.path.dirname(proto)}",
                        f"--python_out={workdir}", proto], check=True)
    except FileNotFoundError:
        sys.exit("check_chakra_export: protoc not found (apt-get install protobuf-compiler)")
    sys.path.insert(0, workdir)
    return importlib.import_module("et_def_pb2")


def records(path):
    """Yields (record index, bytes) of a varint-length-delimited protobuf stream."""
    with open(path, "rb") as f:
        data = f.read()
    pos, index = 0, 0
    while pos < len(data):
        length, shift = 0, 0
        while True:
            if pos >= len(data) or shift > 63:
                raise ValueError(f"record {index}: length prefix cut off or over ten bytes")
            byte = data[pos]
            pos += 1
            length |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        if pos + length > len(data):
            raise ValueError(f"record {index}: {length} bytes announced, "
                             f"{len(data) - pos} left in the file")
        yield index, data[pos:pos + length]
        pos += length
        index += 1


def attributes(message):
    """{name: value} of a node's or metadata's AttributeProto list (the oneof's value)."""
    out = {}
    for attr in message.attr:
        which = attr.WhichOneof("value")
        value = getattr(attr, which) if which else None
        if which and which.endswith("_list"):
            value = list(value.values)
        out[attr.name] = value
    return out


class Check:
    def __init__(self):
        self.errors = []

    def fail(self, where, what):
        self.errors.append(f"{where}: {what}")

    def expect(self, condition, where, what):
        if not condition:
            self.fail(where, what)


def decode(pb, path, rank, check, stats):
    """Reads one rank's file; returns its nodes as dicts of what the cross-rank checks need."""
    nodes = []
    read = 0
    for index, raw in records(path):
        read += 1
        where = f"{path}: record {index}"
        message = pb.GlobalMetadata() if index == 0 else pb.Node()
        message.ParseFromString(raw)
        check.expect(message.SerializeToString() == raw, where,
                     "re-encoding with Chakra's schema gives other bytes (a field et_def.proto "
                     "does not have, or one encoded another way)")
        if index == 0:
            meta = attributes(message)
            check.expect(message.version == VERSION, where,
                         f"GlobalMetadata.version {message.version!r}, expected {VERSION!r}")
            check.expect(meta.get("rank") == rank, where,
                         f"metadata rank {meta.get('rank')!r}, the file is rank {rank}")
            stats["rank_counts"].add(meta.get("rank_count"))
            continue
        where = f"{where} (node {message.id})"
        kind = pb.NodeType.Name(message.type)
        stats["types"][kind] += 1
        stats["deps"] += len(message.data_deps)
        attrs = attributes(message)
        node = {"id": message.id, "type": kind, "deps": list(message.data_deps), "where": where}
        if kind == "COMM_COLL_NODE":
            comm_type = attrs.get("comm_type")
            check.expect(comm_type in pb.CollectiveCommType.values(), where,
                         f"comm_type {comm_type!r} is no CollectiveCommType")
            node["coll"] = (pb.CollectiveCommType.Name(comm_type)
                            if comm_type in pb.CollectiveCommType.values() else comm_type)
            node["size"] = attrs.get("comm_size")
            node["group"] = attrs.get("pg_name")
            stats["collectives"][node["coll"]] += 1
        elif kind in ("COMM_SEND_NODE", "COMM_RECV_NODE"):
            for key in ("comm_src", "comm_dst", "comm_tag", "comm_size"):
                node[key] = attrs.get(key)
                check.expect(key in attrs, where, f"no {key}")
            own = "comm_src" if kind == "COMM_SEND_NODE" else "comm_dst"
            check.expect(node[own] == rank, where, f"{own} {node[own]!r} on rank {rank}'s file")
        else:
            check.expect(kind == "COMP_NODE", where, f"node type {kind}, which dtsim never writes")
        nodes.append(node)
    check.expect(read > 0, path, "empty: no GlobalMetadata record")
    return nodes


def check_rank_graph(nodes, path, check, seen_ids):
    ids = {}
    for node in nodes:
        if node["id"] in seen_ids:
            check.fail(node["where"], f"node id {node['id']} also in {seen_ids[node['id']]}")
        seen_ids[node["id"]] = path
        ids[node["id"]] = node
    indegree = {i: 0 for i in ids}
    successors = collections.defaultdict(list)
    for node in nodes:
        for dep in node["deps"]:
            if dep not in ids:
                check.fail(node["where"], f"data dependency {dep} is no node of this file")
                continue
            indegree[node["id"]] += 1
            successors[dep].append(node["id"])
    ready = [i for i, d in indegree.items() if d == 0]
    done = 0
    while ready:
        i = ready.pop()
        done += 1
        for s in successors[i]:
            indegree[s] -= 1
            if indegree[s] == 0:
                ready.append(s)
    check.expect(done == len(ids), path,
                 f"data dependencies form a cycle ({len(ids) - done} nodes never become ready)")


def check_collectives(per_rank, groups, check, stats):
    sequences = collections.defaultdict(dict)  # group -> rank -> [(type, size)]
    for rank, nodes in per_rank.items():
        for node in nodes:
            if node["type"] != "COMM_COLL_NODE":
                continue
            group, where = node["group"], node["where"]
            check.expect(isinstance(node["size"], int) and node["size"] > 0, where,
                         f"comm_size {node['size']!r}, expected a positive int64")
            if not (isinstance(group, str) and group.isdigit() and int(group) >= 1):
                check.fail(where, f"pg_name {group!r} is not a group id >= 1 (ASTRA-sim rejects "
                                  f"communicator 0)")
                continue
            if group not in groups:
                check.fail(where, f"pg_name {group!r} is not in the comm group file")
                continue
            check.expect(rank in groups[group], where,
                         f"rank {rank} is not a member of group {group} {groups[group]}")
            sequences[group].setdefault(rank, []).append((node["coll"], node["size"]))
    for group, by_rank in sequences.items():
        stats["groups_used"] += 1
        members = groups[group]
        absent = [r for r in members if r not in by_rank]
        check.expect(not absent, f"group {group}", f"members {absent} issue none of its "
                                                    f"{len(next(iter(by_rank.values())))} "
                                                    f"collectives")
        first = members[0] if members[0] in by_rank else next(iter(by_rank))
        for rank, sequence in by_rank.items():
            if sequence != by_rank[first]:
                diverge = next((k for k, (a, b) in enumerate(zip(sequence, by_rank[first]))
                                if a != b), min(len(sequence), len(by_rank[first])))
                check.fail(f"group {group}",
                           f"rank {rank} issues {len(sequence)} collectives, rank {first} "
                           f"{len(by_rank[first])}; they differ from collective {diverge}")


def check_pairs(per_rank, check, stats):
    sends, recvs = collections.Counter(), collections.Counter()
    for nodes in per_rank.values():
        for node in nodes:
            if node["type"] in ("COMM_SEND_NODE", "COMM_RECV_NODE"):
                key = (node["comm_src"], node["comm_dst"], node["comm_tag"], node["comm_size"])
                (sends if node["type"] == "COMM_SEND_NODE" else recvs)[key] += 1
    for key in sends.keys() | recvs.keys():
        src, dst, tag, size = key
        if sends[key] != 1 or recvs[key] != 1:
            check.fail(f"rank {src} -> rank {dst}",
                       f"tag {tag}, {size} bytes: {sends[key]} sends and {recvs[key]} receives "
                       f"(expected one of each)")
    stats["pairs"] = sum(min(sends[k], recvs[k]) for k in sends)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chakra-src", required=True, help="a Chakra source tree")
    parser.add_argument("prefix", help="the --chakra PREFIX of the export")
    args = parser.parse_args()
    groups_path = f"{args.prefix}.comm_groups.json"
    try:
        with open(groups_path, encoding="utf-8") as f:
            groups = json.load(f)
    except (OSError, ValueError) as error:
        sys.exit(f"check_chakra_export: {groups_path}: {error}")
    check = Check()
    stats = {"types": collections.Counter(), "collectives": collections.Counter(), "deps": 0,
             "rank_counts": set(), "groups_used": 0, "pairs": 0}
    with tempfile.TemporaryDirectory() as workdir:
        pb = load_schema(args.chakra_src, workdir)
        per_rank, seen_ids = {}, {}
        rank = 0
        while os.path.exists(f"{args.prefix}.{rank}.et"):
            path = f"{args.prefix}.{rank}.et"
            try:
                per_rank[rank] = decode(pb, path, rank, check, stats)
            except Exception as error:  # a decode error names the record; go on to the next file
                check.fail(path, f"does not decode with Chakra's schema: {error}")
                per_rank[rank] = []
            check_rank_graph(per_rank[rank], path, check, seen_ids)
            rank += 1
    if not per_rank:
        sys.exit(f"check_chakra_export: no {args.prefix}.0.et")
    check.expect(stats["rank_counts"] == {len(per_rank)}, args.prefix,
                 f"rank_count {sorted(stats['rank_counts'], key=str)} in the metadata, "
                 f"{len(per_rank)} files")
    check_collectives(per_rank, groups, check, stats)
    check_pairs(per_rank, check, stats)
    print(f"{args.prefix}: {len(per_rank)} files, "
          f"{sum(stats['types'].values()):,} nodes ({', '.join(f'{n:,} {t}' for t, n in sorted(stats['types'].items()))}), "
          f"{stats['deps']:,} data dependencies; collectives "
          f"{', '.join(f'{n:,} {t}' for t, n in sorted(stats['collectives'].items())) or 'none'} "
          f"over {stats['groups_used']} of {len(groups)} groups; {stats['pairs']:,} send/receive "
          f"pairs")
    for error in check.errors[:MAX_ERRORS]:
        print(f"  FAIL {error}")
    if len(check.errors) > MAX_ERRORS:
        print(f"  ... and {len(check.errors) - MAX_ERRORS} more")
    print("checked with Chakra's et_def.proto: " + ("FAILED" if check.errors else "ok"))
    return 1 if check.errors else 0


if __name__ == "__main__":
    sys.exit(main())
