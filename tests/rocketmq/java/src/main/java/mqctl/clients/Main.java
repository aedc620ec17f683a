package mqctl.clients;

import java.util.Arrays;

/**
 * RocketMQ's Java remoting clients, driven for the tests: {@code java -cp ... mqctl.clients.Main MODE --name value...}.
 *
 * <pre>
 * create-topic  --namesrv A --topic T [--queues 4]               creates T through TBW102's route, waits for its route
 * produce       --namesrv A --topic T --history F [--modes sync,async,oneway,batch] [--first 0] [--rounds N]
 *               [--linger true]            (after its rounds, stays connected until --until)
 *               [--until FILE] [--batch 3] [--pause-ms 20] [--send-timeout-ms 3000] [--group G]
 *               [--pause-while FILE]       (modes also: delayed, transaction; no send while FILE exists)
 * push          --namesrv A --topic T --group G --history F --until FILE [--expression *] [--threads 4]
 *               [--listener concurrently|orderly] [--reconsume-every K]
 * lite-pull     --namesrv A --topic T --group G --history F --until FILE [--expression *] [--assign true]
 * seek-time     --namesrv A --topic T --group G --history F --until FILE --timestamp MS   (SeekTime.java)
 * poison        --namesrv A --topic T --group G --history F --until FILE --poison-every K --max-reconsume N   (PoisonConsume.java)
 * transaction-produce  --namesrv A --topic T --history F --until FILE [--rounds 30] [--first 0] [--group G]
 *               [--pause-ms 20] [--send-timeout-ms 3000] [--stop-sending FILE]
 *               commit, roll back, leave to the check-back (TransactionProduce.java)
 * load          --namesrv A --topic T [--threads 4] [--size 1024] [--group G] [--mode sync|async] [--window 256]
 *               sends in slices asked on stdin, or until stopped (Load.java)
 * drain         --namesrv A --topic T --count N [--group G] [--threads 20] [--pull-batch 32] [--timeout-s 600]
 *               consumes N messages from the first, then measures end-to-end latency on stdin (Drain.java)
 * together      --plan FILE      the modes of FILE's lines (a mode and its options, tab-separated), each in a
 *               thread of this one JVM (Together.java)
 * </pre>
 *
 * Every mode also takes {@code --deadline-s} (600: the longest it runs), {@code --route-poll-ms},
 * {@code --heartbeat-ms} and {@code --offset-persist-ms} (1000 each). Exit code 0 when the run ended as
 * asked, 2 for a usage error, 1 for anything else (with its stack trace on stderr).
 */
public final class Main {
    private Main() {
    }

    public static void main(String[] args) {
        int code;
        try {
            code = run(args);
        } catch (Options.UsageError e) {
            System.err.println("usage error: " + e.getMessage());
            code = 2;
        } catch (Exception e) {
            e.printStackTrace();
            code = 1;
        }
        System.out.flush();
        // the clients leave non-daemon threads behind (Netty, timers): end the JVM explicitly
        System.exit(code);
    }

    static int run(String[] args) throws Exception {
        if (args.length == 0) {
            throw new Options.UsageError("a mode is required: create-topic, produce, push or lite-pull");
        }
        Options options = Options.parse(args, 1);
        switch (args[0]) {
            case "create-topic":
                return CreateTopic.run(options);
            case "produce":
                return Produce.run(options);
            case "push":
                return PushConsume.run(options);
            case "lite-pull":
                return LitePull.run(options);
            case "seek-time":
                return SeekTime.run(options);
            case "poison":
                return PoisonConsume.run(options);
            case "transaction-produce":
                return TransactionProduce.run(options);
            case "drain":
                return Drain.run(options);
            case "load":
                return Load.run(options);
            case "together":
                return Together.run(options);
            default:
                throw new Options.UsageError("unknown mode " + args[0] + " in " + Arrays.toString(args));
        }
    }
}
