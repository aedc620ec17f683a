package mqctl.clients;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
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
 * CONSUMED  see Clients.consumed
 * DONE      messages consumed
 * </pre>
 */
final class SeekTime {
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
            for (MessageQueue queue : queues) {
                long offset = retrying(queue, history, () -> consumer.offsetForTimestamp(queue, timestamp));
                history.write("OFFSET", queue.getQueueId(), offset);
                retrying(queue, history, () -> {
                    consumer.seek(queue, offset);
                    return offset;
                });
            }
            long count = 0;
            while (!until.reached()) {
                Collection<MessageExt> polled = consumer.poll(500);
                for (MessageExt message : polled) {
                    Clients.consumed(history, message);
                    count++;
                }
            }
            consumer.shutdown();
            history.write("DONE", count);
        }
        return 0;
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
