package mqctl.clients;

import java.nio.file.Path;
import java.util.Collection;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * A lite pull consumer of one group: subscribed (the brokers' consumer group rebalances the queues), or with
 * {@code --assign true} given every queue of the topic itself. It polls until {@code --until}, committing what
 * it polled every second and at the end (from the group's committed offsets; a new group from the first
 * message). History lines:
 * <pre>
 * STARTED   lite-pull, client version, subscribe or assign
 * ASSIGNED  the queues                                  (assign mode)
 * CONSUMED  see Clients.consumed
 * DONE      messages consumed
 * </pre>
 */
final class LitePull {
    private LitePull() {
    }

    static int run(Options options) throws Exception {
        String topic = options.text("topic");
        String expression = options.text("expression", "*");
        boolean assign = Boolean.parseBoolean(options.text("assign", "false"));
        Clients.Until until = new Clients.Until(options);
        DefaultLitePullConsumer consumer = new DefaultLitePullConsumer(options.text("group"));
        Clients.configure(consumer, options, "lite-pull");
        try (History history = new History(Path.of(options.text("history")))) {
            options.checkAllRead();
            consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
            consumer.setAutoCommit(true);
            consumer.setAutoCommitIntervalMillis(1000);
            if (!assign) {
                consumer.subscribe(topic, expression);
            }
            consumer.start();
            history.write("STARTED", "lite-pull", Clients.version(), assign ? "assign" : "subscribe");
            if (assign) {
                Collection<MessageQueue> queues = consumer.fetchMessageQueues(topic);
                consumer.assign(queues);
                history.write("ASSIGNED", queues);
            }
            long count = 0;
            while (!until.reached()) {
                for (MessageExt message : consumer.poll(500)) {
                    Clients.consumed(history, message);
                    count++;
                }
            }
            consumer.commit(); // what was polled last, into the offset store; shutdown persists it
            consumer.shutdown();
            history.write("DONE", count);
        }
        return 0;
    }
}
