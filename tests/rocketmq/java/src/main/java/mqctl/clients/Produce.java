package mqctl.clients;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Numbered messages in rounds, each round one send of every mode asked (a batch sends {@code --batch} messages),
 * until {@code --rounds} or {@code --until}. Besides sync, async, oneway and batch, two modes need more of a
 * broker: {@code delayed} (a sync send at delay level 2, five seconds) and {@code transaction} (a half message
 * whose local transaction commits at once; the producer is then a TransactionMQProducer). With
 * {@code --pause-while FILE} it sends nothing while that file exists: before the next round it waits for the
 * answers of its async sends, writes PAUSED (so a test that sees the line knows no answered send is in flight)
 * and waits for the file to go (or {@code --until}). History lines:
 * <pre>
 * STARTED  produce, client version
 * SENT     seq, mode, send status, broker name, queue id, queue offset, msgId, store host (an answer)
 * FAILED   seq, mode, the exception                                            (no answer, or a refusal)
 * ONEWAY   seq                                                                 (handed to the client; never answered)
 * PAUSED   the next seq, async sends still unanswered                          (--pause-while: the file appeared)
 * RESUMED  the next seq                                                        (the file is gone)
 * DONE     sent, failed, oneway, async sends still unanswered at the end
 * </pre>
 */
final class Produce {
    private static final Set<String> MODES = Set.of("sync", "async", "oneway", "batch", "delayed", "transaction");
    private static final int DELAY_LEVEL = 2;

    private final DefaultMQProducer producer;
    private final String topic;
    private final History history;
    private final int batch;
    private final AtomicInteger pending = new AtomicInteger();
    private final AtomicInteger sent = new AtomicInteger();
    private final AtomicInteger failed = new AtomicInteger();
    private int oneway;

    private Produce(DefaultMQProducer producer, String topic, History history, int batch) {
        this.producer = producer;
        this.topic = topic;
        this.history = history;
        this.batch = batch;
    }

    static int run(Options options) throws Exception {
        String topic = options.text("topic");
        List<String> modes = List.of(options.text("modes", "sync,async,oneway,batch").split(","));
        if (!MODES.containsAll(modes)) {
            throw new Options.UsageError("--modes takes " + MODES + ", got " + modes);
        }
        long seq = options.number("first", 0);
        long rounds = options.number("rounds", -1);
        long pauseMs = options.number("pause-ms", 20);
        boolean linger = Boolean.parseBoolean(options.text("linger", "false"));
        Clients.Until until = new Clients.Until(options);
        Path pauseFile = options.has("pause-while") ? Path.of(options.text("pause-while")) : null;
        DefaultMQProducer producer = producer(options.text("group", "mqctl-java-producer"),
            modes.contains("transaction"));
        producer.setSendMsgTimeout((int) options.number("send-timeout-ms", 3000));
        Clients.configure(producer, options, "producer");
        try (History history = new History(Path.of(options.text("history")))) {
            Produce run = new Produce(producer, topic, history, (int) options.number("batch", 3));
            options.checkAllRead();
            producer.start();
            history.write("STARTED", "produce", Clients.version());
            for (long round = 0; (rounds < 0 || round < rounds) && !until.reached(); round++) {
                if (run.pauseWhile(pauseFile, until, seq)) {
                    continue; // the run's end came while paused
                }
                for (String mode : modes) {
                    seq = run.send(mode, seq);
                }
                Thread.sleep(pauseMs); // pacing: a steady stream, not a flood
            }
            int unanswered = run.drain(producer.getSendMsgTimeout() * 4L);
            if (linger) {
                history.write("PAUSED", seq, unanswered); // the rounds are sent; connected until --until
                until.await();
            }
            producer.shutdown();
            history.write("DONE", run.sent.get(), run.failed.get(), run.oneway, unanswered);
        }
        return 0;
    }

