"""Controller write capacity: committed metadata writes through the HTTP API and through RocketMQ's
remoting protocol of a 3-node controller (journal on), against bare pysyncobj writes on 3 nodes measured
in the same run.

    python -m bench.controller_writes [--seconds 12] [--rounds 4] [--clients 16]

HTTP: ``--clients`` concurrent callers, one keep-alive connection each, POST ``applyBrokerId`` to the
leader (every call commits one write: an event for one of 64 broker sets; writes that arrive together share a
log entry, the controller's group commit). Remoting: the same writes as ``CONTROLLER_APPLY_BROKER_ID``
(1013) frames, ``--clients`` of them in flight on one connection, answered by ``opaque``. Raw: the same number of threads inside
the leader process of a bare pysyncobj cluster, each calling a replicated method synchronously with an
entry of the same size (``bench/raw_raft.py``). CPU time per committed write is charged to each process.

Both clusters run side by side (one idle while the other is measured) and each is measured in
``--rounds`` alternating slices of ``--seconds / --rounds`` (raw, HTTP, HTTP, raw, ...): this machine's
speed drifts by tens of percent within a minute, and alternating puts the same drift into both sides
of the ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from bench.common import (
    alternate,
    cpu_seconds,
    read_response,
    request_bytes,
    scratch_dir,
    summary,
    table,
    write_result,
)
from mqctl.cluster import ControllerCluster, free_port_pair, send_and_wait, wait_until
from services.controller import contract
from services.remoting import headers as h
from services.remoting.codec import FrameDecoder, encode
from services.remoting.command import RequestCode, make_request


class Slices:
    """What one case committed, slice by slice."""

    def __init__(self) -> None:
        self.writes = 0
        self.seconds = 0.0
        self.cpu = 0.0
        self.failed: dict[str, int] = {}
        self.latencies: list[float] = []
        self.per_slice: list[float] = []

    def add(self, writes: int, seconds: float, cpu: float, latencies: list[float], failed: dict[str, int]) -> None:
        self.writes += writes
        self.seconds += seconds
        self.cpu += cpu
        self.latencies += latencies
        for code, n in failed.items():
            self.failed[code] = self.failed.get(code, 0) + n
        self.per_slice.append(writes / seconds if seconds else 0.0)

    def row(self) -> dict[str, Any]:
        return {"writesPerSec": self.writes / self.seconds if self.seconds else 0.0, "failed": self.failed,
                "latencyMs": summary(self.latencies), "sliceWritesPerSec": [round(x) for x in self.per_slice],
                "cpuUsPerWrite": round(self.cpu * 1e6 / max(1, self.writes), 1)}


class RawCluster:
    """Three ``bench.raw_raft`` processes; each slice is driven inside the leader."""

    def __init__(self, root: Path, clients: int) -> None:
        self.control = root / "raw-control"
        self.control.mkdir(parents=True)
        ports = [free_port_pair() for _ in range(3)]
        addresses = [f"127.0.0.1:{p + 1}" for p in ports]
        self.procs = [subprocess.Popen(
            [sys.executable, "-m", "bench.raw_raft", "--self", address,
             "--peers", ",".join(a for a in addresses if a != address), "--dir", str(root / f"raw-n{i}"),
             "--clients", str(clients), "--control", str(self.control)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for i, address in enumerate(addresses)]
        self.count = 0
        self.slices = Slices()
        try:
            wait_until((self.control / "ready").exists, 60, "a raw pysyncobj leader")
        except BaseException:
            self.stop()
            raise

    def slice(self, seconds: float, measured: bool = True) -> None:
        self.count += 1
        order = self.control / f"slice-{self.count}.go"
        result = order.with_suffix(".json")
        before = [cpu_seconds(p.pid) for p in self.procs]
        tmp = order.with_suffix(".tmp")
        tmp.write_text(str(seconds))
        tmp.rename(order)
        wait_until(result.exists, seconds + 60, "a raw pysyncobj slice", interval=0.02)
        used = sum(cpu_seconds(p.pid) - b for p, b in zip(self.procs, before))
        outcome = json.loads(result.read_text())
        if measured:
            self.slices.add(outcome["writes"], outcome["seconds"], used, outcome["latencies"],
                            {"timeout": outcome["failed"]} if outcome["failed"] else {})

    def stop(self) -> None:
        for p in self.procs:
            send_and_wait(p, signal.SIGTERM)


class HttpCluster:
    """A 3-node controller cluster; each slice drives its leader's HTTP API."""

    def __init__(self, root: Path, clients: int) -> None:
        self.clients = clients
        self.cluster = ControllerCluster(root / "http", size=3, extra={"logLevel": "WARNING"})
        self.cluster.configure()
        self.cluster.start()
        self.slices = Slices()
        self.leader = self.cluster.leader(timeout=60)
        url = f"http://{self.leader.address}/v1/controller/applyBrokerId"
        self.body = {"clusterName": "DefaultCluster", "brokerName": "bench-0", "appliedBrokerId": 1,
                     "registerCheckCode": "127.0.0.1:10911;1"}
        with httpx.Client(timeout=5.0) as c:  # the broker sets exist before the clock starts
            for g in range(64):
                wait_until(lambda g=g: c.post(url, json={**self.body, "brokerName": f"bench-{g}"})
                           .json()["code"] == 0, 30, "the first applyBrokerId")
        self.pids = [n.process.pid for n in self.cluster.nodes if n.process is not None]
        self.leader_index = next(i for i, n in enumerate(self.cluster.nodes) if n is self.leader)
        self.leader_cpu = 0.0
        self.loadgen_cpu = 0.0

    def slice(self, seconds: float, measured: bool = True) -> None:
        before = [cpu_seconds(p) for p in self.pids]
        me = time.process_time()
        started = time.monotonic()
        done, failed, latencies = asyncio.run(_drive(self.leader.address, self.body, seconds, self.clients))
        elapsed = time.monotonic() - started
        per_node = [cpu_seconds(p) - b for p, b in zip(self.pids, before)]
        if measured:
            self.slices.add(done, elapsed, sum(per_node), latencies, failed)
            self.leader_cpu += per_node[self.leader_index]
            self.loadgen_cpu += time.process_time() - me

    def row(self) -> dict[str, Any]:
        s = self.slices
        return {**s.row(), "leaderCpuUsPerWrite": round(self.leader_cpu * 1e6 / max(1, s.writes), 1),
                "leaderCpuPct": round(100 * self.leader_cpu / max(s.seconds, 1e-9), 1),
                "loadgenCpuUsPerWrite": round(self.loadgen_cpu * 1e6 / max(1, s.writes), 1)}

    def stop(self) -> None:
        self.cluster.stop()


