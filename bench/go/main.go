// Command gobench is the Go worker of the weft-bench cross-runtime benchmark
// suite. It mirrors the Rust and Java workers: the same workloads, the same
// arguments and the same output, so that the orchestrator can run all three
// side by side and compare them.
//
// Usage:
//
//	gobench <workload> <args...>
//
// Measuring workloads print exactly one line of JSON to stdout:
//
//	{"workload":"<name>","value":<float>,"unit":"<unit>","hwm_kib":<peak RSS>}
//
// and exit 0 (hwm_kib: this process's VmHWM at the end of the run). The
// server workloads print "ready <port>" once they listen and then serve
// until killed (the orchestrator reads their peak RSS from /proc). Wrong
// arguments or a failed verification print a message to stderr and exit 1.
//
// Workloads:
//
//	spawn <n>                          start n empty goroutines, wait for all (ns/op)
//	pingpong <n>                       n round trips over two unbuffered channels (ns/op)
//	sleep <n> <ms>                     n goroutines each sleep ms milliseconds (ms)
//	park <n>                           n goroutines blocked at once: KiB per goroutine, and parked_ms
//	mutex <threads> <ops>              contended sync.Mutex counter increments (ns/op)
//	channel <producers> <msgs> <cap>   many producers, one consumer, one channel (msg/s)
//	echo-server                        TCP echo server on 127.0.0.1, kernel-chosen port
//	http-server                        HTTP/1.1 server on 127.0.0.1, kernel-chosen port
//	https-server <cert.pem> <key.pem>  the same over TLS (crypto/tls), HTTP/1.1 only
//
// The CPU workloads (spawn, pingpong, mutex, channel) first run once untimed
// with a tenth of the size as a warm-up. All goroutines run with the default
// GOMAXPROCS.
package main

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// result is the single JSON line a measuring workload prints.
type result struct {
	Workload string  `json:"workload"`
	Value    float64 `json:"value"`
	Unit     string  `json:"unit"`
	// HwmKiB is this process's peak RSS (VmHWM) at the end of the run: the
	// orchestrator cannot use wait4's ru_maxrss, which keeps the parent's
	// high-water mark across fork+exec.
	HwmKiB uint64 `json:"hwm_kib"`
	// ParkedMs is the park workload's second figure: the time until all
	// goroutines are blocked.
	ParkedMs *float64 `json:"parked_ms,omitempty"`
}

// peakRSSKiB reads VmHWM from /proc/self/status (0 if unavailable).
func peakRSSKiB() uint64 {
	v, _ := statusKiB("VmHWM:")
	return v
}

// statusKiB returns the sum of the given fields of one read of
// /proc/self/status (in KiB), and whether every one was there.
func statusKiB(keys ...string) (uint64, bool) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	var sum uint64
	found := 0
	for _, line := range strings.Split(string(data), "\n") {
		for _, key := range keys {
			if rest, ok := strings.CutPrefix(line, key); ok {
				fields := strings.Fields(rest)
				if len(fields) > 0 {
					v, err := strconv.ParseUint(fields[0], 10, 64)
					if err == nil {
						sum += v
						found++
					}
				}
			}
		}
	}
	return sum, found == len(keys)
}

const usage = `usage: gobench <workload> <args...>
workloads:
  spawn <n>
  pingpong <n>
  sleep <n> <ms>
  park <n>
  mutex <threads> <ops>
  channel <producers> <msgs> <cap>
  echo-server
  http-server
  https-server <cert.pem> <key.pem>`

func main() {
	if len(os.Args) < 2 {
		fail(usage)
	}
	name, args := os.Args[1], os.Args[2:]

	switch name {
	case "spawn", "spawn-main": // Go spawns from the main goroutine either way
		expectArgs(name, args, "<n>")
		n := parseInt("n", args[0], 1)
		report(name, runSpawn(n), "ns/op")
	case "pingpong":
		expectArgs(name, args, "<n>")
		n := parseInt("n", args[0], 1)
		report(name, runPingPong(n), "ns/op")
	case "sleep", "sleep-main":
		expectArgs(name, args, "<n>", "<ms>")
		n := parseInt("n", args[0], 1)
		ms := parseInt("ms", args[1], 0)
		report(name, runSleep(n, ms), "ms")
	case "park":
		expectArgs(name, args, "<n>")
		n := parseInt("n", args[0], 1)
		kib, ms := runPark(n)
		reportWith(result{Workload: name, Value: kib, Unit: "KiB", ParkedMs: &ms})
	case "mutex":
		expectArgs(name, args, "<threads>", "<ops>")
		threads := parseInt("threads", args[0], 1)
		ops := parseInt("ops", args[1], 1)
		report(name, runMutex(threads, ops), "ns/op")
	case "channel":
		expectArgs(name, args, "<producers>", "<msgs>", "<cap>")
		producers := parseInt("producers", args[0], 1)
		msgs := parseInt("msgs", args[1], 1)
		capacity := parseInt("cap", args[2], 0)
		report(name, runChannel(producers, msgs, capacity), "msg/s")
	case "echo-server":
		expectArgs(name, args)
		runEchoServer()
	case "http-server":
		expectArgs(name, args)
		runHTTPServer()
	case "https-server":
		expectArgs(name, args, "<cert.pem>", "<key.pem>")
		runHTTPSServer(args[0], args[1])
	default:
		fail(fmt.Sprintf("unknown workload %q\n%s", name, usage))
	}
}

