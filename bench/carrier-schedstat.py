#!/usr/bin/env python3
"""What the kernel says about a process's carriers over an interval.

usage: bench/carrier-schedstat.py PID SECONDS [NAME]

Reads /proc/PID/task/TID/schedstat (time on a CPU, time runnable but
waiting for one, times scheduled) of every thread whose name contains NAME
(default `weft-carrier-`, which leaves out the monitor) at the start and
the end of SECONDS, and prints per thread and in total: CPUs on a CPU
(`run`), CPUs runnable but waiting (`wait`), and per time scheduled, the
run and the wait. This is what the monitor's rule for resting carriers
reads (crates/weft/src/sched/rest.rs).
"""
import os
import sys
import time


def snap(pid, pattern):
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            if pattern not in name or name.endswith("-mo"):
                continue
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                run, wait, slices = map(int, f.read().split())
            out[tid] = (name, run, wait, slices)
        except OSError:
            pass
    return out


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    pid, secs = sys.argv[1], float(sys.argv[2])
    pattern = sys.argv[3] if len(sys.argv) > 3 else "weft-carrier-"
    a = snap(pid, pattern)
    t0 = time.time()
    time.sleep(secs)
    b = snap(pid, pattern)
    wall = (time.time() - t0) * 1e9
    total = [0, 0, 0]
    for tid in sorted(b):
        if tid not in a:
            continue
        name, r1, w1, s1 = b[tid]
        _, r0, w0, s0 = a[tid]
        dr, dw, ds = r1 - r0, w1 - w0, max(s1 - s0, 1)
        total = [total[0] + dr, total[1] + dw, total[2] + ds]
        print(
            f"{name:20s} run={dr / wall:.2f} wait={dw / wall:.2f} "
            f"scheduled/s={ds / wall * 1e9:8.0f} "
            f"run/time={dr / ds / 1e3:7.1f}us wait/time={dw / ds / 1e3:7.1f}us"
        )
    r, w, s = total[0], total[1], max(total[2], 1)
    print(
        f"TOTAL run={r / wall:.2f} wait={w / wall:.2f} "
        f"run/time={r / s / 1e3:.1f}us wait/time={w / s / 1e3:.1f}us"
    )


if __name__ == "__main__":
    main()