class RemotingSide:
    """The same controller cluster as an HttpCluster, driven over remoting."""

    def __init__(self, cluster: HttpCluster) -> None:
        self.cluster = cluster
        self.slices = Slices()

    def slice(self, seconds: float, measured: bool = True) -> None:
        c = self.cluster
        before = [cpu_seconds(p) for p in c.pids]
        started = time.monotonic()
        done, failed, latencies = asyncio.run(_drive_remoting(c.leader.address, c.body, seconds, c.clients))
        elapsed = time.monotonic() - started
        if measured:
            self.slices.add(done, elapsed, sum(cpu_seconds(p) - b for p, b in zip(c.pids, before)), latencies,
                            failed)


def measure(root: Path, seconds: float, rounds: int,
            clients: int) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    raw: RawCluster | None = None
    http: HttpCluster | None = None
    try:
        raw = RawCluster(root, clients)
        http = HttpCluster(root, clients)
        remoting = RemotingSide(http)
        alternate([raw, http, remoting], rounds, seconds, warmup=min(1.0, seconds / rounds))
        return raw.slices.row(), http.row(), remoting.slices.row()
    finally:
        if http is not None:
            http.stop()
        if raw is not None:
            raw.stop()


async def _drive(address: str, body: dict[str, Any], seconds: float,
                 clients: int) -> tuple[int, dict[str, int], list[float]]:
    """``clients`` keep-alive connections, each sending its next write when the last is answered. The
    requests are encoded once (one per broker set), so the load generator costs little CPU."""
    host, _, port = address.rpartition(":")
    requests = [request_bytes(address, contract.APPLY_BROKER_ID, {**body, "brokerName": f"bench-{g}"})
                for g in range(64)]
    stop = time.monotonic() + seconds
    done = 0
    failed: dict[str, int] = {}
    latencies: list[float] = []

    async def client(k: int) -> None:
        nonlocal done
        reader, writer = await asyncio.open_connection(host, int(port))
        i = k
        while time.monotonic() < stop:
            t0 = time.perf_counter()
            writer.write(requests[i % 64])
            reply = json.loads(await read_response(reader))
            if reply["code"] == 0:
                done += 1
                latencies.append((time.perf_counter() - t0) * 1000)
            else:
                failed[str(reply["code"])] = failed.get(str(reply["code"]), 0) + 1
            i += clients
        writer.close()

    await asyncio.gather(*(client(k) for k in range(clients)))
    return done, failed, latencies