// ---------------------------------------------------------------------------
// Helpers: argument parsing, output and errors.
// ---------------------------------------------------------------------------

// fail prints msg to stderr and exits with status 1.
func fail(msg string) {
	fmt.Fprintln(os.Stderr, "gobench:", msg)
	os.Exit(1)
}

// expectArgs checks that args has exactly one entry per name in want.
func expectArgs(workload string, args []string, want ...string) {
	if len(args) != len(want) {
		fail(fmt.Sprintf("%s: expected %d argument(s) %v, got %d\n%s",
			workload, len(want), want, len(args), usage))
	}
}

// parseInt parses a decimal integer argument and checks it is >= min.
func parseInt(what, s string, min int) int {
	v, err := strconv.Atoi(s)
	if err != nil {
		fail(fmt.Sprintf("argument %s: %q is not an integer", what, s))
	}
	if v < min {
		fail(fmt.Sprintf("argument %s: %d must be >= %d", what, v, min))
	}
	return v
}

// report prints the single JSON result line to stdout.
func report(workload string, value float64, unit string) {
	reportWith(result{Workload: workload, Value: value, Unit: unit})
}

// reportWith prints r, with this process's peak RSS, as the single JSON
// result line.
func reportWith(r result) {
	r.HwmKiB = peakRSSKiB()
	line, err := json.Marshal(r)
	if err != nil {
		fail("encoding result: " + err.Error())
	}
	fmt.Println(string(line))
}

// nsPerOp converts an elapsed time over ops operations into ns/op.
func nsPerOp(elapsed time.Duration, ops int) float64 {
	return float64(elapsed.Nanoseconds()) / float64(ops)
}

// ---------------------------------------------------------------------------
// 1. spawn: start n goroutines that do nothing, wait for all of them.
// ---------------------------------------------------------------------------

func runSpawn(n int) float64 {
	spawnOnce(n / 10) // untimed warm-up
	start := time.Now()
	spawnOnce(n)
	return nsPerOp(time.Since(start), n)
}

func spawnOnce(n int) {
	var wg sync.WaitGroup
	wg.Add(n)
	for i := 0; i < n; i++ {
		go func() {
			wg.Done()
		}()
	}
	wg.Wait()
}

// ---------------------------------------------------------------------------
// 2. pingpong: pass a token back and forth n times over two unbuffered
// channels. The main goroutine is one side, a second goroutine the other.
// One op is one full round trip.
// ---------------------------------------------------------------------------

func runPingPong(n int) float64 {
	pingPongOnce(n / 10) // untimed warm-up
	start := time.Now()
	pingPongOnce(n)
	return nsPerOp(time.Since(start), n)
}

func pingPongOnce(n int) {
	ping := make(chan uint64)
	pong := make(chan uint64)

	// The other side: receive the token, increment it and send it back.
	go func() {
		for i := 0; i < n; i++ {
			pong <- (<-ping) + 1
		}
	}()

	var token uint64
	for i := 0; i < n; i++ {
		ping <- token
		token = <-pong
	}
	// Every round trip increments the token exactly once.
	if token != uint64(n) {
		fail(fmt.Sprintf("pingpong: verification failed: token %d, expected %d", token, n))
	}
}

// ---------------------------------------------------------------------------
// 3. sleep: n goroutines each sleep ms milliseconds; measures the total
// wall-clock time from before the first start until all are done. No warm-up.
// ---------------------------------------------------------------------------

