/*
 * Bench.java — the Java worker of the weft-bench cross-runtime benchmark suite.
 *
 * It mirrors the Go and Rust workers of weft-bench: the same workloads, the same
 * arguments and the same output, so the orchestrator can run all three side by
 * side. Everything runs on Java 25 VIRTUAL THREADS (Project Loom) with default
 * JVM settings; only the JDK standard library is used.
 *
 * Build and run (JDK 25):
 *   javac -Xlint:all -d /tmp/javabench bench/java/Bench.java
 *   java -cp /tmp/javabench Bench <workload> <args...>
 *
 * Workloads:
 *   spawn <n>                          start n empty virtual threads, join all    -> ns/op
 *   pingpong <n>                       n park/unpark round trips, two threads      -> ns/op
 *   sleep <n> <ms>                     n virtual threads sleep ms, join all        -> ms (wall)
 *   park <n>                           n virtual threads parked at once            -> KiB/thread, parked_ms
 *   mutex <threads> <ops>              threads x ops increments under one lock     -> ns/op
 *   channel <producers> <msgs> <cap>   producers -> bounded queue -> one consumer  -> msg/s
 *   echo-server                        TCP echo server, one virtual thread/conn    (until killed)
 *   http-server                        HTTP server, /hello, /sleep and /cpu        (until killed)
 *   https-server <cert.pem> <key.pem>  the same over TLS (HttpsServer, JSSE)       (until killed)
 *
 * Output contract: a measuring workload prints exactly one JSON line to stdout,
 *   {"workload":"<name>","value":<double>,"unit":"<unit>","hwm_kib":<peak RSS>}
 * and exits 0 (hwm_kib: this process's VmHWM at the end of the run; park adds
 * "parked_ms":<double>, the time until all its threads are parked). The
 * servers print exactly "ready <port>" and then serve until SIGTERM (their
 * peak RSS is read by the orchestrator from /proc). Wrong arguments or a
 * failed verification: message on stderr, exit 1. Nothing else is ever
 * written to stdout.
 *
 * Timing: the driver (the main thread) takes System.nanoTime() immediately
 * before the first virtual thread is started and immediately after the last one
 * has been joined (pingpong: around the round-trip loop, see there). The CPU
 * workloads (spawn, pingpong, mutex, channel) first run the same workload,
 * untimed, three times at a tenth of the size, so the JIT has compiled the hot
 * paths before the measured run. sleep is not warmed up.
 */

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import com.sun.net.httpserver.HttpsConfigurator;
import com.sun.net.httpserver.HttpsServer;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.math.BigDecimal;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.KeyStore;
import java.security.PrivateKey;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.security.spec.PKCS8EncodedKeySpec;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.SynchronousQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;

public final class Bench {

    private Bench() {}

    /** Number of untimed warm-up runs of the CPU workloads, each at size / WARMUP_DIVISOR. */
    private static final int WARMUP_RUNS = 3;
    private static final int WARMUP_DIVISOR = 10;

    private static final String USAGE = """
            usage: java -cp <dir> Bench <workload> <args...>
              spawn <n>
              pingpong <n>
              sleep <n> <ms>
              park <n>
              mutex <threads> <ops>
              channel <producers> <msgs> <cap>      (cap 0 = SynchronousQueue)
              echo-server
              http-server
              https-server <cert.pem> <key.pem>""";

