package mqctl.clients;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;

/**
 * A send load for the benchmarks, in slices the caller times: one producer, {@code --threads} threads each
 * sending {@code --size}-byte messages synchronously, one after the other. It reads commands on stdin and
 * answers each on stdout with one line:
 * <pre>
 * slice MS   send for MS milliseconds; answers {"sent":N,"failed":N,"seconds":S,"p50_us":U,"p99_us":U,"max_us":U}
 *            (the latencies of the acknowledged sends, SEND_OK only)
 * quit       shuts the producer down and exits
 * </pre>
 * It prints {@code READY} once the producer has started and sent one message (the route is known).
 */
final class Load {
    private Load() {
    }

    static int run(Options options) throws Exception {
        String topic = options.text("topic");
        int threads = (int) options.number("threads", 4);
        int size = (int) options.number("size", 1024);
        DefaultMQProducer producer = new DefaultMQProducer(options.text("group", "bench-load"));
        Clients.configure(producer, options, "load");
        producer.setSendMsgTimeout((int) options.number("send-timeout-ms", 3000));
        options.checkAllRead();
        producer.start();
        byte[] body = new byte[size];
        Arrays.fill(body, (byte) 'x');
        producer.send(new Message(topic, body));
        System.out.println("READY");
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] words = line.trim().split("\\s+");
            if (words[0].equals("quit")) {
                break;
            }
            if (words[0].equals("slice") && words.length == 2) {
                System.out.println(slice(producer, topic, body, threads, Long.parseLong(words[1])));
            } else {
                System.out.println("{\"error\":\"unknown command\"}");
            }
            System.out.flush();
        }
        producer.shutdown();
        return 0;
    }

    private static String slice(DefaultMQProducer producer, String topic, byte[] body, int threads, long millis)
            throws InterruptedException {
        long end = System.nanoTime() + millis * 1_000_000L;
        AtomicLong failed = new AtomicLong();
        List<long[]> latencies = new ArrayList<>();
        List<Thread> workers = new ArrayList<>();
        long began = System.nanoTime();
        for (int t = 0; t < threads; t++) {
            long[][] mine = {new long[1 << 16]};
            int[] count = {0};
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
                    if (count[0] == mine[0].length) {
                        mine[0] = Arrays.copyOf(mine[0], mine[0].length * 2);
                    }
                    mine[0][count[0]++] = (System.nanoTime() - start) / 1000;
                }
                synchronized (latencies) {
                    latencies.add(Arrays.copyOf(mine[0], count[0]));
                }
            });
            workers.add(worker);
            worker.start();
        }
        for (Thread worker : workers) {
            worker.join();
        }
        double seconds = (System.nanoTime() - began) / 1e9;
        long[] all = latencies.stream().flatMapToLong(Arrays::stream).sorted().toArray();
        return String.format("{\"sent\":%d,\"failed\":%d,\"seconds\":%.3f,\"p50_us\":%d,\"p99_us\":%d,\"max_us\":%d}",
            all.length, failed.get(), seconds, percentile(all, 0.50), percentile(all, 0.99),
            all.length == 0 ? 0 : all[all.length - 1]);
    }

    private static long percentile(long[] sorted, double q) {
        if (sorted.length == 0) {
            return 0;
        }
        return sorted[(int) Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
    }
}
