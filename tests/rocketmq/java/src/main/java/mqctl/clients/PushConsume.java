package mqctl.clients;

import java.nio.file.Path;
import java.util.List;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.common.UtilAll;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * A push consumer of one group, consuming from the group's committed offsets (a new group from the first
 * message, or with {@code --from-timestamp MILLIS} from that time, CONSUME_FROM_TIMESTAMP, whose
 * {@code consumeTimestamp} counts whole seconds) until {@code --until}; its shutdown commits the group's offsets to the brokers. It consumes
 * concurrently, or in order with {@code --listener orderly} (which locks its queues on the broker). Every message
 * is consumed at once, but with {@code --reconsume-every K} a message whose number is a multiple of K is refused
 * on its first delivery (concurrently: RECONSUME_LATER, which sends it back to the broker for a retry; in order:
 * SUSPEND_CURRENT_QUEUE_A_MOMENT) and consumed when it comes again. History lines:
 * <pre>
 * STARTED   push, client version, listener
 * REFUSED   seq, queue id, queue offset        (--reconsume-every: the delivery refused)
 * CONSUMED  see Clients.consumed
 * DONE      messages consumed
 * </pre>
 */
final class PushConsume {
    private PushConsume() {
    }

    static int run(Options options) throws Exception {
        String topic = options.text("topic");
        String expression = options.text("expression", "*");
        int threads = (int) options.number("threads", 4);
        String listener = options.text("listener", "concurrently");
        long reconsumeEvery = options.number("reconsume-every", 0);
        long fromTimestamp = options.number("from-timestamp", 0);
        Clients.Until until = new Clients.Until(options);
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(options.text("group"));
        Clients.configure(consumer, options, "push");
        try (History history = new History(Path.of(options.text("history")))) {
            options.checkAllRead();
            if (fromTimestamp > 0) {
                consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_TIMESTAMP);
                consumer.setConsumeTimestamp(UtilAll.timeMillisToHumanString3(fromTimestamp));
            } else {
                consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
            }
            consumer.setConsumeThreadMin(threads);
            consumer.setConsumeThreadMax(threads);
            consumer.subscribe(topic, expression);
            Listener consume = new Listener(history, reconsumeEvery);
            if (listener.equals("orderly")) {
                consumer.registerMessageListener((MessageListenerOrderly) (messages, context) -> consume.take(messages)
                    ? ConsumeOrderlyStatus.SUCCESS : ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT);
            } else if (listener.equals("concurrently")) {
                consumer.registerMessageListener((MessageListenerConcurrently) (messages, context) -> consume.take(messages)
                    ? ConsumeConcurrentlyStatus.CONSUME_SUCCESS : ConsumeConcurrentlyStatus.RECONSUME_LATER);
            } else {
                throw new Options.UsageError("--listener takes concurrently or orderly, got " + listener);
            }
            consumer.start();
            history.write("STARTED", "push", Clients.version(), listener);
            until.await();
            consumer.shutdown();
            history.write("DONE", consume.count());
        }
        return 0;
    }

    /** Records what it is given; refuses a batch holding a message to retry (see the class comment). */
    private static final class Listener {
        private final History history;
        private final long reconsumeEvery;
        private long count;

        Listener(History history, long reconsumeEvery) {
            this.history = history;
            this.reconsumeEvery = reconsumeEvery;
        }

        synchronized boolean take(List<MessageExt> messages) {
            for (MessageExt message : messages) {
                long seq = Clients.seqOf(message.getBody());
                if (reconsumeEvery > 0 && seq % reconsumeEvery == 0 && message.getReconsumeTimes() == 0) {
                    history.write("REFUSED", seq, message.getQueueId(), message.getQueueOffset());
                    return false;
                }
            }
            for (MessageExt message : messages) {
                Clients.consumed(history, message);
            }
            count += messages.size();
            return true;
        }

        synchronized long count() {
            return count;
        }
    }
}
