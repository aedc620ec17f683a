package mqctl.interop;

import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * A small client of Apache RocketMQ's remoting API for the rocketmq test tier, one mode per run:
 *
 * <pre>
 * produce --namesrv A --topic T --history FILE [--first 1] [--count N] [--interval-ms 0] [--group G]
 *         [--pause-file P] [--stop-file S] [--send-timeout-ms 5000] [--route-poll-ms 30000]
 * consume --namesrv A --topic T --out FILE [--group G] [--expect FILE] [--idle-ms 10000] [--timeout-ms 120000]
 *         [--consumer push|lite]
 * </pre>
 *
 * produce sends the messages numbered first, first+1, ... (the number is the key, "message-N" the body), one
 * synchronous send at a time, and writes one line per message to the history file as soon as the send ends:
 * {@code N<TAB>SEND_OK<TAB>detail}, the client's other send status, or {@code N<TAB>FAILED<TAB>exception}. While
 * the pause file exists it sends nothing (after a line "# paused before N"); once the stop file exists it ends.
 *
 * consume reads the topic from the start of every queue and writes
 * {@code key<TAB>broker<TAB>queueId<TAB>queueOffset<TAB>msgId} per message; it ends once every key of the expect
 * file was read, after idle-ms without a new message, or at timeout-ms. The consumer is a push consumer of a
 * group (from the first offset, on PULL_MESSAGE, committing offsets), or with --consumer lite a lite pull
 * consumer with every queue assigned (on LITE_PULL_MESSAGE, 361, committing nothing).
 *
 * Both end the file with a "# done" line and exit 0 unless the arguments or the client's start fail.
 */
public final class Client {

