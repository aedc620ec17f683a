package mqctl.clients;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * A consumption load for the benchmarks: a push consumer of a new group reads {@code --topic} from its first
 * message with {@code --threads} consume threads and {@code --pull-batch} messages per pull, until it has
 * consumed {@code --count} messages (or {@code --timeout-s} has passed). It then prints one line:
 * <pre>
 * {"consumed":N,"seconds":S,"from_first_s":F}   S from the consumer's start, F from its first message, to the Nth
 * </pre>
 * and stays subscribed, answering commands on stdin, one line each:
 * <pre>
 * measure MS   for MS milliseconds, the end-to-end latency of every message consumed (this machine's clock when
 *              consumed, less the message's born timestamp: whole milliseconds); answers
 *              {"sent":N,"failed":0,"seconds":S,"p50_us":U,"p99_us":U,"max_us":U} (N: the messages consumed)
 * quit         shuts the consumer down and exits
 * </pre>
 */
final class Drain {
    private Drain() {
    }

    static int run(Options options) throws Exception {
        String topic = options.text("topic");
        long count = options.number("count", 1);
        int threads = (int) options.number("threads", 20);
        int pullBatch = (int) options.number("pull-batch", 32);
        long timeoutS = options.number("timeout-s", 600);
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(options.text("group", "bench-drain"));
        Clients.configure(consumer, options, "drain");
        options.checkAllRead();
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.setConsumeThreadMin(threads);
        consumer.setConsumeThreadMax(threads);
        consumer.setPullBatchSize(pullBatch);
        consumer.subscribe(topic, "*");
        AtomicLong consumed = new AtomicLong();
        AtomicLong firstNs = new AtomicLong();
        AtomicLong lastNs = new AtomicLong();
        CountDownLatch done = new CountDownLatch(1);
        AtomicReference<Load.Latencies> recording = new AtomicReference<>();
        consumer.registerMessageListener((MessageListenerConcurrently) (messages, context) -> {
            long nowMs = System.currentTimeMillis();
            long n = consumed.addAndGet(messages.size());
            firstNs.compareAndSet(0, System.nanoTime());
            if (n >= count && lastNs.compareAndSet(0, System.nanoTime())) {
                done.countDown();
            }
            Load.Latencies latencies = recording.get();
            if (latencies != null) {
                for (MessageExt message : messages) {
                    latencies.add(Math.max(0, nowMs - message.getBornTimestamp()) * 1000);
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        long startNs = System.nanoTime();
        consumer.start();
        done.await(timeoutS, TimeUnit.SECONDS);
        long endNs = lastNs.get() == 0 ? System.nanoTime() : lastNs.get();
        long first = firstNs.get() == 0 ? endNs : firstNs.get();
        System.out.println(String.format("{\"consumed\":%d,\"seconds\":%.3f,\"from_first_s\":%.3f}",
            consumed.get(), (endNs - startNs) / 1e9, (endNs - first) / 1e9));
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] words = line.trim().split("\\s+");
            if (words[0].equals("quit")) {
                break;
            }
            if (words[0].equals("measure") && words.length == 2) {
                Load.Latencies latencies = new Load.Latencies();
                long began = System.nanoTime();
                recording.set(latencies);
                Thread.sleep(Long.parseLong(words[1]));
                recording.set(null);
                System.out.println(latencies.summary(0, (System.nanoTime() - began) / 1e9));
            } else {
                System.out.println("{\"error\":\"unknown command\"}");
            }
            System.out.flush();
        }
        consumer.shutdown();
        return 0;
    }
}
