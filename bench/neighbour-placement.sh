#!/usr/bin/env bash
# Where the threads run (issue 54, docs/bench.md "Where the neighbours
# run"): starts two CPU-bound neighbours (`yes > /dev/null`), one hello
# server and `wrk -t1 -c100 -d6s --latency` against it, and samples every
# 2 ms for 4 s the state and CPU (/proc/PID/task/TID/stat) of the server's
# threads and of both neighbours. Prints wrk's req/s and latency
# percentiles, and how often the two busiest server threads and the two
# neighbours were on the same CPU.
#
#     bench/neighbour-placement.sh [--bind] -- SERVER-COMMAND...
#     bench/neighbour-placement.sh -- target/release/weft-bench worker weft http-server
#     bench/neighbour-placement.sh --bind -- bench/peers/target/release/axum-hello 0
#
# --bind binds neighbour i to CPU i (0 and 1), as `weft-bench --busy` and
# bench/shared-cores.sh do by default; without it the kernel places them.
# The server must print "ready PORT" on stdout (weft-bench's workers and
# the peers in bench/peers do). Loopback only; needs wrk, python3, taskset.

set -euo pipefail

bind=0
while (($#)); do
    case $1 in
    --bind) bind=1 ;;
    --) shift; break ;;
    -h | --help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "neighbour-placement: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
(($#)) || { echo "neighbour-placement: give the server command after --" >&2; exit 2; }
for tool in wrk python3 taskset; do
    command -v "$tool" >/dev/null || { echo "neighbour-placement: $tool not found" >&2; exit 2; }
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/placement.XXXXXX")
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT

for i in 0 1; do
    if ((bind)); then taskset -c "$i" yes >/dev/null & else yes >/dev/null & fi
    pids+=($!)
done
neighbours=("${pids[@]}")
"$@" >"$tmp/server.out" 2>&1 &
server=$!
pids+=("$server")
port=""
for _ in $(seq 100); do
    port=$(grep -o 'ready [0-9]*' "$tmp/server.out" | awk '{ print $2 }' || true)
    [[ -n $port ]] && break
    sleep 0.05
done
[[ -n $port ]] || { echo "neighbour-placement: the server did not say 'ready PORT':" >&2; cat "$tmp/server.out" >&2; exit 1; }
wrk -t1 -c100 -d6s --latency "http://127.0.0.1:$port/hello" >"$tmp/wrk.out" &
wrk_pid=$!
sleep 1
python3 - "$server" "${neighbours[@]}" <<'PY'
import glob, os, sys, time
server, n0, n1 = sys.argv[1:4]

def stat(path):
    """(state, cpu, utime + stime in ticks) of /proc/.../stat, or None."""
    try:
        fields = open(path).read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return fields[0], int(fields[36]), int(fields[11]) + int(fields[12])

tids = [os.path.basename(t) for t in glob.glob(f"/proc/{server}/task/*")]
before = {t: stat(f"/proc/{server}/task/{t}/stat") for t in tids}
samples = []
end = time.time() + 4
while time.time() < end:
    row = {t: stat(f"/proc/{server}/task/{t}/stat") for t in tids}
    row["n0"], row["n1"] = stat(f"/proc/{n0}/stat"), stat(f"/proc/{n1}/stat")
    samples.append({k: v for k, v in row.items() if v})
    time.sleep(0.002)
after = {t: stat(f"/proc/{server}/task/{t}/stat") for t in tids}
live = [t for t in tids if before.get(t) and after.get(t)]
a, b = sorted(live, key=lambda t: after[t][2] - before[t][2], reverse=True)[:2]

def share(pred):
    rows = [r for r in samples if a in r and b in r and "n0" in r and "n1" in r]
    return sum(1 for r in rows if pred(r)) / max(len(rows), 1)

print(f"samples {len(samples)}; busiest server threads on one CPU: "
      f"{share(lambda r: r[a][1] == r[b][1]):.2f}, both runnable: "
      f"{share(lambda r: r[a][0] == 'R' and r[b][0] == 'R'):.2f}; "
      f"neighbours on one CPU: {share(lambda r: r['n0'][1] == r['n1'][1]):.2f}")
PY
wait "$wrk_pid"
echo "wrk: $(grep Requests/sec "$tmp/wrk.out" | awk '{ print $2 }') req/s; $(grep -A4 'Latency Distribution' "$tmp/wrk.out" | tail -4 | awk '{ printf "%s %s  ", $1, $2 }')"
