package mqctl.clients;

import java.nio.file.Files;
import java.nio.file.Path;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Numbered transactional messages from a TransactionMQProducer, one every {@code --pause-ms}, {@code --rounds} of
 * them. Message {@code seq}'s local transaction answers by {@code seq % 3}: 0 commits, 1 rolls back, 2 does not
 * know yet (UNKNOW), which leaves the message to the broker's check-back. Every check-back is answered
 * COMMIT_MESSAGE, whichever message it asks about: a rolled-back message the broker wrongly asks about is then
 * committed, and a consumer sees it. After its sends the producer stays up (the broker's check-backs need a
 * producer of the group) until {@code --until}; with {@code --stop-sending FILE} its sends also end once FILE
 * exists (it still answers check-backs until {@code --until}). History lines:
 * <pre>
 * STARTED      transaction-produce, client version
 * SENT         seq, transaction, send status, broker name, queue id, queue offset, msgId, store host (Produce.java)
 * FAILED       seq, transaction, the exception
 * LOCAL        seq, the local transaction's answer, the send result's local state, transaction id
 * CHECKED      seq, the answer (COMMIT_MESSAGE), transaction id, msgId, reconsume times   (a check-back)
 * SENT_ALL     sent, failed                                                               (the sends are over)
 * DONE         sent, failed, check-backs answered
 * </pre>
 */
final class TransactionProduce {
    private TransactionProduce() {
    }

    static int run(Options options) throws Exception {
        String topic = options.text("topic");
        long first = options.number("first", 0);
        long rounds = options.number("rounds", 30);
        long pauseMs = options.number("pause-ms", 20);
        Clients.Until until = new Clients.Until(options);
        Path stopSending = options.has("stop-sending") ? Path.of(options.text("stop-sending")) : null;
        TransactionMQProducer producer = new TransactionMQProducer(options.text("group", "mqctl-java-transactions"));
        producer.setSendMsgTimeout((int) options.number("send-timeout-ms", 3000));
        Clients.configure(producer, options, "transaction-produce");
        try (History history = new History(Path.of(options.text("history")))) {
            options.checkAllRead();
            Listener listener = new Listener(history);
            producer.setTransactionListener(listener);
            producer.start();
            history.write("STARTED", "transaction-produce", Clients.version());
            int sent = 0;
            int failed = 0;
            for (long seq = first; seq < first + rounds && !until.reached()
                    && (stopSending == null || !Files.exists(stopSending)); seq++) {
                if (send(producer, history, topic, seq)) {
                    sent++;
                } else {
                    failed++;
                }
                Thread.sleep(pauseMs); // pacing: a steady stream, not a flood
            }
            history.write("SENT_ALL", sent, failed);
            until.await();
            producer.shutdown();
            history.write("DONE", sent, failed, listener.checks());
        }
        return 0;
    }

    /** One transactional send; whether the broker answered it. */
    private static boolean send(TransactionMQProducer producer, History history, String topic, long seq) {
        Message message = Clients.message(topic, seq);
        try {
            TransactionSendResult result = producer.sendMessageInTransaction(message, seq);
            history.write("SENT", seq, "transaction", result.getSendStatus(), result.getMessageQueue().getBrokerName(),
                result.getMessageQueue().getQueueId(), result.getQueueOffset(), result.getMsgId(), "-");
            history.write("LOCAL", seq, local(seq), result.getLocalTransactionState(), result.getTransactionId());
            return true;
        } catch (Exception e) {
            history.write("FAILED", seq, "transaction", History.describe(e));
            return false;
        }
    }

    /** The local transaction's answer for message ``seq`` (see the class comment). */
    static LocalTransactionState local(long seq) {
        switch ((int) (seq % 3)) {
            case 0:
                return LocalTransactionState.COMMIT_MESSAGE;
            case 1:
                return LocalTransactionState.ROLLBACK_MESSAGE;
            default:
                return LocalTransactionState.UNKNOW;
        }
    }

    /** Answers the local transactions by number and every check-back with a commit, recording the check-backs. */
    private static final class Listener implements TransactionListener {
        private final History history;
        private long checks;

        Listener(History history) {
            this.history = history;
        }

        @Override
        public LocalTransactionState executeLocalTransaction(Message message, Object argument) {
            return local((Long) argument);
        }

        @Override
        public synchronized LocalTransactionState checkLocalTransaction(MessageExt message) {
            LocalTransactionState answer = LocalTransactionState.COMMIT_MESSAGE;
            history.write("CHECKED", Clients.seqOf(message.getBody()), answer, message.getTransactionId(),
                message.getMsgId(), message.getReconsumeTimes());
            checks++;
            return answer;
        }

        synchronized long checks() {
            return checks;
        }
    }
}
