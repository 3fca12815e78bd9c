#!/usr/bin/env python3
"""compare.py's timing, in blocks, next to the SM clock and power nvidia-smi samples.

At 8k-16k the paper grid's cells are long (1.5-3.5 ms a call) and their times bimodal for
every system; the H100 then runs below its 1.98 GHz boost clock (power). This script asks
how much of a cell's time is the clock: it times each system on each shape in blocks of
--calls back-to-back calls (the same inputs, hold and events as compare.py), in --rounds
rounds that interleave the systems and shapes, while nvidia-smi samples the SM clock, the
power draw and the clock-event reasons every --interval-ms. Each block's line gives its
median TFLOPS, the mean SM clock and power over its window, TFLOPS per GHz and TFLOPS per
kW. Two cells that differ in TFLOPS but not in TFLOPS per GHz differ by the clock they ran
at; at the power cap (clock-event reason 0x4, SW power cap) the clock is what the power
allows, and TFLOPS per kW (the inverse of the energy per flop) decides the speed. A summary
per system and length follows, over the rounds after the first (which brings the GPU to
its steady power state).

With --energy a block is instead --energy-seconds of back-to-back calls (no hold kernel
before them), timed by two events: the kernels' sustained speed at the power cap, steady to
about 0.5% from block to block. It also reads NVML's energy counter (millijoules since the
driver loaded) before and after, for TFLOPS per kW; on the H100 that counter proved too coarse
for ~1 s blocks (single blocks read 670-740 W, above the 700 W cap, and TFLOPS per kW
scattered by +-10%), so only the blocks' TFLOPS (steady to +-0.5%) are to be trusted there.

    python3 bench/clock_trace.py --hdim 128 --seqlens 8192,16384 --systems fa3,cudnn
    python3 bench/clock_trace.py --kernels fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_ls_pp_ps_xt
    python3 bench/clock_trace.py --energy --systems "" --kernels A,B --seqlens 16384
    python3 bench/clock_trace.py --direction bwd --hdim 64 --causal 1 --systems fa3,fa3-public \
        --public-fa3 .anchors/fa3
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from compare import (DTYPES, Shape, System, all_systems, import_public_fa3, make_input_sets,
                     public_fa3_system, time_direction)
import fa3  # noqa: E402 (compare puts the repository's python/ on the path)

SMI_FIELDS = ("timestamp", "clocks.sm", "power.draw", "temperature.gpu")
REASON_FIELDS = ("clocks_event_reasons.active", "clocks_throttle_reasons.active")


def start_sampler(path: Path, interval_ms: int) -> tuple[subprocess.Popen, bool]:
    """nvidia-smi sampling into path; the second value says whether reasons are sampled
    (the field's name changed between driver versions; without it, none)."""
    for reasons in (*REASON_FIELDS, None):
        fields = ",".join(SMI_FIELDS + ((reasons,) if reasons else ()))
        probe = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"],
                               capture_output=True, text=True)
        if probe.returncode == 0:
            handle = path.open("w")
            process = subprocess.Popen(
                ["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits",
                 f"-lms={interval_ms}"], stdout=handle, stderr=subprocess.DEVNULL)
            return process, reasons is not None
    raise RuntimeError("nvidia-smi cannot sample the SM clock and power here")


def read_samples(path: Path) -> list[dict]:
    samples = []
    for line in path.read_text().splitlines():
        parts = [p.strip() for p in line.split(",")]
        try:
            stamp = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
            sample = {"t": stamp, "mhz": float(parts[1]), "watts": float(parts[2]),
                      "celsius": float(parts[3])}
        except (ValueError, IndexError):
            continue  # a partial last line, or a field the GPU reports as [N/A]
        if len(parts) > 4:
            sample["reasons"] = parts[4]
        samples.append(sample)
    return samples


