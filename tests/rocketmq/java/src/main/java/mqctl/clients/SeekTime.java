package mqctl.clients;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * Consumption from a point in time: a lite pull consumer given every queue of the topic asks each queue's
 * offset for {@code --timestamp} (epoch millis; {@code offsetForTimestamp}, SEARCH_OFFSET_BY_TIMESTAMP on the
 * wire), seeks there and polls until {@code --until}. It commits nothing. History lines:
 * <pre>
 * STARTED   seek-time, client version, the timestamp
 * OFFSET    queue id, the offset the broker gave for the timestamp
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
                long offset = consumer.offsetForTimestamp(queue, timestamp);
                history.write("OFFSET", queue.getQueueId(), offset);
                consumer.seek(queue, offset);
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
}