func runSleep(n, ms int) float64 {
	d := time.Duration(ms) * time.Millisecond
	var wg sync.WaitGroup
	wg.Add(n)

	start := time.Now()
	for i := 0; i < n; i++ {
		go func() {
			defer wg.Done()
			time.Sleep(d)
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)

	return float64(elapsed.Nanoseconds()) / 1e6
}

// ---------------------------------------------------------------------------
// 3b. park: n goroutines started from the main goroutine, each counting
// itself and then blocked on a channel until main closes it. Reports the
// growth of VmRSS + VmPTE per goroutine (KiB), read settle after the last
// one counted itself, and the time from the first go statement until the
// last one counted itself. A first run of one goroutine before the baseline
// starts what that path starts lazily; no collection is forced (one could
// hand memory back to the OS while the run is measured).
// ---------------------------------------------------------------------------

// settle is how long park waits after the last goroutine counted itself,
// so that the last few have reached their channel receive (the Rust and
// Java workers wait as long).
const settle = 200 * time.Millisecond

// parkGate is what the goroutines of one park run share.
type parkGate struct {
	n       int64
	arrived atomic.Int64
	// allAt receives the time the last goroutine counted itself.
	allAt   chan time.Time
	release chan struct{}
	wg      sync.WaitGroup
}

func runPark(n int) (kibPerGoroutine, parkedMs float64) {
	parkOnce(1)
	until, before, after := parkOnce(n)
	var growth uint64
	if after > before {
		growth = after - before
	}
	return float64(growth) / float64(n), float64(until.Nanoseconds()) / 1e6
}

// parkOnce runs n blocked goroutines; it returns the time until all had
// counted themselves and VmRSS + VmPTE before and after.
func parkOnce(n int) (time.Duration, uint64, uint64) {
	g := &parkGate{n: int64(n), allAt: make(chan time.Time, 1), release: make(chan struct{})}
	g.wg.Add(n)
	before := residentKiB()
	start := time.Now()
	for i := 0; i < n; i++ {
		go parked(g)
	}
	all := <-g.allAt
	time.Sleep(settle)
	after := residentKiB()
	close(g.release)
	g.wg.Wait()
	return all.Sub(start), before, after
}

func parked(g *parkGate) {
	if g.arrived.Add(1) == g.n {
		g.allAt <- time.Now()
	}
	<-g.release
	g.wg.Done()
}

// residentKiB is VmRSS + VmPTE: resident memory and the page tables that
// map it.
func residentKiB() uint64 {
	v, ok := statusKiB("VmRSS:", "VmPTE:")
	if !ok {
		fail("park: no VmRSS or VmPTE in /proc/self/status")
	}
	return v
}

// ---------------------------------------------------------------------------
// 4. mutex: threads goroutines each increment a shared counter ops times
// under a single shared sync.Mutex.
// ---------------------------------------------------------------------------

func runMutex(threads, ops int) float64 {
	mutexOnce(threads, ops/10) // untimed warm-up
	start := time.Now()
	mutexOnce(threads, ops)
	return nsPerOp(time.Since(start), threads*ops)
}

func mutexOnce(threads, ops int) {
	var (
		mu      sync.Mutex
		counter uint64
		wg      sync.WaitGroup
	)
	wg.Add(threads)
	for t := 0; t < threads; t++ {
		go func() {
			defer wg.Done()
			for i := 0; i < ops; i++ {
				mu.Lock()
				counter++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()

	if want := uint64(threads) * uint64(ops); counter != want {
		fail(fmt.Sprintf("mutex: verification failed: counter %d, expected %d", counter, want))
	}
}

// ---------------------------------------------------------------------------
// 5. channel: producers goroutines together send msgs uint64 values into one
// channel of capacity cap (0 = unbuffered); one consumer goroutine receives
// exactly msgs values and sums them. Producer i sends msgs/producers values,
// the first msgs%producers producers send one more; each producer sends
// 1..=count, so the expected sum is the sum of count*(count+1)/2.
// ---------------------------------------------------------------------------

func runChannel(producers, msgs, capacity int) float64 {
	channelOnce(producers, msgs/10, capacity) // untimed warm-up
	start := time.Now()
	channelOnce(producers, msgs, capacity)
	elapsed := time.Since(start)
	return float64(msgs) / elapsed.Seconds()
}

func channelOnce(producers, msgs, capacity int) {
	ch := make(chan uint64, capacity)
	sumCh := make(chan uint64)

	// Consumer: receive exactly msgs values and report their sum.
	go func() {
		var sum uint64
		for i := 0; i < msgs; i++ {
			sum += <-ch
		}
		sumCh <- sum
	}()

	// Producers: split msgs as evenly as possible.
	var (
		wg       sync.WaitGroup
		expected uint64
	)
	base, extra := msgs/producers, msgs%producers
	wg.Add(producers)
	for p := 0; p < producers; p++ {
		count := uint64(base)
		if p < extra {
			count++
		}
		expected += count * (count + 1) / 2
		go func(count uint64) {
			defer wg.Done()
			for v := uint64(1); v <= count; v++ {
				ch <- v
			}
		}(count)
	}

	sum := <-sumCh
	wg.Wait()

	if sum != expected {
		fail(fmt.Sprintf("channel: verification failed: sum %d, expected %d", sum, expected))
	}
}

// ---------------------------------------------------------------------------
// 6. echo-server: TCP echo on 127.0.0.1, one goroutine per connection.
// ---------------------------------------------------------------------------

func runEchoServer() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail("echo-server: listen: " + err.Error())
	}
	announce(ln)

	for {
		conn, err := ln.Accept()
		if err != nil {
			// Temporary failures (e.g. too many open files) must not stop
			// the server; back off briefly and keep accepting.
			if errors.Is(err, net.ErrClosed) {
				fail("echo-server: accept: " + err.Error())
			}
			fmt.Fprintln(os.Stderr, "gobench: echo-server: accept:", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go echo(conn)
	}
}

// echo writes back every byte read from conn until EOF or an error.
func echo(conn net.Conn) {
	defer conn.Close()
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.SetNoDelay(true) // Go's default already, set explicitly.
	}
	buf := make([]byte, 4096)
	for {
		n, err := conn.Read(buf)
		if n > 0 {
			if _, werr := conn.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // io.EOF or a real error: either way, close.
		}
	}
}

// ---------------------------------------------------------------------------
// 7. http-server: net/http HTTP/1.1 server on 127.0.0.1 with keep-alive.
//
//	GET /hello -> 200 "Hello, World!" (text/plain)
//	GET /sleep -> sleep 1 s, then 200 "slept"
//	GET /cpu   -> compute for 4 s (spin), then 200 "spun <rounds> rounds: <hash>"
//	otherwise  -> 404
//
// No read/write/idle timeouts are set, so thousands of keep-alive
// connections each waiting a second are never cut off.
// ---------------------------------------------------------------------------

func runHTTPServer() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail("http-server: listen: " + err.Error())
	}

	srv := &http.Server{Handler: http.HandlerFunc(handleHTTP)}
	announce(ln)

	if err := srv.Serve(ln); err != nil {
		fail("http-server: serve: " + err.Error())
	}
}

// ---------------------------------------------------------------------------
// 8. https-server: the http-server behind crypto/tls, with the certificate
// chain and private key from PEM files. ALPN offers http/1.1 only (net/http
// would otherwise negotiate HTTP/2 with clients that offer it; the suite's
// client speaks HTTP/1.1, like the other servers).
// ---------------------------------------------------------------------------

func runHTTPSServer(certFile, keyFile string) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		fail("https-server: " + err.Error())
	}
	cfg := &tls.Config{
		Certificates: []tls.Certificate{cert},
		NextProtos:   []string{"http/1.1"},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail("https-server: listen: " + err.Error())
	}

	srv := &http.Server{Handler: http.HandlerFunc(handleHTTP), TLSConfig: cfg}
	announce(ln)

	if err := srv.Serve(tls.NewListener(ln, cfg)); err != nil {
		fail("https-server: serve: " + err.Error())
	}
}