class EnergyCounter:
    """NVML's total energy counter of the one GPU (nvmlDeviceGetTotalEnergyConsumption,
    Volta and later), through ctypes: no pynvml needed."""

    def __init__(self) -> None:
        self.nvml = ctypes.CDLL("libnvidia-ml.so.1")
        if self.nvml.nvmlInit_v2() != 0:
            raise RuntimeError("nvmlInit_v2 failed")
        count = ctypes.c_uint()
        self.nvml.nvmlDeviceGetCount_v2(ctypes.byref(count))
        if count.value != 1:
            raise RuntimeError(f"--energy reads one GPU's counter; NVML sees {count.value}")
        self.handle = ctypes.c_void_p()
        if self.nvml.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(self.handle)) != 0:
            raise RuntimeError("nvmlDeviceGetHandleByIndex_v2 failed")

    def joules(self) -> float:
        millijoules = ctypes.c_ulonglong()
        if self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle,
                                                         ctypes.byref(millijoules)) != 0:
            raise RuntimeError("nvmlDeviceGetTotalEnergyConsumption failed")
        return millijoules.value / 1e3


def energy_block(system: System, sets: list, causal: bool, seconds: float, warmup: int,
                 counter: EnergyCounter) -> tuple[int, float, float]:
    """(calls, seconds, joules) of about `seconds` of back-to-back calls, timed by two events
    around them and metered by the energy counter read before and after (GPU idle at both)."""
    with system.context():
        started = time.perf_counter()
        for i in range(max(1, warmup)):
            system.call(*sets[i % len(sets)], causal)
        torch.cuda.synchronize()
        per_call = (time.perf_counter() - started) / max(1, warmup)
        calls = max(10, int(seconds / per_call))
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        before = counter.joules()
        begin.record()
        for i in range(calls):
            system.call(*sets[i % len(sets)], causal)
        end.record()
        torch.cuda.synchronize()
        after = counter.joules()
    return calls, begin.elapsed_time(end) / 1e3, after - before


