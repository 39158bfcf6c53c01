#!/usr/bin/env bash
# Shared cores (issue 54): weft-http beside its peers when the cores are not
# its own. Each hello server in turn — weft-http (virtual threads), the std
# thread-per-connection server, may_minihttp, axum (Tokio multi-thread) and
# Go net/http — is driven by
#
#     wrk -t1 -c100 -d5s --latency http://127.0.0.1:PORT/hello
#
# beside N CPU-bound neighbour processes (`yes > /dev/null`, --busy N; each
# bound to its own CPU unless --busy-placement free) and,
# with --cpu-quota CPUS, inside a cgroup with a CPU quota (the server
# process only: not wrk, not the neighbours). Rounds interleave the servers
# (each round starts one server later), every measurement is a fresh server
# process, and the table gives the median req/s and median p99 per server
# with each relative to weft-http, the server's CPU, and wrk's: its time on
# a CPU and its time on a CPU or waiting for one (a wrk runnable nearly all
# the time is what limits req/s, whatever the server).
#
#     bench/shared-cores.sh                          # 2 busy neighbours, 3 rounds
#     bench/shared-cores.sh --busy 0                 # quiet(-ish) machine
#     bench/shared-cores.sh --busy-placement free    # the kernel places the neighbours
#     bench/shared-cores.sh --cpu-quota 1.5 --busy 0 # a container with 1.5 CPUs
#     bench/shared-cores.sh --help
#
# Loopback only. Needs cargo, Go (`go` on PATH, $GO, or /usr/local/go/bin/go;
# without it the Go row is skipped with a note), wrk (`apt-get install -y
# wrk`) and, for --cpu-quota, root and a cgroup cpu controller (v1
# /sys/fs/cgroup/cpu or v2 /sys/fs/cgroup). Everything it starts — servers,
# neighbours, the cgroup — is stopped or removed on exit, also on Ctrl-C.

set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out="$root/target/shared-cores"
go_dir="$root/target/shared-cores" # the Go server's binary (bench/go)

busy=2
placement=spread
quota=""
runs=3
duration=5
warmup=1
connections=100
servers="weft-http,std-threads,may_minihttp,axum,go"
build=1
build_weft=1
weft_bench="${WEFT_BENCH_BIN:-$root/target/release/weft-bench}"

usage() {
    cat <<EOF
usage: bench/shared-cores.sh [options]
  --busy N           CPU-bound neighbours (yes > /dev/null) during the run (default $busy)
  --busy-placement HOW
                     spread: neighbour i bound to the i-th CPU this script may use, round
                     robin, so that every core is shared; free: wherever the kernel puts
                     them, which changes from run to run (default $placement)
  --cpu-quota CPUS   run each server in a cgroup with this CPU quota, e.g. 1.5 (default: none)
  --runs N           rounds over all servers; medians over them (default $runs)
  --duration S       seconds per wrk measurement (default $duration)
  --warmup S         seconds of unmeasured wrk load before each measurement (default $warmup; 0: none)
  --connections C    wrk connections (default $connections)
  --servers LIST     comma-separated subset of: weft-http,std-threads,may_minihttp,axum,go
                     (default: all; weft-http must be among them for the relative column)
  --weft-bench PATH  the weft-bench binary to use (default \$WEFT_BENCH_BIN or
                     target/release/weft-bench); with it, weft-bench is not built
  --out DIR          where the table, raw figures and wrk outputs go (default target/shared-cores)
  --no-build         use the binaries already built
EOF
}

die() {
    echo "shared-cores: $*" >&2
    exit 2
}