var (
	helloBody = []byte("Hello, World!")
	sleptBody = []byte("slept")
)

func handleHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		http.NotFound(w, r)
		return
	}
	switch r.URL.Path {
	case "/hello":
		writeText(w, helloBody)
	case "/sleep":
		time.Sleep(time.Second)
		writeText(w, sleptBody)
	case "/cpu":
		writeText(w, []byte(spin(cpuFor)))
	default:
		http.NotFound(w, r)
	}
}

// cpuFor is how long GET /cpu computes.
const cpuFor = 4 * time.Second

// spin is the CPU-bound request, the same work as the Rust and Java
// workers' spin: rounds of 65,536 steps of a multiply-xorshift hash
// (MurmurHash3's 64-bit finalizer, each step fed the previous one's
// result) until d has passed since it began, then the number of rounds and
// the hash.
func spin(d time.Duration) string {
	t0 := time.Now()
	x := uint64(0x9e3779b97f4a7c15)
	rounds := 0
	for time.Since(t0) < d {
		for i := uint64(0); i < 65536; i++ {
			x ^= i
			x ^= x >> 33
			x *= 0xff51afd7ed558ccd
			x ^= x >> 33
		}
		rounds++
	}
	return fmt.Sprintf("spun %d rounds: %016x", rounds, x)
}

// writeText sends a 200 response with a text/plain body.
func writeText(w http.ResponseWriter, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "text/plain")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// announce prints "ready <port>" on its own line. os.Stdout is unbuffered
// in Go, so the line reaches the orchestrator immediately.
func announce(ln net.Listener) {
	port := ln.Addr().(*net.TCPAddr).Port
	if _, err := fmt.Fprintf(os.Stdout, "ready %d\n", port); err != nil {
		fail("writing ready line: " + err.Error())
	}
}