    private Client() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 0) {
            throw usage("no mode given");
        }
        Map<String, String> options = parse(args);
        switch (args[0]) {
            case "produce":
                produce(options);
                break;
            case "consume":
                consume(options);
                break;
            default:
                throw usage("unknown mode " + args[0]);
        }
        System.exit(0);
    }

    private static IllegalArgumentException usage(String problem) {
        return new IllegalArgumentException(problem + "; usage: produce|consume --namesrv A --topic T ...");
    }

    private static Map<String, String> parse(String[] args) {
        Map<String, String> options = new HashMap<>();
        for (int i = 1; i < args.length; i += 2) {
            if (!args[i].startsWith("--") || i + 1 >= args.length) {
                throw usage("expected --name value at " + args[i]);
            }
            options.put(args[i].substring(2), args[i + 1]);
        }
        return options;
    }

    private static String required(Map<String, String> options, String name) {
        String value = options.get(name);
        if (value == null) {
            throw usage("--" + name + " is required");
        }
        return value;
    }

    private static long number(Map<String, String> options, String name, long fallback) {
        return options.containsKey(name) ? Long.parseLong(options.get(name)) : fallback;
    }

    private static BufferedWriter open(String path) throws IOException {
        return Files.newBufferedWriter(Path.of(path), StandardCharsets.UTF_8, StandardOpenOption.CREATE,
                StandardOpenOption.APPEND);
    }

    private static void line(BufferedWriter out, String text) throws IOException {
        out.write(text);
        out.newLine();
        out.flush();
    }

    /** One line of text: no tab or line break of an exception message may split a record. */
    private static String flat(Throwable error) {
        String text = error.getClass().getSimpleName() + ": " + error.getMessage();
        return text.replaceAll("\\s+", " ");
    }

    // ------------------------------------------------------------------------------------------ produce

    private static void produce(Map<String, String> options) throws Exception {
        String topic = required(options, "topic");
        long first = number(options, "first", 1);
        long count = number(options, "count", Long.MAX_VALUE);
        long interval = number(options, "interval-ms", 0);
        Path pause = options.containsKey("pause-file") ? Path.of(options.get("pause-file")) : null;
        Path stop = options.containsKey("stop-file") ? Path.of(options.get("stop-file")) : null;
        DefaultMQProducer producer = new DefaultMQProducer(options.getOrDefault("group", "mqctl_interop_producer"));
        producer.setNamesrvAddr(required(options, "namesrv"));
        producer.setSendMsgTimeout((int) number(options, "send-timeout-ms", 5000));
        producer.setPollNameServerInterval((int) number(options, "route-poll-ms", 30000));
        producer.start();
        try (BufferedWriter history = open(required(options, "history"))) {
            for (long n = first; n - first < count; n++) {
                if (stop != null && Files.exists(stop)) {
                    break;
                }
                waitWhilePaused(pause, history, n);
                line(history, n + "\t" + sendOne(producer, topic, n));
                if (interval > 0) {
                    Thread.sleep(interval);
                }
            }
            line(history, "# done");
        } finally {
            producer.shutdown();
        }
    }

    private static void waitWhilePaused(Path pause, BufferedWriter history, long next) throws Exception {
        if (pause == null || !Files.exists(pause)) {
            return;
        }
        line(history, "# paused before " + next);
        while (Files.exists(pause)) {
            Thread.sleep(50);
        }
        line(history, "# resumed");
    }

    private static String sendOne(DefaultMQProducer producer, String topic, long n) {
        Message message = new Message(topic, "interop", Long.toString(n),
                ("message-" + n).getBytes(StandardCharsets.UTF_8));
        try {
            SendResult result = producer.send(message);
            MessageQueue queue = result.getMessageQueue();
            return result.getSendStatus() + "\tmsgId=" + result.getMsgId() + " broker=" + queue.getBrokerName()
                    + " queue=" + queue.getQueueId() + " offset=" + result.getQueueOffset();
        } catch (Exception error) {
            return "FAILED\t" + flat(error);
        }
    }

    // ------------------------------------------------------------------------------------------ consume

    private static void consume(Map<String, String> options) throws Exception {
        if ("lite".equals(options.getOrDefault("consumer", "push"))) {
            consumeLite(options);
            return;
        }
        String topic = required(options, "topic");
        long idle = number(options, "idle-ms", 10000);
        long deadline = System.currentTimeMillis() + number(options, "timeout-ms", 120000);
        Set<String> expected = expectedKeys(options);
        boolean waitForKeys = !expected.isEmpty();
        DefaultMQPushConsumer consumer =
                new DefaultMQPushConsumer(options.getOrDefault("group", "mqctl_interop_consumer"));
        consumer.setNamesrvAddr(required(options, "namesrv"));
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        long[] lastNew = {System.currentTimeMillis()};
        int[] read = {0};
        try (BufferedWriter out = open(required(options, "out"))) {
            consumer.registerMessageListener((MessageListenerConcurrently) (messages, context) -> {
                synchronized (out) {
                    for (MessageExt message : messages) {
                        read[0]++;
                        lastNew[0] = System.currentTimeMillis();
                        expected.remove(message.getKeys());
                        writeConsumed(out, message);
                    }
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            consumer.start();
            while (System.currentTimeMillis() < deadline && System.currentTimeMillis() - lastNew[0] < idle) {
                synchronized (out) {
                    if (waitForKeys && expected.isEmpty()) {
                        break;
                    }
                }
                Thread.sleep(100);
            }
            consumer.shutdown();
            synchronized (out) {
                line(out, "# done " + read[0] + " messages"
                        + (waitForKeys ? ", " + expected.size() + " expected not read" : ""));
            }
        }
    }

    private static Set<String> expectedKeys(Map<String, String> options) throws IOException {
        Set<String> expected = new HashSet<>();
        if (options.containsKey("expect")) {
            for (String key : Files.readAllLines(Path.of(options.get("expect")), StandardCharsets.UTF_8)) {
                if (!key.isBlank()) {
                    expected.add(key.trim());
                }
            }
        }
        return expected;
    }

    private static void writeConsumed(BufferedWriter out, MessageExt message) {
        try {
            line(out, message.getKeys() + "\t" + message.getBrokerName() + "\t" + message.getQueueId() + "\t"
                    + message.getQueueOffset() + "\t" + message.getMsgId());
        } catch (IOException error) {
            throw new IllegalStateException(error);
        }
    }

    private static void consumeLite(Map<String, String> options) throws Exception {
        String topic = required(options, "topic");
        long idle = number(options, "idle-ms", 10000);
        long deadline = System.currentTimeMillis() + number(options, "timeout-ms", 120000);
        Set<String> expected = expectedKeys(options);
        DefaultLitePullConsumer consumer =
                new DefaultLitePullConsumer(options.getOrDefault("group", "mqctl_interop_consumer"));
        consumer.setNamesrvAddr(required(options, "namesrv"));
        consumer.setAutoCommit(false);
        consumer.start();
        try (BufferedWriter out = open(required(options, "out"))) {
            Collection<MessageQueue> queues = queuesOf(consumer, topic, deadline);
            consumer.assign(queues);
            for (MessageQueue queue : queues) {
                consumer.seekToBegin(queue);
            }
            int read = readAll(consumer, out, expected, idle, deadline);
            line(out, "# done " + read + " messages" + (expected.isEmpty() ? "" : ", " + expected.size() + " expected not read"));
        } finally {
            consumer.shutdown();
        }
    }

    private static Collection<MessageQueue> queuesOf(DefaultLitePullConsumer consumer, String topic, long deadline)
            throws Exception {
        while (true) {
            try {
                return new ArrayList<>(consumer.fetchMessageQueues(topic));
            } catch (Exception error) {
                if (System.currentTimeMillis() > deadline) {
                    throw error;
                }
                Thread.sleep(500);
            }
        }
    }

    private static int readAll(DefaultLitePullConsumer consumer, BufferedWriter out, Set<String> expected, long idle,
            long deadline) throws IOException {
        boolean waitForKeys = !expected.isEmpty();
        long lastNew = System.currentTimeMillis();
        int read = 0;
        while (System.currentTimeMillis() < deadline && System.currentTimeMillis() - lastNew < idle) {
            List<MessageExt> messages = consumer.poll(1000);
            for (MessageExt message : messages) {
                read++;
                lastNew = System.currentTimeMillis();
                expected.remove(message.getKeys());
                writeConsumed(out, message);
            }
            if (waitForKeys && expected.isEmpty()) {
                break;
            }
        }
        return read;
    }
}