    public static void main(String[] args) {
        if (args.length == 0) {
            usage("no workload given");
        }
        String workload = args[0];
        try {
            switch (workload) {
                case "spawn", "spawn-main" -> { // from the main thread either way
                    expectArgs(args, 1);
                    report(workload, spawn(parseCount(args[1], "n")), "ns/op");
                }
                case "pingpong" -> {
                    expectArgs(args, 1);
                    report("pingpong", pingpong(parseCount(args[1], "n")), "ns/op");
                }
                case "sleep", "sleep-main" -> {
                    expectArgs(args, 2);
                    report(workload, sleep(parseCount(args[1], "n"), parseNonNegative(args[2], "ms")), "ms");
                }
                case "park" -> {
                    expectArgs(args, 1);
                    park(parseCount(args[1], "n"));
                }
                case "mutex" -> {
                    expectArgs(args, 2);
                    report("mutex", mutex(parseCount(args[1], "threads"), parseCount(args[2], "ops")), "ns/op");
                }
                case "channel" -> {
                    expectArgs(args, 3);
                    report("channel",
                            channel(parseCount(args[1], "producers"), parseCount(args[2], "msgs"),
                                    parseNonNegative(args[3], "cap")),
                            "msg/s");
                }
                case "echo-server" -> {
                    expectArgs(args, 0);
                    echoServer();
                }
                case "http-server" -> {
                    expectArgs(args, 0);
                    httpServer(null);
                }
                case "https-server" -> {
                    expectArgs(args, 2);
                    httpServer(sslContext(args[1], args[2]));
                }
                default -> usage("unknown workload '" + workload + "'");
            }
        } catch (InterruptedException e) {
            fail(workload + ": interrupted");
        } catch (IOException e) {
            fail(workload + ": I/O error: " + e);
        } catch (GeneralSecurityException e) {
            fail(workload + ": TLS setup: " + e);
        }
        System.exit(0);
    }

    // ---------------------------------------------------------------------------------------
    // 1. spawn: start n virtual threads that do nothing (all started first), then join all.
    // ---------------------------------------------------------------------------------------

    private static double spawn(int n) throws InterruptedException {
        for (int i = 0; i < WARMUP_RUNS; i++) {
            spawnOnce(warmupSize(n));
        }
        return (double) spawnOnce(n) / n;
    }

    /** Returns the elapsed nanoseconds for starting and joining n empty virtual threads. */
    private static long spawnOnce(int n) throws InterruptedException {
        Thread.Builder builder = Thread.ofVirtual();
        Runnable nothing = () -> {};
        Thread[] threads = new Thread[n];
        long start = System.nanoTime();
        for (int i = 0; i < n; i++) {
            threads[i] = builder.start(nothing);
        }
        for (Thread t : threads) {
            t.join();
        }
        return System.nanoTime() - start;
    }

    // ---------------------------------------------------------------------------------------
    // 2. pingpong: two virtual threads pass a token back and forth with park/unpark.
    //
    // Like the Rust worker: the pinger publishes an odd turn (2i+1) and unparks the ponger,
    // which answers with the next even turn (2i+2) and unparks the pinger. Each side parks in
    // a loop until it sees the turn it waits for, so spurious wake-ups (and unpark permits
    // left over from earlier rounds) are harmless. One op = one round trip.
    // ---------------------------------------------------------------------------------------

    private static double pingpong(int n) throws InterruptedException {
        for (int i = 0; i < WARMUP_RUNS; i++) {
            pingpongOnce(warmupSize(n));
        }
        return (double) pingpongOnce(n) / n;
    }

    /** Returns the elapsed nanoseconds of n round trips, as timed by the pinger. */
    private static long pingpongOnce(int n) throws InterruptedException {
        AtomicLong turn = new AtomicLong(0);
        long[] elapsed = new long[1]; // written by the pinger, read after join()

        // Each thread needs the other's Thread object. Both are created unstarted; the
        // ponger reaches the pinger through a holder filled in before anything starts
        // (Thread.start() happens-before the started thread's first action).
        Thread[] pingerRef = new Thread[1];
        Thread ponger = Thread.ofVirtual().unstarted(() -> {
            Thread pinger = pingerRef[0];
            for (long i = 0; i < n; i++) {
                while (turn.get() != 2 * i + 1) {
                    LockSupport.park();
                }
                turn.set(2 * i + 2);
                LockSupport.unpark(pinger);
            }
        });
        Thread pinger = Thread.ofVirtual().unstarted(() -> {
            long start = System.nanoTime();
            for (long i = 0; i < n; i++) {
                turn.set(2 * i + 1);
                LockSupport.unpark(ponger);
                while (turn.get() != 2 * i + 2) {
                    LockSupport.park();
                }
            }
            elapsed[0] = System.nanoTime() - start;
        });
        pingerRef[0] = pinger;
        ponger.start();
        pinger.start();
        pinger.join();
        ponger.join();
        if (turn.get() != 2L * n) {
            fail("pingpong: verification failed: final turn " + turn.get() + ", expected " + 2L * n);
        }
        return elapsed[0];
    }

