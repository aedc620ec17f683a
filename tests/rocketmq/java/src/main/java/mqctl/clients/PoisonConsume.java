package mqctl.clients;

import java.nio.file.Path;
import java.util.List;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * A concurrent push consumer that never consumes its poison messages: every message whose number is a multiple of
 * {@code --poison-every K} is refused (RECONSUME_LATER) on every delivery, so the client sends it back to the broker
 * (CONSUMER_SEND_MSG_BACK) until {@code --max-reconsume N} retries are spent and the broker moves it to the group's
 * dead-letter queue. The others are consumed. It takes one message per delivery, so a refusal concerns that
 * message alone. History lines:
 * <pre>
 * STARTED   poison, client version
 * ATTEMPT   seq, reconsume times, topic it came from, queue id   (a delivery of a poison message, refused)
 * CONSUMED  see Clients.consumed
 * DONE      messages consumed
 * </pre>
 */
final class PoisonConsume {
    private PoisonConsume() {
    }

    static int run(Options options) throws Exception {
        String topic = options.text("topic");
        long every = options.number("poison-every", 0);
        int maxReconsume = (int) options.number("max-reconsume", 16);
        Clients.Until until = new Clients.Until(options);
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(options.text("group"));
        Clients.configure(consumer, options, "poison");
        try (History history = new History(Path.of(options.text("history")))) {
            options.checkAllRead();
            consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
            consumer.setMaxReconsumeTimes(maxReconsume);
            consumer.setConsumeMessageBatchMaxSize(1);
            consumer.subscribe(topic, "*");
            long[] count = new long[1];
            consumer.registerMessageListener((MessageListenerConcurrently) (messages, context) -> {
                synchronized (count) {
                    return take(history, messages, every, count);
                }
            });
            consumer.start();
            history.write("STARTED", "poison", Clients.version());
            until.await();
            consumer.shutdown();
            synchronized (count) {
                history.write("DONE", count[0]);
            }
        }
        return 0;
    }

    private static ConsumeConcurrentlyStatus take(History history, List<MessageExt> messages, long every,
                                                  long[] count) {
        for (MessageExt message : messages) {
            long seq = Clients.seqOf(message.getBody());
            if (every > 0 && seq % every == 0) {
                history.write("ATTEMPT", seq, message.getReconsumeTimes(), message.getTopic(), message.getQueueId());
                return ConsumeConcurrentlyStatus.RECONSUME_LATER;
            }
        }
        for (MessageExt message : messages) {
            Clients.consumed(history, message);
        }
        count[0] += messages.size();
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
    }
}
