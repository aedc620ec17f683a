package mqctl.clients;

import java.util.HashMap;
import java.util.List;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * Creates a topic as a client can, through the route of the auto-create topic (TBW102): UPDATE_AND_CREATE_TOPIC
 * to every master listed there, asked again every 10 s until the topic's own route lists its queues. Prints
 * {@code CREATED topic queues} on stdout.
 */
final class CreateTopic {
    private static final long ASK_AGAIN_MS = 10_000;

    private CreateTopic() {
    }

    // createTopic is deprecated for applications (mqadmin's is preferred), but it is the one a client has
    @SuppressWarnings("deprecation")
    static int run(Options options) throws Exception {
        String topic = options.text("topic");
        int queues = (int) options.number("queues", 4);
        Clients.Until until = new Clients.Until(options);
        DefaultMQProducer producer = new DefaultMQProducer("mqctl-java-create-topic");
        Clients.configure(producer, options, "create-topic");
        options.checkAllRead();
        producer.start();
        try {
            List<MessageQueue> found = List.of();
            long askedAt = 0;
            while (found.size() < queues && !until.reached()) {
                // asked again every ASK_AGAIN_MS while the route does not list the topic: a TBW102 route that
                // lists no master (the group between two masters) makes createTopic ask nobody, silently
                if (System.currentTimeMillis() - askedAt >= ASK_AGAIN_MS) {
                    askedAt = System.currentTimeMillis();
                    create(producer, topic, queues);
                }
                found = routed(producer, topic);
                if (found.size() < queues) {
                    Thread.sleep(200);
                }
            }
            if (found.size() < queues) {
                System.err.println("the route of " + topic + " lists " + found + ", not " + queues + " queues");
                return 1;
            }
            System.out.println("CREATED " + topic + " " + found.size());
            return 0;
        } finally {
            producer.shutdown();
        }
    }

    @SuppressWarnings("deprecation")
    private static void create(DefaultMQProducer producer, String topic, int queues) {
        try {
            producer.createTopic(producer.getCreateTopicKey(), topic, queues, new HashMap<>());
        } catch (Exception e) {
            System.err.println("createTopic " + topic + " failed, asked again: " + e);
        }
    }

    private static List<MessageQueue> routed(DefaultMQProducer producer, String topic) {
        try {
            return producer.fetchPublishMessageQueues(topic);
        } catch (Exception e) {
            return List.of(); // not routed yet
        }
    }
}