    // ---------------------------------------------------------------------------------------
    // 3. sleep: n virtual threads each Thread.sleep(ms); wall time until all joined, in ms.
    //    No warm-up: this measures how many sleepers the runtime can hold, not JIT'd code.
    // ---------------------------------------------------------------------------------------

    private static double sleep(int n, int ms) throws InterruptedException {
        Thread.Builder builder = Thread.ofVirtual();
        Runnable sleeper = () -> {
            try {
                Thread.sleep(ms);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        };
        Thread[] threads = new Thread[n];
        long start = System.nanoTime();
        for (int i = 0; i < n; i++) {
            threads[i] = builder.start(sleeper);
        }
        for (Thread t : threads) {
            t.join();
        }
        long elapsed = System.nanoTime() - start;
        return elapsed / 1e6;
    }

    // ---------------------------------------------------------------------------------------
    // 3b. park: n virtual threads started from the main thread, each counting itself and then
    //     parked (LockSupport.park in a loop on a flag) until main releases them. Reports the
    //     growth of VmRSS + VmPTE per thread in KiB, read SETTLE_MS after the last one counted
    //     itself (the heap's growth is in it: parked virtual threads' stacks live in the heap),
    //     and the time from the first start until the last one counted itself. A first run of
    //     one thread before the baseline starts the scheduler's carriers. No System.gc(): G1
    //     hands memory back to the OS concurrently after it, while the run is measured (at
    //     1,000 threads the growth read 0). Not warmed up further: a larger warm-up would
    //     leave heap touched that the measured run then reuses.
    // ---------------------------------------------------------------------------------------

    /** How long park waits after the last thread counted itself (as the Rust and Go workers). */
    private static final long SETTLE_MS = 200;

    private static void park(int n) throws InterruptedException {
        parkOnce(1);
        long[] r = parkOnce(n);
        double kib = Math.max(0, r[2] - r[1]) / (double) n;
        String parkedMs = new BigDecimal(Double.toString(r[0] / 1e6)).toPlainString();
        report("park", kib, "KiB", ",\"parked_ms\":" + parkedMs);
    }

    /**
     * Returns the nanoseconds until all n threads had counted themselves, and VmRSS + VmPTE
     * (KiB) before the first start and SETTLE_MS after the last count.
     */
    private static long[] parkOnce(int n) throws InterruptedException {
        AtomicInteger arrived = new AtomicInteger();
        AtomicBoolean released = new AtomicBoolean();
        CountDownLatch allParked = new CountDownLatch(1);
        long[] allAt = new long[1]; // written by the last thread before countDown()
        Runnable parked = () -> {
            if (arrived.incrementAndGet() == n) {
                allAt[0] = System.nanoTime();
                allParked.countDown();
            }
            // An unpark before the park is kept as its permit: the release is never missed.
            while (!released.get()) {
                LockSupport.park();
            }
        };
        Thread.Builder builder = Thread.ofVirtual();
        Thread[] threads = new Thread[n];
        long before = residentKib();
        long start = System.nanoTime();
        for (int i = 0; i < n; i++) {
            threads[i] = builder.start(parked);
        }
        allParked.await();
        Thread.sleep(SETTLE_MS);
        long after = residentKib();
        released.set(true);
        for (Thread t : threads) {
            LockSupport.unpark(t);
        }
        for (Thread t : threads) {
            t.join();
        }
        return new long[] {allAt[0] - start, before, after};
    }

    /** VmRSS + VmPTE from one read of /proc/self/status, in KiB: memory and its page tables. */
    private static long residentKib() {
        long sum = 0;
        int found = 0;
        try {
            for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
                if (line.startsWith("VmRSS:") || line.startsWith("VmPTE:")) {
                    sum += Long.parseLong(line.substring(6).trim().split("\\s+")[0]);
                    found++;
                }
            }
        } catch (IOException | RuntimeException e) {
            fail("park: cannot read /proc/self/status: " + e);
        }
        if (found != 2) {
            fail("park: no VmRSS or VmPTE in /proc/self/status");
        }
        return sum;
    }

