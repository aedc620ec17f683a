package mqctl.clients;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.exception.RemotingException;

/**
 * Consumption from a point in time: a lite pull consumer given every queue of the topic asks each queue's
 * offset for {@code --timestamp} (epoch millis; {@code offsetForTimestamp}, SEARCH_OFFSET_BY_TIMESTAMP on the
 * wire), seeks there and polls until {@code --until}. It commits nothing. History lines:
 * <pre>
 * STARTED   seek-time, client version, the timestamp
 * OFFSET    queue id, the offset the broker gave for the timestamp
 * RETRY     queue id, attempt, why: the question (or the seek) was lost with its connection and is made again
 * RESEEK    queue id, the seek offset, the offset of the queue's first message (-1: none came for IDLE_RESEEK_MS):
 *           the seek was swallowed, made again
 * CONSUMED  see Clients.consumed
 * DONE      messages consumed
 * </pre>
 */
final class SeekTime {
    /** A queue from which nothing came for this long after its seek is seeked again. */
    private static final long IDLE_RESEEK_MS = 5000;
    /** How many times at most, per queue. */
    private static final int IDLE_RESEEKS = 10;

    private SeekTime() {
    }

    static int run(Options options) throws Exception {
        String topic = options.text("topic");
        long timestamp = options.number("timestamp", 0);
        Clients.Until until = new Clients.Until(options);
        DefaultLitePullConsumer consumer = new DefaultLitePullConsumer(options.text("group"));
        Clients.configure(consumer, options, "seek-time");
        try (History history = new History(Path.of(options.text("history")))) {
            options.checkAllRead();
            consumer.setAutoCommit(false);
            consumer.start();
            history.write("STARTED", "seek-time", Clients.version(), timestamp);
            List<MessageQueue> queues = new ArrayList<>(consumer.fetchMessageQueues(topic));
            queues.sort(null);
            consumer.assign(queues);
            Map<Integer, Long> unchecked = new HashMap<>();  // queue id -> the offset its first message must have
            Map<Integer, MessageQueue> byId = new HashMap<>();
            for (MessageQueue queue : queues) {
                long offset = retrying(queue, history, () -> consumer.offsetForTimestamp(queue, timestamp));
                history.write("OFFSET", queue.getQueueId(), offset);
                seek(consumer, queue, offset, history);
                unchecked.put(queue.getQueueId(), offset);
                byId.put(queue.getQueueId(), queue);
            }
            long count = 0;
            int reseeks = 0;
            Map<Integer, Long> seekedAt = new HashMap<>();  // queue id -> when its last seek was made
            Map<Integer, Integer> idleReseeks = new HashMap<>();
            for (Integer queueId : unchecked.keySet()) {
                seekedAt.put(queueId, System.currentTimeMillis());
            }
            while (!until.reached()) {
                Collection<MessageExt> polled = consumer.poll(500);
                for (MessageExt message : polled) {
                    Clients.consumed(history, message);
                    count++;
                    Long wanted = unchecked.remove(message.getQueueId());
                    if (wanted != null && message.getQueueOffset() > wanted && reseeks++ < 8) {
                        // the seek was swallowed: a pull task it cancelled took its offset (see seek)
                        history.write("RESEEK", message.getQueueId(), wanted, message.getQueueOffset());
                        seek(consumer, byId.get(message.getQueueId()), wanted, history);
                        unchecked.put(message.getQueueId(), wanted);
                        seekedAt.put(message.getQueueId(), System.currentTimeMillis());
                    }
                }
                long now = System.currentTimeMillis();
                for (Map.Entry<Integer, Long> waiting : unchecked.entrySet()) {
                    // Swallowed the other way: the new pull task went on from the queue's end (a new group
                    // starts there), so no message comes to show it. A queue with nothing stored after the
                    // timestamp looks the same; seeking it again is harmless.
                    int queueId = waiting.getKey();
                    if (now - seekedAt.get(queueId) >= IDLE_RESEEK_MS
                            && idleReseeks.merge(queueId, 1, Integer::sum) <= IDLE_RESEEKS) {
                        history.write("RESEEK", queueId, waiting.getValue(), -1);
                        seek(consumer, byId.get(queueId), waiting.getValue(), history);
                        seekedAt.put(queueId, now);
                    }
                }
            }
            consumer.shutdown();
            history.write("DONE", count);
        }
        return 0;
    }

    /**
     * Seek, made again when lost with its connection. RocketMQ's client can swallow a seek: the queue's pull
     * task that the seek cancels may take the seek offset for its own last pull, whose result is then
     * dropped, and the new task goes on from the old position; the run then sees a queue's first message
     * past the seek offset, and seeks that queue again ({@code RESEEK}).
     */
    private static void seek(DefaultLitePullConsumer consumer, MessageQueue queue, long offset, History history)
            throws Exception {
        retrying(queue, history, () -> {
            consumer.seek(queue, offset);
            return offset;
        });
    }

    /** One step of the client that asks a broker: {@link #retrying} makes it again when the connection is lost. */
    private interface Step {
        long run() throws Exception;
    }

    /**
     * A request of this client lost with its connection is made again, as an application would, a few times.
     * On a busy machine a request can time out, and the client then closes that connection, failing every
     * other request in flight on it ("send request ... failed"); a seek also cancels the queue's pull task,
     * and the pull it interrupts closes the connection the same way, under the seek's own question of the
     * queue's minimum offset.
     */
    private static long retrying(MessageQueue queue, History history, Step step) throws Exception {
        for (int attempt = 1; ; attempt++) {
            try {
                return step.run();
            } catch (MQClientException e) {
                if (attempt >= 5 || !(e.getCause() instanceof RemotingException)) {
                    throw e;
                }
                history.write("RETRY", queue.getQueueId(), attempt, e.getCause().getClass().getSimpleName());
                Thread.sleep(1000);
            }
        }
    }
}
