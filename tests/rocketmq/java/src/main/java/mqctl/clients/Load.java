package mqctl.clients;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;

/**
 * A send load for the benchmarks, in slices the caller times: one producer, {@code --size}-byte messages, sent
 * either by {@code --threads} threads each sending synchronously, one after the other ({@code --mode sync}), or
 * by one thread sending asynchronously with at most {@code --window} sends unanswered ({@code --mode async}).
 * It reads commands on stdin and answers each on stdout with one line:
 * <pre>
 * slice MS        send for MS milliseconds; answers {"sent":N,"failed":N,"seconds":S,"p50_us":U,"p99_us":U,"max_us":U}
 *                 (the latencies of the acknowledged sends, SEND_OK only; an async slice waits for its last answers)
 * paced RATE MS   sends asynchronously at RATE messages per second for MS milliseconds (at most {@code --window}
 *                 unanswered; a send that finds the window full waits); answers as slice does
 * run             starts {@code --threads} synchronous senders that keep sending until {@code stop}; answers RUNNING
 * first-ok-after US PORT MS
 *                 waits up to MS milliseconds for the first SEND_OK answered at or after US (microseconds since
 *                 the epoch, this machine's clock) by a broker other than the one on PORT (the store host of its
 *                 offset message id); answers {"first_ok_us":U,"failed":N} (N: the sends that failed while it
 *                 waited) or {"first_ok_us":null,...}; forgets every answer seen so far
 * stop            stops the senders of {@code run}; answers {"sent":N,"failed":N}
 * quit            shuts the producer down and exits
 * </pre>
 * It prints {@code READY} once the producer has started and sent one message (the route is known).
 */
final class Load {
    private Load() {
    }

    /**
     * The first send, made again until one is acknowledged or a minute has passed: on a busy machine the
     * route lookup and the first connection can take most of a send's timeout, as they would for an
     * application starting beside other JVMs.
     */
    private static void firstSend(DefaultMQProducer producer, Message message) throws Exception {
        long deadline = System.currentTimeMillis() + 60_000;
        while (true) {
            try {
                producer.send(message);
                return;
            } catch (Exception e) {
                if (System.currentTimeMillis() >= deadline) {
                    throw e;
                }
                System.err.println("the first send failed, trying again: " + e);
                Thread.sleep(500);
            }
        }
    }