    // ---------------------------------------------------------------------------------------
    // 4. mutex: `threads` virtual threads each do `ops` lock / counter++ / unlock on one shared
    //    non-fair ReentrantLock. One op = one locked increment.
    // ---------------------------------------------------------------------------------------

    /** The shared counter; only ever touched while holding the lock. */
    private static final class Counter {
        long value;
    }

    private static double mutex(int threads, int ops) throws InterruptedException {
        for (int i = 0; i < WARMUP_RUNS; i++) {
            mutexOnce(threads, warmupSize(ops));
        }
        return (double) mutexOnce(threads, ops) / ((long) threads * ops);
    }

    /** Returns the elapsed nanoseconds; verifies the counter. */
    private static long mutexOnce(int threads, int ops) throws InterruptedException {
        ReentrantLock lock = new ReentrantLock(false); // non-fair, like Go's sync.Mutex
        Counter counter = new Counter();
        Runnable worker = () -> {
            for (int i = 0; i < ops; i++) {
                lock.lock();
                try {
                    counter.value++;
                } finally {
                    lock.unlock();
                }
            }
        };
        Thread.Builder builder = Thread.ofVirtual();
        Thread[] workers = new Thread[threads];
        long start = System.nanoTime();
        for (int i = 0; i < threads; i++) {
            workers[i] = builder.start(worker);
        }
        for (Thread t : workers) {
            t.join();
        }
        long elapsed = System.nanoTime() - start;
        long expected = (long) threads * ops;
        lock.lock(); // join() already orders the writes; taking the lock makes it obvious
        try {
            if (counter.value != expected) {
                fail("mutex: verification failed: counter " + counter.value + ", expected " + expected);
            }
        } finally {
            lock.unlock();
        }
        return elapsed;
    }

    // ---------------------------------------------------------------------------------------
    // 5. channel: `producers` virtual threads put exactly `msgs` Long values into one bounded
    //    queue (ArrayBlockingQueue of capacity cap, or a SynchronousQueue for cap 0); one
    //    consumer virtual thread takes exactly `msgs` values and sums them.
    //
    //    The msgs values are 0 .. msgs-1, split into contiguous ranges: producer i sends
    //    msgs/producers of them, the first msgs%producers producers one more. The consumer's
    //    sum must therefore be msgs*(msgs-1)/2.
    // ---------------------------------------------------------------------------------------

    private static double channel(int producers, int msgs, int cap) throws InterruptedException {
        for (int i = 0; i < WARMUP_RUNS; i++) {
            channelOnce(producers, warmupSize(msgs), cap);
        }
        long elapsed = channelOnce(producers, msgs, cap);
        return msgs / (elapsed / 1e9);
    }