# in_range VALUE LO HI: VALUE is a whole number in LO..HI.
in_range() { [[ $1 =~ ^[0-9]{1,6}$ ]] && ((10#$1 >= $2 && 10#$1 <= $3)); }

while (($#)); do
    opt=$1
    case $opt in
    --help | -h)
        usage
        exit 0
        ;;
    --no-build)
        build=0
        shift
        continue
        ;;
    --busy | --busy-placement | --cpu-quota | --runs | --duration | --warmup | --connections | --servers | --weft-bench | --out)
        (($# >= 2)) || die "$opt needs a value"
        val=$2
        shift 2
        ;;
    *) die "unknown option $opt (see --help)" ;;
    esac
    case $opt in
    --busy) in_range "$val" 0 64 || die "--busy $val: give a whole number 0..64" ;;
    --busy-placement) [[ $val == spread || $val == free ]] || die "--busy-placement $val: give spread or free" ;;
    --runs) in_range "$val" 1 50 || die "--runs $val: give a whole number 1..50" ;;
    --duration) in_range "$val" 1 600 || die "--duration $val: give whole seconds 1..600" ;;
    --warmup) in_range "$val" 0 60 || die "--warmup $val: give whole seconds 0..60" ;;
    --connections) in_range "$val" 1 10000 || die "--connections $val: give a whole number 1..10000" ;;
    --cpu-quota)
        [[ $val =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "--cpu-quota $val: give a number of CPUs, e.g. 1.5"
        awk -v q="$val" 'BEGIN { exit !(q >= 0.01) }' || die "--cpu-quota $val: at least 0.01 CPUs"
        ;;
    esac
    case $opt in
    --busy) busy=$((10#$val)) ;;
    --busy-placement) placement=$val ;;
    --cpu-quota) quota=$val ;;
    --runs) runs=$((10#$val)) ;;
    --duration) duration=$((10#$val)) ;;
    --warmup) warmup=$((10#$val)) ;;
    --connections) connections=$((10#$val)) ;;
    --servers) servers=$val ;;
    --out) out=$val ;;
    --weft-bench)
        weft_bench=$val
        build_weft=0
        ;;
    esac
done

all_servers=(weft-http std-threads may_minihttp axum go)
IFS=, read -r -a chosen <<<"$servers"
((${#chosen[@]})) || die "--servers: name at least one server"
for s in "${chosen[@]}"; do
    [[ " ${all_servers[*]} " == *" $s "* ]] || die "--servers: unknown server '$s' (known: ${all_servers[*]})"
done

command -v wrk >/dev/null || die "wrk not found: install it (Debian/Ubuntu: apt-get install -y wrk)"
((busy == 0)) || [[ $placement == free ]] || command -v taskset >/dev/null ||
    die "taskset not found (util-linux): install it, or give --busy-placement free"

go_bin="${GO:-$(command -v go || true)}"
[[ -n $go_bin ]] || { [[ -x /usr/local/go/bin/go ]] && go_bin=/usr/local/go/bin/go; }

mkdir -p "$out" || die "--out $out: cannot create it"
out=$(cd "$out" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/shared-cores.XXXXXX")

# ---------------------------------------------------------------------------
# Clean-up: everything this script started, by pid; the cgroup last.
# ---------------------------------------------------------------------------
neighbours=()
server_pid=""
cgroup_dir=""

stop_server() {
    [[ -n $server_pid ]] || return 0
    kill -TERM "$server_pid" 2>/dev/null || true
    local i
    for ((i = 0; i < 30; i++)); do
        kill -0 "$server_pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
}

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    stop_server
    local p
    for p in "${neighbours[@]}"; do
        kill -KILL "$p" 2>/dev/null || true
    done
    for p in "${neighbours[@]}"; do
        wait "$p" 2>/dev/null || true
    done
    if [[ -n $cgroup_dir && -d $cgroup_dir ]]; then
        rmdir "$cgroup_dir" 2>/dev/null || echo "shared-cores: could not remove $cgroup_dir" >&2
    fi
    rm -rf "$tmp"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------------------
# Build
# ---------------------------------------------------------------------------
want() { [[ " ${chosen[*]} " == *" $1 "* ]]; }

if ((build)); then
    if ((build_weft)) && { want weft-http || want std-threads; }; then
        echo "building weft-bench (cargo build --release -p weft-bench) …" >&2
        (cd "$root" && cargo build --release -p weft-bench --quiet)
    fi
    if want may_minihttp || want axum; then
        echo "building bench/peers (may-hello, axum-hello) …" >&2
        cargo build --release --quiet --manifest-path "$root/bench/peers/Cargo.toml"
    fi
    if want go; then
        if [[ -n $go_bin ]]; then
            echo "building bench/go ($("$go_bin" version)) …" >&2
            mkdir -p "$go_dir"
            (cd "$root/bench/go" && "$go_bin" build -o "$go_dir/gobench" .)
        else
            echo "shared-cores: go not found (PATH, \$GO, /usr/local/go/bin/go): skipping the Go row" >&2
        fi
    fi
fi

# server_cmd NAME: sets cmd to the server's command line.
server_cmd() {
    case $1 in
    weft-http) cmd=("$weft_bench" worker weft http-server) ;;
    std-threads) cmd=("$weft_bench" worker std http-server) ;;
    may_minihttp) cmd=("$root/bench/peers/target/release/may-hello" 0) ;;
    axum) cmd=("$root/bench/peers/target/release/axum-hello" 0) ;;
    go) cmd=("$go_dir/gobench" http-server) ;;
    esac
}
# A server whose binary is missing is skipped with a note.
cmd=()
runnable=()
for s in "${chosen[@]}"; do
    server_cmd "$s"
    if [[ -x ${cmd[0]} ]]; then
        runnable+=("$s")
    else
        echo "shared-cores: $s: ${cmd[0]} is missing (build it, or drop --no-build): skipping" >&2
    fi
done
((${#runnable[@]})) || die "no server to run"

# ---------------------------------------------------------------------------
# The cgroup (servers only)
# ---------------------------------------------------------------------------
period_us=100000
if [[ -n $quota ]]; then
    quota_us=$(awk -v q="$quota" -v p="$period_us" 'BEGIN { printf "%d", q * p + 0.5 }')
    name="weft-shared-cores-$$"
    if [[ -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]]; then
        cgroup_dir=/sys/fs/cgroup/cpu/$name
        mkdir "$cgroup_dir" || die "cannot create $cgroup_dir (needs root)"
        echo "$period_us" >"$cgroup_dir/cpu.cfs_period_us"
        echo "$quota_us" >"$cgroup_dir/cpu.cfs_quota_us"
        quota_desc="cgroup v1 $cgroup_dir: cpu.cfs_quota_us $quota_us / cpu.cfs_period_us $period_us"
    elif [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then
        echo "+cpu" >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true
        cgroup_dir=/sys/fs/cgroup/$name
        mkdir "$cgroup_dir" || die "cannot create $cgroup_dir (needs root)"
        [[ -f $cgroup_dir/cpu.max ]] || die "$cgroup_dir has no cpu.max: the cpu controller is not enabled for the root's children"
        echo "$quota_us $period_us" >"$cgroup_dir/cpu.max"
        quota_desc="cgroup v2 $cgroup_dir: cpu.max \"$quota_us $period_us\""
    else
        die "--cpu-quota: no cgroup cpu controller at /sys/fs/cgroup/cpu (v1) or /sys/fs/cgroup (v2)"
    fi
fi

# ---------------------------------------------------------------------------
# One measurement
# ---------------------------------------------------------------------------

# start_server NAME: starts it (inside the cgroup with --cpu-quota: a shell
# joins the cgroup, then execs the server, so the server sees the quota from
# its first instruction and keeps the shell's pid); sets server_pid and port.
start_server() {
    server_cmd "$1"
    : >"$tmp/out"
    if [[ -n $cgroup_dir ]]; then
        # shellcheck disable=SC2016 # $$, $0 and $@ are the inner shell's.
        sh -c 'echo $$ > "$CGROUP_PROCS" && exec "$0" "$@"' "${cmd[@]}" \
            >"$tmp/out" 2>"$tmp/err" </dev/null &
    else
        "${cmd[@]}" >"$tmp/out" 2>"$tmp/err" </dev/null &
    fi
    server_pid=$!
    local i
    port=""
    for ((i = 0; i < 300; i++)); do
        port=$(sed -n 's/^ready \([0-9][0-9]*\)$/\1/p' "$tmp/out" | head -n1)
        [[ -n $port ]] && break
        kill -0 "$server_pid" 2>/dev/null || break
        sleep 0.1
    done
    if [[ -z $port ]]; then
        echo "shared-cores: $1 did not print 'ready <port>' within 30 s; stderr:" >&2
        cat "$tmp/err" >&2
        stop_server
        return 1
    fi
    if [[ -n $cgroup_dir ]] && ! grep -qx "$server_pid" "$cgroup_dir/cgroup.procs"; then
        echo "shared-cores: $1 (pid $server_pid) is not in $cgroup_dir" >&2
        stop_server
        return 1
    fi
}

# check_hello NAME: GET /hello once; the body must be the 13 bytes.
check_hello() {
    local body
    body=$(curl -sS --max-time 10 "http://127.0.0.1:$port/hello" 2>&1) || true
    if [[ $body != "Hello, World!" ]]; then
        echo "shared-cores: $1: GET /hello answered '$body', not 'Hello, World!'" >&2
        return 1
    fi
}

# to_ms VALUE: wrk's latency (e.g. 812.00us, 3.41ms, 1.02s, 2.00m) in ms.
to_ms() {
    awk -v v="$1" 'BEGIN {
        n = v + 0; u = v; sub(/^[0-9.]+/, "", u)
        if (u == "us") n /= 1000; else if (u == "s") n *= 1000; else if (u == "m") n *= 60000
        else if (u != "ms") { print "nan"; exit }
        printf "%.3f", n
    }'
}

# cpu_ticks PID: user + system CPU time of process PID (all its threads),
# in clock ticks (/proc/PID/stat fields 14 and 15, after the command name).
cpu_ticks() {
    awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"
}
clk_tck=$(getconf CLK_TCK)

# schedstat PID: "RUN WAIT", nanoseconds on a CPU and runnable but waiting
# for one, summed over process PID's threads (/proc/PID/task/*/schedstat).
schedstat() {
    cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ r += $1; w += $2 } END { if (NR) printf "%d %d", r, w }'
}

# measure NAME RUN: one wrk measurement of the running server; appends
# "NAME RUN REQ/S P99_MS ERRORS CPUS" to the results (CPUS: the server's
# CPU time over the measurement, in CPUs: how much of the machine it got).
measure() {
    local url="http://127.0.0.1:$port/hello" log="$out/wrk-$1-run$2.txt"
    if ((warmup)); then
        timeout $((warmup + 15)) wrk -t1 -c"$connections" -d"${warmup}s" "$url" >/dev/null 2>&1 || true
    fi
    local t0 c0 t1 c1 cpus tpid wpid w0="" w1="" s0 s1 client
    t0=$(date +%s.%N)
    c0=$(cpu_ticks "$server_pid")
    timeout $((duration + 30)) wrk -t1 -c"$connections" -d"${duration}s" --latency "$url" >"$log" 2>&1 &
    tpid=$!
    # The client's own share of the machine, from the middle of the
    # measurement (its first and last half second left out).
    if ((duration >= 2)); then
        sleep 0.5
        wpid=$(pgrep -P "$tpid" -x wrk | head -n1 || true)
        if [[ -n $wpid ]]; then
            s0=$(date +%s.%N)
            w0=$(schedstat "$wpid")
            sleep $((duration - 1))
            w1=$(schedstat "$wpid")
            s1=$(date +%s.%N)
        fi
    fi
    if ! wait "$tpid"; then
        echo "shared-cores: $1 run $2: wrk failed or timed out:" >&2
        cat "$log" >&2
        return 1
    fi
    c1=$(cpu_ticks "$server_pid")
    t1=$(date +%s.%N)
    cpus=$(awk -v a="$c0" -v b="$c1" -v hz="$clk_tck" -v t0="$t0" -v t1="$t1" 'BEGIN { printf "%.3f", (b - a) / hz / (t1 - t0) }')
    # "CPU RUNNABLE": wrk's time on a CPU, and on a CPU or waiting for one,
    # per second (nan if it could not be read).
    client=$(awk -v a="$w0" -v b="$w1" -v s0="${s0:-0}" -v s1="${s1:-0}" 'BEGIN {
        split(a, x, " "); split(b, y, " ")
        if (a == "" || b == "" || s1 <= s0) { print "nan nan"; exit }
        t = (s1 - s0) * 1e9
        printf "%.3f %.3f", (y[1] - x[1]) / t, (y[1] + y[2] - x[1] - x[2]) / t }')
    local rps p99 errors
    rps=$(awk '/^Requests\/sec:/ { print $2 }' "$log")
    p99=$(awk '$1 == "99%" { print $2 }' "$log")
    # Socket errors and non-2xx answers: counted, shown beside the figures.
    errors=$(awk '/Socket errors:/ { gsub(/,/, ""); n += $4 + $6 + $8 + $10 }
                  /Non-2xx or 3xx responses:/ { n += $NF }
                  END { print n + 0 }' "$log")
    if [[ -z $rps || -z $p99 ]]; then
        echo "shared-cores: $1 run $2: could not read req/s or p99 from wrk:" >&2
        cat "$log" >&2
        return 1
    fi
    printf '%s %s %s %s %s %s %s\n' "$1" "$2" "$rps" "$(to_ms "$p99")" "$errors" "$cpus" "$client" >>"$out/results.txt"
    printf '  %-13s run %d: %10.0f req/s  p99 %8.3f ms  errors %s  server CPU %s  wrk CPU, runnable %s\n' "$1" "$2" "$rps" "$(to_ms "$p99")" "$errors" "$cpus" "$client" >&2
}

# ---------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------
: >"$out/results.txt"
export CGROUP_PROCS="${cgroup_dir:+$cgroup_dir/cgroup.procs}"

load_before=$(uptime)
# The CPUs this script may use ("0-3,6" in /proc/self/status), one per word.
allowed_cpus() {
    local list range
    list=$(awk '/^Cpus_allowed_list:/ { print $2 }' /proc/self/status)
    IFS=, read -r -a ranges <<<"$list"
    for range in "${ranges[@]}"; do
        if [[ $range == *-* ]]; then seq "${range%-*}" "${range#*-}"; else echo "$range"; fi
    done
}
if ((busy > 0)) && [[ $placement == spread ]]; then
    mapfile -t cpus < <(allowed_cpus)
    ((${#cpus[@]})) || die "cannot read the CPUs this process may use (/proc/self/status)"
fi
bound=()
for ((i = 0; i < busy; i++)); do
    if [[ $placement == spread ]]; then
        cpu=${cpus[$((i % ${#cpus[@]}))]}
        taskset -c "$cpu" yes >/dev/null &
        bound+=("$cpu")
    else
        yes >/dev/null &
    fi
    neighbours+=($!)
done
if ((busy == 0)); then
    where=""
elif [[ $placement == spread ]]; then
    where=" bound to CPUs $(IFS=,; echo "${bound[*]}")"
else
    where=" placed by the kernel"
fi
((busy == 0)) || sleep 1 # let the neighbours take their cores

n=${#runnable[@]}
echo "shared-cores: ${runnable[*]}; $runs rounds; $busy busy neighbours$where${quota:+; CPU quota $quota}" >&2
for ((r = 1; r <= runs; r++)); do
    for ((k = 0; k < n; k++)); do
        s=${runnable[$(((r - 1 + k) % n))]}
        if start_server "$s" && check_hello "$s"; then
            measure "$s" "$r" || true
        fi
        stop_server
    done
done
load_after=$(uptime)

# ---------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------
median() { sort -g | awk '{ a[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

declare -A med_rps med_p99 all_rps all_err med_cpu med_eff med_ccpu med_crun
for s in "${runnable[@]}"; do
    med_rps[$s]=$(awk -v s="$s" '$1 == s { print $3 }' "$out/results.txt" | median)
    med_cpu[$s]=$(awk -v s="$s" '$1 == s { print $6 }' "$out/results.txt" | median)
    # Requests per millisecond of the server's CPU time, per round.
    med_eff[$s]=$(awk -v s="$s" '$1 == s && $6 > 0 { print $3 / $6 / 1000 }' "$out/results.txt" | median)
    med_p99[$s]=$(awk -v s="$s" '$1 == s { print $4 }' "$out/results.txt" | median)
    med_ccpu[$s]=$(awk -v s="$s" '$1 == s && $7 != "nan" { print $7 }' "$out/results.txt" | median)
    med_crun[$s]=$(awk -v s="$s" '$1 == s && $8 != "nan" { print $8 }' "$out/results.txt" | median)
    all_rps[$s]=$(awk -v s="$s" '$1 == s { printf "%s%.1f", sep, $3 / 1000; sep = " / " }' "$out/results.txt")
    all_err[$s]=$(awk -v s="$s" '$1 == s { n += $5 } END { print n + 0 }' "$out/results.txt")
done

rel() { # rel VALUE BASE: "+12 %" (VALUE against BASE), or "–" without a base
    awk -v v="$1" -v b="$2" 'BEGIN {
        if (b == "" || b == "nan" || v == "nan" || b + 0 == 0) { print "–"; exit }
        printf "%+.0f %%", (v / b - 1) * 100 }'
}

base_rps=${med_rps[weft-http]:-}
base_p99=${med_p99[weft-http]:-}
{
    echo
    echo "wrk -t1 -c$connections -d${duration}s --latency http://127.0.0.1:PORT/hello (warm-up ${warmup} s); $busy busy neighbours (yes > /dev/null)$where${quota:+; server in a cgroup, $quota_desc}"
    echo "medians of $runs rounds; $(nproc) CPUs; $(uname -r)"
    echo "load before: $load_before"
    echo "load after:  $load_after"
    echo
    echo "| server | req/s (median) | vs weft-http | p99 (median) | vs weft-http | req/s per round (k) | errors | server CPU (CPUs) | requests per CPU-ms | wrk CPU | wrk runnable |"
    echo "|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|"
    for s in "${runnable[@]}"; do
        awk -v s="$s" -v r="${med_rps[$s]}" -v p="${med_p99[$s]}" -v rr="$(rel "${med_rps[$s]}" "$base_rps")" \
            -v rp="$(rel "${med_p99[$s]}" "$base_p99")" -v all="${all_rps[$s]}" -v e="${all_err[$s]}" \
            -v c="${med_cpu[$s]}" -v f="${med_eff[$s]}" -v cc="${med_ccpu[$s]}" -v cr="${med_crun[$s]}" 'BEGIN {
            if (r == "nan") { printf "| %s | failed | | | | | | | | | |\n", s; exit }
            printf "| %s | %.1f k | %s | %.2f ms | %s | %s | %s | %.2f | %.1f | %s | %s |\n", s, r / 1000, rr, p, rp, all, e, c, f,
                cc == "nan" ? "–" : sprintf("%.2f", cc), cr == "nan" ? "–" : sprintf("%.2f", cr) }'
    done
    echo
    echo "wrk outputs: $out/wrk-<server>-run<N>.txt; raw figures: $out/results.txt"
} | tee "$out/table.md"