    private static DefaultMQProducer producer(String group, boolean transactions) {
        if (!transactions) {
            return new DefaultMQProducer(group);
        }
        TransactionMQProducer producer = new TransactionMQProducer(group);
        producer.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message message, Object argument) {
                return LocalTransactionState.COMMIT_MESSAGE;
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt message) {
                return LocalTransactionState.COMMIT_MESSAGE;
            }
        });
        return producer;
    }

    /** Waits while ``file`` exists (see the class comment); whether ``until`` was reached meanwhile. */
    private boolean pauseWhile(Path file, Clients.Until until, long next) throws InterruptedException {
        if (file == null || !Files.exists(file)) {
            return false;
        }
        int unanswered = drain(producer.getSendMsgTimeout() * 4L);
        history.write("PAUSED", next, unanswered);
        while (Files.exists(file) && !until.reached()) {
            Thread.sleep(50);
        }
        history.write("RESUMED", next);
        return until.reached();
    }

    /** Sends ``seq`` (a batch: from ``seq`` on) in ``mode``; returns the next number. */
    private long send(String mode, long seq) throws InterruptedException {
        switch (mode) {
            case "sync":
                sendSync(seq);
                return seq + 1;
            case "async":
                sendAsync(seq);
                return seq + 1;
            case "oneway":
                sendOneway(seq);
                return seq + 1;
            case "delayed":
            case "transaction":
                sendSpecial(seq, mode);
                return seq + 1;
            default:
                sendBatch(seq);
                return seq + batch;
        }
    }

    private void sendSync(long seq) throws InterruptedException {
        try {
            sent(seq, "sync", producer.send(Clients.message(topic, seq)), 0);
        } catch (InterruptedException e) {
            throw e;
        } catch (Exception e) {
            failed(seq, "sync", e);
        }
    }

    private void sendAsync(long seq) throws InterruptedException {
        pending.incrementAndGet();
        SendCallback callback = new SendCallback() {
            @Override
            public void onSuccess(SendResult result) {
                sent(seq, "async", result, 0);
                pending.decrementAndGet();
            }

            @Override
            public void onException(Throwable error) {
                failed(seq, "async", error);
                pending.decrementAndGet();
            }
        };
        try {
            producer.send(Clients.message(topic, seq), callback);
        } catch (InterruptedException e) {
            throw e;
        } catch (Exception e) {
            callback.onException(e);
        }
    }

    private void sendSpecial(long seq, String mode) throws InterruptedException {
        Message message = Clients.message(topic, seq);
        try {
            if (mode.equals("delayed")) {
                message.setDelayTimeLevel(DELAY_LEVEL);
                sent(seq, mode, producer.send(message), 0);
            } else {
                sent(seq, mode, producer.sendMessageInTransaction(message, null), 0);
            }
        } catch (InterruptedException e) {
            throw e;
        } catch (Exception e) {
            failed(seq, mode, e);
        }
    }

    private void sendOneway(long seq) throws InterruptedException {
        try {
            producer.sendOneway(Clients.message(topic, seq));
            history.write("ONEWAY", seq);
            oneway++;
        } catch (InterruptedException e) {
            throw e;
        } catch (Exception e) {
            failed(seq, "oneway", e);
        }
    }

    private void sendBatch(long first) throws InterruptedException {
        List<Message> messages = new ArrayList<>();
        for (int i = 0; i < batch; i++) {
            messages.add(Clients.message(topic, first + i));
        }
        try {
            SendResult result = producer.send(messages);
            for (int i = 0; i < batch; i++) {
                sent(first + i, "batch", result, i);
            }
        } catch (InterruptedException e) {
            throw e;
        } catch (Exception e) {
            for (int i = 0; i < batch; i++) {
                failed(first + i, "batch", e);
            }
        }
    }

    /** A batch's messages are stored one after another from the answer's queue offset. */
    private void sent(long seq, String mode, SendResult result, int index) {
        history.write("SENT", seq, mode, result.getSendStatus(), result.getMessageQueue().getBrokerName(),
            result.getMessageQueue().getQueueId(), result.getQueueOffset() + index, result.getMsgId(),
            storeHost(result));
        sent.incrementAndGet();
    }

    /** The broker that stored the message, from the offset message id it answered (host:port, or "-"). */
    private static String storeHost(SendResult result) {
        String ids = result.getOffsetMsgId();
        if (ids == null || ids.isEmpty()) {
            return "-";
        }
        try {
            return String.valueOf(MessageDecoder.decodeMessageId(ids.split(",")[0]).getAddress()).replace("/", "");
        } catch (Exception e) {
            return "-";
        }
    }

    private void failed(long seq, String mode, Throwable error) {
        history.write("FAILED", seq, mode, History.describe(error));
        failed.incrementAndGet();
    }

    /** Waits up to ``timeoutMs`` for every async send's callback; returns how many never came. */
    private int drain(long timeoutMs) throws InterruptedException {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (pending.get() > 0 && System.currentTimeMillis() < deadline) {
            Thread.sleep(20);
        }
        return pending.get();
    }
}
