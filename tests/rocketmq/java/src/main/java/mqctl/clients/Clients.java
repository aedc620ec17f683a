package mqctl.clients;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.apache.rocketmq.client.ClientConfig;
import org.apache.rocketmq.common.MQVersion;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/** What every mode shares: the client settings, the numbered messages, the stop condition. */
final class Clients {
    static final String[] TAGS = {"TagA", "TagB", "TagC"};
    /** Every 50th message (seq % 50 == 7) is padded past the client's 4 KiB threshold, so it travels compressed. */
    static final int PADDED_EVERY = 50;
    static final int PADDED_AT = 7;
    static final int PADDING = 5000;

    private Clients() {
    }

    /**
     * A failover must reach the clients within a second or two: routes, heartbeats and offsets every second.
     * The client's own requests (a topic's route from the name server, above all) get 10 s instead of the client's
     * 3 s: on a machine of two busy cores a JVM that has just started can spend most of 3 s connecting and
     * compiling, and a route query that times out while the consumer starts makes its start throw. A broker that
     * dies closes its connections, so the longer budget does not slow a failover.
     */
    /**
     * Appended to the client's instance name in this thread: each mode of a {@code together} run gets a client
     * instance of its own (groups are unique per instance; two modes may use the same one, as two JVMs may).
     */
    static final ThreadLocal<String> INSTANCE_SUFFIX = ThreadLocal.withInitial(() -> "");

    static void configure(ClientConfig config, Options options, String role) {
        config.setNamesrvAddr(options.text("namesrv"));
        config.setMqClientApiTimeout((int) options.number("api-timeout-ms", 10_000));
        config.setInstanceName(role + "-" + ProcessHandle.current().pid() + INSTANCE_SUFFIX.get());
        config.setPollNameServerInterval((int) options.number("route-poll-ms", 1000));
        config.setHeartbeatBrokerInterval((int) options.number("heartbeat-ms", 1000));
        config.setPersistConsumerOffsetInterval((int) options.number("offset-persist-ms", 1000));
    }

    static String version() {
        return MQVersion.getVersionDesc(MQVersion.CURRENT_VERSION);
    }

    static Message message(String topic, long seq) {
        return new Message(topic, TAGS[(int) (seq % TAGS.length)], "key-" + seq, body(seq));
    }

    static byte[] body(long seq) {
        String text = "body-" + seq;
        if (seq % PADDED_EVERY == PADDED_AT) {
            text += ".".repeat(PADDING);
        }
        return text.getBytes(StandardCharsets.UTF_8);
    }

    /** The number a body carries ("body-17..." is 17), or -1 for a body this program did not write. */
    static long seqOf(byte[] body) {
        String text = new String(body, 0, Math.min(body.length, 32), StandardCharsets.UTF_8);
        if (!text.startsWith("body-")) {
            return -1;
        }
        int end = 5;
        while (end < text.length() && Character.isDigit(text.charAt(end))) {
            end++;
        }
        return end == 5 ? -1 : Long.parseLong(text.substring(5, end));
    }

    /**
     * One consumed message: seq, queue, offset, tags, keys, body length, reconsume times, broker, store host, id,
     * born timestamp (the client's clock when it sent this copy: each attempt of a retried send has its own).
     */
    static void consumed(History history, MessageExt message) {
        history.write("CONSUMED", seqOf(message.getBody()), message.getQueueId(), message.getQueueOffset(),
            message.getTags(), message.getKeys(), message.getBody().length, message.getReconsumeTimes(),
            message.getBrokerName(), message.getStoreHost(), message.getMsgId(), message.getBornTimestamp());
    }

    /** The end of a run: a file that appears ({@code --until}), or {@code --deadline-s} seconds. */
    static final class Until {
        private final Path file;
        private final long deadline;

        Until(Options options) {
            file = options.has("until") ? Path.of(options.text("until")) : null;
            deadline = System.currentTimeMillis() + options.number("deadline-s", 600) * 1000;
        }

        boolean reached() {
            return (file != null && Files.exists(file)) || System.currentTimeMillis() >= deadline;
        }

        void await() throws InterruptedException {
            while (!reached()) {
                Thread.sleep(50);
            }
        }
    }
}