def systems_from(args: argparse.Namespace) -> list[System]:
    known = all_systems()
    if args.public_fa3:
        why = import_public_fa3(args.public_fa3)
        if why:
            raise SystemExit(f"--public-fa3 {args.public_fa3}: {why}")
        known["fa3-public"] = public_fa3_system()
    chosen = [known[name] for name in args.systems.split(",") if name]
    for kernel in filter(None, args.kernels.split(",")):
        short = "d" + kernel.split("_d", 1)[-1]  # fa3_fwd_bf16_d128_... -> d128_...
        chosen.append(System(f"fa3:{short}", f"fa3 {short}",
                             lambda q, k, v, causal, name=kernel: fa3.forward(
                                 q, k, v, causal=causal, kernel=name)))
    return chosen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hdim", type=int, default=128)
    parser.add_argument("--seqlens", default="8192,16384")
    parser.add_argument("--causal", type=int, choices=(0, 1), default=0)
    parser.add_argument("--batch", type=int, default=0,
                        help="batch size instead of the paper grid's 16384 / seqlen")
    parser.add_argument("--heads", type=int, default=0,
                        help="heads instead of the paper grid's 2048 / hdim (e.g. equal flops "
                             "at two lengths, so the difference is the cost of half the tiles)")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    parser.add_argument("--direction", choices=("fwd", "bwd"), default="fwd",
                        help="what a timed call is: the forward, or the backward alone "
                             "(each input set's forward run once beforehand, as compare.py)")
    parser.add_argument("--public-fa3", default="",
                        help="directory of the public FA3's flash_attn_interface: the system "
                             "fa3-public")
    parser.add_argument("--systems", default="fa3,cudnn",
                        help="compare.py systems (fa3, cudnn, flash), comma-separated")
    parser.add_argument("--kernels", default="",
                        help="fa3 kernels to time as systems of their own, comma-separated")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=200, help="timed calls per block")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--interval-ms", type=int, default=20)
    parser.add_argument("--json", type=Path, default=None, help="write every block here")
    parser.add_argument("--energy", action="store_true",
                        help="blocks of --energy-seconds metered by NVML's energy counter")
    parser.add_argument("--energy-seconds", type=float, default=1.0)
    args = parser.parse_args()
    if args.rounds < 1 or args.calls < 1 or args.interval_ms < 1:
        parser.error("--rounds, --calls and --interval-ms must be at least 1")
    if args.energy_seconds <= 0:
        parser.error("--energy-seconds must be positive")
    if args.kernels and args.direction != "fwd":
        parser.error("--kernels names forward kernels: give --direction fwd")
    if args.energy and args.direction != "fwd":
        parser.error("--energy times forward calls only")
    if args.batch < 0 or args.heads < 0:
        parser.error("--batch and --heads must be positive (0: the paper's grid)")

    dtype, device = DTYPES[args.dtype], torch.device("cuda")
    shapes = [Shape(int(s), args.hdim, bool(args.causal), args.batch, args.heads,
                    args.direction) for s in args.seqlens.split(",")]
    systems = systems_from(args)
    if not systems:
        parser.error("no system to time: give --systems or --kernels")
    inputs = {shape: make_input_sets(shape, dtype, device) for shape in shapes}
    douts = {shape: [torch.randn_like(q) for q, _, _ in inputs[shape]] if args.direction == "bwd"
             else [] for shape in shapes}
    prepared = {shape: {} for shape in shapes}  # bwd: each system's forwards, kept over rounds
    for shape in shapes:
        print(f"# seqlen {shape.seqlen}: {shape.config}, batch {shape.batch}, heads "
              f"{shape.heads}, {shape.flops / 1e12:.3f} TFLOP a call")
    if args.energy:
        return energy_main(args, shapes, systems, inputs, device)

    trace = Path(tempfile.mkstemp(suffix=".csv")[1])
    sampler, has_reasons = start_sampler(trace, args.interval_ms)
    blocks = []
    try:
        time.sleep(0.5)  # the sampler's first lines
        for round_index in range(args.rounds):
            for shape in shapes:
                for system in systems:
                    times = time_direction(system, shape, inputs[shape], douts[shape],
                                           args.calls, args.warmup, prepared[shape])
                    end = time.time()
                    blocks.append({"round": round_index, "system": system.key,
                                   "seqlen": shape.seqlen, "end": end,
                                   "start": end - sum(times) / 1e3, "times_ms": times,
                                   "flops": shape.flops})
        time.sleep(0.3)
    finally:
        sampler.terminate()
        sampler.wait()
    samples = read_samples(trace)
    trace.unlink()

    reasons_note = ", with clock-event reasons" if has_reasons else ""
    print(f"{torch.cuda.get_device_name(device)}, {args.dtype} d{args.hdim} "
          f"causal={args.causal}; {args.calls} calls per block; {len(samples)} nvidia-smi "
          f"samples (every {args.interval_ms} ms{reasons_note})")
    print(f"{'round':>5} {'system':<28} {'seqlen':>6} {'median ms':>9} {'p10-p90 ms':>15} "
          f"{'TFLOPS':>7} {'SM MHz':>12} {'W':>5} {'C':>3} {'TF/GHz':>7} {'TF/kW':>6}  reasons")
    for block in blocks:
        inside = [s for s in samples if block["start"] <= s["t"] <= block["end"]]
        times = sorted(block["times_ms"])
        median = statistics.median(times)
        p10, p90 = times[len(times) // 10], times[(9 * len(times)) // 10]
        tflops = block["flops"] / (median * 1e-3) / 1e12
        if inside:
            mhz = [s["mhz"] for s in inside]
            block.update(mhz_mean=statistics.mean(mhz), mhz_min=min(mhz), mhz_max=max(mhz),
                         watts=statistics.mean(s["watts"] for s in inside),
                         celsius=max(s["celsius"] for s in inside),
                         reasons=sorted({s.get("reasons", "") for s in inside}))
            clock = (f"{block['mhz_mean']:.0f} ({block['mhz_min']:.0f}-{block['mhz_max']:.0f})")
            per_ghz = f"{tflops / (block['mhz_mean'] / 1e3):.1f}"
            per_kw = f"{tflops / (block['watts'] / 1e3):.0f}"
            rest = (f"{block['watts']:5.0f} {block['celsius']:3.0f} {per_ghz:>7} {per_kw:>6}  "
                    + ",".join(block["reasons"]))
        else:
            clock, rest = "-", "(no sample inside the block)"
        block.update(median_ms=median, tflops=tflops)
        print(f"{block['round']:>5} {block['system']:<28} {block['seqlen']:>6} {median:9.4f} "
              f"{p10:7.4f}-{p90:7.4f} {tflops:7.1f} {clock:>12} {rest}")
    steady = [b for b in blocks if b["round"] >= 1 and "watts" in b] or \
        [b for b in blocks if "watts" in b]
    print(f"\nsummary over rounds {'1' if args.rounds > 1 else '0'}-{args.rounds - 1} "
          "(medians of the blocks)")
    print(f"{'system':<28} {'seqlen':>6} {'TFLOPS':>7} {'SM MHz':>6} {'W':>5} {'TF/GHz':>7} "
          f"{'TF/kW':>6}")
    for key in dict.fromkeys((b["system"], b["seqlen"]) for b in steady):
        group = [b for b in steady if (b["system"], b["seqlen"]) == key]
        tflops = statistics.median(b["tflops"] for b in group)
        mhz = statistics.median(b["mhz_mean"] for b in group)
        watts = statistics.median(b["watts"] for b in group)
        print(f"{key[0]:<28} {key[1]:>6} {tflops:7.1f} {mhz:6.0f} {watts:5.0f} "
              f"{tflops / (mhz / 1e3):7.1f} {tflops / (watts / 1e3):6.0f}")
    if args.json:
        args.json.write_text(json.dumps({"samples": samples, "blocks": blocks}))
    return 0


def energy_main(args: argparse.Namespace, shapes: list[Shape], systems: list[System],
                inputs: dict, device: torch.device) -> int:
    counter = EnergyCounter()
    blocks = []
    for round_index in range(args.rounds):
        for shape in shapes:
            for system in systems:
                calls, seconds, joules = energy_block(system, inputs[shape], shape.causal,
                                                      args.energy_seconds, args.warmup, counter)
                blocks.append({"round": round_index, "system": system.key,
                               "seqlen": shape.seqlen, "calls": calls, "seconds": seconds,
                               "joules": joules, "flops": shape.flops})
    print(f"{torch.cuda.get_device_name(device)}, {args.dtype} d{args.hdim} "
          f"causal={args.causal}; blocks of ~{args.energy_seconds} s metered by NVML")
    print(f"{'round':>5} {'system':<40} {'seqlen':>6} {'calls':>5} {'ms/call':>8} "
          f"{'TFLOPS':>7} {'W':>5} {'TF/kW':>6}")
    for b in blocks:
        b["tflops"] = b["flops"] * b["calls"] / b["seconds"] / 1e12
        b["watts"] = b["joules"] / b["seconds"]
        b["tf_per_kw"] = b["flops"] * b["calls"] / b["joules"] / 1e9 if b["joules"] > 0 else 0.0
        print(f"{b['round']:>5} {b['system']:<40} {b['seqlen']:>6} {b['calls']:>5} "
              f"{1e3 * b['seconds'] / b['calls']:8.4f} {b['tflops']:7.1f} {b['watts']:5.0f} "
              f"{b['tf_per_kw']:6.0f}")
    steady = [b for b in blocks if b["round"] >= 1] or blocks
    print(f"\nsummary over rounds {'1' if args.rounds > 1 else '0'}-{args.rounds - 1} "
          "(median, min-max of the blocks)")
    print(f"{'system':<40} {'seqlen':>6} {'TFLOPS':>19} {'W':>5} {'TF/kW':>16}")
    for key in dict.fromkeys((b["system"], b["seqlen"]) for b in steady):
        group = [b for b in steady if (b["system"], b["seqlen"]) == key]
        tf = [b["tflops"] for b in group]
        eff = [b["tf_per_kw"] for b in group]
        print(f"{key[0]:<40} {key[1]:>6} {statistics.median(tf):7.1f} "
              f"({min(tf):5.1f}-{max(tf):5.1f}) {statistics.median(b['watts'] for b in group):5.0f} "
              f"{statistics.median(eff):6.0f} ({min(eff):4.0f}-{max(eff):4.0f})")
    if args.json:
        args.json.write_text(json.dumps({"blocks": blocks}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