async def _drive_remoting(address: str, body: dict[str, Any], seconds: float,
                          clients: int) -> tuple[int, dict[str, int], list[float]]:
    """One connection with ``clients`` CONTROLLER_APPLY_BROKER_ID requests in flight, each answer followed
    by the next request; frames encoded once per broker set (only the opaque changes)."""
    host, _, port = address.rpartition(":")
    frames = []
    for g in range(64):
        header = h.ApplyBrokerIdRequestHeader(cluster_name=body["clusterName"], broker_name=f"bench-{g}",
                                              applied_broker_id=body["appliedBrokerId"],
                                              register_check_code=body["registerCheckCode"])
        frames.append(encode(make_request(RequestCode.CONTROLLER_APPLY_BROKER_ID, 0, header.to_ext_fields())))
    reader, writer = await asyncio.open_connection(host, int(port))
    decoder = FrameDecoder()
    stop = time.monotonic() + seconds
    sent: dict[int, float] = {}
    done, counter = 0, 0
    failed: dict[str, int] = {}
    latencies: list[float] = []

    def send() -> None:
        nonlocal counter
        counter += 1
        sent[counter] = time.perf_counter()
        writer.write(_with_opaque(frames[counter % 64], counter))

    for _ in range(clients):
        send()
    while sent:
        data = await reader.read(1 << 16)
        if not data:
            break
        for answer in decoder.feed(data):
            t0 = sent.pop(answer.opaque)
            if answer.code == 0:
                done += 1
                latencies.append((time.perf_counter() - t0) * 1000)
            else:
                failed[str(answer.code)] = failed.get(str(answer.code), 0) + 1
            if time.monotonic() < stop:
                send()
    writer.close()
    return done, failed, latencies


def _with_opaque(frame: bytes, opaque: int) -> bytes:
    """``frame`` (written with opaque 0) with ``opaque`` instead: the JSON header is rewritten, lengths too."""
    _, mark = struct.unpack_from(">ii", frame)
    header = frame[8:8 + (mark & 0xFFFFFF)].replace(b'"opaque":0,', f'"opaque":{opaque},'.encode(), 1)
    body = frame[8 + (mark & 0xFFFFFF):]
    return struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=12, help="measuring time per case")
    parser.add_argument("--rounds", type=int, default=4, help="alternating slices the time is cut into")
    parser.add_argument("--clients", type=int, default=16)
    args = parser.parse_args()
    gc.collect()
    gc.freeze()
    root = scratch_dir("mqctl-bench-ctl-")
    raw, http, remoting = measure(root, args.seconds, args.rounds, args.clients)
    rows = [{"case": "bare pysyncobj, in-process callers", "writesPerSec": raw["writesPerSec"],
             "p50Ms": raw["latencyMs"]["p50"], "p99Ms": raw["latencyMs"]["p99"],
             "cpuUsPerWrite": raw["cpuUsPerWrite"]},
            {"case": "controller HTTP API (applyBrokerId)", "writesPerSec": http["writesPerSec"],
             "p50Ms": http["latencyMs"]["p50"], "p99Ms": http["latencyMs"]["p99"],
             "cpuUsPerWrite": http["cpuUsPerWrite"]},
            {"case": "controller remoting (1013, one connection)", "writesPerSec": remoting["writesPerSec"],
             "p50Ms": remoting["latencyMs"]["p50"], "p99Ms": remoting["latencyMs"]["p99"],
             "cpuUsPerWrite": remoting["cpuUsPerWrite"]}]
    ratio = http["writesPerSec"] / raw["writesPerSec"]
    remoting_ratio = remoting["writesPerSec"] / raw["writesPerSec"]
    remoting_slices = [x / r for r, x in zip(raw["sliceWritesPerSec"], remoting["sliceWritesPerSec"]) if r]
    slice_ratios = [h / r for r, h in zip(raw["sliceWritesPerSec"], http["sliceWritesPerSec"]) if r]
    print(table(rows, ["case", "writesPerSec", "p50Ms", "p99Ms", "cpuUsPerWrite"]))
    print(f"\nHTTP / raw (same run, alternating slices): {ratio:.2f}x; slice by slice: "
          + ", ".join(f"{x:.2f}x" for x in slice_ratios) + f"; failed HTTP writes: {http['failed'] or 0}")
    print(f"remoting / raw: {remoting_ratio:.2f}x (target >= 0.5x); slice by slice: "
          + ", ".join(f"{x:.2f}x" for x in remoting_slices) + f"; failed: {remoting['failed'] or 0}")
    path = write_result("controller_writes", {"args": vars(args), "raw": raw, "http": http, "httpOverRaw": ratio,
                                              "sliceRatios": slice_ratios, "remoting": remoting,
                                              "remotingOverRaw": remoting_ratio,
                                              "remotingSliceRatios": remoting_slices})
    print(f"result: {path}")


if __name__ == "__main__":
    main()