    static int run(Options options) throws Exception {
        String topic = options.text("topic");
        int threads = (int) options.number("threads", 4);
        int size = (int) options.number("size", 1024);
        String mode = options.text("mode", "sync");
        int window = (int) options.number("window", 256);
        if (!mode.equals("sync") && !mode.equals("async")) {
            throw new Options.UsageError("--mode is sync or async, not " + mode);
        }
        DefaultMQProducer producer = new DefaultMQProducer(options.text("group", "bench-load"));
        Clients.configure(producer, options, "load");
        producer.setSendMsgTimeout((int) options.number("send-timeout-ms", 3000));
        options.checkAllRead();
        producer.start();
        byte[] body = new byte[size];
        Arrays.fill(body, (byte) 'x');
        firstSend(producer, new Message(topic, body));
        System.out.println("READY");
        System.out.flush();
        Senders senders = null;
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] words = line.trim().split("\\s+");
            if (words[0].equals("quit")) {
                break;
            }
            if (words[0].equals("slice") && words.length == 2) {
                long millis = Long.parseLong(words[1]);
                System.out.println(mode.equals("sync") ? slice(producer, topic, body, threads, millis)
                    : asyncSlice(producer, topic, body, window, millis));
            } else if (words[0].equals("paced") && words.length == 3) {
                System.out.println(paced(producer, topic, body, window, Double.parseDouble(words[1]),
                    Long.parseLong(words[2])));
            } else if (words[0].equals("run") && senders == null) {
                senders = new Senders(producer, topic, body, threads);
                System.out.println("RUNNING");
            } else if (words[0].equals("first-ok-after") && words.length == 4 && senders != null) {
                System.out.println(senders.firstOkAfter(Long.parseLong(words[1]), Integer.parseInt(words[2]),
                    Long.parseLong(words[3])));
            } else if (words[0].equals("stop") && senders != null) {
                System.out.println(senders.stop());
                senders = null;
            } else {
                System.out.println("{\"error\":\"unknown command\"}");
            }
            System.out.flush();
        }
        if (senders != null) {
            senders.stop();
        }
        producer.shutdown();
        return 0;
    }

    /** Microseconds since the epoch, by this machine's clock (the one the caller's kill time is read from). */
    static long nowUs() {
        return ChronoUnit.MICROS.between(Instant.EPOCH, Instant.now());
    }

    private static String slice(DefaultMQProducer producer, String topic, byte[] body, int threads, long millis)
            throws InterruptedException {
        long end = System.nanoTime() + millis * 1_000_000L;
        AtomicLong failed = new AtomicLong();
        Latencies latencies = new Latencies();
        List<Thread> workers = new ArrayList<>();
        long began = System.nanoTime();
        for (int t = 0; t < threads; t++) {
            Thread worker = new Thread(() -> {
                while (System.nanoTime() < end) {
                    long start = System.nanoTime();
                    try {
                        SendResult result = producer.send(new Message(topic, body));
                        if (result.getSendStatus() != SendStatus.SEND_OK) {
                            failed.incrementAndGet();
                            continue;
                        }
                    } catch (Exception e) {
                        failed.incrementAndGet();
                        continue;
                    }
                    latencies.add((System.nanoTime() - start) / 1000);
                }
            });
            workers.add(worker);
            worker.start();
        }
        for (Thread worker : workers) {
            worker.join();
        }
        return latencies.summary(failed.get(), (System.nanoTime() - began) / 1e9);
    }

    /** One thread sends asynchronously, at most {@code window} sends unanswered; waits for the last answers. */
    private static String asyncSlice(DefaultMQProducer producer, String topic, byte[] body, int window, long millis)
            throws InterruptedException {
        long end = System.nanoTime() + millis * 1_000_000L;
        AtomicLong failed = new AtomicLong();
        Latencies latencies = new Latencies();
        Semaphore unanswered = new Semaphore(window);
        long began = System.nanoTime();
        while (System.nanoTime() < end) {
            if (!unanswered.tryAcquire(10, TimeUnit.MILLISECONDS)) {
                continue;
            }
            sendAsync(producer, new Message(topic, body), System.nanoTime(), latencies, failed, unanswered);
        }
        awaitAnswers(producer, unanswered, window);
        return latencies.summary(failed.get(), (System.nanoTime() - began) / 1e9);
    }

    /**
     * Asynchronous sends at evenly spaced moments (a late one is sent at once: the rate holds on average); each
     * latency counts from the moment the send was due, so a send held back by a full window is not flattered.
     */
    private static String paced(DefaultMQProducer producer, String topic, byte[] body, int window, double rate,
            long millis) throws InterruptedException {
        long interval = Math.max(1000L, (long) (1e9 / Math.max(rate, 1.0)));
        long began = System.nanoTime();
        long end = began + millis * 1_000_000L;
        AtomicLong failed = new AtomicLong();
        Latencies latencies = new Latencies();
        Semaphore unanswered = new Semaphore(window);
        for (long next = began; next < end; next += interval) {
            long wait = next - System.nanoTime();
            if (wait > 0) {
                LockSupport.parkNanos(wait);
            }
            unanswered.acquire();
            sendAsync(producer, new Message(topic, body), next, latencies, failed, unanswered);
        }
        awaitAnswers(producer, unanswered, window);
        return latencies.summary(failed.get(), (System.nanoTime() - began) / 1e9);
    }

    /**
     * One asynchronous send holding a permit of {@code unanswered} until it is answered; its latency (SEND_OK
     * only) counts from {@code startNanos}.
     */
    private static void sendAsync(DefaultMQProducer producer, Message message, long startNanos, Latencies latencies,
            AtomicLong failed, Semaphore unanswered) {
        try {
            producer.send(message, new SendCallback() {
                @Override
                public void onSuccess(SendResult result) {
                    if (result.getSendStatus() == SendStatus.SEND_OK) {
                        latencies.add((System.nanoTime() - startNanos) / 1000);
                    } else {
                        failed.incrementAndGet();
                    }
                    unanswered.release();
                }

                @Override
                public void onException(Throwable e) {
                    failed.incrementAndGet();
                    unanswered.release();
                }
            });
        } catch (Exception e) {
            failed.incrementAndGet();
            unanswered.release();
        }
    }

    /** Until every send is answered (or the send timeout has certainly passed for the last of them). */
    private static void awaitAnswers(DefaultMQProducer producer, Semaphore unanswered, int window)
            throws InterruptedException {
        if (unanswered.tryAcquire(window, producer.getSendMsgTimeout() + 5000L, TimeUnit.MILLISECONDS)) {
            unanswered.release(window);
        }
    }

    private static long percentile(long[] sorted, double q) {
        if (sorted.length == 0) {
            return 0;
        }
        return sorted[(int) Math.max(0, Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1))];
    }

    /** Acknowledged sends' latencies in microseconds, from any thread. */
    static final class Latencies {
        private long[] values = new long[1 << 16];
        private int count;

        synchronized void add(long micros) {
            if (count == values.length) {
                values = Arrays.copyOf(values, values.length * 2);
            }
            values[count++] = micros;
        }

        synchronized String summary(long failed, double seconds) {
            long[] all = Arrays.copyOf(values, count);
            Arrays.sort(all);
            return String.format("{\"sent\":%d,\"failed\":%d,\"seconds\":%.3f,\"p50_us\":%d,\"p99_us\":%d,"
                + "\"max_us\":%d}", all.length, failed, seconds, percentile(all, 0.50), percentile(all, 0.99),
                all.length == 0 ? 0 : all[all.length - 1]);
        }
    }

    /**
     * Synchronous senders that run until stopped, noting when each acknowledged send began and ended (for a
     * failover's first SEND_OK after a kill).
     */
    private static final class Senders {
        private final AtomicBoolean running = new AtomicBoolean(true);
        private final AtomicLong sent = new AtomicLong();
        private final AtomicLong failed = new AtomicLong();
        private final List<Thread> workers = new ArrayList<>();
        /** (ended, store host port) of the acknowledged sends since the last question, in microseconds since the epoch. */
        private long[] oks = new long[1 << 16];
        private int count;

        Senders(DefaultMQProducer producer, String topic, byte[] body, int threads) {
            for (int t = 0; t < threads; t++) {
                Thread worker = new Thread(() -> {
                    while (running.get()) {
                        try {
                            SendResult result = producer.send(new Message(topic, body));
                            if (result.getSendStatus() == SendStatus.SEND_OK) {
                                sent.incrementAndGet();
                                noteOk(nowUs(), storePort(result.getOffsetMsgId()));
                                continue;
                            }
                        } catch (Exception e) {
                            // counted below; a dead master fails fast, a stopped one after the send timeout
                        }
                        failed.incrementAndGet();
                    }
                });
                worker.setDaemon(true);
                workers.add(worker);
                worker.start();
            }
        }

        /** The port of the broker that stored a message, from its offset message id (IPv4: 8 hex digits, then 8). */
        static long storePort(String offsetMsgId) {
            if (offsetMsgId == null || offsetMsgId.length() != 32) {
                return -1;
            }
            try {
                return Long.parseLong(offsetMsgId.substring(8, 16), 16);
            } catch (NumberFormatException e) {
                return -1;
            }
        }

        private synchronized void noteOk(long ended, long port) {
            if (count + 2 > oks.length) {
                oks = Arrays.copyOf(oks, oks.length * 2);
            }
            oks[count++] = ended;
            oks[count++] = port;
        }

        private synchronized long earliestOk(long after, int notPort) {
            long first = Long.MAX_VALUE;
            for (int i = 0; i < count; i += 2) {
                if (oks[i] >= after && oks[i + 1] != notPort && oks[i] < first) {
                    first = oks[i];
                }
            }
            return first;
        }

        String firstOkAfter(long afterUs, int notPort, long timeoutMs) throws InterruptedException {
            long failedBefore = failed.get();
            long deadline = System.nanoTime() + timeoutMs * 1_000_000L;
            long first = earliestOk(afterUs, notPort);
            while (first == Long.MAX_VALUE && System.nanoTime() < deadline) {
                Thread.sleep(2);
                first = earliestOk(afterUs, notPort);
            }
            synchronized (this) {
                count = 0;
                if (oks.length > 1 << 20) {
                    oks = new long[1 << 16];
                }
            }
            return String.format("{\"first_ok_us\":%s,\"failed\":%d}",
                first == Long.MAX_VALUE ? "null" : Long.toString(first), failed.get() - failedBefore);
        }

        String stop() throws InterruptedException {
            running.set(false);
            for (Thread worker : workers) {
                worker.join(30_000);
            }
            return String.format("{\"sent\":%d,\"failed\":%d}", sent.get(), failed.get());
        }
    }
}