    /** Returns the elapsed nanoseconds; verifies the consumer's sum. */
    private static long channelOnce(int producers, int msgs, int cap) throws InterruptedException {
        BlockingQueue<Long> queue = cap == 0 ? new SynchronousQueue<>() : new ArrayBlockingQueue<>(cap);
        long[] sum = new long[1]; // written by the consumer, read after join()
        Thread.Builder builder = Thread.ofVirtual();
        Thread[] threads = new Thread[producers + 1];
        int base = msgs / producers;
        int extra = msgs % producers;

        long start = System.nanoTime();
        threads[producers] = builder.start(() -> {
            long s = 0;
            try {
                for (int i = 0; i < msgs; i++) {
                    s += queue.take();
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            sum[0] = s;
        });
        for (int p = 0; p < producers; p++) {
            long first = (long) p * base + Math.min(p, extra); // first value of this range
            long count = base + (p < extra ? 1 : 0);
            threads[p] = builder.start(() -> {
                try {
                    for (long v = first; v < first + count; v++) {
                        queue.put(v);
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            });
        }
        for (Thread t : threads) {
            t.join();
        }
        long elapsed = System.nanoTime() - start;

        long expected = (long) msgs * (msgs - 1) / 2;
        if (sum[0] != expected) {
            fail("channel: verification failed: sum " + sum[0] + ", expected " + expected);
        }
        return elapsed;
    }

    // ---------------------------------------------------------------------------------------
    // 6. echo-server: blocking java.net sockets, one virtual thread per connection.
    // ---------------------------------------------------------------------------------------

    private static void echoServer() throws IOException, InterruptedException {
        ServerSocket server = new ServerSocket(0, 4096, InetAddress.getByName("127.0.0.1"));
        ready(server.getLocalPort());
        // The accept loop runs on a virtual thread too; main just waits for it (forever).
        Thread acceptor = Thread.ofVirtual().name("echo-acceptor").start(() -> {
            Thread.Builder perConnection = Thread.ofVirtual();
            while (true) {
                Socket socket;
                try {
                    socket = server.accept();
                } catch (IOException e) {
                    // E.g. EMFILE under load: report, back off briefly, keep serving.
                    System.err.println("echo-server: accept failed: " + e);
                    try {
                        Thread.sleep(10);
                    } catch (InterruptedException ie) {
                        return;
                    }
                    continue;
                }
                perConnection.start(() -> echo(socket));
            }
        });
        acceptor.join();
    }

    /** Echoes every byte read back to the peer until EOF or an error, then closes. */
    private static void echo(Socket socket) {
        try (socket;
             InputStream in = socket.getInputStream();
             OutputStream out = socket.getOutputStream()) {
            socket.setTcpNoDelay(true);
            byte[] buf = new byte[4096];
            int n;
            while ((n = in.read(buf)) != -1) {
                out.write(buf, 0, n);
            }
        } catch (IOException e) {
            // Connection reset etc.: the client went away; nothing to do but close.
        }
    }

    // ---------------------------------------------------------------------------------------
    // 7. http-server: the JDK's built-in com.sun.net.httpserver, handlers on virtual threads.
    // ---------------------------------------------------------------------------------------

    private static final byte[] HELLO = "Hello, World!".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] SLEPT = "slept".getBytes(StandardCharsets.US_ASCII);

    /** Starts the http-server, or with an SSLContext the same server as an HttpsServer. */
    private static void httpServer(SSLContext tls) throws IOException, InterruptedException {
        // Connection limits of the built-in server. These are read ONCE, by the static
        // initializer of sun.net.httpserver.ServerConfig, when the first server is created —
        // so they must be set before HttpServer.create(). Names and defaults as documented
        // in the jdk.httpserver module (module-info.java) and ServerConfig.java of JDK 25:
        //
        //  jdk.httpserver.maxConnections (default -1): max open connections, idle or active;
        //      zero or negative = no limit. (The name is jdk.*, NOT sun.net.httpserver.*.)
        //      The default is already unlimited; set explicitly so it cannot bite.
        //  sun.net.httpserver.maxIdleConnections (default 200): max connections kept in the
        //      idle (keep-alive) pool. When a response completes and the pool is full, the
        //      connection is CLOSED — with the default, 10,000 keep-alive clients would see
        //      all but 200 connections dropped after every request. Set far above 10,000.
        //  sun.net.httpserver.idleInterval (default 30, in SECONDS): an idle keep-alive
        //      connection — and a newly accepted one that has not sent a request yet — is
        //      closed after this long. Load generators may open 10,000 connections and keep
        //      some idle between phases, so make it a day (86,400 s; the value is multiplied
        //      by 1000 into a long, so this cannot overflow).
        //  sun.net.httpserver.nodelay (default false): TCP_NODELAY on accepted connections,
        //      as the echo server (and Go's net/http) do, so small responses are not delayed
        //      by Nagle's algorithm.
        //  sun.net.httpserver.maxReqTime / maxRspTime default to -1 (no limit): left alone.
        System.setProperty("jdk.httpserver.maxConnections", "0");
        System.setProperty("sun.net.httpserver.maxIdleConnections", "1000000");
        System.setProperty("sun.net.httpserver.idleInterval", "86400");
        System.setProperty("sun.net.httpserver.nodelay", "true");

        InetSocketAddress addr = new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0);
        HttpServer server;
        if (tls == null) {
            server = HttpServer.create(addr, 4096);
        } else {
            HttpsServer https = HttpsServer.create(addr, 4096);
            // The default configurator: the context's default SSLParameters (TLS 1.3 and 1.2).
            https.setHttpsConfigurator(new HttpsConfigurator(tls));
            server = https;
        }
        // One root context that dispatches on the exact path: HttpServer contexts match by
        // path prefix, and "anything else" must be a 404.
        server.createContext("/", Bench::handle);
        server.setExecutor(Executors.newVirtualThreadPerTaskExecutor()); // one virtual thread per exchange
        server.start();
        ready(server.getAddress().getPort());
        // server.start() runs the dispatcher on its own thread; main just waits (forever).
        new CountDownLatch(1).await();
    }

    // ---------------------------------------------------------------------------------------
    // 8. https-server: the http-server as com.sun.net.httpserver.HttpsServer. The certificate
    // chain and the private key come from PEM files (what weft-bench writes for every
    // runtime): CertificateFactory reads PEM certificates directly; the PKCS#8 key is
    // base64-decoded by hand (the JDK has no PEM key reader before the JEP 470 preview).
    // ---------------------------------------------------------------------------------------

    private static SSLContext sslContext(String certFile, String keyFile)
            throws IOException, GeneralSecurityException {
        List<Certificate> chain = new ArrayList<>();
        try (InputStream in = Files.newInputStream(Path.of(certFile))) {
            chain.addAll(CertificateFactory.getInstance("X.509").generateCertificates(in));
        }
        if (chain.isEmpty()) {
            throw new GeneralSecurityException(certFile + ": no certificate");
        }
        String pem = Files.readString(Path.of(keyFile), StandardCharsets.US_ASCII);
        String begin = "-----BEGIN PRIVATE KEY-----";
        String end = "-----END PRIVATE KEY-----";
        int from = pem.indexOf(begin);
        int to = pem.indexOf(end);
        if (from < 0 || to < from) {
            throw new GeneralSecurityException(keyFile + ": no PKCS#8 '" + begin + "' block");
        }
        byte[] der = Base64.getMimeDecoder().decode(pem.substring(from + begin.length(), to));
        String algorithm = chain.get(0).getPublicKey().getAlgorithm(); // "EC", "RSA", ...
        PrivateKey key = KeyFactory.getInstance(algorithm).generatePrivate(new PKCS8EncodedKeySpec(der));

        char[] password = new char[0];
        KeyStore store = KeyStore.getInstance("PKCS12");
        store.load(null, null);
        store.setKeyEntry("server", key, password, chain.toArray(new Certificate[0]));
        KeyManagerFactory kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
        kmf.init(store, password);
        SSLContext ctx = SSLContext.getInstance("TLS");
        ctx.init(kmf.getKeyManagers(), null, null);
        return ctx;
    }

    private static void handle(HttpExchange exchange) throws IOException {
        // try-with-resources closes the exchange in every case; closing it completes the
        // response and returns the connection to the keep-alive pool.
        try (exchange) {
            String path = exchange.getRequestURI().getPath();
            boolean get = "GET".equals(exchange.getRequestMethod());
            if (get && "/hello".equals(path)) {
                respond(exchange, 200, HELLO);
            } else if (get && "/cpu".equals(path)) {
                respond(exchange, 200, spin(CPU_FOR_NANOS).getBytes(StandardCharsets.US_ASCII));
            } else if (get && "/sleep".equals(path)) {
                try {
                    Thread.sleep(1000);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    exchange.sendResponseHeaders(500, -1);
                    return;
                }
                respond(exchange, 200, SLEPT);
            } else {
                exchange.sendResponseHeaders(404, -1); // -1: no body (Content-length: 0)
            }
        }
    }

    /** How long GET /cpu computes: 4 s. */
    private static final long CPU_FOR_NANOS = 4_000_000_000L;

    /**
     * The CPU-bound request, the same work as the Rust and Go workers' spin: rounds of 65,536
     * steps of a multiply-xorshift hash (MurmurHash3's 64-bit finalizer, each step fed the
     * previous one's result) until {@code nanos} have passed since it began, then the number
     * of rounds and the hash. It never blocks, so its virtual thread keeps its carrier.
     */
    private static String spin(long nanos) {
        long t0 = System.nanoTime();
        long x = 0x9e3779b97f4a7c15L;
        long rounds = 0;
        while (System.nanoTime() - t0 < nanos) {
            for (int i = 0; i < 65536; i++) {
                x ^= i;
                x ^= x >>> 33;
                x *= 0xff51afd7ed558ccdL;
                x ^= x >>> 33;
            }
            rounds++;
        }
        return String.format("spun %d rounds: %016x", rounds, x);
    }

    private static void respond(HttpExchange exchange, int status, byte[] body) throws IOException {
        exchange.getResponseHeaders().set("Content-Type", "text/plain");
        exchange.sendResponseHeaders(status, body.length); // exact length: no chunking
        try (OutputStream out = exchange.getResponseBody()) {
            out.write(body);
        }
    }

    // ---------------------------------------------------------------------------------------
    // Helpers: arguments, output, failure.
    // ---------------------------------------------------------------------------------------

    /** Size of one warm-up run: a tenth of the measured size, at least 1. */
    private static int warmupSize(int n) {
        return Math.max(1, n / WARMUP_DIVISOR);
    }

    /**
     * This process's peak RSS (VmHWM from /proc/self/status) in KiB, 0 if unavailable. The
     * orchestrator cannot use wait4's ru_maxrss: it keeps the parent's high-water mark across
     * fork+exec.
     */
    private static long peakRssKib() {
        try {
            for (String line : java.nio.file.Files.readAllLines(java.nio.file.Path.of("/proc/self/status"))) {
                if (line.startsWith("VmHWM:")) {
                    return Long.parseLong(line.substring(6).trim().split("\\s+")[0]);
                }
            }
        } catch (IOException | RuntimeException e) {
            // Not Linux or not readable: report 0, the orchestrator falls back to wait4.
        }
        return 0;
    }

    /** Prints the single result line as JSON and flushes. */
    private static void report(String workload, double value, String unit) {
        report(workload, value, unit, "");
    }

    /** The result line with {@code extra} (further {@code ,"name":value} pairs) at its end. */
    private static void report(String workload, double value, String unit, String extra) {
        if (!Double.isFinite(value)) {
            fail(workload + ": measured value is not finite: " + value);
        }
        // BigDecimal(Double.toString(v)).toPlainString(): the shortest exact decimal of the
        // double, without an exponent (like Go's encoding/json for ordinary magnitudes).
        String number = new BigDecimal(Double.toString(value)).toPlainString();
        PrintStream out = System.out;
        out.println("{\"workload\":\"" + workload + "\",\"value\":" + number + ",\"unit\":\"" + unit
                + "\",\"hwm_kib\":" + peakRssKib() + extra + "}");
        out.flush();
    }

    /** Announces a listening server to the orchestrator: "ready <port>". */
    private static void ready(int port) {
        System.out.println("ready " + port);
        System.out.flush();
    }

    private static void expectArgs(String[] args, int count) {
        if (args.length - 1 != count) {
            usage(args[0] + " takes " + count + " argument(s), got " + (args.length - 1));
        }
    }

    /** Parses a count that must be >= 1. */
    private static int parseCount(String s, String name) {
        int v = parseInt(s, name);
        if (v < 1) {
            usage(name + " must be >= 1, got " + v);
        }
        return v;
    }

    /** Parses a value that must be >= 0. */
    private static int parseNonNegative(String s, String name) {
        int v = parseInt(s, name);
        if (v < 0) {
            usage(name + " must be >= 0, got " + v);
        }
        return v;
    }

    private static int parseInt(String s, String name) {
        try {
            return Integer.parseInt(s.replace("_", ""));
        } catch (NumberFormatException e) {
            usage(name + " must be an integer, got '" + s + "'");
            return 0; // unreachable
        }
    }

    private static void usage(String message) {
        System.err.println("error: " + message);
        System.err.println(USAGE);
        System.exit(1);
    }

    private static void fail(String message) {
        System.err.println("error: " + message);
        System.exit(1);
    }
}
